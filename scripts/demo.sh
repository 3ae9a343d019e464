#!/usr/bin/env bash
# make demo: slotd (embedded etcd) + three slotkv nodes on 127.0.0.1, 100,000
# keys loaded through the SDK, a fourth node added and the slots rebalanced
# onto it under live traffic, then every key checked.
#
# Everything it starts is stopped on exit, unless DEMO_KEEP=1.
# Tunables: DEMO_KEYS (100000), DEMO_SIZE (100), DEMO_RATE (traffic ops/s, 300),
# DEMO_THROTTLE (copy rate per donor; slotd's default when empty),
# DEMO_DISK=1 (keep ./.demo on disk, see below),
# DEMO_TLS=1 (everything over TLS with certificates from `make certs`, see below),
# DEMO_AUTO=1 (the automatic balancer is turned on and fills the fourth node:
# no plan or apply command; see "slotctl auto"),
# DEMO_PORT (7400): the base of every port the demo uses, so two demos (or a
# demo and tests) can run side by side: slotd gRPC base, HTTP base+1, its etcd
# base+79/base+80, node nN gRPC base+100+N, HTTP base+110+N.
# `scripts/demo.sh ports` prints the ports and exits.
#
# DEMO_TLS=1: slotd serves TLS and requires a role (client certificate or
# token) on every call; its embedded etcd serves TLS and requires client
# certificates; the slotkv nodes require mutual TLS (slotd's mover dials them
# with certs/store.pem) and register with slotd each with its own certificate,
# bound to its node id (certs/store-n1.pem ...; slotd runs with
# --require-node-identity, so a node can register and heartbeat only as
# itself); slotctl uses certs/admin.pem; the KV clients (load, traffic,
# check) certs/read.pem.
#
# Data lives in ./.demo. The demo's data is throwaway, and every slot move
# waits for a few etcd fsyncs (phase changes, commit) and a fence fsync on
# the node: on the 2-core dev machine 4,096 moves took 86 s on its disk and
# 55 s on tmpfs (same load; 90 s for the whole demo on tmpfs).
# So when /dev/shm exists, ./.demo is a symlink to a directory there, unless
# DEMO_DISK=1.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${DEMO_DIR:-$ROOT/.demo}
BIN=$ROOT/bin
KEYS=${DEMO_KEYS:-100000}
SIZE=${DEMO_SIZE:-100}
RATE=${DEMO_RATE:-300}
BASE=${DEMO_PORT:-7400}
[[ $BASE =~ ^[0-9]+$ ]] && ((BASE >= 1024 && BASE <= 65400)) || { echo "demo: DEMO_PORT=$BASE: want a port in 1024-65400" >&2; exit 2; }
SLOTD_HTTP=$((BASE + 1)) ETCD_CLIENT=$((BASE + 79)) ETCD_PEER=$((BASE + 80))
node_port() { echo $((BASE + 100 + ${1#n})); }
node_http() { echo $((BASE + 110 + ${1#n})); }
SLOTD=127.0.0.1:$BASE
export SLOTCTL_ENDPOINTS=$SLOTD

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# Every port the demo listens on: slotd gRPC/HTTP, its embedded etcd's
# client/peer, the nodes' gRPC and HTTP.
PORTS=($BASE $SLOTD_HTTP $ETCD_CLIENT $ETCD_PEER)
for id in n1 n2 n3 n4; do PORTS+=("$(node_port $id)" "$(node_http $id)"); done
if [[ ${1:-} == ports ]]; then
	echo "slotd=$SLOTD http=127.0.0.1:$SLOTD_HTTP etcd=127.0.0.1:$ETCD_CLIENT etcd-peer=127.0.0.1:$ETCD_PEER"
	for id in n1 n2 n3 n4; do echo "$id=127.0.0.1:$(node_port $id) http=127.0.0.1:$(node_http $id)"; done
	exit 0
fi
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "${PORTS[@]}"; do
	if port_taken "$p"; then
		die "port 127.0.0.1:$p is taken (a demo still running? stop it, or free the port); the demo needs ${PORTS[*]}"
	fi
done

PIDS=()
stop_all() {
	local code=$?
	if [[ ${DEMO_KEEP:-} == 1 && $code == 0 ]]; then
		say "still running (DEMO_KEEP=1)"
		echo "pids: $(echo ${PIDS[*]})   logs: $DIR/*.log"
		echo "try:  export SLOTCTL_ENDPOINTS=$SLOTD; bin/slotctl status; bin/slotctl map; bin/slotkv put --slotd $SLOTD k v; bin/slotkv get --slotd $SLOTD k"
		echo "stop: kill $(echo ${PIDS[*]}); rm -rf .demo"
		return
	fi
	# Reverse order: clients, then nodes, then slotd (and its etcd).
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		[[ -n ${PIDS[i]} ]] && kill "${PIDS[i]}" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		[[ -n $pid ]] && wait "$pid" 2>/dev/null || true
	done
	if [[ $code != 0 ]]; then
		echo "demo failed (exit $code); logs in $DIR" >&2
	fi
}
trap stop_all EXIT

# wait_for DESC SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what: not ready after ${secs}s (logs in $DIR)"
		sleep 0.2
	done
}

CERTS=$ROOT/certs
SLOTD_TLS=() NODE_TLS=() CLIENT_TLS=()
SLOTCTL=("$BIN/slotctl")
if [[ ${DEMO_TLS:-} == 1 ]]; then
	SLOTD_TLS=(--tls-cert "$CERTS/server.pem" --tls-key "$CERTS/server-key.pem" --tls-ca "$CERTS/ca.pem"
		--token-file "$CERTS/tokens.txt" --require-node-identity
		--store-tls-cert "$CERTS/store.pem" --store-tls-key "$CERTS/store-key.pem"
		--etcd-tls-cert "$CERTS/server.pem" --etcd-tls-key "$CERTS/server-key.pem" --etcd-tls-ca "$CERTS/ca.pem")
	# Each node's --slotd-tls-cert is its own (start_node adds it).
	NODE_TLS=(--tls-cert "$CERTS/server.pem" --tls-key "$CERTS/server-key.pem" --tls-ca "$CERTS/ca.pem"
		--client-auth require)
	CLIENT_TLS=(--tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/read.pem" --tls-key "$CERTS/read-key.pem")
	SLOTCTL+=(--tls-ca="$CERTS/ca.pem" --tls-cert="$CERTS/admin.pem" --tls-key="$CERTS/admin-key.pem")
fi
slotctl() { "${SLOTCTL[@]}" "$@"; }

# metrics prints slotd's Prometheus metrics (bash's /dev/tcp: no curl needed).
metrics() {
	exec 3<>/dev/tcp/127.0.0.1/$SLOTD_HTTP
	printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	cat <&3
	exec 3<&-
}

# metric NAME prints the sum of a metric's samples whose line starts with NAME.
metric() { awk -v n="$1" 'index($0, n) == 1 { s += $NF } END { printf "%.0f", s }' "$DIR/metrics.txt"; }

registered() { slotctl nodes list -o json | grep -q "\"$1\""; }

# node_bytes prints "ID BYTES" for each node with a load report: the bytes it
# measured it holds (slotctl status -o json, "measured": {"keys": K, "bytes": B}).
node_bytes() {
	slotctl status -o json | tr -d ' \n' | grep -o '"id":"[^"]*"\|"measured":{"keys":[0-9]*,"bytes":[0-9]*' |
		awk -F'"' '/^"id"/ { id = $4; next } { n = split($0, f, ":"); print id, f[n] }'
}

# reported_total N MIN: the nodes' measured bytes add up to at least MIN,
# with N nodes reporting.
reported_total() {
	node_bytes | awk -v n="$1" -v min="$2" '{ s += $2; c++ } END { exit !(c >= n && s >= min) }'
}

T0=$SECONDS
say "build"
make --no-print-directory build
if [[ ${DEMO_TLS:-} == 1 ]]; then
	say "certificates (DEMO_TLS=1)"
	make --no-print-directory certs
	# The KV clients must present certs/read.pem to the nodes.
	if ! "$BIN/slotkv" load --help 2>&1 | grep -q -- '--tls-ca'; then
		die "DEMO_TLS=1: 'slotkv load/traffic/check' take no TLS flags yet (--tls-ca, --tls-cert, --tls-key in cmd/slotkv/client.go); the nodes would refuse them"
	fi
fi
rm -rf "$DIR"
if [[ -z ${DEMO_DIR:-} && -z ${DEMO_DISK:-} && -d /dev/shm && -w /dev/shm ]]; then
	SHM=/dev/shm/slotd-demo-$UID
	rm -rf "$SHM"
	mkdir -p "$SHM"
	ln -s "$SHM" "$DIR"
	echo "data in $DIR -> $SHM (tmpfs; DEMO_DISK=1 for the disk)"
else
	mkdir -p "$DIR"
	echo "data in $DIR"
fi

say "start slotd (embedded etcd) on $SLOTD${DEMO_TLS:+ (TLS)}"
"$BIN/slotd" --data-dir "$DIR/slotd" --listen "$SLOTD" --http "127.0.0.1:$SLOTD_HTTP" \
	--etcd-client-url "127.0.0.1:$ETCD_CLIENT" --etcd-peer-url "127.0.0.1:$ETCD_PEER" "${SLOTD_TLS[@]}" \
	${DEMO_AUTO:+--balancer-tick 1s} >"$DIR/slotd.log" 2>&1 &
PIDS+=($!)
wait_for "slotd" 60 slotctl status
if [[ -n ${DEMO_THROTTLE:-} ]]; then
	slotctl throttle "$DEMO_THROTTLE"
fi

start_node() {
	local id=$1 own=()
	if [[ ${DEMO_TLS:-} == 1 ]]; then
		own=(--slotd-tls-cert "$CERTS/store-$id.pem" --slotd-tls-key "$CERTS/store-$id-key.pem")
	fi
	"$BIN/slotkv" --id "$id" --listen "127.0.0.1:$(node_port "$id")" --http "127.0.0.1:$(node_http "$id")" \
		--data-dir "$DIR/$id" --slotd "$SLOTD" --fsync=false --load-report-interval 2s "${NODE_TLS[@]}" "${own[@]}" >"$DIR/$id.log" 2>&1 &
	PIDS+=($!)
	wait_for "node $id" 30 registered "$id"
	echo "$id serving on 127.0.0.1:$(node_port "$id")"
}

say "start three slotkv nodes and bootstrap the directory"
for id in n1 n2 n3; do start_node "$id"; done
slotctl init --node "n1=127.0.0.1:$(node_port n1)" --node "n2=127.0.0.1:$(node_port n2)" --node "n3=127.0.0.1:$(node_port n3)"
slotctl status

say "load $KEYS keys of $SIZE bytes through the SDK"
"$BIN/slotkv" load --keys "$KEYS" --size "$SIZE" --concurrency 16 --slotd "$SLOTD" "${CLIENT_TLS[@]}"

say "start background traffic ($RATE ops/s: verified reads of loaded keys, writes)"
"$BIN/slotkv" traffic --keys "$KEYS" --size "$SIZE" --rate "$RATE" --slotd "$SLOTD" "${CLIENT_TLS[@]}" >"$DIR/traffic.out" 2>"$DIR/traffic.log" &
TRAFFIC=$!
PIDS+=($TRAFFIC)

LOADED=$((KEYS * SIZE * 9 / 10))
if [[ ${DEMO_AUTO:-} == 1 ]]; then
	# The balancer balances bytes as the nodes measured them: the three
	# nodes' reports of the loaded data first.
	wait_for "load reports of the loaded data" 60 reported_total 3 "$LOADED"
	say "turn the automatic balancer on (DEMO_AUTO=1)"
	# A new node is filled at once (no window for that); no hourly budget,
	# so the demo fills it in one plan; the window (for an imbalance) is
	# longer than the nodes' 30-s size pass, so it never plans on sizes
	# taken before its own plan moved anything.
	slotctl auto set enabled=true balance-by=bytes tolerance=5% window=40s interval=5s budget-moves=0 budget-bytes=0 --reason "demo"
	slotctl auto status
fi

say "add a fourth node"
start_node n4

if [[ ${DEMO_AUTO:-} == 1 ]]; then
	say "the balancer fills n4: no plan command"
	A0=$SECONDS
	auto_plan() { slotctl auto status -o json | grep -q '"last_plan": "[^"]'; }
	wait_for "an automatic plan" 60 auto_plan
	PLAN=$(slotctl auto status -o json | sed -n 's/.*"last_plan": "\([^"]*\)".*/\1/p')
	echo "automatic plan $PLAN: $(slotctl plans show "$PLAN" | sed -n 's/^operator: //p')"
	# (The output is read whole: head closing the pipe would fail slotctl
	# under pipefail.)
	while SHOW=$(slotctl plans show "$PLAN") && ! grep -qE "^plan $PLAN (done|cancelled|failed|paused) " <<<"$SHOW"; do
		sed -n 2p <<<"$SHOW"
		sleep 5
	done
	sed -n 1,3p <<<"$SHOW" | tee "$DIR/apply.txt"
	grep -q "^plan $PLAN done" "$DIR/apply.txt" || die "automatic plan $PLAN did not finish"
	APPLY=$((SECONDS - A0))
	slotctl auto status
else
	# The plan balances bytes as the nodes measured them: wait for reports of
	# all that was loaded (every 2 s from each node).
	wait_for "load reports of the loaded data" 60 reported_total 4 "$LOADED"

	say "plan: preview the rebalance (balance by bytes, aiming within 2.5% of each node's share)"
	slotctl plan --balance-by bytes --tolerance 0.05 --reason "demo: fill n4" | tee "$DIR/plan.txt"
	PLAN=$(awk '/^plan /{print $2; exit}' "$DIR/plan.txt")
	[[ -n $PLAN ]] || die "no plan id in slotctl plan's output"

	say "apply $PLAN"
	A0=$SECONDS
	slotctl apply "$PLAN" --wait | tee "$DIR/apply.txt"
	APPLY=$((SECONDS - A0))
fi

say "stop the traffic; it reads back every write it made"
kill -TERM "$TRAFFIC"
TRAFFIC_OK=0
wait "$TRAFFIC" || TRAFFIC_OK=$?
PIDS=("${PIDS[@]/$TRAFFIC/}")

say "check every loaded key"
CHECK_OK=0
"$BIN/slotkv" check --keys "$KEYS" --size "$SIZE" --concurrency 16 --slotd "$SLOTD" "${CLIENT_TLS[@]}" | tee "$DIR/check.txt" || CHECK_OK=$?

say "summary"
slotctl status
echo
echo "rebalance: $(grep -E '^plan .* done' "$DIR/apply.txt" | tail -1) (${DEMO_AUTO:+automatic, }took ${APPLY}s)"
if [[ ${DEMO_TLS:-} != 1 ]] && metrics >"$DIR/metrics.txt" 2>/dev/null; then
	# The plan's "copied" sums the planner's estimates; slotd's counters
	# have what the targets applied.
	PAUSE=$(awk '/^slotd_mover_cutover_pause_seconds_sum/ { s = $NF } /^slotd_mover_cutover_pause_seconds_count/ { n = $NF }
		END { if (n > 0) printf "%.1f ms", 1000 * s / n; else print "-" }' "$DIR/metrics.txt")
	echo "moved:     $(metric slotd_placement_keys_moved_total) keys and changes, $(metric slotd_mover_bytes_moved_total) bytes applied on targets; mean write pause per slot $PAUSE (slotd /metrics)"
fi
# Bytes per node once every node reported after the last move (they report
# every 2 s).
sleep 3
wait_for "fresh load reports" 30 reported_total 4 "$LOADED"
BALANCE=$(node_bytes | sort | awk '{ id[NR] = $1; b[NR] = $2; s += $2 } END {
	m = s / NR; bad = 0
	for (i = 1; i <= NR; i++) { d = 100 * (b[i] - m) / m; printf "%s %.2f MB (%+.1f%%)%s", id[i], b[i] / 1e6, d, i < NR ? ", " : ""; if (d > 10 || d < -10) bad = 1 }
	printf "\n"; exit bad }') || BALANCE_BAD=1
echo "bytes:     $BALANCE (each within 10% of the mean: $([[ -z ${BALANCE_BAD:-} ]] && echo yes || echo NO))"
echo "clients:   $(head -1 "$DIR/traffic.out")"
echo "check:     $(head -1 "$DIR/check.txt")"
echo "demo:      $((SECONDS - T0))s in all"
if [[ -n ${BALANCE_BAD:-} ]]; then
	die "bytes per node not within 10% of the mean: $BALANCE"
fi
if ((TRAFFIC_OK != 0 || CHECK_OK != 0)); then
	tail -n +2 "$DIR/traffic.out" >&2
	die "client errors or bad keys (traffic exit $TRAFFIC_OK, check exit $CHECK_OK)"
fi
