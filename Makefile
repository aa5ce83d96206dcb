# landwall: build, test, demo, install.
#
#   make            debug build of the whole workspace
#   make test       fmt check, clippy (warnings denied), build, the real Claude Code CLI, all tests
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

# The real Claude Code CLI the end-to-end tests run behind the shim. 2.1.197 is the last
# release that ships the native binary and still declares node >= 18 (the version after it
# asks for node 22; node only runs the package's postinstall, which places the binary).
CLAUDE_CODE_VERSION := 2.1.197
AGENTS_DIR := $(TARGET_DIR)/agents
CLAUDE_CLI := $(AGENTS_DIR)/node_modules/.bin/claude
CLAUDE_PKG := $(AGENTS_DIR)/node_modules/@anthropic-ai/claude-code

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

# Installs the pinned Claude Code CLI into target/agents unless it is already there. The
# package's postinstall copies the platform's native binary over bin/claude.exe; an npm that
# skips install scripts leaves a placeholder, so the script is run by hand in that case.
agents:
	@if [ "$$('$(CLAUDE_CLI)' --version 2>/dev/null)" = "$(CLAUDE_CODE_VERSION) (Claude Code)" ]; then \
	  echo "Claude Code $(CLAUDE_CODE_VERSION) is installed in $(AGENTS_DIR)"; \
	else \
	  command -v $(NPM) >/dev/null || { echo "make agents: npm is not installed (apt-get install npm)" >&2; exit 1; }; \
	  echo "installing Claude Code $(CLAUDE_CODE_VERSION) into $(AGENTS_DIR)"; \
	  mkdir -p '$(AGENTS_DIR)'; \
	  $(NPM) install --prefix '$(AGENTS_DIR)' --no-audit --no-fund --loglevel=error \
	    '@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)'; \
	  if [ "$$('$(CLAUDE_CLI)' --version 2>/dev/null)" != "$(CLAUDE_CODE_VERSION) (Claude Code)" ]; then \
	    echo "make agents: the native binary is not in place; running the package's postinstall"; \
	    (cd '$(CLAUDE_PKG)' && node install.cjs); \
	  fi; \
	  v="$$('$(CLAUDE_CLI)' --version 2>&1)" || true; \
	  if [ "$$v" != "$(CLAUDE_CODE_VERSION) (Claude Code)" ]; then \
	    echo "make agents: $(CLAUDE_CLI) --version said '$$v', not '$(CLAUDE_CODE_VERSION) (Claude Code)'" >&2; \
	    exit 1; \
	  fi; \
	  echo "installed: $$v"; \
	fi

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
