"""Helpers for the tests against a real vLLM (see conftest.py)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 128  # vLLM's CPU backend caches whole blocks of 128 tokens (16 on GPU)


def nonce() -> str:
    """Put first in a prompt so no earlier run (or test) left it in the cache."""
    return uuid.uuid4().hex[:12]


def long_system(tag: str, sentences: int = 40) -> str:
    """A stable agent prompt of several 128-token blocks, unique to ``tag``."""
    body = " ".join(
        f"Rule {i}: be brief, polite and confirm the caller's booking details."
        for i in range(sentences)
    )
    return f"[{tag}] You are the receptionist of a dental clinic. {body}"


def turnkit(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real ``turnkit`` CLI of this checkout (turnkit's venv)."""
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def wait_for(pred: Callable[[], bool], timeout_s: float, every_s: float = 0.05) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every_s)
    return pred()
