"""The caller audio of the current turn, kept for audio end-of-turn models:
a fixed ring of the newest samples and the turn's start."""

from __future__ import annotations

import numpy as np

from turnkit.audio.mel import SAMPLE_RATE, WINDOW_S
from turnkit.audio.vad import VADStep
from turnkit.frames import AudioInFrame

__all__ = ["TurnAudio"]


class _Ring:
    """The last ``size`` samples of a stream, in a fixed buffer."""

    def __init__(self, size: int) -> None:
        self.buf = np.zeros(size, dtype=np.float32)
        self.pos = 0  # next write index
        self.filled = 0

    def clear(self) -> None:
        self.pos = 0
        self.filled = 0

    def push(self, x: np.ndarray) -> None:
        n = self.buf.size
        if x.size >= n:
            self.buf[:] = x[-n:]
            self.pos, self.filled = 0, n
            return
        end = self.pos + x.size
        if end <= n:
            self.buf[self.pos : end] = x
        else:
            k = n - self.pos
            self.buf[self.pos :] = x[:k]
            self.buf[: x.size - k] = x[k:]
        self.pos = end % n
        self.filled = min(n, self.filled + x.size)

    def last(self, count: int) -> np.ndarray:
        """A copy of the newest ``count`` samples (fewer if not yet heard)."""
        count = max(0, min(count, self.filled))
        start = self.pos - count
        if start >= 0:
            return self.buf[start : self.pos].copy()
        return np.concatenate((self.buf[start:], self.buf[: self.pos]))


class TurnAudio:
    """The caller audio of the current turn, for audio models: the last
    ``window_s`` of the stream, cut to start ``pre_speech_ms`` before the
    turn's first speech (older audio is the agent's echo or the previous
    turn, which drags the model's judgement)."""

    def __init__(self, window_s: float = WINDOW_S, pre_speech_ms: float = 500.0) -> None:
        self.ring = _Ring(round(window_s * SAMPLE_RATE))
        self.pre_speech_ms = pre_speech_ms
        self.turn_start: float | None = None

    def clear(self) -> None:
        self.ring.clear()
        self.turn_start = None

    def push(self, frame: AudioInFrame, vad: VADStep, opening: bool) -> None:
        if frame.sample_rate != SAMPLE_RATE:
            raise ValueError(f"audio models take {SAMPLE_RATE} Hz audio, got {frame.sample_rate}")
        self.ring.push(np.asarray(frame.audio, dtype=np.float32).reshape(-1))
        if opening:
            self.turn_start = vad.speech_start

    def turn_audio(self, now: float) -> np.ndarray:
        start = self.turn_start if self.turn_start is not None else 0.0
        seconds = now - start + self.pre_speech_ms / 1000
        return self.ring.last(round(seconds * SAMPLE_RATE))
