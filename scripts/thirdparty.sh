#!/usr/bin/env bash
# Installs the third-party application the e2e suite e2e/directus_test.go
# starts on loopback: Directus 9 (GPL-3.0-only; REST and GraphQL over
# SQLite), at the exact version and dependency tree pinned by
# scripts/thirdparty/package-lock.json, as .cache/thirdparty/directus-<version>/.
#
# Idempotent: when that folder already holds this version installed from
# this lock file for this Node.js, it does nothing. Otherwise it installs what
# is missing from Debian (Node.js and npm when there is no node; a C++
# toolchain, Python and Node's headers, which node-gyp needs to compile
# Directus's native modules, sqlite3 and argon2, from the npm registry's
# sources: their prebuilt binaries are fetched from outside the registry and
# may not be reachable), then runs `npm ci` in a fresh folder and moves it
# into place only when it succeeded and its native modules load. (sharp is
# pinned by an override in package.json to a release whose binaries are npm
# packages: the one Directus 9 names downloads libvips from outside the
# registry and Debian's libvips is too old to build it against.)
#
# The compile takes minutes, so the finished install is kept once per
# machine, outside the work tree, in $VERIFIERD_THIRDPARTY_CACHE (default
# ~/.cache/verifierd/thirdparty), and .cache/thirdparty/directus-<version>
# is a link to it: a fresh clone on the same machine links it in at once.
set -euo pipefail
cd "$(dirname "$0")/.."

src=scripts/thirdparty
version=$(sed -n 's/^ *"directus": "\([0-9][0-9.]*\)".*/\1/p' "$src/package.json")
if [[ -z $version ]]; then
	echo "thirdparty: no exact directus version in $src/package.json" >&2
	exit 1
fi
lock=$(sha256sum "$src/package-lock.json" | cut -c1-16)
dest=.cache/thirdparty/directus-$version
store=$(realpath -m "${VERIFIERD_THIRDPARTY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/verifierd/thirdparty}")
# installed <folder>: the folder holds this version from this lock file,
# built for this node (the compiled modules were built against its headers).
want() { echo "directus $version lock $lock node $(node -p 'process.versions.modules' 2>/dev/null || echo none)"; }
installed() { [[ -f $1/.installed && $(cat "$1/.installed") == "$(want)" ]]; }
link() {
	mkdir -p .cache/thirdparty
	rm -rf "$dest"
	ln -s "$1" "$dest"
}
if command -v node >/dev/null; then
	if installed "$dest"; then
		echo "thirdparty: directus $version already installed in $dest"
		exit 0
	fi
	real=$store/directus-$version-$lock-node$(node -p 'process.versions.modules')
	if installed "$real"; then
		link "$real"
		echo "thirdparty: directus $version linked from $real"
		exit 0
	fi
fi

start=$(date +%s)
sudo=""
if [[ $(id -u) -ne 0 ]]; then
	sudo="sudo"
fi
# node_headers: node-gyp compiles against these instead of downloading them.
node_headers() {
	local prefix
	prefix=$(node -p 'process.config.variables.node_prefix' 2>/dev/null || true)
	for d in "$prefix" /usr /usr/local; do
		if [[ -n $d && -f $d/include/node/node_api.h ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}
packages=()
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	packages+=(nodejs npm libnode-dev)
fi
for p in build-essential python3; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		packages+=("$p")
	fi
done
if command -v node >/dev/null && ! node_headers >/dev/null; then
	packages+=(libnode-dev)
fi
if [[ ${#packages[@]} -gt 0 ]]; then
	echo "thirdparty: installing ${packages[*]} from Debian"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

major=$(node -p 'process.versions.node.split(".")[0]')
if ((major < 18)); then
	echo "thirdparty: directus $version needs Node.js 18 or later; node is $(node --version)" >&2
	exit 1
fi
if ! headers=$(node_headers); then
	echo "thirdparty: no Node.js headers (include/node/node_api.h) for node $(node --version); install the headers of this node (Debian: libnode-dev)" >&2
	exit 1
fi
export npm_config_nodedir=$headers

# A fresh folder each time: a half-finished install never looks finished.
real=$store/directus-$version-$lock-node$(node -p 'process.versions.modules')
mkdir -p "$store"
tmp=$(mktemp -d "$store/.install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$tmp/"
echo "thirdparty: npm ci directus@$version (node $(node --version); native modules compile from source)"
(cd "$tmp" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
if [[ ! -f $tmp/node_modules/@directus/api/dist/cli/run.js ]]; then
	echo "thirdparty: the install has no node_modules/@directus/api/dist/cli/run.js" >&2
	exit 1
fi
# The native modules Directus loads must load here too (sqlite3 is an
# optional dependency of Directus: npm skips it silently when it fails to
# build).
if ! (cd "$tmp" && node -e 'for (const m of ["sqlite3", "argon2", "sharp"]) require(m)'); then
	echo "thirdparty: a native module of the install does not load (sqlite3, argon2 or sharp); see the error above" >&2
	exit 1
fi
want >"$tmp/.installed"
rm -rf "$real"
mv "$tmp" "$real"
link "$real"
echo "thirdparty: installed directus $version in $real ($(du -sh "$real" | cut -f1), $(($(date +%s) - start)) s), linked as $dest"
