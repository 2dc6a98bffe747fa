#!/usr/bin/env bash
# Builds capture-send and capture-recv as they ship, into .build-static/release/:
#  - the Swift runtime and Foundation linked in (--static-swift-stdlib), so a device needs no Swift
#    toolchain, only libc, libstdc++ and the C libraries (libasound2, libopus0, libsndfile1);
#  - linked by lld (the toolchain's; gold cannot) with relative relocations packed
#    (-z pack-relative-relocs, read by glibc >= 2.36) and no exported dynamic symbol table
#    (--no-export-dynamic): 110,000 relocation entries and 32,000 exported symbols cost about 6 MB of
#    resident memory at start-up and bought nothing. The executables stay position independent (ASLR).
# Extra arguments go to `swift build` (for example --product capture-send).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --static-swift-stdlib --scratch-path .build-static -Xswiftc -use-ld=lld \
  -Xlinker --no-export-dynamic -Xlinker -z -Xlinker pack-relative-relocs "$@"
