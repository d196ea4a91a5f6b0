"""One caller-audio timeline per session: framing, resampling, echo filter,
VAD and the audio clock, in one framework-free object.

Every host (``turnkit replay``, the Pipecat engine, the LiveKit stream)
needs the same plumbing in front of its policies, and :class:`AudioTimeline`
is the one copy of it:

* **resampling** — caller audio of any rate (int16 PCM or float32, first
  channel of an interleaved buffer) becomes 16 kHz float32 through one
  streaming converter (:class:`To16k`, soxr), so chunk edges leave no seams;
  the agent's played audio goes through its own instance of the same
  converter;
* **framing** — 32 ms frames of 512 samples, whatever size the host's
  chunks are;
* **the audio clock** — time is the caller audio received: a frame is
  available once its last sample has arrived, so the clock is advanced to
  each frame's end before anything judges it. The clock is injected: a
  :class:`~turnkit.clock.VirtualClock` (replay, offline Pipecat: sleepers
  wake on audio time) or an :class:`AudioClock` (live: ``now()`` is audio
  time, ``sleep`` waits real time);
* **the echo filter** (optional) — each frame is echo-suppressed against
  what the agent played (:meth:`push_reference`) before the VAD hears it;
* **one Silero VAD** — the verdict (:class:`~turnkit.audio.vad.VADStep`)
  every policy of the session reads; there is no second VAD to disagree;
* **the caller's own rate** — a detector attached with :meth:`attach` is
  told the rate the caller audio had before resampling
  (``set_source_rate``): 8 kHz is a telephone line.

It decides nothing about turns or barge-ins; it says, per frame, what the
caller's microphone holds (echo-suppressed audio, speech or not) and when.

Example::

    timeline = AudioTimeline(VirtualClock(), echo=EchoFilter())
    timeline.attach(detector)
    for frame in await timeline.push(pcm, rate=8000):   # 0..n 32 ms frames
        signals = await detector.on_audio(frame, frame.vad)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Protocol

import numpy as np
import soxr

from turnkit.audio import FRAME_SAMPLES, SAMPLE_RATE
from turnkit.audio.vad import VADAnalyzer, VADParams, VADStep
from turnkit.barge_in.echo import EchoFilter, EchoStep
from turnkit.clock import Clock
from turnkit.frames import (
    AudioInFrame,
    Frame,
    StartFrame,
    VADSpeechStartedFrame,
    VADSpeechStoppedFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = [
    "FRAME_S",
    "FRAME_SAMPLES",
    "SAMPLE_RATE",
    "AudioClock",
    "AudioTimeline",
    "TimelineProcessor",
    "To16k",
]

FRAME_S = FRAME_SAMPLES / SAMPLE_RATE


class AudioClock:
    """Live audio time: ``now()`` is the seconds of caller audio received
    (set by the timeline as frames complete), ``sleep`` waits real time.
    Replaces the plugins' ``MicClock`` / ``AudioTimeClock``."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def advance_to(self, t: float) -> None:
        self.t = max(self.t, t)


class _Advancing(Protocol):
    async def advance_to(self, t: float) -> None: ...


def as_float(pcm: np.ndarray | bytes, channels: int = 1) -> np.ndarray:
    """Mono float32 in [-1, 1) from int16 PCM bytes/array or float audio;
    the first channel of an interleaved buffer."""
    if isinstance(pcm, bytes | bytearray | memoryview):
        pcm = np.frombuffer(pcm, dtype="<i2")
    if channels > 1:
        pcm = pcm[::channels]
    if pcm.dtype == np.int16:
        return pcm.astype(np.float32) / 32768.0
    return np.asarray(pcm, dtype=np.float32)


class To16k:
    """A stream of audio at any rate as 16 kHz float32 (soxr's streaming
    resampler, so chunk edges leave no seams); a rate change starts a new
    stream. At 16 kHz it only converts."""

    def __init__(self) -> None:
        self.rate = SAMPLE_RATE
        self._stream: soxr.ResampleStream | None = None

    def __call__(self, audio: np.ndarray, rate: int) -> np.ndarray:
        if rate == SAMPLE_RATE:
            return audio
        if rate != self.rate or self._stream is None:
            self.rate = rate
            self._stream = soxr.ResampleStream(rate, SAMPLE_RATE, 1, "float32")
        return self._stream.resample_chunk(audio)


class AudioTimeline:
    """The session's caller audio, framed, echo-filtered and VAD-judged on
    the audio clock (see the module docstring for what it owns).

    ``clock``: injected; advanced to each frame's end (``advance_to``) when
    it has that method, default a new :class:`AudioClock`. ``echo``: the
    session's echo filter (None: no echo suppression). ``vad`` /
    ``vad_params``: the session's one VAD.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        echo: EchoFilter | None = None,
        vad: VADAnalyzer | None = None,
        vad_params: VADParams | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else AudioClock()
        self._advance: Callable[[float], object] | None = getattr(self.clock, "advance_to", None)
        self.echo = echo
        self.vad = vad if vad is not None else VADAnalyzer(params=vad_params)
        if self.vad.frame_samples != FRAME_SAMPLES:
            raise ValueError(f"the VAD must take {FRAME_SAMPLES}-sample frames")
        self._to16k = To16k()
        self._ref16k = To16k()
        self._buf = np.zeros(0, dtype=np.float32)
        self.samples = 0  # 16 kHz caller samples framed: the audio clock
        self.source_rate: int | None = None
        # The caller's line rate when the host knows it better than the
        # frames do (a telephone line the framework already resampled).
        self.line_rate: int | None = None
        self._listeners: list[object] = []  # detectors told the source rate
        self.last_echo: EchoStep | None = None
        self.echo_frames = 0  # frames the echo filter judged the agent's echo alone

    # -- wiring ------------------------------------------------------------------
    def attach(self, detector: object) -> None:
        """Tell ``detector`` (anything with ``set_source_rate``) the caller
        audio's own rate, now if known and whenever it changes."""
        self._listeners.append(detector)
        if self.source_rate is not None:
            detector.set_source_rate(self.source_rate)  # type: ignore[attr-defined]

    def set_source_rate(self, rate: int) -> None:
        """The caller audio's rate before resampling (a host that resampled
        it itself, or a replay reading the file's header, says so)."""
        if rate == self.source_rate:
            return
        self.source_rate = rate
        for d in self._listeners:
            d.set_source_rate(rate)  # type: ignore[attr-defined]

    def set_line_rate(self, rate: int | None) -> None:
        """The caller's line rate as the host knows it: a phone call that
        reached the host at 8 kHz and was resampled to 16 kHz before turnkit
        sees it (Pipecat's Twilio/Telnyx serializers, a LiveKit SIP
        participant). It holds over the rate frames arrive at, so the
        detectors still weigh the audio as narrowband; ``None`` goes back to
        the frames' rate."""
        self.line_rate = rate
        if rate is not None:
            self.set_source_rate(rate)

    def reset(self) -> None:
        """A new call on the same objects: VAD, echo filter and framing
        start over (the clock is the host's)."""
        self.vad.reset()
        if self.echo is not None:
            self.echo.reset()
        self._buf = np.zeros(0, dtype=np.float32)
        self.samples = 0
        self.last_echo = None
        self.echo_frames = 0

    @property
    def now(self) -> float:
        """Seconds of caller audio framed so far."""
        return self.samples / SAMPLE_RATE

    # -- the agent's side --------------------------------------------------------
    def push_reference(
        self, audio: np.ndarray | bytes, rate: int = SAMPLE_RATE, at: float | None = None,
        channels: int = 1,
    ) -> np.ndarray:
        """Agent audio the loudspeaker played from ``at`` (seconds on the
        audio clock; default: now): the echo filter's reference. Returns it
        at 16 kHz (empty without an echo filter it still converts)."""
        out = self._ref16k(as_float(audio, channels), rate)
        if self.echo is not None and len(out):
            self.echo.push_reference(out, self.clock.now() if at is None else at)
        return out

    # -- the caller's side -------------------------------------------------------
    def step(self, chunk: np.ndarray, at: float) -> AudioInFrame:
        """One 32 ms frame starting at ``at``: echo filter, then the VAD.
        Synchronous; the host has already moved the clock to its end."""
        if self.echo is not None:
            es = self.echo.process(chunk, at)
            self.last_echo = es
            self.echo_frames += es.echo_only
            chunk = es.audio
        vad: VADStep = self.vad.analyze(chunk, at)
        return AudioInFrame(at=at, audio=chunk, sample_rate=SAMPLE_RATE, vad=vad)

    async def push(
        self, audio: np.ndarray | bytes, rate: int = SAMPLE_RATE, channels: int = 1
    ) -> list[AudioInFrame]:
        """Caller audio as it arrives (any rate, any chunk size): the 32 ms
        frames it completes, each judged after the clock reached its end."""
        if self.line_rate is None:
            self.set_source_rate(rate)
        self._buf = np.concatenate([self._buf, self._to16k(as_float(audio, channels), rate)])
        out: list[AudioInFrame] = []
        n = FRAME_SAMPLES
        while len(self._buf) >= n:
            chunk, self._buf = self._buf[:n], self._buf[n:]
            out.append(await self._frame(chunk))
        return out

    async def _frame(self, chunk: np.ndarray) -> AudioInFrame:
        at = self.samples / SAMPLE_RATE
        self.samples += len(chunk)
        if self._advance is not None:
            # A frame is available once its last sample has arrived.
            await self._advance(self.samples / SAMPLE_RATE)  # type: ignore[misc]
        return self.step(chunk, at)

    def frames(self, blocks: Iterator[np.ndarray]) -> Iterator[tuple[float, np.ndarray]]:
        """16 kHz blocks (a file read in pieces) as ``(start s, 32 ms
        frame)``, the last zero-padded; for hosts that drive the clock
        themselves (the replay) and call :meth:`step`."""
        buf = np.zeros(0, dtype=np.float32)
        start = 0
        for block in blocks:
            buf = np.concatenate([buf, block]) if len(buf) else np.asarray(block, np.float32)
            k = len(buf) // FRAME_SAMPLES * FRAME_SAMPLES
            for i in range(0, k, FRAME_SAMPLES):
                yield (start + i) / SAMPLE_RATE, buf[i : i + FRAME_SAMPLES]
            start += k
            buf = buf[k:]
        if len(buf):
            yield start / SAMPLE_RATE, np.pad(buf, (0, FRAME_SAMPLES - len(buf)))


class TimelineProcessor(FrameProcessor):
    """The timeline in turnkit's own pipeline (the replay): each caller
    :class:`~turnkit.frames.AudioInFrame` (one 32 ms frame, the clock
    already at its end) is echo-filtered and judged by the session's VAD,
    and speech start/stop edges go out as system frames after it. Takes the
    place of an echo gate and a VAD processor."""

    def __init__(self, timeline: AudioTimeline) -> None:
        super().__init__()
        self.timeline = timeline

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.timeline.reset()
        elif isinstance(frame, AudioInFrame) and direction is FrameDirection.DOWNSTREAM:
            judged = self.timeline.step(frame.audio, frame.at)
            frame.audio, frame.vad = judged.audio, judged.vad
            step = judged.vad
            assert step is not None
            await self.push_frame(frame, direction)
            if step.started:
                await self.push_frame(
                    VADSpeechStartedFrame(at=step.speech_start, confirmed_at=frame.end)
                )
            if step.stopped:
                await self.push_frame(
                    VADSpeechStoppedFrame(at=step.speech_end, confirmed_at=frame.end)
                )
            return
        await self.push_frame(frame, direction)
