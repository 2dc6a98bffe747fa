# Two set-up commands for a newcomer: `make demo` and `make test`. `make bench` measures.
SWIFT ?= swift
BIN_DEBUG := .build/debug
BIN_RELEASE := .build-static/release

.PHONY: deps build test demo bench release deb clean proto fuzz docs

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	@scripts/build-release.sh

test: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) scripts/run-tests.sh

demo: build
	@scripts/demo.sh $(BIN_DEBUG)

# The Debian package, in dist/ (README, "Install the package"); debian/ and scripts/stage-package.sh.
deb:
	@scripts/install-deps.sh --build-only --package
	@scripts/build-deb.sh

bench: release
	@bench/run.sh $(BIN_RELEASE)

proto:
	scripts/generate-proto.sh

# DocC for the embeddable API (CaptureSender: CaptureStreamer), as a static site in docs/api.
docs: deps
	$(SWIFT) package --allow-writing-to-directory docs/api generate-documentation --target CaptureSender \
		--disable-indexing --transform-for-static-hosting --warnings-as-errors --output-path docs/api
	@echo "open docs/api/documentation/capturesender/index.html (or serve docs/api over HTTP)"

# libFuzzer targets (Fuzz/README.md); FUZZ_SECONDS per target, default 60.
fuzz: deps
	SWIFT=$(SWIFT) scripts/fuzz.sh

clean:
	rm -rf .build out dist
