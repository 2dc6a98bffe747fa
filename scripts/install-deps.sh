#!/usr/bin/env bash
# Installs the Debian packages the build, the tests, the demo and the benchmarks need, skipping
# those already installed. Runs apt-get as root, or through sudo.
#   scripts/install-deps.sh               everything (make deps, make test)
#   scripts/install-deps.sh --build-only  only what `swift build` and scripts/build-release.sh need
#                                         (a field kit's build machine)
#   add --package for what `make deb` needs besides (debhelper; the Docker build stage builds the package)
#   add --list to print the packages instead of installing them
set -euo pipefail
build_packages=(
  pkg-config libasound2-dev libopus-dev libsndfile1-dev   # C libraries we link
  libogg-dev libsoxr-dev                                  # Ogg pages and resampling for live listening
  libebur128-dev                                          # EBU R128 loudness and true peak, measured by the sender
)
package_packages=(
  debhelper dpkg-dev                                      # dpkg-buildpackage and dh, for `make deb` (debian/)
)
test_packages=(
  ffmpeg sox opus-tools alsa-utils openssl socat time curl  # independent tools the tests and benchmarks use
  protobuf-compiler                                       # protoc: an independent decoder of the wire messages in the tests
  strace                                                  # shows the socket options the executables really set
  haproxy                                                 # the load balancer the scale-out tests put in front of two receivers
  prometheus prometheus-alertmanager                      # promtool and amtool check the alerting rules and Alertmanager configuration in docs/prometheus
  chromium chromium-driver                                # a real browser, driven over WebDriver, for the console's test
  pulseaudio pulseaudio-utils libasound2-plugins          # a real-time paced capture device for the ALSA tests (PulseAudio's null sink via ALSA's pulse PCM)
  lintian                                                 # checks the Debian package (scripts/test-package.sh, CI)
  python3-fusepy                                          # the power-cut file system of the durability tests (FUSE, Debian's python3)
  glusterfs-server glusterfs-client                       # a real GlusterFS volume mounted twice, for the shared-storage tests (Tests/EndToEndTests/GlusterFS)
)
python_packages=(
  selenium                                                # the WebDriver client the console's browser test uses
)
build_only=false
package=false
list=false
for argument in "$@"; do
  case "$argument" in
    --build-only) build_only=true ;;
    --package) package=true ;;
    --list) list=true ;;
    *) echo "install-deps: unknown argument $argument (use --build-only, --package and/or --list)" >&2; exit 2 ;;
  esac
done
packages=("${build_packages[@]}")
if [ "$package" = true ] || [ "$build_only" = false ]; then
  packages+=("${package_packages[@]}")
fi
if [ "$build_only" = false ]; then
  packages+=("${test_packages[@]}")
fi
if [ "$list" = true ]; then
  printf '%s\n' "${packages[@]}"
  [ "$build_only" = true ] || printf 'python:%s\n' "${python_packages[@]}"
  exit 0
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$build_only" = false ]; then
  for module in "${python_packages[@]}"; do
    python3 -c "import $module" 2>/dev/null || { echo "install-deps: installing the Python package $module"; python3 -m pip install --quiet "$module"; }
  done
fi
