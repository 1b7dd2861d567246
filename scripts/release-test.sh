#!/usr/bin/env bash
# release-test.sh: a customer's build against dist/ (make release first),
# outside the repository, with GOPROXY=file://…/dist/goproxy, GOSUMDB=off,
# GOFLAGS=-mod=mod and no replace:
#   1. an adapter, sdk/examples/jsonl copied out as a module of its own,
#      passes its tests (adaptertest drives the built plugin binary);
#   2. a client program (scripts/release-test/client) runs Begin and Verify
#      against dist/bin/verifierd serving the demo's clinic deployment, and
#      checks the receipt offline with the key `verifyctl key` printed.
# Dependencies that are not ours come through the machine's own module
# cache and then its configured GOPROXY; the consumer gets a module cache
# of its own, so a stale copy of an earlier release is never used.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dist="${DIST:-$root/dist}"
fail() { echo "release-test: $*" >&2; exit 1; }

version="$(cat "$dist"/goproxy/github.com/verifierd/verifierd/@v/list 2>/dev/null | tail -n 1 || true)"
[[ -n "$version" && -x "$dist/bin/verifierd" ]] || fail "no release in $dist; run 'make release VERSION=vX.Y.Z' first"
(cd "$dist" && sha256sum --quiet -c SHA256SUMS) || fail "$dist/SHA256SUMS does not match dist/; run make release again"
for b in verifierd verifyctl; do
	got="$("$dist/bin/$b" $([[ $b == verifierd ]] && echo --version || echo version))"
	[[ "$got" == "$b $version "* ]] || fail "dist/bin/$b reports '$got', not $version"
done

work="$(mktemp -d)"
daemon=
cleanup() {
	[[ -n "$daemon" ]] && { kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

shared_cache="$(go env GOMODCACHE)/cache/download"
export GOPROXY="file://$dist/goproxy,file://$shared_cache,$(go env GOPROXY)"
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOMODCACHE="$work/modcache"
export GONOSUMDB= GOPRIVATE= GONOPROXY=

# 1. The adapter.
mkdir -p "$work/adapter"
cp sdk/examples/jsonl/*.go "$work/adapter/"
sed -i 's#"github.com/verifierd/verifierd/sdk/examples/jsonl"#"example.com/jsonl"#' "$work/adapter/main_test.go"
(cd "$work/adapter" && go mod init example.com/jsonl >/dev/null 2>&1 &&
	go mod edit -require=github.com/verifierd/verifierd/sdk@"$version" &&
	go test -count=1 ./...) || fail "the customer adapter (sdk/examples/jsonl copied out) did not pass its adaptertest tests against the SDK $version"
grep -q replace "$work/adapter/go.mod" && fail "the adapter's go.mod has a replace"

# 2. The client program, against the released daemon.
mkdir -p "$work/client" "$work/run"
cp scripts/release-test/client/main.go "$work/client/"
(cd "$work/client" && go mod init example.com/consumer >/dev/null 2>&1 &&
	go mod edit -require=github.com/verifierd/verifierd@"$version" &&
	go build -o "$work/consumer" .) || fail "the client program did not build against github.com/verifierd/verifierd $version"
(cd "$work/client" && go list -m github.com/verifierd/verifierd/sdk | grep -qx "github.com/verifierd/verifierd/sdk $version") ||
	fail "the client program resolved $(cd "$work/client" && go list -m github.com/verifierd/verifierd/sdk), not the SDK $version"

unset GOFLAGS GOPROXY GOSUMDB GOMODCACHE
go build -o "$work/clinic" ./examples/demo/clinic
cp -r examples/demo "$work/run/demo"
mkdir -p "$work/run/.cache/demo"
"$work/clinic" init "$work/run/.cache/demo/clinic.db"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
addr="127.0.0.1:$(port)" http="127.0.0.1:$(port)"
(cd "$work/run" && exec "$dist/bin/verifierd" --listen "$addr" --http-listen "$http" --data-dir "$work/run/data" \
	--config demo/daemon.yaml --log-level warn) &
daemon=$!
for _ in $(seq 600); do
	"$dist/bin/verifyctl" key --addr "$addr" >"$work/key.json" 2>/dev/null && break
	kill -0 "$daemon" 2>/dev/null || fail "dist/bin/verifierd exited before serving"
	sleep 0.1
done
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["public_key"])' "$work/key.json" >"$work/key.pub" ||
	fail "verifyctl key gave no public key within 60 s"
(cd "$work/run" && "$work/consumer" -addr "$addr" -http "$http" -key "$work/key.pub" -version "$version" -- \
	"$work/clinic" save "$work/run/.cache/demo/clinic.db" p1 Triage Follow-up)
echo "release-test: $version passes: an adapter and a client built outside the repository from dist/goproxy, against dist/bin"
