#!/usr/bin/env bash
# Installs what building and testing the container image needs, from
# Debian's packages: podman (with runc: crun does not run on every cgroup
# layout), mmdebstrap (the image's Debian root filesystem) and kubectl (to
# render deploy/kubernetes). Idempotent, as scripts/deps.sh: it installs only
# what is missing, and starts no service.
set -euo pipefail

packages=(
	podman     # builds and runs the image (rootful, host network)
	runc       # the OCI runtime deploy/containers.conf names
	mmdebstrap # the Debian root filesystem the image starts from
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# kubectl may come from another package than Debian's (a cloud SDK's);
# any kubectl on PATH will do, Debian's kubernetes-client otherwise.
if ! command -v kubectl >/dev/null; then
	missing+=(kubernetes-client)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	sudo="sudo"
fi
echo "image-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee $policy >/dev/null
	$sudo chmod +x $policy
	created_policy=1
fi
cleanup() { if [[ $created_policy == 1 ]]; then $sudo rm -f $policy; fi; }
trap cleanup EXIT
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "image-deps: installed ${missing[*]}"
