#!/usr/bin/env bash
# Builds the pinned code generators and the linter declared as `tool` directives in
# tools/go.mod into .cache/bin/. The versions live only in tools/go.mod (and
# tools/go.sum); this script never picks a version itself.
#
# Idempotent: a stamp file records the sha256 of tools/go.sum (and of this
# script) that the binaries were built from. When the stamp matches and every
# binary exists, nothing is rebuilt. buf and golangci-lint take minutes to
# compile the first time, so the cache matters.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/bin"
stamp="$bin/.tools.sha256"

# name=import path, one per tool.
tools=(
	"buf=github.com/bufbuild/buf/cmd/buf"
	"protoc-gen-go=google.golang.org/protobuf/cmd/protoc-gen-go"
	"protoc-gen-go-grpc=google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	"protoc-gen-grpc-gateway=github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway"
	"protoc-gen-openapiv2=github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2"
	"golangci-lint=github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	"apidiff=golang.org/x/exp/cmd/apidiff"
)

want="$(cat "$root/tools/go.mod" "$root/tools/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

fresh=1
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
	fresh=0
fi
for entry in "${tools[@]}"; do
	if [[ ! -x "$bin/${entry%%=*}" ]]; then
		fresh=0
	fi
done
if [[ $fresh == 1 ]]; then
	exit 0
fi

mkdir -p "$bin"
rm -f "$stamp"
for entry in "${tools[@]}"; do
	name="${entry%%=*}"
	pkg="${entry#*=}"
	echo "tools.sh: building $name ($pkg)" >&2
	# -C tools resolves pkg against tools/go.mod, so the pinned version is used
	# and the root module never sees buf's dependency tree.
	go build -C "$root/tools" -trimpath -o "$bin/$name" "$pkg"
done
echo "$want" >"$stamp"
