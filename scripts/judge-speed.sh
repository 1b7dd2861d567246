#!/usr/bin/env bash
# judge-speed.sh: `verifyctl judge --case` against the plain Python judge
# (scripts/pyjudge.py) on the same generated case, in the same run.
#
#   scripts/judge-speed.sh [RECORDS] [RUNS]     (defaults 200000, 5)
#
# Both sides read and parse the JSON file and judge both effects. The runs
# alternate (Go, Python, Go, ...) so that both see the same machine load;
# the best wall time of each is compared, and the CPU time (user+sys) of
# that best run is shown beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
runs=${2:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/verifyctl" ./cmd/verifyctl
python3 scripts/gencase.py "$n" "$dir/case.json"
echo "case: $n baseline records, two effects, $(stat -c %s "$dir/case.json") bytes"
measure() { # prints "wall_ms cpu_ms" of one run of "$@"
	local out
	out=$( { TIMEFORMAT='%R %U %S'; time "$@" >"$dir/out.json"; } 2>&1 )
	awk '{printf "%d %d\n", $1*1000, ($2+$3)*1000}' <<<"$out"
	grep -q '"outcome": "VERIFIED"' "$dir/out.json" || { echo "not VERIFIED: $*" >&2; exit 1; }
}
best_go=999999999; best_go_cpu=0; best_py=999999999; best_py_cpu=0
for _ in $(seq "$runs"); do
	res=$(measure "$dir/verifyctl" judge --case "$dir/case.json")
	read -r w c <<<"$res"
	if ((w < best_go)); then best_go=$w; best_go_cpu=$c; fi
	res=$(measure python3 scripts/pyjudge.py "$dir/case.json")
	read -r w c <<<"$res"
	if ((w < best_py)); then best_py=$w; best_py_cpu=$c; fi
done
echo "verifyctl judge: best ${best_go} ms wall (${best_go_cpu} ms cpu)"
echo "pyjudge.py:      best ${best_py} ms wall (${best_py_cpu} ms cpu)"
awk -v g="$best_go" -v p="$best_py" -v gc="$best_go_cpu" -v pc="$best_py_cpu" \
	'BEGIN {printf "speed-up: %.1fx wall, %.1fx cpu\n", p/g, (gc>0 ? pc/gc : 0)}'
