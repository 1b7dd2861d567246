#!/usr/bin/env bash
# Regenerates the code under proto/ (the adapter protocol's, under
# sdk/internal/adapterpb/, and the daemon's HTTP gateway handlers, under
# internal/httpapi/gw/) and fails when it differs from what is
# committed or staged: the generated code in the repository must be exactly
# what the pinned generators make from the .proto files. Works on a fresh
# clone (the generators are built on first use).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/generate.sh

# Work tree vs index covers modified and deleted files; untracked files cover
# generated files that were never committed.
changed="$(git diff --name-only -- proto/ sdk/internal/adapterpb/ internal/httpapi/gw/)"
untracked="$(git ls-files --others --exclude-standard -- proto/ sdk/internal/adapterpb/ internal/httpapi/gw/)"
if [[ -n "$changed" || -n "$untracked" ]]; then
	echo "check-generated: generated code is out of date; run scripts/generate.sh and commit the result" >&2
	git diff --stat -- proto/ sdk/internal/adapterpb/ internal/httpapi/gw/ >&2
	if [[ -n "$untracked" ]]; then
		echo "untracked:" >&2
		printf '  %s\n' $untracked >&2
	fi
	exit 1
fi
echo "check-generated: the generated code (proto/, sdk/internal/adapterpb/, internal/httpapi/gw/) is up to date"
