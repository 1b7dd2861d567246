#!/usr/bin/env bash
# Installs the Debian packages the tests run against: real servers started on
# loopback by the tests themselves (PostgreSQL, MariaDB, OpenSSH's sshd and
# sftp-server), Chromium for the UI read-backs and Tesseract (library and
# headers: the onscreen plugin links it through cgo) for the on-screen
# read-back's OCR. Idempotent: it installs only
# what is missing, and does nothing when everything is there.
set -euo pipefail

packages=(
	postgresql        # adapters/sql: PostgreSQL through pgx
	mariadb-server    # adapters/sql: MySQL/MariaDB
	openssh-server    # adapters/file: SFTP against a real sshd
	chromium          # adapters/uireadback, adapters/onscreen: headless browser
	tesseract-ocr     # adapters/onscreen: OCR of marked screen regions
	tesseract-ocr-eng # adapters/onscreen: the English model
	libtesseract-dev  # adapters/onscreen: the warm in-process engine (cgo, gosseract)
	libleptonica-dev  # adapters/onscreen: Tesseract's image library headers
	x11-apps          # adapters/onscreen: xwd, the X display source's capture
	xvfb              # adapters/onscreen: a virtual X display for its tests
	prometheus        # promtool: e2e checks deploy/prometheus/alerts.yaml with it
)

# "deps.sh build" installs only what building the binaries needs: the
# onscreen plugin links Tesseract through cgo.
if [[ ${1:-} == build ]]; then
	packages=(libtesseract-dev libleptonica-dev tesseract-ocr-eng)
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	sudo="sudo"
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package installs must not start services: the tests start their own
# servers on loopback and stop them by PID.
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
echo "deps: installed ${missing[*]}"
