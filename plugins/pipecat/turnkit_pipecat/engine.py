"""One turnkit turn-taking engine per Pipecat pipeline.

Pipecat hands every frame the user aggregator sees to each user turn start
strategy and then to each stop strategy. :class:`TurnkitTurnEngine` turns
those Pipecat frames into the evidence turnkit's policies take — caller audio
in 32 ms frames with turnkit's Silero VAD verdict, whole-turn transcripts,
whether the bot is speaking — and runs the end-of-turn detector on it, once
per frame however many strategies ask (:meth:`feed` is memoised on the frame).

The audio plumbing is the session's one
:class:`~turnkit.audio.timeline.AudioTimeline` (16 kHz conversion, 32 ms
framing, the echo filter, the one Silero VAD, the caller's own rate told to
the detector). Time is the **audio's own clock**: a
:class:`~turnkit.clock.VirtualClock` the timeline advances to the end of
each 32 ms frame as it arrives, exactly as ``turnkit replay`` advances it. Live, audio arrives in real time, so this is
real time at frame resolution; offline, a recorded call can be pushed
through a Pipecat pipeline as fast as the CPU allows and the detector
decides at the same instants as in ``turnkit replay``.

Example::

    engine = TurnkitTurnEngine("fused")
    strategies = UserTurnStrategies(
        start=[TurnkitUserTurnStartStrategy(engine)],
        stop=[TurnkitUserTurnStopStrategy(engine)],
    )
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    STTMetadataFrame,
    TranscriptionFrame,
)
from turnkit.audio.timeline import SAMPLE_RATE, AudioTimeline
from turnkit.audio.vad import VADAnalyzer, VADParams
from turnkit.barge_in.echo import EchoFilter
from turnkit.clock import VirtualClock
from turnkit.detectors.base import EndOfTurnDetector
from turnkit.detectors.registry import create_detector
from turnkit.drafting.owed import OwedTurn
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

from turnkit_pipecat.word_times import WordTimes

__all__ = ["SAMPLE_RATE", "EngineStep", "TurnkitTurnEngine", "pcm_of"]

log = logging.getLogger(__name__)


def pcm_of(frame: Any) -> tuple[np.ndarray, int, int]:
    """(int16 samples, rate, channels) of a Pipecat raw audio frame."""
    return np.frombuffer(frame.audio, dtype="<i2"), frame.sample_rate, frame.num_channels


@dataclass(slots=True)
class EngineStep:
    """What one Pipecat frame told the engine: the 32 ms caller frames it
    completed (with their VAD verdicts) and the turn signals they caused."""

    audio: list[AudioInFrame] = field(default_factory=list)
    signals: list[SystemFrame] = field(default_factory=list)
    transcript: TranscriptFrame | None = None  # the whole-turn transcript it made

    @property
    def speech_started(self) -> bool:
        return any(f.vad is not None and f.vad.started for f in self.audio)

    @property
    def speech_edge(self) -> bool | None:
        """The caller's last VAD edge in this step: True started speaking,
        False stopped, None neither."""
        edge = None
        for f in self.audio:
            if f.vad is not None and (f.vad.started or f.vad.stopped):
                edge = f.vad.started
        return edge


class TurnkitTurnEngine:
    """Feeds a turnkit end-of-turn detector from Pipecat frames.

    ``detector`` is a registry spec (``"fused"``, ``"smart-turn"``,
    ``"silence:stop_ms=500"``) or a detector built on :attr:`clock`.
    Listeners added with :meth:`on_signal` see every turn signal and every
    32 ms caller frame (recorders, metrics, replay agents).

    ``echo``: a turnkit :class:`~turnkit.barge_in.echo.EchoFilter` run on each
    caller frame *before* the VAD (as turnkit's ``EchoGateProcessor`` does),
    so the VAD, the detector and the barge-in policy hear the caller, not the
    bot's own voice coming back. Its reference is what the bot played:
    :meth:`push_reference` (live, from :class:`~turnkit_pipecat.echo.
    EchoReferenceTap` after the output transport) or ``set_reference`` with a
    whole track (replay).

    ``line_rate``: the caller's line rate when the transport resampled it
    before Pipecat's pipeline (8000 for a phone call through Twilio's or
    Telnyx's serializer): detectors then weigh the audio as telephone band
    although frames arrive at 16 kHz.

    ``recogniser``: ``"segmented"`` when the STT writes each speech segment
    once the VAD has closed it (Pipecat's ``WhisperSTTService``,
    ``OpenAISTTService``: a ``SegmentedSTTService``): a pause is then not
    judged on the words written before the segment just spoken, from the
    first turn (see ``Endpointing.judged_text``), and a decision waits for
    the segment's words before it ends the turn (Pipecat's aggregator runs
    no LLM for a turn with none), at most the STT's ``ttfs_p99_latency``
    (its ``STTMetadataFrame``; 1 s until one comes). Left at
    ``"streaming"``, the detector still learns it after three segments.
    """

    def __init__(
        self,
        detector: str | EndOfTurnDetector = "fused",
        *,
        clock: VirtualClock | None = None,
        vad: VADAnalyzer | None = None,
        vad_params: VADParams | None = None,
        echo: EchoFilter | None = None,
        line_rate: int | None = None,
        recogniser: RecogniserKind = "streaming",
    ) -> None:
        self.clock = clock if clock is not None else VirtualClock()
        if isinstance(detector, str):
            detector = create_detector(detector, self.clock)
        self.detector = detector
        self.recogniser: RecogniserKind = recogniser
        detector.set_recogniser(recogniser)
        # The session's one timeline: framing, 16 kHz, echo filter, VAD, clock.
        self.timeline = AudioTimeline(self.clock, echo=echo, vad=vad, vad_params=vad_params)
        self.timeline.attach(detector)
        self.timeline.set_line_rate(line_rate)
        self.frame_samples = self.timeline.vad.frame_samples
        self.bot_speaking = False
        # A caller turn the detector ended while the bot talked (the start
        # strategy started no user turn for it): answered if owed once the
        # bot stops (turnkit's one rule, as the Responder applies it). The
        # start strategy starts that turn; ``answer_owed`` tells the stop
        # strategy, on the same frame, to end it.
        self.owed = OwedTurn(self.clock)
        self.answer_owed: str | None = None
        # A Pipecat user turn is on: its controller started one and has not
        # stopped it (each turnkit strategy's handlers say so).
        self.user_turn = False
        # An LLM response is streaming (a ReplyTextTap says so): the bot
        # falling silent meanwhile is a gap in its reply, not its end.
        self.reply_streaming = False
        self.agent_text = ""  # the bot's last reply (context for detectors, barge-in)
        self.bot_words = ""  # what the bot has spoken of its current reply (TTS words)
        # A ReplyTextTap hands each reply's text as it plays (the strategy then
        # leaves the detector's context to it).
        self.reply_text_tapped = False
        self._bot_listeners: list[Callable[[str], None]] = []
        self._text_listeners: list[Callable[[str], None]] = []
        self.transcript = ""  # normalised whole-turn transcript so far
        self._committed = ""  # the transcript when the detector last committed
        self.committed_text = ""  # the words that commit ended the turn on
        self._finals: list[str] = []
        self._words: list[Word] = []
        self._segment: object = None  # the STT's utterance id, when it gives one
        self.word_times = WordTimes()  # the STT's word times, on the audio clock
        self._last: tuple[Frame, EngineStep] | None = None
        self._listeners: list[Callable[[SystemFrame | AudioInFrame], None]] = []
        self.decisions: list[TurnEndFrame] = []
        self.speech_ends: list[float] = []  # the speech end each decision follows
        self._fed = asyncio.Event()
        self._seen: set[int] = set()  # ids of text frames fed (see wait_fed)
        self._audio_steps: dict[int, list[AudioInFrame]] = {}
        self.keep_audio_steps = False  # audio_of() is used (lock-step replay)

    # -- plumbing ----------------------------------------------------------------
    def on_signal(self, fn: Callable[[SystemFrame | AudioInFrame], None]) -> None:
        """Call ``fn`` with each 32 ms caller frame and each turn signal."""
        self._listeners.append(fn)

    def _emit(self, item: SystemFrame | AudioInFrame) -> None:
        for fn in self._listeners:
            fn(item)

    @property
    def vad(self) -> VADAnalyzer:
        """The session's one VAD (the timeline's)."""
        return self.timeline.vad

    @property
    def echo(self) -> EchoFilter | None:
        """The timeline's echo filter (None: no echo suppression)."""
        return self.timeline.echo

    @echo.setter
    def echo(self, echo: EchoFilter | None) -> None:
        self.timeline.echo = echo

    @property
    def echo_frames(self) -> int:
        """Caller frames the echo filter judged the bot's echo alone."""
        return self.timeline.echo_frames

    @property
    def now(self) -> float:
        """Seconds of caller audio heard so far."""
        return self.clock.now()

    def reset(self) -> None:
        self._segment = None
        self.owed = OwedTurn(self.clock)
        self.answer_owed = None
        self.user_turn = False
        self.reply_streaming = False
        self.detector.reset()
        self.timeline.reset()
        self.new_turn()

    def push_reference(self, audio: np.ndarray, at: float | None = None) -> None:
        """Bot audio (16 kHz float32) the loudspeaker played from ``at``
        (seconds on the audio clock; default now): the echo reference."""
        self.timeline.push_reference(audio, at=at)

    def new_turn(self) -> None:
        """A new user turn began: transcripts start over (unless the STT
        gives utterance ids, which then decide)."""
        if self._segment is not None:
            return
        self._finals = []
        self._words = []
        self.transcript = ""
        self._committed = ""

    @property
    def turn_transcript(self) -> str:
        """The words since the detector's last commit: what Pipecat's user
        aggregator writes as this user turn. After a cut-off inside a caller's
        utterance the whole-utterance transcript (which the detector judges)
        still holds the words already written with the previous user turn;
        a draft or speculation asks only about the new ones."""
        done = self._committed
        if done and self.transcript.startswith(done):
            return self.transcript[len(done) :].strip()
        return self.transcript

    def set_agent_text(self, text: str) -> None:
        self.agent_text = text
        self.detector.set_agent_text(text)
        for fn in self._text_listeners:
            fn(text)

    def on_agent_text(self, fn: Callable[[str], None]) -> None:
        """Call ``fn`` with each agent line handed to the detector."""
        self._text_listeners.append(fn)

    def on_bot_words(self, text: str | Callable[[str], None]) -> None:
        """With a callable: call it with the bot's spoken words so far each
        time they grow. With text: those words grew (an output tap says so)."""
        if callable(text):
            self._bot_listeners.append(text)
            return
        for fn in self._bot_listeners:
            fn(text)

    # -- frames --------------------------------------------------------------------
    async def feed(self, frame: Frame) -> EngineStep:
        """Process ``frame`` once; a second call with the same frame returns
        the first call's result (start and stop strategies share it)."""
        if self._last is not None and self._last[0] is frame:
            return self._last[1]
        step = EngineStep()
        if isinstance(frame, InputAudioRawFrame):
            await self._audio(frame, step)
            if self.keep_audio_steps:
                self._audio_steps[id(frame)] = step.audio
        elif isinstance(frame, TranscriptionFrame | InterimTranscriptionFrame):
            await self._transcript(frame, step)
            self._seen.add(id(frame))
        elif isinstance(frame, BotStartedSpeakingFrame):
            self.bot_speaking = True
            # The reply reaches the context (and the strategy's
            # set_agent_text) only once it has played or been cut: the
            # detector learns now that the agent spoke, so the caller's
            # "uh-huh" over it is a new turn waiting for its words, as in
            # the replay, not the last turn going on.
            self.detector.agent_started()
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self.bot_speaking = False
        elif isinstance(frame, STTMetadataFrame):
            # How late the STT's finals come (its p99 after speech ends): the
            # longest a decision waits for a segment's words.
            self.detector.set_recogniser(self.recogniser, frame.ttfs_p99_latency * 1000)
        self._last = (frame, step)
        self._fed.set()
        return step

    async def wait_fed(self, frame: Frame) -> None:
        """Wait until :meth:`feed` has seen ``frame``. A feeder that pushes a
        recorded call faster than real time uses it after each transcript:
        Pipecat lets system frames (audio) overtake data frames (text), and
        the detector must hear them in the order they were spoken."""
        while id(frame) not in self._seen:
            self._fed.clear()
            await self._fed.wait()
        self._seen.discard(id(frame))

    async def audio_of(self, frame: InputAudioRawFrame) -> list[AudioInFrame]:
        """The 32 ms caller frames (echo-gated, with VAD verdicts) that
        ``frame`` completed, once :meth:`feed` has seen it (needs
        :attr:`keep_audio_steps`). A host further down the pipeline uses it
        to act on exactly the evidence the strategies saw."""
        while id(frame) not in self._audio_steps:
            self._fed.clear()
            await self._fed.wait()
        return self._audio_steps.pop(id(frame))

    async def _audio(self, frame: InputAudioRawFrame, step: EngineStep) -> None:
        pcm, rate, channels = pcm_of(frame)
        # The timeline frames, converts, echo-filters and VAD-judges the
        # audio, moving the clock to each 32 ms frame's end first.
        for af in await self.timeline.push(pcm, rate, channels):
            step.audio.append(af)
            self._emit(af)
            assert af.vad is not None
            self._signals(await self.detector.on_audio(af, af.vad), step)

    async def _transcript(
        self, frame: TranscriptionFrame | InterimTranscriptionFrame, step: EngineStep
    ) -> None:
        text = normalize_text(frame.text)
        final = isinstance(frame, TranscriptionFrame)
        now = self.clock.now()
        # Word times, where the STT's result carries them (Deepgram, Deepgram
        # Flux, or turnkit's dict: see turnkit_pipecat.word_times), on the
        # audio clock; an utterance id, where it gives one, makes the
        # transcript run over the utterance, across turn starts (turnkit
        # replay's oracle keeps it per labelled caller turn; without ids it
        # restarts with each turn).
        heard = self.word_times.read(frame.result, now)
        segment = heard.segment
        if segment is not None:
            if segment != self._segment:
                self._finals, self._words = [], []
                self._committed = ""
            self._segment = segment
        words = heard.words
        spoken_until = heard.spoken_until if heard.spoken_until is not None else now
        parts = [*self._finals, text] if text else list(self._finals)
        if final and text:
            self._finals.append(text)
            self._words.extend(words)
        whole = " ".join(p for p in parts if p)
        if not whole:
            return
        self.transcript = whole
        tf = TranscriptFrame(
            at=now,
            text=whole,
            is_final=final,
            spoken_until=spoken_until,
            words=[*self._words] if final else [*self._words, *words],
        )
        step.transcript = tf
        self._emit(tf)
        self._signals(await self.detector.on_transcript(tf), step)

    def speech_decided(self) -> bool:
        """The caller is silent and every sound the VAD heard was followed
        by a detector end: words arriving now are of a turn already ended."""
        vad = self.vad
        return (
            not vad.speaking
            and bool(self.speech_ends)
            and vad.speech_end <= self.speech_ends[-1] + 1e-6
        )

    def late_final(self, frame: Frame) -> bool:
        """``frame`` is a final transcript with words, of speech the
        detector has already ended (:meth:`speech_decided`)."""
        return (
            isinstance(frame, TranscriptionFrame)
            and bool(frame.text.strip())
            and self.speech_decided()
        )

    def commit_words(self) -> None:
        """The host ended the user turn on the words so far without a
        detector end (late words of speech already ended): they are the
        committed turn's, and the next turn's transcript starts after them."""
        self.committed_text = self.turn_transcript
        self._committed = self.transcript

    def _signals(self, signals: list[SystemFrame], step: EngineStep) -> None:
        for s in signals:
            if isinstance(s, TurnEndFrame):
                self.commit_words()
                self.decisions.append(s)
                # The detector's own speech end where it gives one (words
                # the VAD did not hear may have opened the turn).
                self.speech_ends.append(
                    s.speech_end if s.speech_end is not None else self.vad.speech_end
                )
            if isinstance(s, TurnEndFrame | TurnEagerFrame | TurnResumedFrame):
                step.signals.append(s)
                self._emit(s)
