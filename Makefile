# slotd — build, test, benchmark. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
CMDS := $(notdir $(wildcard cmd/*))

# Pinned code generators (installed into ./bin/tools by `make tools`).
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
# staticcheck, pinned (make staticcheck installs it into ./bin/tools): the
# newest release that builds with and understands go1.26.
STATICCHECK_VERSION := v0.8.2
TOOLS := $(CURDIR)/bin/tools

.PHONY: chromium all build test mutants lint staticcheck bench bench-compare fleet e2e demo proto tools fuzz fuzz-short help clean certs hooks promtool rules redis

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build slotd, slotctl and slotkv into bin/
	@mkdir -p $(BIN)
	@for c in $(CMDS); do $(GO) build -buildvcs=auto -o $(BIN)/$$c ./cmd/$$c || exit 1; done

test: lint ## lint, then unit + integration tests (race detector), alert rule tests and the mutant builds, as CI runs them; no fuzzing engine (plain go test replays every seed corpus; see make fuzz)
	@$(MAKE) --no-print-directory rules
	@$(MAKE) --no-print-directory chromium
	$(GO) test -race -count=1 -timeout 12m ./...
	@$(MAKE) --no-print-directory mutants

mutants: ## every mutant build (a file built with a tag mutant_NAME) must fail the tests it targets (scripts/mutants.sh)
	GO=$(GO) ./scripts/mutants.sh

lint: staticcheck ## go vet + staticcheck (pinned, from bin/tools) over the module
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

staticcheck: ## install the pinned staticcheck into bin/tools when it is missing or another version
	@mkdir -p $(TOOLS)
	@$(TOOLS)/staticcheck -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))' || \
		GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Fuzz targets: every `func FuzzX` in a _test.go of this module (bench/ is
# another module). go test fuzzes one target per run, hence the loop.
# The short run is bounded by a count of executions, not by wall time: with a
# duration, Go 1.26's fuzz coordinator can report a spurious "context deadline
# exceeded" at the end of -fuzztime on a loaded machine (golang/go#75804, fixed
# in Go 1.27), which failed CI once with no crasher written.
FUZZ_SHORT_TIME ?= 20000x
FUZZTIME ?= 1m
define run-fuzz
	@set -e; grep -rl --include='*_test.go' --exclude-dir=bench --exclude-dir=.demo '^func Fuzz' . | sort | while read -r f; do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "fuzz $$(dirname "$$f") $$fn ($(1))"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(1) "$$(dirname "$$f")" >/tmp/slotd-fuzz.$$$$.log 2>&1 || { cat /tmp/slotd-fuzz.$$$$.log; rm -f /tmp/slotd-fuzz.$$$$.log; exit 1; }; \
			rm -f /tmp/slotd-fuzz.$$$$.log; \
		done; \
	done
endef

fuzz-short: ## optional: every Fuzz* target for 20,000 executions each (FUZZ_SHORT_TIME), seeds from testdata/fuzz
	$(call run-fuzz,$(FUZZ_SHORT_TIME))

fuzz: ## every Fuzz* target for 1m each (FUZZTIME=10m for a longer hunt)
	$(call run-fuzz,$(FUZZTIME))

bench: ## run the Go benchmarks; output is benchstat input
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 90m ./... | tee bench.txt

bench-compare: build redis ## side-by-side benchmarks against peer libraries and Redis Cluster: writes bench/RESULTS.md, ~8 min
	cd bench && GO=$(GO) ./compare.sh

fleet: build ## slotd at fleet scale: 1,000 in-process store nodes heartbeating and reporting load, 100,000 directory moves, at rf 1 and 3; prints the figures docs/scale.md explains (long: 15 min or more, and at 1,000 nodes a loaded 2-core machine may never settle: docs/scale.md)
	cd bench && $(GO) run ./cmd/fleet -bin ../bin

redis: ## install Debian's redis-server and redis-tools (the peer of bench-compare) when missing
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 redis-server redis-tools || \
		{ apt-get -o DPkg::Lock::Timeout=300 update && apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 redis-server redis-tools; }; }

tools: ## install protoc (Debian protobuf-compiler) and the pinned Go generators into bin/tools
	@command -v protoc >/dev/null || { apt-get install -y protobuf-compiler || { apt-get update && apt-get install -y protobuf-compiler; }; }
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: tools ## regenerate the Go code under api/ from the .proto files
	TOOLS=$(TOOLS) ./scripts/proto.sh

certs: ## development CA, certificates and tokens into certs/ (kept if complete; not for production)
	$(GO) run ./cmd/devca -dir certs -nodes n1,n2,n3,n4

demo: ## start slotd + 3 slotkv nodes, load 100,000 keys, add a 4th node and rebalance under traffic (DEMO_KEEP=1 keeps it running)
	./scripts/demo.sh

e2e: ## every end-to-end scenario (real processes, faults, porcupine), ~10 min; prints a summary table
	@mkdir -p $(BIN)
	E2E_FULL=1 $(GO) test -count=1 -timeout 30m -v -run . ./e2e/ 2>&1 | tee $(BIN)/e2e.txt | grep -E '^(---|ok|FAIL|PASS|panic)|scenario|^[0-9] ' ; test $${PIPESTATUS[0]} -eq 0

promtool: ## install promtool (Debian's prometheus package) when it is missing
	@command -v promtool >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }; }

rules: promtool ## check the Prometheus alert rules in deploy/prometheus and run their unit tests (promtool test rules)
	promtool check rules deploy/prometheus/slotd-rules.yml
	cd deploy/prometheus && promtool test rules slotd-rules.test.yml

# The console's browser tests (console/browser_test.go) drive Debian's
# chromium; with CI=true a missing browser fails them instead of skipping.
# apt-get waits for another apt-get holding the dpkg lock (up to 5 minutes).
chromium: ## install Debian's chromium (headless browser for the console's tests) when it is missing
	@command -v chromium >/dev/null || { \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 chromium || \
		{ apt-get -o DPkg::Lock::Timeout=300 update && apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 chromium; }; }

hooks: ## install the git pre-commit hook that refuses binaries and files over 512 KiB
	install -D -m 0755 scripts/githooks/pre-commit "$$(git rev-parse --git-common-dir)/hooks/pre-commit"

clean: ## remove build output
	rm -rf $(BIN) bench.txt
