#!/usr/bin/env bash
# Lints the protos and regenerates the Go code beside them, with the pinned
# local generators from tools/go.mod. Generated code is committed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/tools.sh

# buf runs the plugins named in buf.gen.yaml; put .cache/bin first on PATH as
# well so nothing resolves to a stray system-wide protoc-gen-* binary.
export PATH="$root/.cache/bin:$PATH"

buf lint
# Generated files whose .proto was removed must disappear too, so start from
# no generated code. buf lint has passed, so buf generate fails only for a
# plugin fault, which git restores from.
find proto sdk/internal/adapterpb internal/httpapi/gw -type f \( -name '*.pb.go' -o -name '*_grpc.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' \) -delete 2>/dev/null || true
buf generate
