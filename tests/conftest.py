"""Shared test helpers: one detector driver for every detector test, and
the loader for the committed scripts the tests build calls with.

:class:`DetectorDriver` feeds a detector 32 ms frames as a host does: the
VAD's verdict comes from the real hysteresis (``VADAnalyzer.step`` over hand
probabilities, no audio model), the virtual clock stands at the end of each
frame, and transcripts carry the time their last word was spoken.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from turnkit.audio.vad import SileroVAD, VADAnalyzer, VADParams, VADStep
from turnkit.clock import VirtualClock
from turnkit.detectors import create_detector
from turnkit.detectors.base import EndOfTurnDetector
from turnkit.frames import AudioInFrame, TranscriptFrame, TurnEagerFrame, TurnEndFrame

SR = 16000
FRAME = 512
FRAME_S = FRAME / SR
SPEECH, QUIET = 0.95, 0.02


class DetectorDriver:
    """Speech and silence into one detector, one frame at a time; every
    signal is kept with the clock time it came out at."""

    def __init__(self, spec_or_detector: str | EndOfTurnDetector = "silence") -> None:
        self.clock = VirtualClock()
        if isinstance(spec_or_detector, str):
            self.det = create_detector(spec_or_detector, self.clock)
        else:
            self.det = spec_or_detector
            self.clock = spec_or_detector.clock  # type: ignore[assignment]
        self.vad = VADAnalyzer(model=SileroVAD(), params=VADParams(start_ms=64, stop_ms=96))
        self.t = 0.0
        self.i = 0  # frames fed so far
        self.signals: list[tuple[float, object]] = []
        self.log: list[tuple[int, float, VADStep, list]] = []  # (frame, now, vad, signals)
        self.audio: np.ndarray | None = None  # optional real audio, played frame by frame

    async def feed(self, probs: list[float], level: float = 0.0) -> list[tuple[int, object]]:
        """One frame per VAD probability; ``level`` fills speech frames (for
        audio models), otherwise ``audio`` or zeros. Returns (frame, signal)."""
        out: list[tuple[int, object]] = []
        for prob in probs:
            step = self.vad.step(prob, self.t)
            chunk = np.zeros(FRAME, np.float32)
            if self.audio is not None:
                i = round(self.t * SR)
                part = self.audio[i : i + FRAME]
                chunk[: part.size] = part
            elif level and prob >= 0.5:
                chunk[:] = level
            frame = AudioInFrame(at=self.t, audio=chunk, sample_rate=SR, vad=step)
            self.t += FRAME_S
            await self.clock.advance_to(self.t)
            signals = await self.det.on_audio(frame, step)
            self.log.append((self.i, self.clock.now(), step, signals))
            self.signals += [(self.clock.now(), s) for s in signals]
            out += [(self.i, s) for s in signals]
            self.i += 1
        return out

    async def frames(self, prob: float, seconds: float) -> list[tuple[float, object]]:
        """``prob`` for ``seconds``; returns (clock time, signal)."""
        n = round(seconds / FRAME_S)
        out = await self.feed([prob] * n)
        return [(self.log[i][1], s) for i, s in out]

    async def speak(self, seconds: float, text: str | None = None) -> list[tuple[float, object]]:
        """Speech for ``seconds``; ``text`` (the turn so far) is transcribed
        at its end, spoken until then."""
        out = await self.frames(SPEECH, seconds)
        if text is not None:
            await self.say(text)
        return out

    async def silence(self, seconds: float) -> list[tuple[float, object]]:
        return await self.frames(QUIET, seconds)

    async def say(self, text: str, spoken_until: float | None = None) -> list[object]:
        until = self.t if spoken_until is None else spoken_until
        out = await self.det.on_transcript(
            TranscriptFrame(at=self.clock.now(), text=text, is_final=True, spoken_until=until)
        )
        self.signals += [(self.clock.now(), s) for s in out]
        return out

    def ends(self) -> list[tuple[float, TurnEndFrame]]:
        return [(at, s) for at, s in self.signals if isinstance(s, TurnEndFrame)]

    def eagers(self) -> list[tuple[float, TurnEagerFrame]]:
        return [(at, s) for at, s in self.signals if isinstance(s, TurnEagerFrame)]


@pytest.fixture
def driver():
    """``driver(spec)`` → a fresh :class:`DetectorDriver`."""
    return DetectorDriver


SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module, loaded once (registered under its
    name, as its dataclasses need)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
