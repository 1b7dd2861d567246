#!/usr/bin/env bash
# Builds the two verifierd images (docs/container-image.md), offline, from
# Debian's packages and the project's own Go build:
#
#   localhost/verifierd:<version>       every first-party adapter, with
#                                       Chromium (ui_readback, onscreen) and
#                                       Tesseract (onscreen)
#   localhost/verifierd:<version>-slim  without those two adapters and
#                                       their packages
#
# <version> is `git describe --tags --match 'v[0-9]*' --always --dirty`
# (a release tag, else the commit), or $VERSION when set.
#
# Steps: mmdebstrap makes each variant's root filesystem from the host's
# Debian sources (the pinned release below), cached under .cache/image/ by
# a key of its package list and options, so later builds skip it; `podman
# import` makes it a local base image; the binaries are built on the host
# into a staging folder; `podman build --pull=never` with
# deploy/Containerfile adds them. It writes .cache/image/version, tag,
# tag-slim and the image ids and digests it built (digest, digest-slim).
#
# `scripts/image.sh probe` only answers whether podman can run a container
# here: it makes the slim root filesystem (cached) and runs /bin/true in it
# as the images run (uid 65532, read-only, host network); exit 0 if so.
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) stops the build too

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="/usr/local/go/bin:$PATH"
export CONTAINERS_CONF="$root/deploy/containers.conf"
out="$root/.cache/image"
mkdir -p "$out"

bash scripts/image-deps.sh
bash scripts/deps.sh build

# The Debian release the images are made of: the host's, whose glibc and
# Tesseract the binaries are built against.
suite=bookworm

# Every image: CA certificates (a store DSN with sslmode=verify-full, TLS
# systems of record) and time zones.
common=(ca-certificates tzdata)
# The full image adds what ui_readback and onscreen run: Chromium with a
# font to render text in, and Tesseract with its English model (the onscreen
# plugin links libtesseract through cgo).
full=(chromium fonts-dejavu-core libtesseract5 tesseract-ocr-eng)

# The adapters of the slim image: every first-party one but the two that
# need a browser (internal/builtin lists the kinds; cmd/plugins holds them).
browser_kinds=(ui_readback onscreen)

version="${VERSION:-$(git describe --tags --match 'v[0-9]*' --always --dirty)}"
revision="$(git rev-parse HEAD)"

log() { echo "image.sh: $*" >&2; }

# mmdebstrap_opts PACKAGES...: the options that shape a root filesystem.
mmdebstrap_opts() {
	opts=(--variant=essential --mode=root --format=tar
		--dpkgopt='path-exclude=/usr/share/doc/*'
		--dpkgopt='path-include=/usr/share/doc/*/copyright'
		--dpkgopt='path-exclude=/usr/share/man/*'
		--dpkgopt='path-exclude=/usr/share/info/*'
		--dpkgopt='path-exclude=/usr/share/locale/*'
		--include="$(IFS=,; echo "$*")")
}

# key PACKAGES...: the cache key of a root filesystem: everything that
# shapes it.
key() {
	local opts
	mmdebstrap_opts "$@"
	printf '%s\n' "$suite" "${opts[@]}" | sha256sum | cut -c1-16
}

# rootfs VARIANT PACKAGES...: the cached root filesystem tarball of a
# variant; prints its path.
rootfs() {
	local variant=$1
	shift
	local opts
	mmdebstrap_opts "$@"
	local tar
	tar="$out/rootfs-$variant-$(key "$@").tar"
	if [[ ! -s $tar ]]; then
		# The host's Debian sources: the only package source there is.
		local sources=()
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
			if [[ -s $f ]] && grep -qE '^[[:space:]]*(deb |Types:)' "$f"; then
				sources+=("$f")
			fi
		done
		if [[ ${#sources[@]} -eq 0 ]]; then
			echo "image.sh: no Debian sources under /etc/apt: mmdebstrap needs the host's package sources" >&2
			exit 1
		fi
		log "mmdebstrap $variant root filesystem ($suite, $*) -> $tar"
		rm -f "$out"/rootfs-"$variant"-*.tar
		local t0=$SECONDS
		mmdebstrap --quiet "${opts[@]}" "$suite" "$tar.tmp" "${sources[@]}"
		mv "$tar.tmp" "$tar"
		log "$variant root filesystem: $((SECONDS - t0)) s, $(du -m "$tar" | cut -f1) MB"
	fi
	echo "$tar"
}

# base VARIANT PACKAGES...: the base image of a variant, imported from its
# root filesystem once per key. An image of that key already in podman's
# storage is used as it is (a fresh checkout on the same machine makes no
# root filesystem again).
base() {
	local variant=$1
	shift
	local image
	image="localhost/verifierd-base:$variant-$(key "$@")"
	if ! podman image exists "$image"; then
		local tar
		tar="$(rootfs "$variant" "$@")"
		log "podman import $image"
		podman import --quiet "$tar" "$image" >/dev/null
	fi
	echo "$image"
}

# stage VARIANT KINDS...: the build context of a variant: the binaries, their
# SHA256SUMS and the pins.yaml of the adapters.
stage() {
	local variant=$1
	shift
	local ctx="$out/context-$variant"
	rm -rf "$ctx"
	mkdir -p "$ctx/bin"
	cp deploy/Containerfile "$ctx/"
	cp "$out/bin/verifierd" "$out/bin/verifyctl" "$ctx/bin/"
	local kind
	for kind in "$@"; do
		cp "$out/bin/verifier-adapter-$kind" "$ctx/bin/"
	done
	(cd "$ctx/bin" && sha256sum -- * >../SHA256SUMS)
	{
		echo "# The daemon config's plugins section pinning this image's adapters"
		echo "# (docs/daemon.md): paste it into daemon.yaml to have the daemon refuse"
		echo "# any adapter binary but these."
		echo "plugins:"
		for kind in "$@"; do
			echo "  $kind: {sha256: $(sha256sum "$ctx/bin/verifier-adapter-$kind" | cut -d' ' -f1)}"
		done
	} >"$ctx/pins.yaml"
	echo "$ctx"
}

# probe-run is the probe's work, run by probe as a process of its own so
# that any failure stops it (errexit does not hold inside an if's test).
if [[ ${1:-} == probe-run ]]; then
	probe_base="$(base slim "${common[@]}")"
	podman run --rm --network=host --read-only --user 65532:65532 "$probe_base" /bin/true
	exit 0
fi
if [[ ${1:-} == probe ]]; then
	if ! out="$(bash "${BASH_SOURCE[0]}" probe-run 2>&1)"; then
		echo "image.sh: podman cannot run a container here:" >&2
		echo "$out" >&2
		exit 1
	fi
	exit 0
fi

t_start=$SECONDS

# The binaries, built once for both images, beside nothing of make build's
# (.cache/bin is left alone).
kinds=()
for d in cmd/plugins/*/; do
	kinds+=("$(basename "$d")")
done
mkdir -p "$out/bin"
log "go build verifierd, verifyctl and ${#kinds[@]} adapters"
# The image's version is stamped into the binaries (verifierd --version,
# /health, verifierd_build_info), as make release stamps dist/bin.
ldflags="-s -w -X github.com/verifierd/verifierd/internal/version.Version=$version"
go build -ldflags="$ldflags" -o "$out/bin/verifierd" ./cmd/verifierd
go build -ldflags="$ldflags" -o "$out/bin/verifyctl" ./cmd/verifyctl
for kind in "${kinds[@]}"; do
	go build -ldflags="$ldflags" -o "$out/bin/verifier-adapter-$kind" "./cmd/plugins/$kind"
done
slim_kinds=()
for kind in "${kinds[@]}"; do
	if [[ " ${browser_kinds[*]} " != *" $kind "* ]]; then
		slim_kinds+=("$kind")
	fi
done
t_binaries=$SECONDS

build() {
	local variant=$1 base_image=$2 tag=$3
	shift 3
	local ctx
	ctx="$(stage "$variant" "$@")"
	log "podman build $tag (from $base_image)"
	podman build --quiet --pull=never --network=none \
		--build-arg BASE="$base_image" --build-arg VERSION="$version" \
		--build-arg REVISION="$revision" --build-arg VARIANT="$variant" \
		--iidfile "$out/iid-$variant" -t "$tag" -f "$ctx/Containerfile" "$ctx" >/dev/null
}

base_full="$(base full "${common[@]}" "${full[@]}")"
base_slim="$(base slim "${common[@]}")"
t_rootfs=$SECONDS
build full "$base_full" "localhost/verifierd:$version" "${kinds[@]}"
build slim "$base_slim" "localhost/verifierd:$version-slim" "${slim_kinds[@]}"

# The digest of each image as stored: the sha256 of its manifest.
for variant in full slim; do
	suffix=""
	[[ $variant == slim ]] && suffix="-slim"
	tag="localhost/verifierd:$version$suffix"
	echo "$tag" >"$out/tag$suffix"
	# By the id this build wrote: a concurrent build of the same version
	# in another checkout may have moved the tag since.
	iid="$(cat "$out/iid-$variant")"
	podman image inspect --format '{{.Digest}}' "$iid" >"$out/digest$suffix"
	size="$(podman image inspect --format '{{.Size}}' "$iid")"
	echo "$((size / 1000000))" >"$out/size-mb$suffix"
done
echo "$version" >"$out/version"

# Builds of other versions more than six hours old are removed (and base
# images of other package lists), their layers with them, so that the
# images of every commit built here do not pile up. A newer one may belong
# to a build or test running beside this one, and an image a container
# still uses is never removed (no --force).
podman images --filter until=6h --format '{{.Repository}}:{{.Tag}}' | while read -r image; do
	case "$image" in
	localhost/verifierd:"$version" | localhost/verifierd:"$version"-slim) ;;
	localhost/verifierd:*) podman rmi "$image" >/dev/null 2>&1 || true ;;
	localhost/verifierd-base:*)
		[[ $image == "$base_full" || $image == "$base_slim" ]] ||
			podman rmi "$image" >/dev/null 2>&1 || true
		;;
	esac
done

# An image whose tag a rebuild of the same version took (a -dirty tree
# rebuilt after an edit) is left untagged; those of this script's images
# (by their variant label) are removed after the same six hours.
podman image prune --force --filter label=io.verifierd.image.variant --filter until=6h >/dev/null 2>&1 || true

log "built in $((SECONDS - t_start)) s (binaries $((t_binaries - t_start)) s, base images $((t_rootfs - t_binaries)) s, images $((SECONDS - t_rootfs)) s)"
for suffix in "" -slim; do
	echo "$(cat "$out/tag$suffix")  $(cat "$out/digest$suffix")  $(cat "$out/size-mb$suffix") MB"
done
