"""espeak-ng as a :class:`~turnkit.tts.base.TTS`, run through its command line.

espeak-ng is GPL-3.0-or-later, so turnkit never links or imports it: each
line is rendered by an ``espeak-ng --stdout`` subprocess and the WAV it
writes is parsed here. Robotic but tiny, fast (about 20-50x real time on one
core) and fully offline, which is what start-up filler rendering and tests
need.

Install: ``apt-get install -y espeak-ng`` (Debian/Ubuntu).

Example::

    tts = EspeakTTS(voice="en-us", speed=170)
    tts.identity       # "espeak-ng 1.51|voice=en-us|speed=170|pitch=50"
    pcm = await tts.synthesize("One moment, let me check that.")  # 22050 Hz
"""

from __future__ import annotations

import asyncio
import io
import re
import shutil
import subprocess

import numpy as np
import soundfile as sf

from turnkit.audio.wav import resample
from turnkit.frames import Word
from turnkit.tts.base import TTSError, TTSUnavailable, WordTimedAudio

__all__ = ["ESPEAK_BINARY", "EspeakTTS", "espeak_version"]

ESPEAK_BINARY = "espeak-ng"
INSTALL_HINT = "install it with: apt-get install -y espeak-ng"


def _find_binary(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise TTSUnavailable(f"{binary} not found on PATH; {INSTALL_HINT}")
    return path


def espeak_version(binary: str = ESPEAK_BINARY) -> str:
    """The version ``espeak-ng --version`` reports, e.g. ``"1.51"``.

    Raises :class:`TTSUnavailable` (one line, with the apt command) when the
    binary is missing, :class:`TTSError` when it does not answer.
    """
    path = _find_binary(binary)
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise TTSError(f"{binary} --version failed: {exc}") from None
    # "eSpeak NG text-to-speech: 1.51  Data at: /usr/lib/.../espeak-ng-data"
    first = out.strip().splitlines()[0] if out.strip() else ""
    m = re.search(r"text-to-speech:\s*(\S+)", first)
    if m:
        return m.group(1)
    if first:
        return first.split("Data at:")[0].strip()
    raise TTSError(f"{binary} --version printed nothing")


class EspeakTTS:
    """Render text with the ``espeak-ng`` CLI (a subprocess per line).

    Decides nothing: it is a renderer. Its ``identity`` carries the version
    that ``espeak-ng --version`` reports plus voice, speed and pitch, so a
    cache keyed on it is invalidated by an upgrade or a settings change.

    ``sample_rate`` is espeak-ng's native 22050 Hz; should a voice write
    another rate (MBROLA voices write 16 kHz), the audio is resampled to it.

    Raises :class:`~turnkit.tts.base.TTSUnavailable` at construction when the
    binary is missing ("... install it with: apt-get install -y espeak-ng").

    Example::

        tts = EspeakTTS("en-gb", speed=160)
        audio = await tts.synthesize("Just a second.")
    """

    sample_rate: int = 22050
    # Silences between words in :meth:`synthesize_words` (seconds).
    LEAD_IN_S = 0.05
    WORD_GAP_S = 0.03
    SHORT_PAUSE_S = 0.15
    LONG_PAUSE_S = 0.3

    def __init__(
        self,
        voice: str = "en-us",
        speed: int = 170,
        pitch: int = 50,
        *,
        binary: str = ESPEAK_BINARY,
        timeout_s: float = 30.0,
    ) -> None:
        if not 80 <= speed <= 500:
            raise ValueError(f"espeak-ng speed must be 80-500 words per minute, got {speed}")
        if not 0 <= pitch <= 99:
            raise ValueError(f"espeak-ng pitch must be 0-99, got {pitch}")
        self._path = _find_binary(binary)
        self.version = espeak_version(binary)
        self.voice = voice
        self.speed = speed
        self.pitch = pitch
        self.timeout_s = timeout_s

    @classmethod
    def available(cls, binary: str = ESPEAK_BINARY) -> bool:
        """Whether the espeak-ng binary is on PATH."""
        return shutil.which(binary) is not None

    @property
    def identity(self) -> str:
        return f"espeak-ng {self.version}|voice={self.voice}|speed={self.speed}|pitch={self.pitch}"

    async def synthesize(self, text: str) -> np.ndarray:
        """``text`` as mono float32 at :attr:`sample_rate`.

        The text goes through stdin (never argv), so a line that starts with
        ``-`` is spoken, not parsed as an option.
        """
        return await self._render(text)

    async def synthesize_words(self, text: str) -> WordTimedAudio:
        """``text`` with exact word timings, rendered one word at a time.

        espeak-ng's command line reports no word positions, so each
        whitespace token is rendered on its own (``-z``: no sentence pause),
        trimmed to its sound (samples above -60 dBFS), and the words are
        joined with fixed silences: :attr:`WORD_GAP_S` between words,
        :attr:`SHORT_PAUSE_S` after ``, ; :`` and :attr:`LONG_PAUSE_S` after
        ``. ! ?``. Word times are therefore exact by construction; the price
        is per-word prosody (each word carries its own intonation). Tokens
        with nothing to say (a lone dash) become a short pause.
        """
        words = text.split()
        if not words:
            raise ValueError("cannot synthesize empty text")
        sem = asyncio.Semaphore(2)
        cache: dict[str, asyncio.Task[np.ndarray]] = {}

        async def one(word: str) -> np.ndarray:
            async with sem:
                return _trim(await self._render(word, final_pause=False))

        for w in words:
            if re.search(r"\w", w) and w not in cache:
                cache[w] = asyncio.ensure_future(one(w))
        try:
            await asyncio.gather(*cache.values())
        except BaseException:
            for t in cache.values():
                t.cancel()
            raise
        rate = self.sample_rate
        pieces: list[np.ndarray] = [np.zeros(round(self.LEAD_IN_S * rate), np.float32)]
        timed: list[Word] = []
        pos = len(pieces[0])
        for w in words:
            if w in cache:
                clip = cache[w].result()
                timed.append(Word(text=w, start=pos / rate, end=(pos + len(clip)) / rate))
                pieces.append(clip)
                pos += len(clip)
            else:
                timed.append(Word(text=w, start=pos / rate, end=pos / rate))
            gap = self.WORD_GAP_S
            end = w.rstrip("\"')]")
            if end[-1:] in ".!?":
                gap = self.LONG_PAUSE_S
            elif end[-1:] in ",;:" or not re.search(r"\w", w):
                gap = self.SHORT_PAUSE_S
            n = round(gap * rate)
            pieces.append(np.zeros(n, np.float32))
            pos += n
        return WordTimedAudio(np.concatenate(pieces), rate, timed)

    async def _render(self, text: str, *, final_pause: bool = True) -> np.ndarray:
        if not text.strip():
            raise ValueError("cannot synthesize empty text")
        proc = await asyncio.create_subprocess_exec(
            self._path,
            "--stdout",
            "-v",
            self.voice,
            "-s",
            str(self.speed),
            "-p",
            str(self.pitch),
            *(() if final_pause else ("-z",)),
            "--stdin",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            wav, err = await asyncio.wait_for(
                proc.communicate(text.encode("utf-8")), timeout=self.timeout_s
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise TTSError(f"espeak-ng took over {self.timeout_s:g} s for {text[:40]!r}") from None
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        if proc.returncode != 0 or len(wav) <= 44:
            why = err.decode("utf-8", "replace").strip().splitlines()
            raise TTSError(
                f"espeak-ng (voice {self.voice!r}) failed for {text[:40]!r}: "
                f"{why[0] if why else f'exit {proc.returncode}, no audio'}"
            )
        try:
            # --stdout writes a streaming header (sizes 0x7fff....); libsndfile
            # reads what is there.
            data, rate = sf.read(io.BytesIO(wav), dtype="float32", always_2d=True)
        except Exception as exc:
            raise TTSError(f"espeak-ng wrote unreadable audio: {exc}") from None
        mono = np.ascontiguousarray(data[:, 0])
        return resample(mono, int(rate), self.sample_rate)


def _trim(clip: np.ndarray, floor_db: float = -60.0) -> np.ndarray:
    """``clip`` without the silence before its first and after its last
    sample above ``floor_db`` dBFS."""
    loud = np.flatnonzero(np.abs(clip) > 10 ** (floor_db / 20))
    if loud.size == 0:
        return clip[:0]
    return clip[loud[0] : loud[-1] + 1]
