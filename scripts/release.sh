#!/usr/bin/env bash
# release.sh VERSION BINARY...: `make release VERSION=vX.Y.Z` writes dist/,
# a release that needs no git tag on the branch:
#   dist/goproxy/   a file-system Go module proxy (GOPROXY=file://…/dist/goproxy)
#                   with every public module at VERSION, made from the
#                   committed tree (HEAD), not the work tree: the SDK
#                   (github.com/verifierd/verifierd/sdk), the Go client
#                   (…/client), the public API's generated code (…/proto),
#                   the receipt checker (…/receipt) and the root module
#                   (github.com/verifierd/verifierd: judge, the daemon)
#   dist/bin/       the daemon, the CLI and every first-party adapter, with
#                   VERSION stamped (-ldflags -X …/internal/version.Version)
#   dist/SHA256SUMS the digests of dist/bin/* and the module zips
# BINARY is out=package, as the Makefile's BINARIES list them; out's
# folder is replaced by dist/bin.
#
# It refuses a work tree with uncommitted changes (the modules would not
# be what the binaries were built from; RELEASE_DIRTY=1 allows it for a
# trial) and a go.mod of a released module that requires another of them
# at a version other than VERSION (a consumer would resolve a version that
# was never released).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="${1:-}"
shift || true
dist="${DIST:-$root/dist}"
root_module=github.com/verifierd/verifierd
# The public modules, as folders of the repository ("." is the root), the
# ones the others require first (the order only reads better in the log).
modules=(sdk proto receipt client .)
module_path() { if [[ "$1" == . ]]; then echo "$root_module"; else echo "$root_module/$1"; fi; }

fail() { echo "release: $*" >&2; exit 1; }

if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	fail "VERSION '$version' is not vX.Y.Z; run: make release VERSION=v0.4.0"
fi
for m in "${modules[@]}"; do
	# Every require of one of our modules, as PATH VERSION.
	while read -r dep required; do
		[[ -n "$dep" ]] || continue
		if [[ "$required" != "$version" ]]; then
			fail "$m/go.mod requires $dep $required, not $version: a consumer of $(module_path "$m") would resolve that version; run '(cd $m && go mod edit -require=$dep@$version)', commit, and release again"
		fi
	done < <(cd "$m" && go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Require") or []:
    if r["Path"] == sys.argv[1] or r["Path"].startswith(sys.argv[1] + "/"):
        print(r["Path"], r["Version"])' "$root_module")
done
if [[ -n "$(git status --porcelain --untracked-files=no)" && "${RELEASE_DIRTY:-}" != 1 ]]; then
	fail "the work tree has uncommitted changes; commit them (the module zips are made from HEAD), or set RELEASE_DIRTY=1 for a trial release"
fi

rm -rf "$dist"
mkdir -p "$dist/bin" "$dist/goproxy"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The modules, from the committed tree.
when="$(git log -1 --format=%cI HEAD | xargs -I{} date -u -d {} +%Y-%m-%dT%H:%M:%SZ)"
(cd tools && go build -o "$stage/modproxy" ./modproxy)
git archive HEAD | tar -x -C "$stage" --one-top-level=tree
# A module's zip leaves out the folders of the modules nested in it (their
# own go.mod), as the go command does: the root's holds no client/ or sdk/.
for m in "${modules[@]}"; do
	"$stage/modproxy" -out "$dist/goproxy" -module "$(module_path "$m")" -version "$version" -dir "$stage/tree/$m" -time "$when"
	echo "release: dist/goproxy holds $(module_path "$m")@$version"
done

# The binaries: the same build as `make build` but for the stamp, which
# only relinks.
ldflags="-X github.com/verifierd/verifierd/internal/version.Version=$version"
for b in "$@"; do
	out="$dist/bin/$(basename "${b%%=*}")"
	echo "go build $out"
	go build -ldflags "$ldflags" -o "$out" "${b#*=}"
done
got="$("$dist/bin/verifierd" --version)"
[[ "$got" == "verifierd $version "* ]] || fail "dist/bin/verifierd --version printed '$got', not $version"

(cd "$dist" && sha256sum bin/* $(cd "$dist" && find goproxy -name '*.zip' -o -name '*.mod' | sort) >SHA256SUMS)
echo "release: $version in $dist (SHA256SUMS: $(wc -l <"$dist/SHA256SUMS") files)"
