#!/usr/bin/env bash
# Installs the Debian packages the build, the tests, the demo and the benchmarks need, skipping
# those already installed. Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(
  pkg-config libasound2-dev libopus-dev libsndfile1-dev   # C libraries we link
  ffmpeg sox opus-tools alsa-utils openssl socat time     # independent tools the tests and benchmarks use
  protobuf-compiler                                       # protoc: an independent decoder of the wire messages in the tests
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
