# Remote — build, run and test. The README documents `make run` and `make test`.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build release test test-short test-latest vet fmt clean vendor-web run lint mutate breakages help image

all: build ## same as build

# Lists the targets with the text after their "## ".
help: ## list the targets with one line each
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z_-]+):.*## (.*)$$/\1\t\2/' | awk -F'\t' '{ printf "  %-12s %s\n", $$1, $$2 }'

# The version build stamps into the binaries (remoted -version, GET /v1/info);
# unstamped builds fall back to what Go records (see internal/version).
VERSION := $(shell git describe --always --dirty --tags 2>/dev/null)
GO_LDFLAGS := -X remote/internal/version.stamped=$(VERSION)

# remote-shim is rebuilt static (no cgo): it runs on the host and in any
# container. BIN (default build/bin) is where build puts the binaries and
# install takes them from (make release uses a directory of its own).
BIN ?= build/bin
build: ## build remoted, remotectl, remote-web and the static remote-shim into build/bin
	mkdir -p $(BIN)
	$(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN)/ ./cmd/...
	CGO_ENABLED=0 $(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN)/remote-shim ./cmd/remote-shim

# Builds the Debian package build/release/remote_<version>_amd64.deb with
# dpkg-deb (scripts/release): the binaries, units, sysusers/tmpfiles
# snippets, bash completion and each binary's -h as make install stages
# them with PREFIX=/usr, /etc/remote/remoted.toml as a conffile, and the
# maintainer scripts of packaging/deb. The version is git describe mapped
# to a Debian version (docs/releasing.md). RELEASE_DIR puts it elsewhere.
RELEASE_DIR ?= build/release
release: ## build the Debian package build/release/remote_<version>_amd64.deb (docs/releasing.md)
	VERSION='$(VERSION)' RELEASE_DIR='$(RELEASE_DIR)' scripts/release

# Sets up LXD, the test image, the pinned CLIs and Chromium, then runs every test.
test: ## set up LXD, the test image, the pinned CLIs and Chromium, then run every test
	mkdir -p build
	scripts/test

# The quick subset for newcomers: every test that needs neither root, LXD,
# an agent CLI nor a browser (go test -short: the testkit helpers for those
# skip at once, CI or not; CI is unset so nothing fails for a missing
# component). No installs, no root, no race detector. CONTRIBUTING.md "Test".
test-short: ## the tests that need no root, LXD, agent CLI or browser (go test -short, ~2 min)
	env -u CI $(GO) test -short -timeout 10m ./...

# Builds the development image (Debian 12 with git, Python, Node.js and a C
# toolchain; debootstrap, cached under build/image) and imports it into the
# local LXD as remote-dev, the default [lxd] image. About 4 minutes the first
# time, seconds when cached (README "The development image").
image: ## build the development image remote-dev (debootstrap) and import it into LXD
	mkdir -p build
	scripts/image

# Runs every test against the newest published Claude Code and Codex instead
# of the pinned ones (installed into build/npm-latest; README "Testing
# against the newest CLIs"). Pass a test selection with TEST_ARGS.
TEST_ARGS ?= ./...
test-latest: ## run the tests against the newest Claude Code and Codex (TEST_ARGS selects)
	mkdir -p build
	scripts/install-clis latest
	@echo "== REMOTE_CLI_VERSIONS=latest: Claude Code $$(build/npm-latest/node_modules/@anthropic-ai/claude-code-linux-x64/claude --version), $$(build/npm-latest/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex --version)"
	REMOTE_CLI_VERSIONS=latest $(GO) test -race -count=1 -timeout 25m $(TEST_ARGS)

vet: ## go vet every package
	$(GO) vet ./...

# go mod tidy check and golangci-lint (.golangci.yml), installed pinned into
# build/tools on first use. make test runs it too.
lint: ## go mod tidy check and golangci-lint (pinned, into build/tools)
	scripts/lint

# Mutation testing (gremlins, pinned, into build/tools) of the core packages;
# prints the efficacy per package. Slow (minutes per package): not part of
# make test. PKGS="./config ./daemon/runhub" limits it. See docs/testing.md.
mutate: ## mutation testing of the core packages (slow; PKGS limits it)
	scripts/mutate $(PKGS)

# Re-applies, one at a time, the breakages that once left every test green
# (docs/testing.md) and checks the test named for each fails. ~3 minutes.
breakages: ## re-apply the breakages old tests missed; check each is caught
	scripts/breakages

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build/ and var/
	rm -rf build var

# Vendors the page's browser libraries from the npm registry into web/static/vendor
# (committed, embedded with go:embed; nothing is built at run time). Pinned versions.
WEB_NPM := marked@18.2.1 dompurify@3.5.0 @xterm/xterm@6.0.0 @xterm/addon-fit@0.11.0
vendor-web: ## vendor the page's pinned browser libraries into web/static/vendor
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
# CONFIG=path/to/remoted.toml runs it on that file instead (-config); the
# state directory and socket stay ./var and ./var/remoted.sock (-state-dir and
# -socket override the file's [daemon] state_dir and socket).
CONFIG ?=
run: build ## build and start remoted in the foreground with its state under ./var (CONFIG=file: that config)
	mkdir -p var
	@echo "remoted: talk to it with: build/bin/remotectl -socket ./var/remoted.sock info"
	@echo "          or: curl --unix-socket ./var/remoted.sock -H 'X-Remote-User: $$(id -un)' http://remoted/v1/info"
	build/bin/remoted$(if $(CONFIG), -config '$(CONFIG)') -state-dir ./var -socket ./var/remoted.sock

# ---- install / uninstall (systemd service) ---------------------------------
# `make install` puts the binaries, the systemd units, the sysusers/tmpfiles
# snippets, remotectl's bash completion and (only when absent) the example
# /etc/remote/remoted.toml in place. DESTDIR stages the tree for packaging;
# PREFIX (default /usr/local) holds the binaries and the completion. See
# the README's "Install as a service" for the steps after it.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
UNITDIR     ?= /lib/systemd/system
SYSUSERSDIR ?= /usr/lib/sysusers.d
TMPFILESDIR ?= /usr/lib/tmpfiles.d
SYSCONFDIR  ?= /etc
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DOCDIR      ?= $(PREFIX)/share/doc/remote
BINARIES    := remoted remotectl remote-web remote-shim

.PHONY: install uninstall

# Installs the binaries `make build` left in $(BIN) (build/bin), building them only
# when missing, so that `make build && sudo make install` leaves build/
# owned by the user.
install: ## install the binaries, systemd units and example config (DESTDIR, PREFIX)
	@for b in $(BINARIES); do [ -x $(BIN)/$$b ] || { $(MAKE) --no-print-directory build; break; }; done
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(addprefix $(BIN)/,$(BINARIES)) $(DESTDIR)$(BINDIR)/
	sed 's|/usr/local/bin/|$(BINDIR)/|g' systemd/remoted.service > $(DESTDIR)$(UNITDIR)/remoted.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/remoted.service
	install -m 0644 systemd/remoted.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/remote.sysusers $(DESTDIR)$(SYSUSERSDIR)/remote.conf
	install -m 0644 systemd/remote.tmpfiles $(DESTDIR)$(TMPFILESDIR)/remote.conf
	install -m 0644 systemd/remotectl.bash $(DESTDIR)$(BASHCOMPDIR)/remotectl
	install -m 0644 config/remoted.example.toml $(DESTDIR)$(DOCDIR)/remoted.example.toml
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/remote
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/remote/remoted.toml ]; then \
		echo "keeping existing $(DESTDIR)$(SYSCONFDIR)/remote/remoted.toml"; \
	else \
		echo "install -m 0640 config/remoted.example.toml $(DESTDIR)$(SYSCONFDIR)/remote/remoted.toml"; \
		install -m 0640 config/remoted.example.toml $(DESTDIR)$(SYSCONFDIR)/remote/remoted.toml; \
	fi

# Removes what install put in place except /etc/remote (configuration and
# secrets key) and /var/lib/remote (the store): those are the operator's.
# On a live systemd host (no DESTDIR) it first stops and disables the
# service and its socket, so nothing runs and no enablement symlink is left
# pointing at a removed unit; otherwise it says to do so.
uninstall: ## stop the service and remove what install put in place (not /etc/remote, /var/lib/remote)
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then \
		echo "systemctl disable --now remoted.service remoted.socket"; \
		systemctl disable --now remoted.service remoted.socket || true; \
	else \
		echo "not a running systemd (or DESTDIR set): stop and disable remoted first: systemctl disable --now remoted.service remoted.socket"; \
	fi
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(BINARIES))
	rm -f $(DESTDIR)$(UNITDIR)/remoted.service $(DESTDIR)$(UNITDIR)/remoted.socket
	rm -f $(DESTDIR)$(SYSUSERSDIR)/remote.conf $(DESTDIR)$(TMPFILESDIR)/remote.conf
	rm -f $(DESTDIR)$(BASHCOMPDIR)/remotectl
	rm -f $(DESTDIR)$(DOCDIR)/remoted.example.toml
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload || true; fi
