# Remote — build, run and test. The README documents `make run` and `make test`.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build test vet fmt clean

all: build

build:
	mkdir -p build/bin
	$(GO) build -o build/bin/ ./cmd/...

# Sets up LXD, the test image, the pinned CLIs and Chromium, then runs every test.
test:
	mkdir -p build
	scripts/test

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf build var
