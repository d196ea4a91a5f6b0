"""Filler lines rendered once, at start-up, and handed out without repeats.

When a tool call runs long, the scheduler (:mod:`turnkit.fillers.scheduler`)
needs audio *now*: a TTS round trip at that moment would add the very silence
the filler is there to cover. :class:`FillerBank` renders every line ahead of
time into PCM at the output rate, keeps it in memory, and caches it on disk
so that the next process start does not call the TTS at all.

Cache key: ``sha256(identity | voice | text | sample_rate | trim)`` where
``identity`` is the TTS's (engine, version, voice, speed...), so an engine
upgrade, another voice, an edited line or another output rate each get their
own file — never stale audio.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from turnkit.audio.wav import resample
from turnkit.tts.base import TTS

__all__ = [
    "DEFAULT_LINES",
    "FillerBank",
    "FillerLine",
    "default_cache_dir",
    "filler_key",
    "trim_silence",
]

log = logging.getLogger(__name__)

DEFAULT_LINES: tuple[str, ...] = (
    "One moment, let me check that.",
    "Just a second.",
    "Let me look that up for you.",
    "Bear with me a moment.",
)

_KEY_VERSION = "turnkit-filler-v1"


def default_cache_dir() -> Path:
    """``$TURNKIT_CACHE/fillers``, else ``~/.cache/turnkit/fillers``."""
    root = os.environ.get("TURNKIT_CACHE") or Path.home() / ".cache" / "turnkit"
    return Path(root) / "fillers"


def filler_key(identity: str, voice: str, text: str, sample_rate: int, trim: bool = True) -> str:
    """The cache key of one rendered line (hex sha256)."""
    raw = "|".join((_KEY_VERSION, identity, voice, text, str(int(sample_rate)), f"trim={trim}"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def trim_silence(
    audio: np.ndarray, sample_rate: int, threshold: float = 0.01, keep_s: float = 0.02
) -> np.ndarray:
    """Cut leading and trailing samples below ``threshold`` (keeping
    ``keep_s`` either side). espeak-ng ends every line with ~0.3 s of
    silence: played as a filler that is dead air that delays the answer."""
    loud = np.flatnonzero(np.abs(audio) >= threshold)
    if loud.size == 0:
        return audio
    keep = int(keep_s * sample_rate)
    start = max(0, int(loud[0]) - keep)
    end = min(len(audio), int(loud[-1]) + 1 + keep)
    return audio[start:end]


@dataclass(frozen=True, slots=True)
class FillerLine:
    """One pre-rendered line: mono float32 PCM at ``sample_rate``."""

    text: str
    audio: np.ndarray
    sample_rate: int
    key: str

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


class FillerBank:
    """Pre-rendered filler lines, and which one to play next.

    Decides *which line* plays: :meth:`next_line` deals the lines from a
    seeded shuffled deck, reshuffled when it runs out so that the first line
    of a new deck is never the last line played — so no line plays twice in
    a row, and each plays once per round. Evidence: only the lines it has
    dealt (a line fetched but not played should not be dealt; the scheduler
    asks only when it starts playing).

    Rendering: :meth:`prerender` renders each line with ``tts`` (resampled
    to ``sample_rate``, leading/trailing silence trimmed), keeps it in memory
    and writes ``<cache_dir>/<key>.npy`` (float32, exact); a later bank with
    the same key loads the file and does not call the TTS. ``cache_dir=None``
    uses :func:`default_cache_dir`; ``disk_cache=False`` keeps memory only.

    Example::

        bank = FillerBank(["One moment, let me check that.", "Just a second."],
                          EspeakTTS("en-us"), sample_rate=16000)
        await bank.prerender()          # at start-up
        line = bank.next_line()         # FillerLine(text, audio, sample_rate, key)
    """

    def __init__(
        self,
        lines: list[str] | tuple[str, ...] = DEFAULT_LINES,
        tts: TTS | None = None,
        sample_rate: int = 16000,
        cache_dir: str | Path | None = None,
        *,
        disk_cache: bool = True,
        trim: bool = True,
        seed: int = 0,
        concurrency: int = 4,
    ) -> None:
        texts = [t.strip() for t in lines]
        if any(not t for t in texts):
            raise ValueError("filler lines must not be empty")
        dupes = sorted({t for t in texts if texts.count(t) > 1})
        if dupes:
            raise ValueError(f"duplicate filler lines: {dupes}")
        if len(texts) < 2:
            raise ValueError(
                "a filler bank needs at least two distinct lines, so that no line "
                "plays twice in a row"
            )
        if tts is None:
            raise ValueError("FillerBank needs a TTS (e.g. turnkit.tts.EspeakTTS())")
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {sample_rate}")
        self.texts: tuple[str, ...] = tuple(texts)
        self.tts = tts
        self.sample_rate = int(sample_rate)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.disk_cache = disk_cache
        self.trim = trim
        self.concurrency = max(1, concurrency)
        self._rng = random.Random(seed)
        self._lines: dict[str, FillerLine] = {}
        self._deck: list[str] = []
        self._last: str | None = None
        self.rendered = 0  # lines rendered by the TTS (not loaded) in this bank
        self.loaded = 0  # lines loaded from the disk cache

    # --- keys and rendering ----------------------------------------------

    @property
    def voice(self) -> str:
        return str(getattr(self.tts, "voice", ""))

    def key_for(self, text: str) -> str:
        return filler_key(self.tts.identity, self.voice, text, self.sample_rate, self.trim)

    def path_for(self, text: str) -> Path:
        return self.cache_dir / f"{self.key_for(text)}.npy"

    @property
    def ready(self) -> bool:
        return len(self._lines) == len(self.texts)

    @property
    def lines(self) -> list[FillerLine]:
        return [self._lines[t] for t in self.texts if t in self._lines]

    def line(self, text: str) -> FillerLine:
        return self._lines[text]

    async def prerender(self) -> list[FillerLine]:
        """Render (or load from disk) every line not yet in memory."""
        sem = asyncio.Semaphore(self.concurrency)

        async def one(text: str) -> None:
            async with sem:
                self._lines[text] = await self._render(text)

        await asyncio.gather(*(one(t) for t in self.texts if t not in self._lines))
        return self.lines

    async def _render(self, text: str) -> FillerLine:
        key = self.key_for(text)
        path = self.cache_dir / f"{key}.npy"
        if self.disk_cache and path.is_file():
            audio = self._load(path)
            if audio is not None:
                self.loaded += 1
                return FillerLine(text, audio, self.sample_rate, key)
        raw = await self.tts.synthesize(text)
        audio = resample(
            np.asarray(raw, dtype=np.float32).reshape(-1), self.tts.sample_rate, self.sample_rate
        )
        if self.trim:
            audio = trim_silence(audio, self.sample_rate)
        if audio.size == 0 or not np.any(audio):
            raise ValueError(f"TTS {self.tts.identity!r} rendered silence for {text!r}")
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        audio.setflags(write=False)
        self.rendered += 1
        if self.disk_cache:
            self._store(path, audio)
        return FillerLine(text, audio, self.sample_rate, key)

    @staticmethod
    def _load(path: Path) -> np.ndarray | None:
        try:
            audio = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("filler cache %s unreadable (%s); rendering again", path, exc)
            return None
        if audio.dtype != np.float32 or audio.ndim != 1 or audio.size == 0:
            log.warning("filler cache %s is not mono float32; rendering again", path)
            return None
        audio.setflags(write=False)
        return audio

    @staticmethod
    def _store(path: Path, audio: np.ndarray) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npy.tmp")
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, audio, allow_pickle=False)
            os.replace(tmp, path)  # atomic: a reader never sees half a file
        except OSError as exc:
            log.warning("could not write filler cache %s: %s (kept in memory)", path, exc)

    # --- choosing ------------------------------------------------------------

    @property
    def last_played(self) -> str | None:
        return self._last

    def next_line(self) -> FillerLine:
        """The line to play now: never the one dealt just before.

        Raises ``RuntimeError`` before :meth:`prerender` has run (rendering
        here would put TTS latency exactly where the filler hides it).
        """
        if not self.ready:
            raise RuntimeError("FillerBank.next_line() before prerender(): await bank.prerender()")
        if not self._deck:
            deck = list(self.texts)
            self._rng.shuffle(deck)
            if deck[-1] == self._last:  # dealt from the end: keep it off the top
                deck[0], deck[-1] = deck[-1], deck[0]
            self._deck = deck
        text = self._deck.pop()
        self._last = text
        return self._lines[text]
