# landwall: build, test, demo, install.
#
#   make            debug build of the whole workspace
#   make test       fmt check, clippy (warnings denied), build, the real agent CLIs, all tests
#   make demo       show the wall on this machine with a stand-in agent
#   make install    PREFIX=/usr/local DESTDIR= : landwall, landwall-drain and the shim links
#   make bench      release build, then every bench/*.sh
#
# Every recipe runs from the directory of this Makefile, whatever the caller's cwd.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.NOTPARALLEL:
.DEFAULT_GOAL := build

ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
CARGO ?= cargo
NPM ?= npm
TARGET_DIR := $(abspath $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),$(ROOT)/target))

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(DESTDIR)$(PREFIX)/bin
SHIMDIR := $(DESTDIR)$(PREFIX)/lib/landwall/bin
SHIMS := claude opencode codex

# The real agent CLIs the end-to-end tests run behind the shim, installed with npm into
# target/agents the way a user would. Each ships a native binary in a platform package:
# - Claude Code 2.1.197 is the last release that ships the native binary and still declares
#   node >= 18 (the version after it asks for node 22; node only runs the package's
#   postinstall, which places the binary).
# - OpenCode (`opencode-ai`) declares no node engine; its postinstall (node) links the
#   platform package's binary (opencode-linux-x64[-baseline]) to bin/opencode.exe.
# - Codex (`@openai/codex`, node >= 16): bin/codex.js is a node launcher that runs the
#   native binary of @openai/codex-linux-x64, so node is needed at run time too.
CLAUDE_CODE_VERSION := 2.1.197
OPENCODE_VERSION := 1.18.33
CODEX_VERSION := 0.171.0
AGENTS_DIR := $(TARGET_DIR)/agents
AGENTS_BIN := $(AGENTS_DIR)/node_modules/.bin
CLAUDE_PKG := $(AGENTS_DIR)/node_modules/@anthropic-ai/claude-code
OPENCODE_PKG := $(AGENTS_DIR)/node_modules/opencode-ai

.PHONY: all build release test fmt-check clippy agents demo install uninstall bench clean

all: build

build:
	cd $(ROOT) && $(CARGO) build --workspace

release:
	cd $(ROOT) && $(CARGO) build --workspace --release

fmt-check:
	cd $(ROOT) && $(CARGO) fmt --all -- --check

clippy:
	cd $(ROOT) && $(CARGO) clippy --workspace --all-targets -- -D warnings

# The one gate for humans and CI (.ci/run calls it).
test: fmt-check clippy build agents
	cd $(ROOT) && $(CARGO) test --workspace

# Installs the pinned agent CLIs into target/agents unless all three are already there, in
# one npm install (a partial install could prune the others). The postinstalls put the
# native binaries in place of stubs; an npm that skips install scripts leaves the stubs, so
# the scripts are run by hand in that case. `--version` runs with a scratch HOME: the CLIs
# create state directories even for that.
agents:
	@v() { HOME='$(AGENTS_DIR)/.version-home' '$(AGENTS_BIN)/'"$$1" --version 2>&1; }; \
	versions() { echo "$$(v claude)|$$(v opencode)|$$(v codex)"; }; \
	want='$(CLAUDE_CODE_VERSION) (Claude Code)|$(OPENCODE_VERSION)|codex-cli $(CODEX_VERSION)'; \
	if [ "$$(versions)" = "$$want" ]; then \
	  echo "Claude Code $(CLAUDE_CODE_VERSION), OpenCode $(OPENCODE_VERSION) and Codex $(CODEX_VERSION) are installed in $(AGENTS_DIR)"; \
	  exit 0; \
	fi; \
	command -v $(NPM) >/dev/null || { echo "make agents: npm is not installed (apt-get install npm)" >&2; exit 1; }; \
	echo "installing Claude Code $(CLAUDE_CODE_VERSION), OpenCode $(OPENCODE_VERSION) and Codex $(CODEX_VERSION) into $(AGENTS_DIR)"; \
	mkdir -p '$(AGENTS_DIR)'; \
	$(NPM) install --prefix '$(AGENTS_DIR)' --no-audit --no-fund --loglevel=error \
	  '@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)' 'opencode-ai@$(OPENCODE_VERSION)' \
	  '@openai/codex@$(CODEX_VERSION)'; \
	if [ "$$(v claude)" != "$(CLAUDE_CODE_VERSION) (Claude Code)" ]; then \
	  echo "make agents: Claude Code's native binary is not in place; running the package's postinstall"; \
	  (cd '$(CLAUDE_PKG)' && node install.cjs); \
	fi; \
	if [ "$$(v opencode)" != "$(OPENCODE_VERSION)" ]; then \
	  echo "make agents: OpenCode's native binary is not in place; running the package's postinstall"; \
	  (cd '$(OPENCODE_PKG)' && node postinstall.mjs); \
	fi; \
	got="$$(versions)" || true; \
	if [ "$$got" != "$$want" ]; then \
	  echo "make agents: --version said '$$got', not '$$want'" >&2; \
	  exit 1; \
	fi; \
	echo "installed: $$got"

demo: build
	bash $(ROOT)/scripts/demo.sh '$(TARGET_DIR)/debug/landwall'

install: release
	install -d '$(BINDIR)' '$(SHIMDIR)'
	install -m 0755 '$(TARGET_DIR)/release/landwall' '$(BINDIR)/landwall'
	if [ -f '$(TARGET_DIR)/release/landwall-drain' ]; then \
	  install -m 0755 '$(TARGET_DIR)/release/landwall-drain' '$(BINDIR)/landwall-drain'; \
	fi
	for a in $(SHIMS); do ln -sfn ../../../bin/landwall '$(SHIMDIR)'/$$a; done
	@echo "installed; put $(PREFIX)/lib/landwall/bin first on PATH, then run: landwall doctor"

uninstall:
	rm -f '$(BINDIR)/landwall' '$(BINDIR)/landwall-drain'
	for a in $(SHIMS); do rm -f '$(SHIMDIR)'/$$a; done
	rmdir '$(SHIMDIR)' '$(DESTDIR)$(PREFIX)/lib/landwall' 2>/dev/null || true

# Each bench script gets the release binaries' paths in LANDWALL and LANDWALL_DRAIN.
bench: release
	@cd $(ROOT); shopt -s nullglob; scripts=(bench/*.sh); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "make bench: no bench/*.sh scripts yet; nothing to run"; exit 0; fi; \
	for s in "$${scripts[@]}"; do \
	  echo "== $$s"; \
	  LANDWALL='$(TARGET_DIR)/release/landwall' LANDWALL_DRAIN='$(TARGET_DIR)/release/landwall-drain' bash "$$s"; \
	done

clean:
	cd $(ROOT) && $(CARGO) clean
