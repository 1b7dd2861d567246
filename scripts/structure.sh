#!/usr/bin/env bash
# structure.sh: the structure limits of issue #36 (make check-structure, part
# of make lint): session.Manager has at most 35 methods, no non-test,
# non-generated Go file is over 800 lines and no function over 100 lines,
# in both Go modules. Prints the numbers; exits non-zero naming each
# offender. The counting is scripts/structure/main.go (go/ast).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
exec "$GO" run ./scripts/structure -root . "$@"
