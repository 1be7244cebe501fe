#!/bin/sh
# Install the pinned real Claude Code client for dreamkit's compatibility checks.
#
#   scripts/claude-code/install.sh        -> prints the path of the claude executable
#
# Idempotent: the install lives in ${DREAMKIT_TEST_CACHE:-$HOME/.cache/dreamkit-test}/claude-code
# with npm's own cache beside it, so a second run only checks the installed version (seconds).
# The package declares engines.node >=22; these machines have Node 20, and the CLI is a native
# binary (bin/claude.exe, copied in from the platform package), so `npm install --force` is used.
# Exits non-zero with one line on stderr when it cannot install.
set -eu

CLAUDE_CODE_VERSION=${CLAUDE_CODE_VERSION:-2.1.332}
CACHE=${DREAMKIT_TEST_CACHE:-${HOME:?HOME is not set}/.cache/dreamkit-test}
DIR=$CACHE/claude-code
BIN=$DIR/node_modules/@anthropic-ai/claude-code/bin/claude.exe
PKGJSON=$DIR/node_modules/@anthropic-ai/claude-code/package.json

die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

installed_version() {
    [ -f "$PKGJSON" ] || return 1
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$PKGJSON" | head -n 1
}

is_ready() {
    [ "$(installed_version 2>/dev/null || true)" = "$CLAUDE_CODE_VERSION" ] || return 1
    [ -x "$BIN" ] || return 1
    # The wrapper left by a failed postinstall is a tiny script, the real one is ~200 MB ELF.
    head -c 4 "$BIN" | grep -q 'ELF' || return 1
    return 0
}

if is_ready; then
    printf '%s\n' "$BIN"
    exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm is not installed (needs Node.js + npm)"
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64|Linux-aarch64) ;;
    *) die "unsupported platform $(uname -s)-$(uname -m) (the tests use the linux native build)" ;;
esac

mkdir -p "$DIR" || die "cannot create $DIR"
[ -f "$DIR/package.json" ] || printf '{"name":"dreamkit-test-claude-code","private":true}\n' > "$DIR/package.json"

export npm_config_cache="$CACHE/npm-cache"
export npm_config_update_notifier=false
export npm_config_fund=false
export npm_config_audit=false

log=$DIR/npm-install.log
if ! (cd "$DIR" && npm install --force --save-exact --ignore-scripts=false --loglevel=warn \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION") >"$log" 2>&1; then
    reason=$(grep -m1 -E 'npm (ERR!|error)' "$log" | sed 's/^npm \(ERR!\|error\) *//' || true)
    die "npm install @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION failed: ${reason:-see $log}"
fi

# npm may have skipped the postinstall (ignore-scripts, allowScripts): it only copies the
# platform package's binary over the bin/claude.exe placeholder, so run it by hand.
if ! is_ready; then
    (cd "$DIR/node_modules/@anthropic-ai/claude-code" && node install.cjs) >>"$log" 2>&1 || true
fi
is_ready || die "installed, but $BIN is not the native claude binary (see $log)"
printf '%s\n' "$BIN"
