"""The real offline TTS for tests: espeak-ng through its CLI (GPL; a
subprocess, never imported). Tests that need it skip without it — unless
``TURNKIT_REQUIRE_TTS=1`` (CI), where they fail."""

from __future__ import annotations

import os

import pytest

from turnkit.tts import EspeakTTS

__all__ = ["require_espeak"]


def require_espeak() -> None:
    if EspeakTTS.available():
        return
    reason = "espeak-ng is not installed (apt-get install -y espeak-ng)"
    if os.environ.get("TURNKIT_REQUIRE_TTS") == "1":
        pytest.fail(f"TURNKIT_REQUIRE_TTS=1 but {reason}", pytrace=False)
    pytest.skip(reason)
