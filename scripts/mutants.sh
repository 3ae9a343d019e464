#!/usr/bin/env bash
# Runs every mutant build and fails unless each one fails the tests it
# targets. A mutant is a file built only with a build tag mutant_NAME that
# breaks one guarantee on purpose (mover/mutant.go: an executor that ignores
# a pause); it proves those tests can fail. `make test` runs this script.
#
# Each mutant's tests are compiled first, so a mutant that does not build
# fails here as a broken mutant, never as a caught one; then only its
# target tests run, and one of them must report "--- FAIL".
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"

# tag, package, the tests (a -run pattern of test names) it must fail.
targets=(
	"mutant_ignorepause ./mover TestScripts"
)

status=0
declare -A known
for t in "${targets[@]}"; do
	read -r tag _ _ <<<"$t"
	known[$tag]=1
done

# Every mutant tag in the tree has a target, and every target a mutant.
declare -A found
while IFS= read -r f; do
	for tag in $(head -n 5 "$f" | sed -n 's#^//go:build ##p' | grep -oE '(^|[^!_A-Za-z0-9])mutant_[A-Za-z0-9_]+' | grep -oE 'mutant_[A-Za-z0-9_]+'); do
		found[$tag]=1
		if [ -z "${known[$tag]:-}" ]; then
			echo "mutants: $f builds with tag $tag, which has no target: add it and the tests it must fail to scripts/mutants.sh" >&2
			status=1
		fi
	done
done < <(grep -rlE --include='*.go' --exclude-dir=.demo --exclude-dir=bench '^//go:build .*mutant_' . | sort)
for tag in "${!known[@]}"; do
	if [ -z "${found[$tag]:-}" ]; then
		echo "mutants: scripts/mutants.sh names $tag, but no file builds with it: remove the target" >&2
		status=1
	fi
done
[ "$status" -eq 0 ] || exit "$status"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "${targets[@]}"; do
	read -r tag pkg tests <<<"$t"
	if [ -z "$tests" ]; then
		echo "mutants: target '$t' names no tests: write it as 'tag package TestA|TestB'" >&2
		status=1
		continue
	fi
	bin="$tmp/$tag.test"
	if ! "$GO" test -c -tags "$tag" -o "$bin" "$pkg" >"$tmp/build.log" 2>&1; then
		cat "$tmp/build.log" >&2
		echo "mutants: $tag does not build ($pkg): fix the mutant, it proves nothing as it is" >&2
		status=1
		continue
	fi
	set +e
	(cd "$pkg" && "$bin" -test.run "^(${tests})\$" -test.count 1) >"$tmp/run.log" 2>&1
	code=$?
	set -e
	if [ "$code" -eq 0 ]; then
		echo "mutants: $tag passed $pkg's $tests: those tests no longer catch what the mutant breaks" >&2
		status=1
	elif ! grep -qE "^--- FAIL: (${tests})( |\$)" "$tmp/run.log"; then
		cat "$tmp/run.log" >&2
		echo "mutants: $tag made $pkg's test binary exit $code without one of $tests failing (see above)" >&2
		status=1
	else
		echo "mutants: $tag fails $pkg's $tests, as it must"
	fi
done
exit "$status"
