#!/usr/bin/env bash
# check-sdk-api: the SDK module (sdk/go.mod) is what customers build their
# adapters against, so its exported API must stay compatible with its last
# release, the newest sdk/v* tag. apidiff (pinned in tools/go.mod, built by
# scripts/tools.sh) compares the two; internal packages are not compared.
#
# Before the first tag there is nothing to compare against and the check
# passes, saying so. SDK_API_AGAINST=<git ref> compares against another ref
# (a branch, a commit) instead of the tag.
#
# An intentional incompatible change is acknowledged in history, never by
# switching the check off: a commit after the tag whose message carries the
# trailer
#   SDK-Break-Acknowledged: <what broke and why>
# lets the check pass with the report printed. The release note
# (sdk/CHANGES.md) must list every removed or changed name, and the next
# tag is then a new minor version (v0.x) or a new major version (v1 on).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
module=github.com/verifierd/verifierd/sdk

against="${SDK_API_AGAINST:-}"
if [[ -z "$against" ]]; then
	against="$(git tag --list 'sdk/v*' --sort=-v:refname | head -n 1)"
fi
if [[ -z "$against" ]]; then
	echo "check-sdk-api: no sdk/v* tag yet, so there is no released SDK API to compare with; passing (tag the first release sdk/v0.1.0)"
	exit 0
fi
if ! git cat-file -e "$against^{commit}" 2>/dev/null; then
	echo "check-sdk-api: $against is not a commit in this repository" >&2
	exit 1
fi
if ! git cat-file -e "$against:sdk/go.mod" 2>/dev/null; then
	echo "check-sdk-api: $against has no sdk/go.mod (the SDK was not its own module yet); nothing to compare" >&2
	exit 1
fi

bash scripts/tools.sh
apidiff="$root/.cache/bin/apidiff"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive "$against" sdk | tar -x -C "$tmp"
# Export data of every package of each version, each loaded inside its own
# module so that its go.mod decides the dependencies.
# apidiff names each internal package it skips on stderr; that stays in a
# log shown only when it fails.
export_api() {
	if ! (cd "$1" && "$apidiff" -m -w "$2" "$module") 2>"$2.log"; then
		cat "$2.log" >&2
		echo "check-sdk-api: apidiff could not load the SDK at $1" >&2
		exit 1
	fi
}
export_api "$tmp/sdk" "$tmp/old.export"
export_api "$root/sdk" "$tmp/new.export"
if ! report="$("$apidiff" -m -incompatible "$tmp/old.export" "$tmp/new.export" 2>"$tmp/diff.log")"; then
	cat "$tmp/diff.log" >&2
	exit 1
fi

if [[ -z "$report" ]]; then
	echo "check-sdk-api: the SDK's API is compatible with $against"
	exit 0
fi
echo "check-sdk-api: incompatible changes to the SDK's API since $against:"
echo "$report"
# grep reads the whole log (no -q): under pipefail, a grep that stops at
# the first match would end git log with SIGPIPE and fail the pipeline.
if git log --format=%B "$against..HEAD" | grep '^SDK-Break-Acknowledged:' >/dev/null; then
	echo "check-sdk-api: acknowledged by a commit's SDK-Break-Acknowledged trailer since $against; list them in sdk/CHANGES.md"
	exit 0
fi
echo "check-sdk-api: keep the old names (deprecate them), or acknowledge the break with a commit whose message carries the trailer 'SDK-Break-Acknowledged: <what and why>' and list it in sdk/CHANGES.md" >&2
exit 1
