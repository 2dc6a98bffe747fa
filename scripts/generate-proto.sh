#!/usr/bin/env bash
# Regenerates Sources/CaptureWire/Generated/capture.pb.swift from proto/capture.proto.
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-swift built from the same swift-protobuf
# version as Package.swift names; the plugin is built into .build-protoc/ when not on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.39.0
plugin=$(command -v protoc-gen-swift || true)
if [ -z "$plugin" ]; then
  src=.build-protoc/swift-protobuf
  if [ ! -d "$src" ]; then
    git clone -q --branch "$version" https://github.com/apple/swift-protobuf.git "$src"
  fi
  (cd "$src" && swift build -c release --product protoc-gen-swift)
  plugin="$src/.build/release/protoc-gen-swift"
fi
command -v protoc >/dev/null || { echo "generate-proto: protoc is missing: apt-get install protobuf-compiler" >&2; exit 1; }
mkdir -p Sources/CaptureWire/Generated
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public --swift_opt=FileNaming=DropPath \
  --swift_out=Sources/CaptureWire/Generated -I proto proto/capture.proto
echo "generated Sources/CaptureWire/Generated/capture.pb.swift"
