#!/usr/bin/env bash
# release-test.sh: a customer's build against dist/ (make release first),
# outside the repository, with GOPROXY=file://…/dist/goproxy, GOSUMDB=off,
# GOFLAGS=-mod=mod and no replace:
#   1. an adapter, sdk/examples/jsonl copied out as a module of its own,
#      passes its tests (adaptertest drives the built plugin binary);
#   2. a client program (scripts/release-test/client), requiring only the
#      client module, runs Begin and Verify against dist/bin/verifierd
#      serving the demo's clinic deployment, and checks the receipt offline
#      with the key `verifyctl key` printed. Its module graph (go list -m
#      all) must hold the client, proto and receipt modules at the release
#      and nothing of the daemon's: not the root module, not the SDK, and
#      none of the daemon's own dependencies (pgx, chromedp, bbolt, ...).
#   3. the root module's released go.mod requires every other module of
#      ours at the release (a consumer of judge resolves those).
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

# 2. The client program, requiring the client module alone, against the
# released daemon.
mkdir -p "$work/client" "$work/run"
cp scripts/release-test/client/main.go "$work/client/"
(cd "$work/client" && go mod init example.com/consumer >/dev/null 2>&1 &&
	go mod edit -require=github.com/verifierd/verifierd/client@"$version" &&
	go build -o "$work/consumer" .) || fail "the client program did not build against github.com/verifierd/verifierd/client $version"
grep -q replace "$work/client/go.mod" && fail "the client program's go.mod has a replace"
graph="$(cd "$work/client" && go list -m all)" || fail "go list -m all failed in the client program"
for m in client proto receipt; do
	grep -qx "github.com/verifierd/verifierd/$m $version" <<<"$graph" ||
		fail "the client program's module graph holds $(grep "^github.com/verifierd/verifierd/$m " <<<"$graph" || echo "no github.com/verifierd/verifierd/$m"), not $m $version"
done
# The daemon's module and its dependencies a client never needs: the root
# module, the SDK, the database drivers, the browser, the store, the HTTP
# gateway, the plugin host.
daemon_only='^(github\.com/verifierd/verifierd|github\.com/verifierd/verifierd/sdk|github\.com/jackc/pgx/v5|github\.com/go-sql-driver/mysql|modernc\.org/sqlite|github\.com/chromedp/chromedp|go\.etcd\.io/bbolt|github\.com/grpc-ecosystem/grpc-gateway/v2|github\.com/hashicorp/go-plugin|github\.com/otiai10/gosseract/v2)( |$)'
if bad="$(grep -E "$daemon_only" <<<"$graph")"; then
	fail "the client program's module graph holds the daemon's modules: $(tr '\n' ' ' <<<"$bad")"
fi
echo "release-test: the client program's module graph is $(wc -l <<<"$graph") modules, none of the daemon's"

# 3. The root module's go.mod requires ours at the release.
rootmod="$dist/goproxy/github.com/verifierd/verifierd/@v/$version.mod"
for m in sdk client proto receipt; do
	grep -qE "^\s*github.com/verifierd/verifierd/$m $version( |\$)" "$rootmod" ||
		fail "$rootmod does not require github.com/verifierd/verifierd/$m $version"
done
grep -q '^replace\|^\s*github.com/verifierd/verifierd/[a-z]* =>' "$rootmod" && fail "$rootmod has a replace"

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
