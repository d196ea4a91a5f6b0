"""turnkit end-of-turn detectors as LiveKit Agents turn detectors.

LiveKit (1.8) takes a turn detector through
``AgentSession(turn_handling={"turn_detection": detector})`` in one of two
shapes. turnkit uses the **streaming** one for every spec, so the turn is
decided by the whole turnkit detector — its scorer *and* its
:class:`~turnkit.detectors.endpointing.Endpointing` (eager signal, waits,
ceiling, fallbacks) — exactly as ``turnkit replay`` runs it:

* :class:`TurnkitStreamingDetector` (what :func:`turn_detector` returns for
  every spec: ``smart-turn``, ``fused``, ``silence``, ``semantic-text``,
  ``llm-eou``). Every caller frame LiveKit receives goes to
  ``stream().push_audio``; the session's one
  :class:`~turnkit.audio.timeline.AudioTimeline` converts it to 16 kHz,
  frames it to 32 ms, runs the session's one Silero VAD and keeps the audio
  clock (time = caller audio received, as in replay). Without a barge-in
  filter the stream holds that timeline; with
  :func:`turnkit_livekit.filter_barge_in` the timeline sits in front of
  LiveKit (:class:`turnkit_livekit.timeline.TimelineInput`, echo filter
  included) and the frames reach the stream already judged, so the
  detector and the barge-in controller read the same VAD. The caller's words
  come in through :func:`turnkit_livekit.attach` (the session's
  ``user_input_transcribed`` events → :meth:`TurnkitDetectorStream.push_transcript`):
  a detector that reads words (``semantic-text``, ``llm-eou``, ``fused``)
  needs it. When LiveKit asks ``predict()`` at a pause, the future resolves
  with P(end)=1.0 as soon as the turnkit detector commits (at once if it
  already has), and with 0.0 if the caller speaks first. LiveKit asks only
  once its own VAD has heard 200 ms of silence and acts on the answer only
  after its VAD ends the speech segment; :func:`turnkit_livekit.attach`
  therefore also has LiveKit commit the turn at the decision
  (:class:`turnkit_livekit.session.DecisionCommitter`), with
  :func:`turnkit_livekit.turn_handling`'s options (``min_delay`` 0,
  interruption ``min_words`` 1). ``prediction_timeout_s`` stays LiveKit's
  longest wait after its VAD's end of speech.
* :class:`TurnkitTextDetector` — opt-in only (``turn_detector(spec,
  livekit_waits=True)``): LiveKit's **text** protocol, where **LiveKit owns
  the waits**. LiveKit asks ``predict_end_of_turn(chat_ctx)`` once its
  VAD/STT say the caller paused; the adapter returns the text scorer's
  P(end) for the caller's words since the agent last spoke, and LiveKit
  waits ``max_delay`` below ``unlikely_threshold``, else ``min_delay``
  (``livekit/agents/voice/audio_recognition.py`` in livekit-agents 1.8.9,
  ``_bounce_eou_task``: ``endpointing_delay = self._endpointing.min_delay``
  then ``predict_end_of_turn`` and ``if end_of_turn_probability <
  unlikely_threshold: endpointing_delay = self._endpointing.max_delay``).
  turnkit's eager signal, waits, ceiling and fallbacks do not run there.
  LiveKit calls it without a timeout, so the adapter enforces one
  (``timeout_s``): a late model answers ``on_timeout`` and is counted.

Example::

    detector = turn_detector("semantic-text")
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3), stt=..., llm=..., tts=...,
        turn_handling=turn_handling(detector),
    )
    attach(session, detector)   # words and agent text in, the commit at the decision
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import llm
from livekit.agents.language import LanguageCode
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.turn import TurnDetectionEvent

from turnkit.audio.timeline import SAMPLE_RATE, AudioClock, AudioTimeline
from turnkit.audio.vad import VADAnalyzer
from turnkit.clock import VirtualClock
from turnkit.detectors.base import EndOfTurnDetector
from turnkit.detectors.registry import available, create_detector, parse_spec
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    Word,
)
from turnkit.text.normalize import normalize_text
from turnkit.text.recogniser import RecogniserKind
from turnkit.text.word_clock import WordClock, timed_words
from turnkit_livekit.noted_words import NotedWords
from turnkit_livekit.timeline import judged

__all__ = [
    "SAMPLE_RATE",
    "TurnkitDetectorStream",
    "TurnkitStreamingDetector",
    "TurnkitTextDetector",
    "turn_detector",
]

log = logging.getLogger(__name__)

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


class TurnkitStreamingDetector:
    """LiveKit streaming (audio) turn detector backed by a turnkit detector.

    Each :meth:`stream` (one per session) gets its own detector, which
    reads the session's one :class:`~turnkit.audio.timeline.AudioTimeline`
    (one VAD per session, shared with the barge-in filter when there is
    one; see :class:`TurnkitDetectorStream`).
    ``on_signal`` is called with every turn signal the detector emits
    (``TurnEagerFrame`` / ``TurnEndFrame`` / ``TurnResumedFrame``): hosts
    use it for drafting and metrics. ``line_rate``: the caller's line rate
    when LiveKit resampled it (8000 for a SIP phone call), so ``fused``
    weighs the audio as telephone band although frames arrive at 16/48 kHz.
    ``recogniser="segmented"``: the session's STT writes each speech segment
    once the VAD closed it (a non-streaming STT behind LiveKit's
    ``StreamAdapter``, Whisper): a pause is then not judged on the words of
    the segment before (``Endpointing.judged_text``), and a decision waits
    for the segment's words (LiveKit commits a turn's final transcript: a
    decision before it commits the words before them, or none), at most
    ``final_p99_s`` after the speech (the STT's p99 time to a final; 1 s).

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
        line_rate: int | None = None,
        recogniser: RecogniserKind = "streaming",
        final_p99_s: float | None = None,
    ) -> None:
        create_detector(spec, VirtualClock())  # validate now, not on the first call
        self.spec = spec
        self.recogniser: RecogniserKind = recogniser
        self.final_p99_s = final_p99_s
        # The caller's line rate when LiveKit already resampled it (a SIP
        # phone call at 8 kHz reaches the agent as 16/48 kHz frames).
        self.line_rate = line_rate
        self.prediction_timeout_s = prediction_timeout_s
        self.threshold = unlikely_threshold
        self.on_signal = on_signal
        # Hosts that execute the stream's decisions (turnkit_livekit.attach:
        # the user-turn commit): called with (stream, signal) after LiveKit's
        # predict() future has been resolved.
        self.listeners: list[Callable[[TurnkitDetectorStream, SystemFrame], None]] = []
        # Called with each reply's whole text when the session hands it to
        # the stream at the reply's first audio (turnkit_livekit.attach, a
        # WordTimesAgent's transcription node): the recorder keeps it for a
        # reply cut before LiveKit's synchronized transcript held any word.
        self.reply_listeners: list[Callable[[str], None]] = []
        # The drafter each stream's detector holds its commits for (LiveKit's
        # preemptive drafts, mirrored: turnkit_livekit.attach sets it).
        self.draft_params: DraftParams | None = None
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
    """One session's detector stream (LiveKit's ``_StreamingTurnDetectorStream``).

    Decides nothing itself: it gives the turnkit detector each 32 ms frame
    of the session's :class:`~turnkit.audio.timeline.AudioTimeline` (with
    its VAD verdict) and the caller's words, and resolves LiveKit's
    ``predict()`` with the detector's decision. The timeline is the
    session's one: the stream's own (created by the first frame LiveKit
    hands it), or, once :func:`turnkit_livekit.filter_barge_in` sits in
    front of LiveKit, the one that input drives — its frames arrive judged
    (:func:`turnkit_livekit.timeline.judged`) and are used as they are, so
    the detector and the barge-in controller read one VAD's speech edges.
    The detector's clock (:attr:`clock`) is the end of the last frame it
    was given, on the timeline's audio time.
    """

    def __init__(self, owner: TurnkitStreamingDetector) -> None:
        self._owner = owner
        # The detector's time: the end of the last frame it was given (the
        # timeline's clock may be ahead of it: the input judges frames
        # before this stream's task takes them from its queue).
        self.clock = AudioClock()
        self.detector: EndOfTurnDetector = create_detector(owner.spec, self.clock)
        self.detector.set_recogniser(
            owner.recogniser, None if owner.final_p99_s is None else owner.final_p99_s * 1000
        )
        self._timeline: AudioTimeline | None = None  # made by the first frame, or shared
        self._shared = False  # an input in front of LiveKit drives the timeline
        self._foreign_warned = False
        self.frames = 0  # 32 ms frames given to the detector
        self._speech_end = 0.0  # the VAD's speech end as of the last frame given
        self._speech_start = 0.0  # ... and the start of that speech
        self.reads_text = bool(getattr(self.detector.scorer, "reads_text", False))
        self.drafter: EagerDrafter | None = None
        if owner.draft_params is not None:
            self.hold_for_drafts(owner.draft_params)
        self._q: asyncio.Queue[rtc.AudioFrame | tuple[str, list[Any]] | None] = asyncio.Queue()
        self._finals: list[str] = []  # the current turn's final transcripts
        self._final_words: list[Word] = []  # ... and their timed words, where given
        # The STT's word times (turnkit_livekit.stt_words notes them as the
        # STT node yields its events; the session's transcript event then
        # picks them up), on the stream's audio clock.
        self._noted = NotedWords()
        self.word_clock = WordClock()
        self._committed_until = 0.0  # speech end of the last commit
        self.transcripts = 0
        self._warned = False
        self._decided: TurnEndFrame | None = None
        self._fut: asyncio.Future[TurnDetectionEvent] | None = None
        self._closed = False
        self.signals: list[SystemFrame] = []
        self.end_silence_ms: dict[int, float] = {}  # id(TurnEndFrame) -> audio silence then
        self.predictions = 0
        self._task = asyncio.get_running_loop().create_task(self._run(), name="turnkit-detector")

    def hold_for_drafts(self, params: DraftParams) -> EagerDrafter:
        """Give the detector a drafter that its commits hold for (see
        :mod:`turnkit_livekit.preemptive`); the existing one if it has one."""
        if self.drafter is None:
            self.drafter = EagerDrafter(self.clock, params)
            self.detector.attach_drafter(self.drafter)
        return self.drafter

    # -- the session's timeline -----------------------------------------------------
    @property
    def timeline(self) -> AudioTimeline:
        """The session's one timeline (16 kHz, 32 ms frames, VAD, audio clock)."""
        if self._timeline is None:
            self._use(AudioTimeline())
        assert self._timeline is not None
        return self._timeline

    @property
    def speech_end(self) -> float:
        """The end of the caller's last speech (the VAD's), as of the last
        frame the detector was given, on its audio clock."""
        return self._speech_end

    @property
    def speech_start(self) -> float:
        """The start of the caller's last speech (the VAD's), as :attr:`speech_end`."""
        return self._speech_start

    @property
    def closed(self) -> bool:
        """LiveKit closed the stream (``aclose``)."""
        return self._closed

    @property
    def shared(self) -> bool:
        """An input in front of LiveKit drives the timeline (the barge-in filter)."""
        return self._shared

    def share_timeline(self) -> AudioTimeline:
        """The timeline, for an input that will judge every caller frame
        before LiveKit hears it (:class:`turnkit_livekit.timeline.TimelineInput`).
        From now on the stream reads those frames' verdicts and ignores any
        frame no timeline judged (still queued from before, or LiveKit's own
        flush silence): the timeline is pushed from one place only."""
        self._shared = True
        return self.timeline

    def _use(self, timeline: AudioTimeline) -> None:
        self._timeline = timeline
        if self._owner.line_rate is not None:
            timeline.set_line_rate(self._owner.line_rate)
        timeline.attach(self.detector)  # the caller's own rate

    def _frames_of(self, item: rtc.AudioFrame) -> list[AudioInFrame] | None:
        """The judged 32 ms frames ``item`` gives the detector (None: push
        it through the stream's own timeline)."""
        j = judged(item)
        if j is None:
            return [] if self._shared else None
        if self._timeline is None or (
            j.timeline is not self._timeline and not self._timeline.samples
        ):
            self._use(j.timeline)  # the session's timeline, judged in front of LiveKit
            self._shared = True
        if j.timeline is self._timeline:
            return [j.frame]
        # This stream's timeline judged frames before another one appeared
        # (the barge-in input did not find it): times from two clocks must
        # not mix, so its own timeline goes on judging the filtered audio.
        if not self._foreign_warned:
            self._foreign_warned = True
            log.warning(
                "%s: frames judged by another timeline after this stream's own began; "
                "judging them again here (two VADs in this session)",
                self._owner.spec,
            )
        return None

    # -- LiveKit's stream protocol -------------------------------------------------
    @property
    def vad(self) -> VADAnalyzer:
        """The session's one VAD (the timeline's)."""
        return self.timeline.vad

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

    def push_transcript(
        self, text: str, is_final: bool = False, words: Sequence[Any] | None = None
    ) -> None:
        """Caller words for detectors that read them (``fused``); see :func:`attach`.
        ``words``: when each was said (LiveKit's ``SpeechData.words``: seconds
        of the session's audio input), else those noted for this transcript
        by :meth:`note_words`, if any."""
        if self._closed:
            return
        if words is None:
            words = self._noted.take(text, is_final)
        self._q.put_nowait((("final:" if is_final else "interim:") + text, list(words or [])))

    def note_words(self, text: str, is_final: bool, words: Sequence[Any] | None) -> None:
        """The STT wrote ``text`` with these timed words; the session's
        transcript event for it follows (see :func:`turnkit_livekit.stt_words`)."""
        self._noted.note(text, is_final, words)

    def set_agent_text(self, text: str) -> None:
        self.detector.set_agent_text(text)

    def agent_started(self) -> None:
        self.detector.agent_started()

    def predict(self) -> asyncio.Future[TurnDetectionEvent]:
        self.cancel_inference()
        self.predictions += 1
        if self.reads_text and not self.transcripts and not self._warned:
            self._warned = True
            log.warning(
                "%s reads the caller's words but has none: attach(session, detector) "
                "feeds it the session's transcripts",
                self._owner.spec,
            )
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
        self._finals = []
        self._final_words = []

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

    async def _transcript(self, item: str, said: list[Any]) -> None:
        kind, _, raw = item.partition(":")
        text = normalize_text(raw)
        final = kind == "final"
        if self._speech_end <= self._committed_until + 1e-9:
            # No speech since the last commit: these words are that turn's,
            # arriving late; they must not open or prefix the next one.
            return
        self.transcripts += 1
        parts = [*self._finals, text] if text else list(self._finals)
        # The STT's word times (seconds of the session's audio input), on
        # the audio clock the detector runs on.
        timed = timed_words(said)
        words = self.word_clock.place(timed, None, self.clock.now()) if timed else []
        if final and text:
            self._finals.append(text)
            self._final_words.extend(words)
        whole = " ".join(p for p in parts if p)
        if not whole:
            return
        frame = TranscriptFrame(
            at=self.clock.now(),
            text=whole,
            is_final=final,
            # Without word times: words cannot have been spoken after the
            # last speech the VAD heard.
            spoken_until=words[-1].end if words else self._speech_end,
            words=[*self._final_words] if final else [*self._final_words, *words],
        )
        await self._signals(await self.detector.on_transcript(frame))

    async def _run(self) -> None:
        while True:
            item = await self._q.get()
            if item is None:
                return
            if isinstance(item, tuple):
                await self._transcript(*item)
                continue
            frames = self._frames_of(item)
            if frames is None:
                pcm = np.frombuffer(item.data, dtype=np.int16)
                frames = await self.timeline.push(pcm, item.sample_rate, item.num_channels)
            for audio in frames:
                assert audio.vad is not None
                await self.clock.advance_to(audio.end)
                self.frames += 1
                self._speech_end = audio.vad.speech_end
                self._speech_start = audio.vad.speech_start
                try:
                    out = await self.detector.on_audio(audio, audio.vad)
                except Exception:  # one bad frame must not end the call
                    log.exception("%s failed on an audio frame", self._owner.spec)
                    continue
                await self._signals(out)

    async def _signals(self, out: list[SystemFrame]) -> None:
        for s in out:
            self.signals.append(s)
            if isinstance(s, TurnEndFrame):
                self._decided = s
                self._committed_until = self._speech_end
                self._finals = []
                self._final_words = []
                self.end_silence_ms[id(s)] = (s.at - self._speech_end) * 1000
                fut, self._fut = self._fut, None
                if fut is not None and not fut.done():
                    fut.set_result(self._event(1.0, s))
            elif isinstance(s, TurnResumedFrame):
                self._decided = None
            elif isinstance(s, TurnEagerFrame):
                pass  # hosts see it through on_signal
            if self._owner.on_signal is not None:
                self._owner.on_signal(s)
            for listen in list(self._owner.listeners):
                try:
                    listen(self, s)
                except Exception:  # a host's bug must not stop the detector
                    log.exception("%s: a listener failed on %s", self._owner.spec, type(s).__name__)


def turn_detector(
    spec: str, *, livekit_waits: bool = False, **kwargs: Any
) -> TurnkitTextDetector | TurnkitStreamingDetector:
    """The LiveKit turn detector for a turnkit detector spec: the streaming
    protocol for every spec, so turnkit's endpointing decides (feed it the
    session's words with :func:`turnkit_livekit.attach`).
    ``livekit_waits=True`` (text specs only: ``semantic-text``, ``llm-eou``)
    gives LiveKit's text protocol instead, where LiveKit's own
    ``min_delay``/``max_delay`` decide and turnkit only scores."""
    if livekit_waits:
        return TurnkitTextDetector(spec, **kwargs)
    return TurnkitStreamingDetector(spec, **kwargs)
