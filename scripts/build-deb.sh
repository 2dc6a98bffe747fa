#!/usr/bin/env bash
# Builds the Debian package (`make deb`): dpkg-buildpackage with debian/ (debhelper; the files come
# from scripts/stage-package.sh). The package and its .buildinfo/.changes go to dist/, not to the
# parent folder where dpkg-buildpackage leaves them by default.
#   scripts/build-deb.sh          prints the path of the .deb on its last line
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist
version=$(dpkg-parsechangelog -S Version)
architecture=$(dpkg-architecture -qDEB_HOST_ARCH)
dpkg-buildpackage --build=binary --no-sign \
  --buildinfo-option=-udist --changes-option=-udist \
  --buildinfo-file="dist/capture-streamer_${version}_${architecture}.buildinfo" \
  --changes-file="dist/capture-streamer_${version}_${architecture}.changes"
echo "dist/capture-streamer_${version}_${architecture}.deb"
