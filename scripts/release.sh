#!/usr/bin/env bash
# release.sh VERSION BINARY...: `make release VERSION=vX.Y.Z` writes dist/,
# a release that needs no git tag on the branch:
#   dist/goproxy/   a file-system Go module proxy (GOPROXY=file://…/dist/goproxy)
#                   with every public module at VERSION: the SDK
#                   (github.com/verifierd/verifierd/sdk) and the root module
#                   (github.com/verifierd/verifierd: client, receipt, judge),
#                   made from the committed tree (HEAD), not the work tree
#   dist/bin/       the daemon, the CLI and every first-party adapter, with
#                   VERSION stamped (-ldflags -X …/internal/version.Version)
#   dist/SHA256SUMS the digests of dist/bin/* and the module zips
# BINARY is out=package, as the Makefile's BINARIES list them; out's
# folder is replaced by dist/bin.
#
# It refuses a work tree with uncommitted changes (the modules would not
# be what the binaries were built from; RELEASE_DIRTY=1 allows it for a
# trial) and a root go.mod that does not require the SDK at VERSION.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="${1:-}"
shift || true
dist="${DIST:-$root/dist}"
sdk_module=github.com/verifierd/verifierd/sdk
root_module=github.com/verifierd/verifierd

fail() { echo "release: $*" >&2; exit 1; }

if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	fail "VERSION '$version' is not vX.Y.Z; run: make release VERSION=v0.4.0"
fi
required="$(go list -m -f '{{.Version}}' "$sdk_module")"
if [[ "$required" != "$version" ]]; then
	fail "go.mod requires $sdk_module $required, not $version: a consumer of the root module would resolve that SDK; run 'go mod edit -require=$sdk_module@$version', commit, and release again"
fi
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
"$stage/modproxy" -out "$dist/goproxy" -module "$sdk_module" -version "$version" -dir "$stage/tree/sdk" -time "$when"
"$stage/modproxy" -out "$dist/goproxy" -module "$root_module" -version "$version" -dir "$stage/tree" -time "$when"
echo "release: dist/goproxy holds $sdk_module@$version and $root_module@$version"

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
