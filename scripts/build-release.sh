#!/usr/bin/env bash
# Builds capture-send and capture-recv as they ship, into .build-static/release/:
#  - the Swift runtime and Foundation linked in (--static-swift-stdlib), so a device needs no Swift
#    toolchain, only libc, libgcc_s and the C libraries (libasound2, libopus0, libsndfile1, libogg0, libsoxr0, libebur128-1);
#  - libstdc++ (which the Swift runtime and ICU use) linked in as well: loading and relocating
#    libstdc++.so cost about 1 ms of CPU at every start and 1.4 MB of resident memory. The linker
#    finds libstdc++.a through a link named libstdc++.so in .build-static/static-libstdc++/, ahead of
#    the system's shared one;
#  - linked by lld (the toolchain's; gold cannot) with relative relocations packed
#    (-z pack-relative-relocs, read by glibc >= 2.36) and no exported dynamic symbol table
#    (--no-export-dynamic): 110,000 relocation entries and 32,000 exported symbols cost about 6 MB of
#    resident memory at start-up and bought nothing. The executables stay position independent (ASLR);
#  - every function in a section of its own (-function-sections, -ffunction-sections) and the
#    functions listed in scripts/release-order.txt (those that typical runs execute; regenerate it
#    with scripts/generate-order-file.sh) placed together at the front of the code. The kernel maps
#    code in whole page-cache folios around each page touched, so scattered hot functions made most
#    of the executable resident.
# Extra arguments go to `swift build` (for example --product capture-send).
set -euo pipefail
cd "$(dirname "$0")/.."
archive=$(gcc -print-file-name=libstdc++.a 2>/dev/null || true)
if [ ! -f "$archive" ]; then
  echo "build-release.sh: libstdc++.a not found; install the C++ library for static linking (apt-get install libstdc++-12-dev)" >&2
  exit 1
fi
link_dir=.build-static/static-libstdc++
mkdir -p "$link_dir"
ln -sfn "$archive" "$link_dir/libstdc++.so"
ordering=()
if [ -f scripts/release-order.txt ]; then
  # Named by its contents: swift build relinks when the linker's arguments change, not the file.
  order=".build-static/release-order-$(sha256sum scripts/release-order.txt | cut -c1-16).txt"
  mkdir -p .build-static
  cp scripts/release-order.txt "$order"
  ordering=(-Xlinker --symbol-ordering-file="$PWD/$order" -Xlinker --no-warn-symbol-ordering)
fi
swift build -c release --static-swift-stdlib --scratch-path .build-static -Xswiftc -use-ld=lld \
  -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections \
  -Xlinker --no-export-dynamic -Xlinker -z -Xlinker pack-relative-relocs -Xlinker -L"$PWD/$link_dir" \
  "${ordering[@]}" "$@"
