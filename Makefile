# dreamkit: build, test, install. `make test` is the test command CI runs.

PREFIX   ?= /usr/local
DESTDIR  ?=
CARGO    ?= cargo
JOBS     ?= 2
# The binaries are the files in src/bin/ (the one list is in src/lib.rs; a test checks both).
BINS     := $(basename $(notdir $(wildcard src/bin/*.rs)))

BINDIR   := $(DESTDIR)$(PREFIX)/bin
MANDIR   := $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR  := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR   := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR  := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
SHAREDIR := $(DESTDIR)$(PREFIX)/share/dreamkit
PLUGINDIR := $(SHAREDIR)/plugin

.PHONY: all print-bins build test eval eval-local fuzz test-local-model test-claude lint man completions bench stress stress-file stress-etcd install uninstall clean

all: build

# For the test that checks the one list of tools.
print-bins:
	@echo $(BINS)

build:
	$(CARGO) build --release --locked -j $(JOBS)

test:
	$(CARGO) test --locked -j $(JOBS) -- --test-threads=4

# The built-in evaluation suite (evals/) with the rules engine: no model, no network; every
# scenario that needs no model must pass (the others are skipped). In CI after `make test`.
eval:
	$(CARGO) build --locked -j $(JOBS)
	target/debug/dream-run eval evals --engine rules -v

# The same suite against the local small model (scripts/local-model/): reported, no threshold,
# not in CI (the first run builds the server: about 20 minutes on 2 cores).
eval-local:
	CARGO=$(CARGO) JOBS=$(JOBS) scripts/local-model/eval.sh

# Not part of `make test` nor CI: every property test (the `props` modules) for 100,000 cases
# (`make test` runs each at its own modest count), printing the detectors' throughput on
# pathological inputs. PROPTEST_CASES=N make fuzz for another count.
PROPTEST_CASES ?= 100000
fuzz:
	PROPTEST_CASES=$(PROPTEST_CASES) $(CARGO) test --locked -j $(JOBS) --lib props:: -- --test-threads=$(JOBS) --nocapture

# The real small model behind llama-cpp-python's OpenAI-compatible server (the first run
# builds it: about 20 minutes on 2 cores; then cached under ~/.cache/dreamkit-test).
test-local-model:
	CARGO=$(CARGO) JOBS=$(JOBS) scripts/local-model/test.sh

# The Claude Code compatibility tests (tests/cli/claude_code.rs) against the real, pinned client
# (scripts/claude-code/install.sh installs it once into ~/.cache/dreamkit-test), run offline in a
# network namespace (needs unshare -n, ip, python3). Without the client those tests skip.
test-claude:
	DREAMKIT_TEST_CLAUDE="$$(scripts/claude-code/install.sh)" && export DREAMKIT_TEST_CLAUDE && \
		$(CARGO) test --locked -j $(JOBS) --test cli -- --test-threads=4 claude_code:: provider_claude::

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked -j $(JOBS) --all-targets -- -D warnings

# Man pages and completions are generated from the clap definitions and committed;
# the docs test fails when they are stale.
man completions:
	$(CARGO) run --locked -q -j $(JOBS) --features docs --example gen-docs

bench:
	$(CARGO) bench --locked -j $(JOBS) --bench bench

# Not part of `make test`: 64 concurrent acquirers x 200 rounds; fails on any double hold.
# stress-etcd runs them over a 3-node etcd cluster (needs `etcd`: apt-get install
# etcd-server), killing and restarting its leader as it goes.
stress: stress-file stress-etcd

stress-file:
	DREAMKIT_STRESS_BACKEND=file $(CARGO) bench --locked -j $(JOBS) --bench stress

stress-etcd:
	DREAMKIT_STRESS_BACKEND=etcd $(CARGO) bench --locked -j $(JOBS) --bench stress

# No `build` prerequisite: `sudo make install` must not compile as root (a root-owned target/
# and a toolchain run with root's rights). Build first as yourself with `make`.
install:
	@for b in $(BINS); do \
		test -x target/release/$$b || { \
			echo "make install: target/release/$$b is missing: run \`make\` first (as yourself, not root)" >&2; \
			exit 1; }; \
	done
	install -d $(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	for b in $(BINS); do \
		install -m 0755 target/release/$$b $(BINDIR)/$$b && \
		install -m 0644 man/$$b*.1 $(MANDIR)/ && \
		install -m 0644 completions/$$b.bash $(BASHDIR)/$$b && \
		install -m 0644 completions/_$$b $(ZSHDIR)/_$$b && \
		install -m 0644 completions/$$b.fish $(FISHDIR)/$$b.fish || exit 1; \
	done
	@# The Claude Code plugin and its marketplace, one installed copy that outlives the clone:
	@# claude plugin marketplace add $(PREFIX)/share/dreamkit. A tree without plugin/ (a
	@# partial copy) installs the rest and says so.
	@if [ -d plugin ]; then \
		set -e; \
		install -d $(SHAREDIR)/.claude-plugin $(PLUGINDIR)/.claude-plugin $(PLUGINDIR)/hooks $(PLUGINDIR)/scripts $(PLUGINDIR)/commands; \
		install -m 0644 .claude-plugin/marketplace.json $(SHAREDIR)/.claude-plugin/marketplace.json; \
		install -m 0644 plugin/.claude-plugin/plugin.json $(PLUGINDIR)/.claude-plugin/plugin.json; \
		install -m 0644 plugin/hooks/hooks.json $(PLUGINDIR)/hooks/hooks.json; \
		install -m 0755 plugin/scripts/*.sh $(PLUGINDIR)/scripts/; \
		install -m 0644 plugin/commands/*.md $(PLUGINDIR)/commands/; \
		echo "installed the Claude Code plugin in $(PLUGINDIR)"; \
		echo "add it once: claude plugin marketplace add $(PREFIX)/share/dreamkit && claude plugin install dreamkit@dreamkit"; \
	else \
		echo "make install: no plugin/ here: the Claude Code plugin is not installed" >&2; \
	fi
	@# zsh looks only in its own fpath (not in ~/.local/share/zsh/site-functions); bash-completion
	@# and fish do look under ~/.local/share. Say the one line to add when zsh would not find them.
	@if command -v zsh >/dev/null 2>&1 && \
		! zsh -fc 'print -rl -- $$fpath' | grep -qxF "$(PREFIX)/share/zsh/site-functions"; then \
		echo "zsh completions: add this line to ~/.zshrc, before compinit:"; \
		echo "  fpath=($(PREFIX)/share/zsh/site-functions \$$fpath)"; \
	fi

uninstall:
	for b in $(BINS); do \
		rm -f $(BINDIR)/$$b $(MANDIR)/$$b.1 $(MANDIR)/$$b-*.1 $(BASHDIR)/$$b $(ZSHDIR)/_$$b $(FISHDIR)/$$b.fish; \
	done
	rm -rf $(PLUGINDIR) $(SHAREDIR)/.claude-plugin
	-rmdir $(SHAREDIR) 2>/dev/null

clean:
	$(CARGO) clean
