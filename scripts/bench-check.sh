#!/usr/bin/env bash
# bench-check.sh [check|baseline]: a release must not be slower than the
# last one. The two numbers checked:
#   - Begin+Verify p50 through the daemon binary and the sql plugin
#     (e2e BenchmarkBeginVerifyPlugin/nosync, p50-µs: the daemon's own work,
#     without the disk's fsync latency);
#   - the judge's ns per baseline record per effect
#     (judge BenchmarkRecordWrittenNewOnlyCollateral1MBatch, ns/record).
#
# check (make bench-check, run by make release): builds the benchmarks of
# the baseline's commit (the "commit:" line of bench/baseline.txt, or
# BENCH_AGAINST=<ref>) and of this tree, runs them as BENCH_PAIRS
# interleaved pairs on this machine (old then new, then new then old, ...)
# so that both see the same load, and compares the samples as benchstat
# does (scripts/benchcmp.py): it fails only when a number is more than 20%
# worse with p < 0.05 by the Mann-Whitney U test. The committed numbers
# are the record of the release, not what the check compares with: a
# different or busy machine would decide that.
#
# baseline (make bench-baseline, when cutting a release): writes
# bench/baseline.txt from this tree, with "commit: HEAD"; commit it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-check}"
pairs="${BENCH_PAIRS:-6}"
baseline=bench/baseline.txt
fail() { echo "bench-check: $*" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# build TREE NAME: the two benchmark binaries of a source tree.
build() {
	(cd "$1" && go test -c -o "$tmp/$2-judge.test" ./judge && go test -c -o "$tmp/$2-e2e.test" ./e2e)
}

# run NAME TREE OUT: one sample of each benchmark, appended to OUT. The e2e
# binary builds the daemon and the adapters from TREE (its TestMain).
run() {
	(cd "$2/judge" && "$tmp/$1-judge.test" -test.run '^$' -test.bench '^BenchmarkRecordWrittenNewOnlyCollateral1MBatch$' \
		-test.benchtime 3x -test.count 1 -test.cpu 1) | grep '^Benchmark' >>"$3"
	(cd "$2/e2e" && "$tmp/$1-e2e.test" -test.run '^$' -test.bench '^BenchmarkBeginVerifyPlugin$/^nosync$' \
		-test.benchtime 300x -test.count 1) | grep '^Benchmark' >>"$3"
}

header() {
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "commit: $1"
}

if [[ "$mode" == baseline ]]; then
	[[ -z "$(git status --porcelain --untracked-files=no)" ]] || fail "commit first: the baseline names the commit it measured"
	build "$root" new
	header "$(git rev-parse HEAD)" >"$tmp/new.txt"
	for _ in $(seq "$pairs"); do run new "$root" "$tmp/new.txt"; done
	mkdir -p bench
	cp "$tmp/new.txt" "$baseline"
	echo "bench-check: wrote $baseline ($(grep -c '^Benchmark' "$baseline") results); commit it"
	exit 0
fi

against="${BENCH_AGAINST:-$(sed -n 's/^commit: //p' "$baseline" 2>/dev/null | head -n 1)}"
[[ -n "$against" ]] || fail "$baseline names no commit; run make bench-baseline on the last release, or give BENCH_AGAINST=<ref>"
git cat-file -e "$against^{commit}" 2>/dev/null || fail "the baseline's commit $against is not in this clone; fetch the full history, or give BENCH_AGAINST=<ref> (e.g. the last release's merge)"
echo "bench-check: $against (old) against this tree (new), $pairs interleaved pairs"
mkdir -p "$tmp/old"
git archive "$against" | tar -x -C "$tmp/old"
build "$tmp/old" old
build "$root" new
header "$against" >"$tmp/old.txt"
header "$(git rev-parse HEAD)+worktree" >"$tmp/new.txt"
for i in $(seq "$pairs"); do
	if ((i % 2)); then
		run old "$tmp/old" "$tmp/old.txt"; run new "$root" "$tmp/new.txt"
	else
		run new "$root" "$tmp/new.txt"; run old "$tmp/old" "$tmp/old.txt"
	fi
done
mkdir -p .cache/bench
cp "$tmp/old.txt" .cache/bench/old.txt
cp "$tmp/new.txt" .cache/bench/new.txt
python3 scripts/benchcmp.py --metric ns/record --metric p50-µs .cache/bench/old.txt .cache/bench/new.txt
