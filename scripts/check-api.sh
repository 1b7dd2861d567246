#!/usr/bin/env bash
# check-api.sh [check|update]: the exported API of every public package,
# as text, against the snapshots committed under api/ (as the Go project's
# own api/ directory does), so compatibility is checked against files on
# the branch, not against git tags, which do not travel with it.
#   api/sdk.txt      the SDK module (github.com/verifierd/verifierd/sdk/...),
#                    but for sdk/unstable/...: the daemon's own support
#                    packages, which the compatibility promise does not
#                    cover (sdk/doc.go, docs/adapters/README.md) and which may
#                    change in any release
#   api/client.txt   the client module (github.com/verifierd/verifierd/client)
#   api/receipt.txt  the receipt module (github.com/verifierd/verifierd/receipt)
#   api/proto.txt    the proto module's generated Go package, the public
#                    API's messages and gRPC stubs
#                    (github.com/verifierd/verifierd/proto/verifierd/verifier/v1)
#   api/judge.txt    github.com/verifierd/verifierd/judge/...
# Internal packages, commands and examples are not in them. An exported
# alias of an internal type is listed with that type's fields and methods
# (tools/apisnap).
#
# check (make check-api, part of make lint) fails when the API differs from
# a snapshot, and when a commit since this branch left main (on main: the
# last commit) changes a snapshot without a CHANGES.md entry in the same
# commit: api/sdk.txt needs sdk/CHANGES.md, the others the root CHANGES.md.
# update (make update-api) rewrites the snapshots; commit them with the
# CHANGES.md entry that says what changed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-check}"
mkdir -p .cache/bin
(cd tools && go build -o "$root/.cache/bin/apisnap" ./apisnap)

# name module-dir exclude patterns... ("-" excludes nothing)
snapshots=(
	"sdk sdk /unstable/ ./..."
	"client client - ./..."
	"receipt receipt - ./..."
	"proto proto - ./verifierd/verifier/v1/..."
	"judge . - ./judge/..."
)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
changed=0
for s in "${snapshots[@]}"; do
	read -r name dir exclude patterns <<<"$s"
	[[ "$exclude" == - ]] && exclude=""
	.cache/bin/apisnap -C "$dir" -exclude "$exclude" $patterns >"$tmp/$name.txt"
	if [[ "$mode" == update ]]; then
		mkdir -p api
		cp "$tmp/$name.txt" "api/$name.txt"
		continue
	fi
	if ! diff -u --label "api/$name.txt (committed)" --label "api/$name.txt (this tree)" "api/$name.txt" "$tmp/$name.txt" >"$tmp/$name.diff"; then
		cat "$tmp/$name.diff"
		changed=1
	fi
done
# The promised SDK API must not show an unstable package's type either
# (an exported field, parameter or alias of one would carry it into the
# promise).
if grep -n 'verifierd/sdk/unstable/' "$tmp/sdk.txt" >&2; then
	echo "check-api: the SDK's promised API above names a type of sdk/unstable/, which the promise does not cover; wrap it in a type of the promised package" >&2
	exit 1
fi
if [[ "$mode" == update ]]; then
	echo "check-api: api/*.txt rewritten; commit them together with a CHANGES.md (or sdk/CHANGES.md, for api/sdk.txt) entry"
	exit 0
fi
if [[ $changed == 1 ]]; then
	echo "check-api: the public API differs from the committed snapshot above; if the change is meant, run 'make update-api' and commit api/ with an entry in CHANGES.md (sdk/CHANGES.md for the SDK) saying what changed, in the same commit" >&2
	exit 1
fi

# Every commit that changed a snapshot carries its CHANGES.md entry.
base="$(git merge-base HEAD main 2>/dev/null || true)"
if [[ -z "$base" || "$base" == "$(git rev-parse HEAD)" ]]; then
	base="$(git rev-parse --verify -q HEAD~1 || true)"
fi
for c in $(git rev-list ${base:+"$base"..}HEAD -- api/); do
	files="$(git diff-tree --no-commit-id --name-only -r --root "$c")"
	for name in $(grep -oE '^api/[a-z]+\.txt$' <<<"$files" | sed -E 's#^api/(.*)\.txt$#\1#'); do
		want=CHANGES.md
		[[ "$name" == sdk ]] && want=sdk/CHANGES.md
		if ! grep -qx "$want" <<<"$files"; then
			echo "check-api: commit $(git log -1 --format='%h %s' "$c") changes api/$name.txt without an entry in $want; add the entry to that commit (git commit --amend, or git rebase -i for an older one)" >&2
			exit 1
		fi
	done
done
echo "check-api: the public API matches api/*.txt, and every snapshot change has its CHANGES.md entry"
