# Remote — build, run and test. The README documents `make run` and `make test`.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build test vet fmt clean vendor-web run

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

# Vendors the page's browser libraries from the npm registry into web/static/vendor
# (committed, embedded with go:embed; nothing is built at run time). Pinned versions.
WEB_NPM := marked@18.2.1 dompurify@3.5.0 @xterm/xterm@6.0.0 @xterm/addon-fit@0.11.0
vendor-web:
	rm -rf build/vendor-web && mkdir -p build/vendor-web web/static/vendor
	cd build/vendor-web && npm install --no-audit --no-fund --ignore-scripts --no-save $(WEB_NPM)
	set -e; m=build/vendor-web/node_modules; v=web/static/vendor; \
	for f in marked/lib/marked.esm.js:marked.esm.js dompurify/dist/purify.es.mjs:purify.es.mjs \
	         @xterm/xterm/lib/xterm.mjs:xterm.mjs @xterm/xterm/css/xterm.css:xterm.css \
	         @xterm/addon-fit/lib/addon-fit.mjs:addon-fit.mjs; do \
	  sed '/sourceMappingURL=/d' "$$m/$${f%%:*}" > "$$v/$${f##*:}"; \
	done; \
	for p in marked dompurify @xterm/xterm @xterm/addon-fit; do \
	  l=$$(ls "$$m/$$p" | grep -i -m1 '^licen[cs]e'); \
	  cp "$$m/$$p/$$l" "$$v/LICENSE.$$(basename $$p)"; \
	done; \
	echo "$(WEB_NPM)" > $$v/VERSIONS

# Builds and starts remoted in the foreground on its embedded default config,
# with its state under ./var and its socket at ./var/remoted.sock.
run: build
	mkdir -p var
	@echo "remoted: talk to it with: build/bin/remotectl -socket ./var/remoted.sock info"
	@echo "          or: curl --unix-socket ./var/remoted.sock -H 'X-Remote-User: $$USER' http://remoted/v1/info"
	build/bin/remoted -state-dir ./var -socket ./var/remoted.sock
