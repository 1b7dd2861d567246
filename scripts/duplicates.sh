#!/usr/bin/env bash
# duplicates: the pairs of places in two different packages that share six or
# more lines, as the `duplicates` command finds them, over the Go code a
# maintainer writes: the root and sdk modules' .go files, leaving out tests
# (*_test.go), generated code (*.pb.go, *.pb.gw.go) and the tools/ module.
#
# The files are copied into a scratch folder, their paths kept. In the copy
# each grouped import declaration, `import ( "a"; b "c" )`, is written as
# single ones, `import "a"` and `import b "c"`, on the same lines: the same
# Go, and `duplicates` passes over single import lines but reads the lines
# of a group as code, so two files that import the same packages would
# otherwise make a pair. Nothing else is changed, and the line numbers of
# every row are the repository's.
#
# Prints the pairs whose two sides are in different folders, then their
# count. DUPLICATES_ALL=1 prints every row the command gave instead (pairs
# within one package too). Needs `duplicates` on PATH.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v duplicates >/dev/null || { echo "duplicates: the duplicates command is not on PATH" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

git ls-files -co --exclude-standard '*.go' |
	grep -Ev '(_test|\.pb|\.pb\.gw)\.go$|^tools/' |
	while IFS= read -r f; do
		[[ -f "$f" ]] || continue
		mkdir -p "$scratch/$(dirname "$f")"
		awk '
			/^import \($/ { group = 1; print ""; next }
			group && /^\)$/ { group = 0; print ""; next }
			group && /^[ \t]*($|\/\/)/ { print; next }
			group { sub(/^[ \t]+/, ""); print "import " $0; next }
			{ print }
		' "$f" >"$scratch/$f"
	done

out="$(cd "$scratch" && duplicates --most 200 --seconds 120)"
if [[ "${DUPLICATES_ALL:-}" == 1 ]]; then
	printf '%s\n' "$out"
	exit 0
fi
printf '%s\n' "$out" | awk '
	/^D[0-9]+ / {
		a = $2; b = $4
		sub(/:[0-9]+-[0-9]+$/, "", a); sub(/:[0-9]+-[0-9]+$/, "", b)
		da = a; db = b
		if (!sub(/\/[^\/]*$/, "", da)) da = "."
		if (!sub(/\/[^\/]*$/, "", db)) db = "."
		if (da != db) { print; n++ }
		next
	}
	/^(incomplete|left out):/ { print }
	END { printf "%d pairs between packages\n", n }
'
