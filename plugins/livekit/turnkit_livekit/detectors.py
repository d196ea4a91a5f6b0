"""turnkit end-of-turn detectors as LiveKit Agents turn detectors.

LiveKit (1.8) takes a turn detector through
``AgentSession(turn_handling={"turn_detection": detector})`` in one of two
shapes, and these adapters give it either from a turnkit detector spec:

* :class:`TurnkitTextDetector` — the **text** protocol, for the detectors that
  read words (``semantic-text``, ``llm-eou``). LiveKit asks
  ``predict_end_of_turn(chat_ctx)`` once its VAD/STT say the caller paused;
  the adapter scores the caller's words since the agent last spoke, in the
  context of the agent's last message, and returns P(end). Below
  ``unlikely_threshold`` LiveKit waits its ``max_delay``, otherwise
  ``min_delay``. LiveKit calls it without a timeout, so the adapter enforces
  one (``timeout_s``): a late model answers ``on_timeout`` (default 1.0: a
  slow model must not hold the caller for ``max_delay``) and is counted.
  It has no ``stream`` attribute, so LiveKit treats it as text.
* :class:`TurnkitStreamingDetector` — the **streaming audio** protocol, for
  the detectors that hear audio (``smart-turn``, ``fused``, ``silence``).
  Every caller frame LiveKit receives goes to ``stream().push_audio``; the
  stream runs turnkit's Silero VAD and the detector on 32 ms frames at 16 kHz,
  on a clock that is the audio's own timeline (exactly as ``turnkit replay``
  runs it). When LiveKit asks ``predict()`` at a pause, the future resolves
  with P(end)=1.0 as soon as the turnkit detector decides the turn is over
  (at once if it already has), and with 0.0 if the caller speaks first.
  Set ``endpointing={"min_delay": ...}`` low (the decision is turnkit's) and
  keep ``prediction_timeout_s`` as the longest wait.

Use :func:`turn_detector` to get the right one for a spec::

    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3), stt=..., llm=..., tts=...,
        turn_handling={"turn_detection": turn_detector("smart-turn"),
                       "endpointing": {"min_delay": 0.2, "max_delay": 3.0}},
    )
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import llm
from livekit.agents.language import LanguageCode
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.turn import TurnDetectionEvent

from turnkit.audio.vad import VADAnalyzer
from turnkit.clock import VirtualClock
from turnkit.detectors.base import EndOfTurnDetector
from turnkit.detectors.registry import available, create_detector, parse_spec
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
)
from turnkit.text.normalize import normalize_text

__all__ = [
    "AudioTimeClock",
    "TurnkitDetectorStream",
    "TurnkitStreamingDetector",
    "TurnkitTextDetector",
    "turn_detector",
]

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
PROVIDER = "turnkit"


def _english(language: LanguageCode | None) -> bool:
    # turnkit's text models and Smart Turn's tuning are English.
    return language is None or str(language).lower().split("-")[0] in ("", "en")


def caller_text(chat_ctx: llm.ChatContext) -> tuple[str, str]:
    """(the caller's words since the agent last spoke, the agent's last message)."""
    user: list[str] = []
    agent = ""
    for msg in reversed(chat_ctx.messages()):
        if msg.role == "assistant":
            agent = msg.text_content or ""
            break
        if msg.role == "user":
            user.append(msg.text_content or "")
    return " ".join(reversed(user)).strip(), agent


class TurnkitTextDetector:
    """LiveKit text turn detector backed by a turnkit text detector.

    Decides P(the caller is done) from the caller's words since the agent
    last spoke and the agent's last message (LiveKit's ``chat_ctx``), with
    the detector's text model, within ``timeout_s``.

    Example::

        det = TurnkitTextDetector("semantic-text")
        session = AgentSession(..., turn_handling={"turn_detection": det})
    """

    def __init__(
        self,
        spec: str = "semantic-text",
        *,
        timeout_s: float = 0.5,
        on_timeout: float = 1.0,
        unlikely_threshold: float | None = None,
    ) -> None:
        name, _ = parse_spec(spec)
        cls = available().get(name)
        if cls is None or not hasattr(cls, "text_scorer"):
            text = sorted(n for n, c in available().items() if hasattr(c, "text_scorer"))
            raise ValueError(
                f"detector spec {spec!r}: not a text detector (text detectors: {', '.join(text)})"
            )
        det = create_detector(spec, VirtualClock())  # validates the parameters
        self.spec = spec
        self.scorer = type(det).text_scorer(det.params)  # type: ignore[attr-defined]
        self.threshold = (
            float(unlikely_threshold) if unlikely_threshold is not None else self.scorer.threshold
        )
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout
        inner = getattr(self.scorer, "scorer", None)
        # llm-eou has an async engine client: await it (cancellable); a local
        # model runs in a worker thread so the event loop never blocks on it.
        self._apredict: Callable[[str, str], Any] | None = (
            inner.predict
            if inner is not None and inspect.iscoroutinefunction(inner.predict)
            else None
        )
        self.calls = 0
        self.timeouts = 0
        self.errors = 0
        self.last: dict[str, Any] = {}

    @property
    def model(self) -> str:
        return self.spec

    @property
    def provider(self) -> str:
        return PROVIDER

    async def unlikely_threshold(self, language: LanguageCode | None) -> float | None:
        return self.threshold

    async def supports_language(self, language: LanguageCode | None) -> bool:
        return _english(language)

    async def predict_end_of_turn(
        self, chat_ctx: llm.ChatContext, *, timeout: float | None = None
    ) -> float:
        """P(end of turn) for the caller's latest words (see the class docstring)."""
        self.calls += 1
        text, agent = caller_text(chat_ctx)
        text = normalize_text(text)
        limit = self.timeout_s if timeout is None else min(timeout, self.timeout_s)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(limit):
                if self._apredict is not None:
                    p = float(await self._apredict(text, agent))
                else:
                    p = float(await asyncio.to_thread(self.scorer.predict, text, agent))
            reason = "model"
        except TimeoutError:
            self.timeouts += 1
            p, reason = self.on_timeout, f"timeout after {limit * 1000:.0f} ms"
            log.warning("%s: no P(end) within %.0f ms; answering %.2f", self.spec, limit * 1000, p)
        except Exception as exc:  # an engine error must not end the call
            self.errors += 1
            p, reason = self.on_timeout, f"error: {exc}"
            log.warning("%s failed (%s); answering %.2f", self.spec, exc, p)
        self.last = {
            "text": text,
            "probability": p,
            "threshold": self.threshold,
            "compute_ms": (time.perf_counter() - t0) * 1000,
            "reason": reason,
        }
        return p


class AudioTimeClock:
    """The stream's clock: ``now()`` is the end of the last audio frame
    analysed (seconds of caller audio), so a detector judges silence in audio
    time exactly as in replay. ``sleep`` waits real time."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TurnkitStreamingDetector:
    """LiveKit streaming (audio) turn detector backed by a turnkit detector.

    Each :meth:`stream` gets its own detector and VAD (one per session).
    ``on_signal`` is called with every turn signal the detector emits
    (``TurnEagerFrame`` / ``TurnEndFrame`` / ``TurnResumedFrame``): hosts
    use it for drafting and metrics.

    Example::

        det = TurnkitStreamingDetector("fused:profile=patient")
    """

    def __init__(
        self,
        spec: str = "smart-turn",
        *,
        prediction_timeout_s: float = 3.0,
        unlikely_threshold: float = 0.5,
        on_signal: Callable[[SystemFrame], None] | None = None,
    ) -> None:
        create_detector(spec, VirtualClock())  # validate now, not on the first call
        self.spec = spec
        self.prediction_timeout_s = prediction_timeout_s
        self.threshold = unlikely_threshold
        self.on_signal = on_signal
        self.streams: list[TurnkitDetectorStream] = []

    @property
    def model(self) -> str:
        return self.spec

    @property
    def provider(self) -> str:
        return PROVIDER

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> TurnkitDetectorStream:
        s = TurnkitDetectorStream(self)
        self.streams.append(s)
        return s


class TurnkitDetectorStream:
    """One session's detector stream (LiveKit's ``_StreamingTurnDetectorStream``)."""

    def __init__(self, owner: TurnkitStreamingDetector) -> None:
        self._owner = owner
        self.clock = AudioTimeClock()
        self.detector: EndOfTurnDetector = create_detector(owner.spec, self.clock)
        self.vad = VADAnalyzer()
        self._q: asyncio.Queue[rtc.AudioFrame | str | None] = asyncio.Queue()
        self._buf = np.zeros(0, dtype=np.float32)
        self._resampler: rtc.AudioResampler | None = None
        self._in_rate: int | None = None
        self._decided: TurnEndFrame | None = None
        self._fut: asyncio.Future[TurnDetectionEvent] | None = None
        self._closed = False
        self.signals: list[SystemFrame] = []
        self.end_silence_ms: dict[int, float] = {}  # id(TurnEndFrame) -> audio silence then
        self.predictions = 0
        self._task = asyncio.get_running_loop().create_task(self._run(), name="turnkit-detector")

    # -- LiveKit's stream protocol -------------------------------------------------
    @property
    def model(self) -> str:
        return self._owner.spec

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def is_fallback(self) -> bool:
        return False

    @property
    def prediction_timeout(self) -> float:
        return self._owner.prediction_timeout_s

    async def unlikely_threshold(self, language: LanguageCode | None) -> float | None:
        return self._owner.threshold

    async def backchannel_threshold(self, language: LanguageCode | None) -> float | None:
        return None

    async def supports_language(self, language: LanguageCode | None) -> bool:
        return _english(language)

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        if not self._closed:
            self._q.put_nowait(frame)

    def push_transcript(self, text: str, is_final: bool = False) -> None:
        """Caller words for detectors that read them (``fused``); see :func:`attach`."""
        if not self._closed:
            self._q.put_nowait(("final:" if is_final else "interim:") + text)

    def set_agent_text(self, text: str) -> None:
        self.detector.set_agent_text(text)

    def predict(self) -> asyncio.Future[TurnDetectionEvent]:
        self.cancel_inference()
        self.predictions += 1
        fut: asyncio.Future[TurnDetectionEvent] = asyncio.get_running_loop().create_future()
        if self._decided is not None or self._closed:
            fut.set_result(self._event(1.0, self._decided))
        else:
            self._fut = fut
        return fut

    def cancel_inference(self, *, timed_out: bool = False) -> None:
        fut, self._fut = self._fut, None
        if fut is not None and not fut.done():
            fut.set_result(self._event(0.0, None))

    def flush(self, reason: str | None = None) -> None:
        # The turn was committed (or cleared): the next pause is a new question.
        self.cancel_inference()
        self._decided = None

    def end_input(self) -> None:
        self._q.put_nowait(None)

    async def aclose(self) -> None:
        self._closed = True
        self.cancel_inference()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    # -- the work -------------------------------------------------------------------
    def _event(self, p: float, end: TurnEndFrame | None) -> TurnDetectionEvent:
        return TurnDetectionEvent(
            type="eot_prediction",
            end_of_turn_probability=p,
            last_speaking_time=time.time(),
            inference_duration=(end.compute_ms / 1000) if end is not None else None,
        )

    def _to_16k_mono(self, frame: rtc.AudioFrame) -> np.ndarray:
        if frame.num_channels != 1:
            pcm = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels)
            frame = rtc.AudioFrame(pcm[:, 0].copy().tobytes(), frame.sample_rate, 1, pcm.shape[0])
        if frame.sample_rate != SAMPLE_RATE:
            if self._resampler is None or self._in_rate != frame.sample_rate:
                self._resampler = rtc.AudioResampler(frame.sample_rate, SAMPLE_RATE, num_channels=1)
                self._in_rate = frame.sample_rate
            frames = self._resampler.push(frame)
        else:
            frames = [frame]
        parts = [np.frombuffer(f.data, dtype=np.int16) for f in frames]
        pcm16 = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
        return pcm16.astype(np.float32) / 32768.0

    async def _run(self) -> None:
        n = self.vad.frame_samples
        while True:
            item = await self._q.get()
            if item is None:
                return
            if isinstance(item, str):
                kind, _, text = item.partition(":")
                frame = TranscriptFrame(
                    at=self.clock.now(),
                    text=normalize_text(text),
                    is_final=kind == "final",
                    spoken_until=self.clock.now(),
                )
                await self._signals(await self.detector.on_transcript(frame))
                continue
            self._buf = np.concatenate([self._buf, self._to_16k_mono(item)])
            while len(self._buf) >= n:
                chunk, self._buf = self._buf[:n], self._buf[n:]
                at = self.clock.t
                step = self.vad.analyze(chunk, at)
                self.clock.t = at + n / SAMPLE_RATE
                audio = AudioInFrame(at=at, audio=chunk, sample_rate=SAMPLE_RATE, vad=step)
                try:
                    out = await self.detector.on_audio(audio, step)
                except Exception:  # one bad frame must not end the call
                    log.exception("%s failed on an audio frame", self._owner.spec)
                    continue
                await self._signals(out)

    async def _signals(self, out: list[SystemFrame]) -> None:
        for s in out:
            self.signals.append(s)
            if isinstance(s, TurnEndFrame):
                self._decided = s
                self.end_silence_ms[id(s)] = (s.at - self.vad.speech_end) * 1000
                fut, self._fut = self._fut, None
                if fut is not None and not fut.done():
                    fut.set_result(self._event(1.0, s))
            elif isinstance(s, TurnResumedFrame):
                self._decided = None
            elif isinstance(s, TurnEagerFrame):
                pass  # hosts see it through on_signal
            if self._owner.on_signal is not None:
                self._owner.on_signal(s)


def turn_detector(spec: str, **kwargs: Any) -> TurnkitTextDetector | TurnkitStreamingDetector:
    """The LiveKit turn detector for a turnkit detector spec: text detectors
    (``semantic-text``, ``llm-eou``) get the text protocol, the others the
    streaming audio protocol."""
    name, _ = parse_spec(spec)
    cls = available().get(name)
    if cls is not None and hasattr(cls, "text_scorer"):
        return TurnkitTextDetector(spec, **kwargs)
    return TurnkitStreamingDetector(spec, **kwargs)
