"""What turnkit needs from a text-to-speech engine: a :class:`TTS` protocol.

A TTS here is used *ahead of time* (filler lines are rendered at start-up, see
:mod:`turnkit.fillers`), so the protocol is small: one async call that turns
text into mono float32 PCM, the rate of that PCM, and an ``identity`` string
that names everything that changes the sound (engine, its version, voice,
speed). Caches key on ``identity``, so a new engine version or voice never
serves stale audio.

turnkit imports no GPL code: GPL engines (espeak-ng, Piper) are run as
separate processes through their command line (see :mod:`turnkit.tts.espeak`).

Example (any object with these members is a TTS)::

    class SineTTS:
        identity = "sine/1.0"
        voice = "440hz"
        sample_rate = 16000

        async def synthesize(self, text: str) -> np.ndarray:
            t = np.arange(int(0.05 * len(text) * 16000)) / 16000
            return (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)

    assert isinstance(SineTTS(), TTS)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from turnkit.frames import Word

__all__ = ["TTS", "TTSError", "TTSUnavailable", "WordTimedAudio", "WordTimedTTS"]


class TTSError(RuntimeError):
    """A TTS engine failed to render a line; the message says which and why."""


class TTSUnavailable(TTSError):
    """The TTS engine is not installed; the message says how to install it."""


@runtime_checkable
class TTS(Protocol):
    """A speech engine that renders text to mono float32 PCM in [-1, 1].

    * ``identity`` — engine, version and every setting that changes the
      audio (voice, speed, ...); used in cache keys.
    * ``sample_rate`` — the rate of the arrays :meth:`synthesize` returns.
    * ``synthesize(text)`` — the whole utterance, mono float32.

    Engines that have a voice name should also expose ``voice: str``; caches
    key on it too (``getattr(tts, "voice", "")``).
    """

    @property
    def identity(self) -> str: ...

    @property
    def sample_rate(self) -> int: ...

    async def synthesize(self, text: str) -> np.ndarray: ...


@dataclass(slots=True, frozen=True)
class WordTimedAudio:
    """Audio plus where each word of its text lies in it (seconds from the
    first sample); ``words`` follow the text's whitespace tokens in order."""

    audio: np.ndarray
    sample_rate: int
    words: Sequence[Word]

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


@runtime_checkable
class WordTimedTTS(TTS, Protocol):
    """Optional extension: a TTS that also says when each word is spoken
    (what playback-aware history truncation needs to cut exactly; see
    :mod:`turnkit.barge_in.truncation`). Engines without it still work:
    truncation then estimates word times from the text."""

    async def synthesize_words(self, text: str) -> WordTimedAudio: ...
