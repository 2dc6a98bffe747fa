#!/usr/bin/env bash
# Regenerates Sources/CaptureWire/Generated/capture.pb.swift from proto/capture.proto.
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-swift of the swift-protobuf version the
# package resolves; the plugin is built from the package's own dependency when not on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
plugin=$(command -v protoc-gen-swift || true)
if [ -z "$plugin" ]; then
  # The plugin of the very swift-protobuf the package resolves (from the package mirror), so the
  # generated code matches the runtime library.
  swift build --product protoc-gen-swift >/dev/null
  plugin="$(swift build --show-bin-path)/protoc-gen-swift"
fi
command -v protoc >/dev/null || { echo "generate-proto: protoc is missing: apt-get install protobuf-compiler" >&2; exit 1; }
mkdir -p Sources/CaptureWire/Generated
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public --swift_opt=FileNaming=DropPath \
  --swift_out=Sources/CaptureWire/Generated -I proto proto/capture.proto
echo "generated Sources/CaptureWire/Generated/capture.pb.swift"
