"""The real local engine for tests: llama-server + SmolLM2-135M-Instruct.

``scripts/build_llama_server.sh`` builds the server and fetches the model into
``${TURNKIT_CACHE:-~/.cache/turnkit}`` (it prints both paths). Tests find
them through ``TURNKIT_LLAMA_SERVER`` / ``TURNKIT_SMOLLM2_GGUF`` or in that
cache; nothing is downloaded here. Without them, tests that need the engine
skip — unless ``TURNKIT_REQUIRE_ENGINE=1`` (CI), where they fail.

Example (a module-scoped fixture)::

    @pytest.fixture(scope="module")
    def engine():
        with running_llama_server() as base_url:   # "http://127.0.0.1:PORT/v1"
            yield base_url
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from turnkit.llm.cache_report import parse_prometheus

__all__ = [
    "EngineMissing",
    "cache_dir",
    "closed_port",
    "engine_metrics",
    "find_engine",
    "free_port",
    "llamacpp_counters",
    "require_engine",
    "running_llama_server",
]

STARTUP_TIMEOUT_S = 60.0


class EngineMissing(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("TURNKIT_CACHE") or Path.home() / ".cache" / "turnkit")


def _newest(paths: list[Path]) -> Path | None:
    paths = [p for p in paths if p.is_file()]
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def find_engine() -> tuple[Path, Path]:
    """(llama-server binary, SmolLM2 GGUF); raises :class:`EngineMissing`
    saying what is missing and how to get it."""
    hint = "run scripts/build_llama_server.sh (or set TURNKIT_LLAMA_SERVER / TURNKIT_SMOLLM2_GGUF)"
    env_bin = os.environ.get("TURNKIT_LLAMA_SERVER")
    env_gguf = os.environ.get("TURNKIT_SMOLLM2_GGUF")
    cache = cache_dir()
    binary = Path(env_bin) if env_bin else _newest(list(cache.glob("llama-server-*/llama-server")))
    gguf = Path(env_gguf) if env_gguf else _newest(list(cache.glob("smollm2-*/*.gguf")))
    if binary is None or not binary.is_file() or not os.access(binary, os.X_OK):
        raise EngineMissing(f"no llama-server binary ({env_bin or cache}): {hint}")
    if gguf is None or not gguf.is_file():
        raise EngineMissing(f"no SmolLM2 GGUF ({env_gguf or cache}): {hint}")
    return binary, gguf


def require_engine() -> tuple[Path, Path]:
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
    binary: Path,
    gguf: Path,
    port: int,
    threads: int | None = None,
    metrics: bool = False,
    ctx_size: int = 2048,
    parallel: int = 1,
) -> list[str]:
    threads = threads or default_threads()
    extra = ["--metrics"] if metrics else []  # Prometheus /metrics
    return [
        str(binary),
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
    """Start llama-server on a free port, wait for ``/health``, yield the
    ``/v1`` base URL, stop it. Skips/fails as :func:`require_engine`.
    ``metrics=True`` adds ``--metrics`` (Prometheus ``/metrics``);
    ``ctx_size`` (``-c``, shared by the slots) and ``parallel`` (``-np``
    slots) size it for longer prompts and concurrent requests."""
    binary, gguf = require_engine()
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        server_command(binary, gguf, port, threads, metrics, ctx_size, parallel),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited with {proc.returncode}:\n{_tail(Path(log.name))}"
                )
            try:
                if httpx.get(f"{root}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"llama-server not healthy after {STARTUP_TIMEOUT_S:.0f} s:\n"
                    f"{_tail(Path(log.name))}"
                )
            time.sleep(0.1)
        yield f"{root}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        Path(log.name).unlink(missing_ok=True)


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
