#!/usr/bin/env bash
# make image-test (docs/container-image.md):
#
#   1. renders deploy/kubernetes with `kubectl kustomize` and decodes every
#      object strictly into the Kubernetes API types (deploy/kubernetes,
#      its own Go module pinning k8s.io/api);
#   2. asks whether podman can run a container here (scripts/image.sh
#      probe); if not, says why and stops there, passing, unless
#      VERIFIERD_IMAGE_TEST=require;
#   3. builds both images (scripts/image.sh: cached root filesystems, the
#      Go build cache and podman's layer cache make a rebuild quick);
#   4. renders an overlay pinning the version just built;
#   5. runs deploy/imagetest: PostgreSQL on loopback (as its own user), two
#      verifierd containers on the host network listening on 127.0.0.1
#      only, with the Deployment's args, env and config; Begin on one,
#      `podman kill` it, Verify on the other, the receipt checked offline,
#      /metrics and health, ui_readback and onscreen in the full image.
#
# Every container the test starts carries the label
# io.verifierd.image-test=<this run>; the test removes each by name, and
# this script removes any left by that label when it exits, failed or not.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="/usr/local/go/bin:$PATH"
export CONTAINERS_CONF="$root/deploy/containers.conf"

bash scripts/image-deps.sh
bash scripts/deps.sh # PostgreSQL, and Chromium for the automation's browser

# kubectl renders this folder's `labels:` from its built-in kustomize v4.1
# on (kubectl 1.22); Debian's kubernetes-client (1.20) has v2. With such a
# kubectl, the pinned kustomize is built from the Go module proxy instead
# (once, into .cache/image) and renders in its place.
kustomize_version=v5.7.1
kubectl_version="$(kubectl version --client 2>/dev/null || true)"
if ! grep -qE 'Kustomize Version: v(4\.([1-9]|[1-9][0-9])\.|[5-9]\.|[1-9][0-9]\.)' <<<"$kubectl_version"; then
	kbin="$root/.cache/image/kustomize-$kustomize_version"
	if [[ ! -x $kbin/kustomize ]]; then
		echo "image-test: kubectl's kustomize is older than v4.1: building kustomize $kustomize_version"
		GOBIN="$kbin" go install "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version"
	fi
	export VERIFIERD_KUSTOMIZE="$kbin/kustomize"
fi

echo "image-test: kubectl kustomize deploy/kubernetes, decoded strictly"
(cd deploy/kubernetes && VERIFIERD_MANIFESTS=require go test -count=1 ./...)

if ! bash scripts/image.sh probe; then
	if [[ ${VERIFIERD_IMAGE_TEST:-} == require ]]; then
		echo "image-test: podman cannot run containers here, and VERIFIERD_IMAGE_TEST=require" >&2
		exit 1
	fi
	echo "image-test: SKIPPED the image build and the container tests: podman cannot run a container on this machine (see the error above); the manifests were checked"
	exit 0
fi

t0=$SECONDS
bash scripts/image.sh
build_s=$((SECONDS - t0))
version="$(cat .cache/image/version)"

echo "image-test: an overlay pinning $version"
(cd deploy/kubernetes && VERIFIERD_MANIFESTS=require VERIFIERD_IMAGE_VERSION="$version" go test -count=1 -run TestImageTagOverlay ./...)

# The run's id names and labels its containers: this script's PID (alive
# while the run is) and the start time, so that neither a concurrent run
# nor a container left by a killed earlier run whose PID is reused takes
# the same names.
run="$$-$(date +%s)"
# Containers left by earlier runs that were killed (SIGKILL runs no trap)
# are removed here: those whose run's PID is no longer alive. A concurrent
# run's containers (its PID alive) are left alone.
podman ps --all --filter label=io.verifierd.image-test --format '{{.ID}} {{index .Labels "io.verifierd.image-test"}}' 2>/dev/null |
	while read -r id owner; do
		pid="${owner%%-*}"
		if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
			echo "image-test: removing container $id left by an earlier run ($owner)" >&2
			podman rm --force --volumes --time 5 "$id" >/dev/null || true
		fi
	done || true
cleanup() {
	local ids
	ids="$(podman ps --all --quiet --filter "label=io.verifierd.image-test=$run" 2>/dev/null || true)"
	if [[ -n $ids ]]; then
		echo "image-test: removing containers left by the run: $ids" >&2
		# shellcheck disable=SC2086 # one id per word
		podman rm --force --volumes --time 5 $ids >/dev/null || true
	fi
}
trap cleanup EXIT

# A build that found every layer cached keeps its image's creation time, so
# a concurrent `make image` elsewhere may take these images for old builds
# and remove them (scripts/image.sh removes images over six hours old that
# no container uses) between this run's tests. A created, never started
# container of each holds it until the cleanup above.
for variant in full slim; do
	podman create --name "verifierd-imagetest-$run-hold-$variant" --label "io.verifierd.image-test=$run" \
		"$(sed 's/^sha256://' ".cache/image/iid-$variant")" /bin/true >/dev/null
done

echo "image-test: the containers"
# By image id, not by tag: a concurrent `make image` of the same commit in
# another checkout (whose binaries differ by their build paths) moves the
# tag, and a replica started from the moved tag would refuse the pins read
# from this run's image.
VERIFIERD_IMAGE="$(sed 's/^sha256://' .cache/image/iid-full)" \
	VERIFIERD_IMAGE_SLIM="$(sed 's/^sha256://' .cache/image/iid-slim)" \
	VERIFIERD_IMAGE_VERIFYCTL="$root/.cache/image/bin/verifyctl" \
	VERIFIERD_IMAGE_TEST_RUN="$run" \
	go test -count=1 -timeout 20m -v ./deploy/imagetest/

echo "image-test: images built (or found up to date) in $build_s s:"
for suffix in "" -slim; do
	echo "  $(cat ".cache/image/tag$suffix")  $(cat ".cache/image/digest$suffix")  $(cat ".cache/image/size-mb$suffix") MB"
done
