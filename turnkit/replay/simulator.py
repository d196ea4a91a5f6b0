"""Replaying recorded calls through the real components on a virtual clock.

For each call and detector: the caller audio streams in 32 ms frames through
the Silero VAD, the oracle transcriber, the end-of-turn detector and the
simulated agent (latency model + the baseline barge-in policy), all in a
:class:`~turnkit.pipeline.Pipeline` driven by a
:class:`~turnkit.clock.VirtualClock`. The result is scored against the labels
(:mod:`turnkit.replay.metrics`). Calls replay in parallel processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from turnkit.audio.timeline import FRAME_SAMPLES, SAMPLE_RATE, AudioTimeline, TimelineProcessor
from turnkit.audio.vad import VADAnalyzer, VADParams
from turnkit.audio.wav import AudioError, read_wav
from turnkit.barge_in.controller import BargeInController, BargeInParams
from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.barge_in.processors import EchoGateProcessor
from turnkit.barge_in.truncation import estimate_word_timings
from turnkit.clock import VirtualClock
from turnkit.detectors.endpointing import ComputeMode
from turnkit.detectors.processor import TurnDetectorProcessor
from turnkit.detectors.registry import DetectorSpecError, create_detector
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.drafting.responder import Responder, ResponderParams
from turnkit.drafting.tools import ToolGate
from turnkit.frames import AudioInFrame, EndFrame, StartFrame, Word
from turnkit.pipeline import CollectSink, FrameProcessor, Pipeline, collect_errors
from turnkit.replay.agent import Reply, SimulatedAgent
from turnkit.replay.engine import (
    HeldClock,
    SimulatedEngine,
    ToolLog,
    replay_fillers,
    replay_tools,
)
from turnkit.replay.latency import LatencyModel
from turnkit.replay.live import (
    LiveAgreement,
    agreement,
    live_decisions,
    live_reply_latencies_ms,
)
from turnkit.replay.llm_source import SYSTEM_PROMPT, LiveEngine, ModelTTFT, TTFTSource
from turnkit.replay.metrics import CallScore, ToolFigures, score_call
from turnkit.replay.oracle import OracleTranscriber, SpeechRun, oracle_words, vad_runs
from turnkit.replay.recording import AgentTurn, Recording, RecordingError, load_recording
from turnkit.replay.reference import ReferenceFeeder
from turnkit.text.recogniser import RecogniserKind

__all__ = [
    "CallFailure",
    "LabelPlanner",
    "ReplayConfig",
    "ReplayInterrupted",
    "barge_in_filters",
    "call_seed",
    "open_line_until",
    "recogniser_runs",
    "replay_call",
    "replay_many",
    "replay_vad_params",
    "segmented_p99_ms",
]

log = logging.getLogger(__name__)

CHARS_PER_SECOND = 15.0
# Speech at most this much faster than the nominal rate (~170 words a
# minute). Recorded agents' segments said whole need at most 1.17 (demo
# corpus, real-call variants, barge-in sets; 3 of 180 in the turn-taking set
# 1.25-1.33, read as cut off); those cut off by a bid, their whole text over
# the part said, need 1.24-4.5 (7 of 240 in the barge-in sets under 1.25,
# read as said whole).
FASTEST_SPEECH = 1.25
# Slack on a segmented recogniser's words past the run's close and delay:
# the replay reveals them on the frame after they are due.
SEGMENT_MARGIN_MS = 64.0


class ReplayConfig(BaseModel):
    """Everything a replay depends on besides the calls and the detector."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm_ttft_ms: str = "350"
    tts_ttfb_ms: str = "150"
    stt_delay_ms: float = Field(0.0, ge=0)
    stt_jitter_ms: float = Field(
        0.0, ge=0, description="up to this much more delay per word, drawn (seeded), in order"
    )
    stt: RecogniserKind = Field(
        "streaming",
        description="the recogniser: streaming (each word stt_delay_ms after it is said, with "
        "its times) or segmented (Whisper behind a VAD: each run of speech whole, stt_delay_ms "
        "after the VAD closed it, stamped with its arrival; turnkit.replay.oracle)",
    )
    timeout_s: float = Field(5.0, gt=0, description="no audio this long after a turn's end: missed")
    grace_s: float = Field(
        0.5, ge=0, description="a stop this long after an event's end still counts for it"
    )
    compute: ComputeMode = Field(
        "measured",
        description="model cost added to decisions: measured (wall clock), fixed (each "
        "model's recorded benchmark figure: identical reruns) or none",
    )
    count_compute: bool = Field(True, description="False: the same as compute='none'")
    eager: bool = Field(
        True,
        description="start drafts on eager signals (EagerDrafter), as the recommended "
        "Responder and Pipecat setups and LiveKit's preemptive generation do; False: "
        "every reply waits for the commit",
    )
    draft_hold: bool = Field(
        True,
        description="with eager: the drafter knows the engine's time to a first token (the "
        "LLM TTFT's 5th percentile; not with llm_url, whose engine's is unknown), so a commit "
        "waits for a draft's first token and one due within that time drafts first; False: "
        "commits where the wait puts them, as Pipecat's speculation and LiveKit's preemptive "
        "generation do",
    )
    preemptive_tts: bool = Field(
        True,
        description="with eager: a held draft's first sentence is rendered before the commit "
        "(turnkit's TTSProcessor, LiveKit's preemptive_tts), so a used draft's audio is ready "
        "the TTS's time after its first token whenever the commit comes, and with draft_hold "
        "a commit waits for that audio (the TTS TTFB's 5th percentile more); False: the TTS "
        "starts at the commit, as in Pipecat",
    )
    filters: bool = Field(
        True, description="barge-in echo + acknowledgement filters (False: raw VAD baseline)"
    )
    llm_url: str | None = Field(
        None,
        description="live OpenAI-compatible engine: its tokens (and measured TTFTs) answer "
        "the replay's LLM requests instead of the latency model and the recorded reply",
    )
    llm_model: str = ""
    latency_from_live: bool = Field(
        False,
        description="a call recorded live by turnkit answers at its host's measured latency: "
        "the median from a committed user turn to the reply's first audio as the LLM's first "
        "token, TTS 0 (turnkit.replay.live.live_reply_latencies_ms); other calls keep "
        "llm_ttft_ms / tts_ttfb_ms",
    )
    default_reply_s: float = Field(2.0, gt=0)
    seed: int = 0
    vad_threshold: float = Field(0.5, gt=0, lt=1)
    vad_start_ms: float = Field(64.0, ge=0)
    vad_stop_ms: float = Field(96.0, ge=0)


class LabelPlanner:
    """What the recording says about a reply: which caller turn a decision
    answers (the latest one begun by the time it is given: the host passes
    the end of the speech the decision follows, so that a commit on turn
    *i*'s pause that lands just as the caller starts turn *i + 1*, before
    the VAD has heard it, answers turn *i* late rather than cutting off
    turn *i + 1*), what the reply says and how long it plays.

    The agent's answer to caller turn *i* is everything the original agent
    said after that turn began and before the caller's next turn: one
    ``agent_turn``, or several where a transcript cuts the clerk's speech
    into segments. The reply says their text and plays until the last one
    ends; if that is already past, or there is none, for its text at 15
    characters a second, or ``default_reply_s``. (Only the first segment
    was played before: the clerk's later segments met a silent agent, a
    caller's backchannel in them was answered as a turn, and text
    detectors read half the agent's question as context.) Where some of
    them start inside the caller's turn and some after its end (a live
    host's cutoff that got out, then its answer), a reply asked for before
    the end says the first, one asked for after it the rest."""

    def __init__(self, rec: Recording, default_reply_s: float) -> None:
        self.turns = rec.caller_turns
        self.agent_turns = rec.agent_turns
        self.default_reply_s = default_reply_s
        self._pace: float | None = None

    def turn_for(self, decision_at: float) -> int | None:
        idx = None
        for i, t in enumerate(self.turns):
            if t.start <= decision_at + 1e-9:
                idx = i
        return idx

    def _agent_floor(self, turn: int | None, at: float | None = None) -> list[AgentTurn]:
        if turn is None:
            return []
        t = self.turns[turn]
        nxt = self.turns[turn + 1].start if turn + 1 < len(self.turns) else float("inf")
        floor = [a for a in self.agent_turns if t.start < a.start < nxt]
        if at is None:
            return floor
        # Two answers to one caller turn: what the agent said inside it (a
        # live host's cutoff that got out, a clerk's "okay" in a pause) and
        # what it said after its end. A decision gets the one on its side
        # of the end: a cutoff says what the cutoff said, the answer at the
        # end does not repeat it (LiveKit's "Thanks, let me check…" cut at
        # once, then "Can I have your name?" after the turn: the caller's
        # words in between were read against both joined, a question, where
        # the live detector had the statement).
        early = [a for a in floor if a.start < t.end]
        late = [a for a in floor if a.start >= t.end]
        if early and late:
            return early if at < t.end else late
        return floor

    def reply_text(self, turn: int | None, at: float | None = None) -> str:
        """What the recorded agent said to caller turn ``turn``, for a
        decision at ``at`` (None: everything it said to it)."""
        return " ".join(a.text.strip() for a in self._agent_floor(turn, at) if a.text.strip())

    def play_until(self, turn: int | None, first_audio_at: float, at: float | None = None) -> float:
        floor = self._agent_floor(turn, at)
        if not floor:
            return first_audio_at + self.default_reply_s
        end = max(a.end for a in floor)
        if end > first_audio_at:
            return end
        text_s = len(self.reply_text(turn, at)) / CHARS_PER_SECOND
        return first_audio_at + (text_s if text_s > 0 else self.default_reply_s)

    def reply_words(
        self, turn: int | None, first_audio_at: float, until: float, at: float | None = None
    ) -> list[Word]:
        """When each word of :meth:`reply_text` played, in seconds of the
        reply's audio (from ``first_audio_at`` to ``until``, its
        :meth:`play_until`): where the recorded agent said it.

        The recorded caller's backchannels and bids were timed to the
        recorded agent's audio (a "mhm" at its comma, a "wait" at the
        wrong date), so that timeline is what the caller heard: each
        recorded segment's words within its own span (its pauses between
        segments kept), none before the first segment began (a reply that
        starts earlier than the recorded one has said nothing yet). A reply
        that starts later than the recorded one still ends at its end: the
        timeline is squeezed into what is left. With no recorded segment to
        follow (none, or all over), the text is spread over the reply.

        A segment whose text would have to be said more than
        :data:`FASTEST_SPEECH` times the nominal rate to fit its span was
        cut off (the agent stopped for a bid; its text is what it meant to
        say, as a host hands it to the TTS): its words go from its start at
        the agent's own pace in this call (:meth:`agent_pace`), and those
        past its end were never said."""
        floor = [a for a in self._agent_floor(turn, at) if a.text.strip()]
        span = until - first_audio_at
        end = max((a.end for a in floor), default=-math.inf)
        if end <= first_audio_at or span <= 0:
            return estimate_word_timings(self.reply_text(turn, at), duration_s=max(span, 1e-3))
        start = min(a.start for a in floor)
        origin, squeeze = first_audio_at, 1.0
        if start < first_audio_at:
            origin, squeeze = start, span / (end - start)
        return [
            Word(
                text=w.text,
                start=(a.start + w.start - origin) * squeeze,
                end=(a.start + w.end - origin) * squeeze,
            )
            for a in floor
            for w in self._segment_words(a)
        ]

    def _segment_words(self, a: AgentTurn) -> list[Word]:
        """One recorded segment's words, seconds from its start."""
        text, span = a.text.strip(), a.end - a.start
        if _said_whole(text, span):
            return estimate_word_timings(text, duration_s=max(span, 1e-3))
        pace = self.agent_pace()
        return [
            Word(text=w.text, start=w.start * pace, end=w.end * pace)
            for w in estimate_word_timings(text)
        ]

    def agent_pace(self) -> float:
        """The recorded agent's seconds per nominal second (1: the nominal
        rate of :func:`~turnkit.barge_in.truncation.estimate_word_timings`):
        the median over its segments said whole, 1 where none was."""
        if self._pace is None:
            paces = [
                (a.end - a.start) / _nominal_s(a.text.strip())
                for a in self.agent_turns
                if _said_whole(a.text.strip(), a.end - a.start)
            ]
            self._pace = statistics.median(paces) if paces else 1.0
        return self._pace


def _nominal_s(text: str) -> float:
    """How long ``text`` takes said at the nominal rate (0: no words)."""
    words = estimate_word_timings(text)
    return words[-1].end if words else 0.0


def _said_whole(text: str, span: float) -> bool:
    """A recorded segment's text fits its span said at most
    :data:`FASTEST_SPEECH` times the nominal rate (else it was cut off);
    False for a segment with no words or no length."""
    nominal = _nominal_s(text)
    return span > 0 and nominal > 0 and nominal <= FASTEST_SPEECH * span


def call_seed(config: ReplayConfig, call_id: str, detector: str) -> int:
    digest = hashlib.sha256(f"{config.seed}|{call_id}|{detector}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def barge_in_params(config: ReplayConfig) -> BargeInParams:
    """The barge-in controller as a host that knows its recogniser's delay
    configures it: words ``--stt-delay-ms`` (plus half the jitter) after
    they are said (a streaming recogniser; one that writes whole runs is
    judged from the caller's onsets, as before)."""
    if config.stt != "streaming":
        return BargeInParams()
    return BargeInParams(word_delay_s=(config.stt_delay_ms + config.stt_jitter_ms / 2) / 1000)


def barge_in_filters(
    rec: Recording,
    n_samples: int,
    clock: VirtualClock,
    config: ReplayConfig,
    *,
    stream: bool = False,
) -> tuple[BargeInController, list[FrameProcessor], str]:
    """The barge-in policy and the echo gate in front of the VAD, and what
    the echo filter's reference was: "agent.wav", "missing" (transcript
    check only) or "off" (``filters=False``: the raw VAD baseline).

    ``stream``: agent.wav is read in blocks as the replay reaches it (a
    :class:`~turnkit.replay.reference.ReferenceFeeder` in front of the
    gate; memory flat with the call's length) instead of whole; the gate is
    then the last processor of the list, not the first."""
    if not config.filters:
        return BargeInController.raw_vad(clock), [], "off"
    policy = BargeInController(
        clock, language=rec.manifest.language, params=barge_in_params(config)
    )
    if rec.agent_path is None:
        return policy, [], "missing"
    if stream:
        echo = EchoFilter(rate=SAMPLE_RATE, frame_samples=512)
        feeder = ReferenceFeeder(echo, rec.agent_path, n_samples, SAMPLE_RATE)
        return policy, [feeder, EchoGateProcessor(echo)], "agent.wav"
    # The recorded agent's audio is what the loudspeaker played: the echo
    # in caller.wav is of it, whatever the replayed agent says.
    ref = align_reference(
        read_wav(rec.agent_path, SAMPLE_RATE), SAMPLE_RATE, n_samples, name=str(rec.agent_path)
    )
    echo = EchoFilter(rate=SAMPLE_RATE, frame_samples=512)
    echo.set_reference(ref)
    return policy, [EchoGateProcessor(echo)], "agent.wav"


def replay_vad_params(config: ReplayConfig) -> VADParams:
    """The session VAD's settings (``--vad-*``)."""
    return VADParams(
        threshold=config.vad_threshold, start_ms=config.vad_start_ms, stop_ms=config.vad_stop_ms
    )


def segmented_p99_ms(config: ReplayConfig) -> float:
    """The longest a segmented recogniser's words take after a run of
    speech ends (the VAD's close, the delay, the jitter, a frame's slack),
    as a host running one tells its detector (Pipecat: the STT's
    ``STTMetadataFrame``)."""
    return config.vad_stop_ms + config.stt_delay_ms + config.stt_jitter_ms + SEGMENT_MARGIN_MS


def recogniser_runs(rec: Recording, config: ReplayConfig) -> list[SpeechRun]:
    """The runs of speech a segmented recogniser writes whole: those the
    session's VAD hears behind the same echo filter (the example Pipecat
    agent's Whisper is fed that VAD's segments), run ahead over the same
    frames, so every host's replay closes a run where the live VAD would."""
    key = ("recogniser_runs", replay_vad_params(config), config.filters)
    if key not in rec.derived:
        _, gate, _ = barge_in_filters(rec, rec.caller_samples(SAMPLE_RATE), VirtualClock(), config)
        echo = next((p.echo for p in gate if isinstance(p, EchoGateProcessor)), None)
        rec.derived[key] = vad_runs(rec, replay_vad_params(config), echo)
    return list(rec.derived[key])


async def replay_agent(
    rec: Recording,
    clock: VirtualClock,
    barge_in: BargeInController,
    llm: TTFTSource,
    rng: random.Random,
    config: ReplayConfig,
    count_compute: bool,
) -> tuple[SimulatedAgent, ToolFigures | None]:
    """The replay's reply path: :class:`Responder` (eager drafts with
    ``config.eager``; the recording's tools through a :class:`ToolGate`
    and a filler scheduler, where it has ``tool_call`` events; history
    through the agent's playback cursor) on the simulated engine, played by
    a :class:`SimulatedAgent`. Returns the agent and, for a call with
    tools, what the tool figures are read from."""
    planner = LabelPlanner(rec, config.default_reply_s)
    engine = SimulatedEngine(clock, planner, llm, rec.tool_calls)
    cursor = PlaybackCursor(clock)
    agent = SimulatedAgent(
        clock,
        planner,
        barge_in,
        engine,
        LatencyModel.parse(config.tts_ttfb_ms),
        rng,
        count_compute=count_compute,
        cursor=cursor,
        preemptive_tts=config.eager and config.preemptive_tts,
    )
    tool_gate = fillers = figures = None
    if rec.tool_calls:
        log = ToolLog()
        tool_gate = ToolGate(replay_tools(rec, clock, log), clock, session_id=rec.id)
        fillers = await replay_fillers(clock, agent.on_filler_audio)
        figures = ToolFigures(
            tool_gate, log, fillers, turn_ends=[t.end for t in rec.caller_turns]
        )
    agent.responder = Responder(
        engine,
        clock,
        emit=agent.on_llm_text,
        system_prompt=SYSTEM_PROMPT,
        # The drafter knows the engine's first-token time (its low end), as
        # a drafting host tells it: commits wait for a draft's first token,
        # or its first audio where the TTS renders the draft ahead.
        drafter=EagerDrafter(
            clock,
            # (A live engine's first tokens are its own, unknown here: no hold.)
            DraftParams(
                first_token_ms=LatencyModel.parse(config.llm_ttft_ms).percentile(0.05)
                if config.draft_hold and config.llm_url is None
                else 0.0,
                first_audio_ms=LatencyModel.parse(config.tts_ttfb_ms).percentile(0.05)
                if config.preemptive_tts
                else 0.0,
            ),
        )
        if config.eager
        else None,
        gate=tool_gate,
        fillers=fillers,
        cursor=cursor,
        # Greedy: a live engine (--llm-url) gives the same reply to the same
        # prompt, so a replay repeats and an A/B compares detectors on the
        # same replies (sampled at 0.7, a short reply the caller heard whole
        # left a barge-in test nothing to cut, now and then).
        params=ResponderParams(temperature=0.0),
    )
    return agent, figures


async def replay_call(
    rec: Recording,
    detector_spec: str,
    config: ReplayConfig,
    observe: Callable[[SimulatedAgent], None] | None = None,
) -> CallScore:
    """Replay one call through one detector and score it. ``observe`` is
    handed the agent (its Responder, engine and cursor) once the call has
    run, before it is scored."""
    t0 = time.perf_counter()
    live_latency = _live_latency(rec) if config.latency_from_live else None
    if live_latency is not None:
        # The host's figure holds all it spent between its decision and its
        # audio; the replay adds its own decision time (compute included).
        config = config.model_copy(
            update={"llm_ttft_ms": f"{live_latency:.1f}", "tts_ttfb_ms": "0"}
        )
    n_samples = rec.caller_samples(SAMPLE_RATE)  # the audio streams in blocks below
    # A live engine: the clock holds while the replay waits for its tokens.
    clock = VirtualClock() if config.llm_url is None else HeldClock()
    detector = create_detector(detector_spec, clock)
    compute = config.compute if config.count_compute else "none"
    detector.set_compute(compute)
    runs = None
    if config.stt == "segmented":
        detector.set_recogniser("segmented", segmented_p99_ms(config))
        runs = recogniser_runs(rec, config)
    vad = VADAnalyzer(params=replay_vad_params(config))
    rng = random.Random(call_seed(config, rec.id, detector_spec))
    model_ttft = ModelTTFT(LatencyModel.parse(config.llm_ttft_ms), rng)
    llm: TTFTSource = (
        model_ttft
        if config.llm_url is None
        else LiveEngine(config.llm_url, model_ttft, model=config.llm_model)
    )
    barge_in, gate, echo_reference = barge_in_filters(rec, n_samples, clock, config, stream=True)
    # The call's one audio timeline: the echo filter (if any) and the VAD on
    # the virtual clock, which this loop moves to each frame's end; the
    # agent.wav feeder stays in front of it.
    echo = next((p.echo for p in gate if isinstance(p, EchoGateProcessor)), None)
    timeline = AudioTimeline(clock, echo=echo, vad=vad)
    timeline.attach(detector)
    if rec.caller_rate is not None:
        timeline.set_source_rate(rec.caller_rate)
    agent, tools = await replay_agent(rec, clock, barge_in, llm, rng, config, compute != "none")
    detector.attach_drafter(agent._r().drafter)
    pipeline = Pipeline(
        [
            *(p for p in gate if not isinstance(p, EchoGateProcessor)),
            TimelineProcessor(timeline),
            OracleTranscriber(
                oracle_words(rec),
                config.stt_delay_ms / 1000,
                config.stt_jitter_ms / 1000,
                # One draw per call, the same for every detector: an A/B
                # compares them on the same recogniser behaviour.
                seed=call_seed(config, rec.id, "stt"),
                segmented=config.stt == "segmented",
                close_s=config.vad_stop_ms / 1000,
                runs=runs,
            ),
            TurnDetectorProcessor(detector),
            agent,
            CollectSink(),
        ]
    )
    sink = pipeline.processors[-1]
    assert isinstance(sink, CollectSink)
    await pipeline.start()
    try:
        # Start and end frames go through in this task, as the audio does:
        # queued, a processor's task would settle the loop against this
        # one's wait_idle, each keeping the other's wake-up ready (a
        # thousand idle rounds each, until settle gives up).
        await pipeline.queue_frame(StartFrame(sample_rate=SAMPLE_RATE))
        await pipeline.wait_idle()
        n = FRAME_SAMPLES
        # On the virtual clock nothing outside the event loop's ready queue
        # (no socket, no thread) acts at an instant: once a frame has been
        # handed through with nothing left ready and every processor idle,
        # it has had all its effects, and wait_idle's settling round trip
        # (an event-loop iteration per 32 ms frame) is skipped. A live
        # engine's tokens come from a socket: then every frame waits.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        quick = config.llm_url is None and ready is not None
        procs = pipeline.processors
        for start, chunk in _line_frames(rec, n, config.timeout_s):
            at = start / SAMPLE_RATE
            # A frame is available once its last sample has arrived.
            await clock.advance_to(at + n / SAMPLE_RATE)
            await pipeline.queue_frame(AudioInFrame(at=at, audio=chunk, sample_rate=SAMPLE_RATE))
            if not (quick and not ready and all(p.idle for p in procs)):
                await pipeline.wait_idle()
            sink.frames.clear()  # nothing downstream reads them; keep memory flat
        # Let replies that are due or playing finish.
        await clock.advance_to(max(clock.now(), rec.duration) + config.timeout_s + 60.0)
        await pipeline.queue_frame(EndFrame(at=clock.now()))
        await pipeline.wait_idle()
    finally:
        await pipeline.stop()
        await agent._r().aclose()
        await llm.aclose()
    if observe is not None:
        observe(agent)
    live = live_figures(rec, agent, llm) if isinstance(llm, LiveEngine) else None
    responder = agent._r()
    drafter = responder.drafter
    score = score_call(
        rec,
        agent.replies,
        timeout_s=config.timeout_s,
        grace_s=config.grace_s,
        wall_seconds=time.perf_counter() - t0,
        llm_requests=agent.llm_requests,
        drafts=None
        if drafter is None
        else {
            "started": drafter.stats.started,
            "used": drafter.stats.used,
            "cancelled": drafter.stats.cancelled,
        },
        live_llm=live,
        ignored_decisions=agent.ignored_ends,
        tools=tools.figures() if tools is not None else None,
    )
    score.echo_reference = echo_reference
    score.live_agreement = _live_agreement(rec, detector_spec, agent)
    score.live_latency_ms = live_latency
    return score


def _live_latency(rec: Recording) -> float | None:
    """The median of the live host's commit-to-audio times for this call
    (None: not recorded live, or no reply reached its audio)."""
    got = live_reply_latencies_ms(rec)
    return round(statistics.median(got), 1) if got else None


def _live_agreement(rec: Recording, spec: str, agent: SimulatedAgent) -> LiveAgreement | None:
    """The replay's decisions against those the live host's same detector
    recorded (:mod:`turnkit.replay.live`), over the recorded audio only."""
    name = agent.decisions[0].detector if agent.decisions else spec
    live = live_decisions(rec, name)
    if live is None:
        return None
    return agreement(live, [d.at for d in agent.decisions if d.at <= rec.duration + 1e-6])


def open_line_until(rec: Recording, timeout_s: float) -> float:
    """Until when (seconds on the call's timeline) a replay host feeds the
    caller's line: to the end of caller.wav, and on in silence to the last
    caller turn's end + ``timeout_s`` where the file stops before that
    (the line stays open after a recording ends; nothing later can be
    scored). Every host replaying a recording should feed this far, or
    its last turn is never judged (see :func:`_line_frames`)."""
    ends = [t.end for t in rec.caller_turns]
    return max(rec.duration, max(ends) + timeout_s) if ends else rec.duration


def _line_frames(rec: Recording, n: int, timeout_s: float) -> Iterator[tuple[int, np.ndarray]]:
    """The caller's frames, then silence until ``timeout_s`` past the last
    caller turn's end where the file stops before that: the line stays
    open after the recording ends, as it does in a call. A recording cut
    (or a caller who hangs up) a moment after the last word must still let
    the pause run its wait: without frames no pause is ever judged, and the
    last turn was scored missed whatever the detector (a real call's last
    turn, 50 ms of tail; two demo calls' last turns for silence-800)."""
    end = 0
    for start, chunk in rec.caller_frames(SAMPLE_RATE, n):
        end = start + n
        yield start, chunk
    stop = math.ceil(open_line_until(rec, timeout_s) * SAMPLE_RATE)
    silence = np.zeros(n, dtype=np.float32)
    while end < stop:
        yield end, silence.copy()
        end += n


def live_figures(rec: Recording, agent: SimulatedAgent, live: LiveEngine) -> dict[str, Any]:
    """What the live engine did in one call (``live_llm`` in the JSON).

    Call level: requests sent, errors (each fell back to the latency model),
    every measured TTFT (ms), deltas streamed, streams aborted on the engine
    (closed while it still generated), drafts discarded and how many of
    them were aborted mid-stream. ``turns``: one row per reply the agent
    made (a confirmed turn end): the caller turn it answers, the engine's
    reply text (what the Responder emitted and the history keeps, cut to
    ``heard_text`` when the reply was stopped), the recorded reply text, its
    request's TTFT and the deltas the engine streamed for it, whether the
    engine finished it or it was aborted, and the drafts discarded since the
    previous reply."""
    engine = agent.engine
    r_ids = {r.id for r in agent.replies}
    reqs = engine.requests
    discarded = [
        q for q in reqs if q.kind == "text" and q.reply_id is not None and q.reply_id not in r_ids
    ]

    def row(prev_id: int, reply: Reply) -> dict[str, Any]:
        mine = [q for q in reqs if q.reply_id == reply.id and q.kind == "text"]
        q = mine[-1] if mine else None
        lv = q.live if q is not None else None
        drafts = [d for d in discarded if prev_id < (d.reply_id or 0) < reply.id]
        heard = None
        said = ""  # what the Responder emitted (the cursor has it): the reply
        if reply.id in agent.cursor:
            said = agent.cursor.reply(reply.id).text
            if reply.stop_reason not in (None, "completed"):
                h = agent.cursor.heard(reply.id)
                heard = h.text_full[: h.cut].strip()
        return {
            "call": rec.id,
            "turn": reply.turn,
            "reply_id": reply.id,
            "decision_at": round(reply.decision_at, 4),
            "reply_text": said,
            "recorded_text": agent.planner.reply_text(reply.turn, reply.asked_at),
            "heard_text": heard,
            "ttft_ms": None if lv is None or lv.ttft_ms is None else round(lv.ttft_ms, 3),
            "tokens": 0 if q is None else q.tokens,
            "engine_finished": lv is not None and lv.finished,
            "aborted": lv is not None and lv.aborted,
            "fallback": q is not None and q.fallback,
            "drafted": reply.drafted,
            "cancelled_drafts": len(drafts),
            "aborted_drafts": sum(1 for d in drafts if d.live is not None and d.live.aborted),
            "stop_reason": reply.stop_reason,
        }

    turns = []
    prev = 0
    for reply in agent.replies:
        turns.append(row(prev, reply))
        prev = reply.id
    return {
        "requests": live.requests,
        "errors": len(live.errors),
        "ttft_ms": [round(x, 3) for x in live.measured_ms],
        "tokens": sum(x.tokens for x in live.log if x.kind == "text"),
        "aborted": live.aborted,
        "drafts_cancelled": len(discarded),
        "drafts_aborted": sum(1 for d in discarded if d.live is not None and d.live.aborted),
        "turns": turns,
    }


@dataclass
class CallFailure:
    path: str
    error: str


class ReplayInterrupted(SystemExit):
    """The batch was stopped by SIGTERM (SIGINT raises ``KeyboardInterrupt``);
    every worker process has been ended when this is raised. A
    ``SystemExit`` (code 128 + the signal), so that no ``except Exception``
    on the way takes it for a failed call, asyncio lets it out of the event
    loop from whichever task it lands in, and uncaught it still exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _replay_job(
    path: str, detectors: list[str], config: ReplayConfig
) -> tuple[str, list[dict] | CallFailure, list[str]]:
    """Worker entry: one call through every detector (the audio is read once
    per detector, in blocks), and the call's warnings. Never raises for a
    bad call: anything that goes wrong is that call's :class:`CallFailure`,
    including an exception a pipeline processor survived (the score would
    otherwise be computed from a half-run pipeline)."""
    try:
        rec = load_recording(Path(path))
    except RecordingError as exc:
        return path, CallFailure(path, str(exc)), []
    except Exception as exc:  # load_recording's own net missed it: still one call
        log.debug("loading %s failed", path, exc_info=True)
        return (
            path,
            CallFailure(path, f"{path}: cannot load: {type(exc).__name__}: {_one_line(exc)}"),
            [],
        )
    out: list[dict] = []
    try:
        for spec in detectors:
            with collect_errors() as errors:
                score = _run_call(replay_call(rec, spec, config))
            if errors:
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                return (
                    path,
                    CallFailure(path, f"{path}: replay with {spec} failed: {errors[0]}{more}"),
                    list(rec.warnings),
                )
            out.append(score.to_dict())
    except (AudioError, RecordingError, DetectorSpecError) as exc:
        return path, CallFailure(path, _one_line(exc)), list(rec.warnings)
    except (Exception, RecursionError) as exc:  # one broken call must not sink the batch
        log.debug("replay of %s failed", path, exc_info=True)
        return (
            path,
            CallFailure(path, f"{path}: replay failed: {type(exc).__name__}: {_one_line(exc)}"),
            list(rec.warnings),
        )
    return path, out, list(rec.warnings)


def _worker_init() -> None:
    # Each worker is one core's worth of work; keep numeric libraries from
    # spawning their own thread pools on top.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    logging.basicConfig(level=logging.ERROR)
    # Ctrl-C reaches the whole process group: the main process ends the
    # workers (a worker interrupted inside the pool's queue code can
    # deadlock it). SIGTERM keeps its default: die at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: SIGTERM this worker when the process that started it dies,
    even by SIGKILL, so that no worker outlives its batch."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent was already gone
        os._exit(1)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """In the main thread, turn SIGTERM into :class:`ReplayInterrupted` so
    that the batch ends its workers before the process goes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        loop = asyncio.events._get_running_loop()
        if loop is None:
            raise ReplayInterrupted(signum)
        # Raised here, it would land in whichever task is running (a reply
        # task, say), which asyncio then reports as "never retrieved" with a
        # traceback. Cancel the call's tasks instead; _replay_job raises it
        # once asyncio.run has returned.
        _STOP.append(signum)
        loop.call_soon_threadsafe(_cancel_all, loop)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _STOP.clear()


# SIGTERMs that arrived while a one-process replay's event loop ran.
_STOP: list[int] = []


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _run_call(coro: Any) -> Any:
    """``asyncio.run`` that turns a SIGTERM taken inside the loop (see
    :func:`_sigterm_raises`) into :class:`ReplayInterrupted` after the loop
    has closed."""
    try:
        result = asyncio.run(coro)
    except asyncio.CancelledError:
        if _STOP:
            raise ReplayInterrupted(_STOP[0]) from None
        raise
    if _STOP:
        raise ReplayInterrupted(_STOP[0])
    return result


class _Flag:
    """A signal that arrived while the pool ran, raised where it is safe."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def check(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise ReplayInterrupted(self.signum)


@contextlib.contextmanager
def _signals_flagged() -> Iterator[_Flag]:
    """In the main thread, SIGINT and SIGTERM only set a flag (see
    :meth:`_Flag.check`) while the pool is waited on."""
    flag = _Flag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, _frame: object) -> None:
        flag.signum = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _end_workers(pool: ProcessPoolExecutor, grace_s: float = 2.0) -> None:
    """Stop a pool now: cancel what has not started, SIGTERM every worker,
    SIGKILL what is still there after ``grace_s``."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    # shutdown() drops the pool's reference to its manager thread: take it first.
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        with contextlib.suppress(Exception):
            if p.is_alive():
                p.kill()
                p.join(1.0)
    # The pool's manager thread closes its wake-up pipe as it ends; at exit,
    # concurrent.futures writes to that pipe unless it is closed already, and
    # a manager still ending races that write ("Bad file descriptor", a
    # traceback on stderr after a clean stop). Its workers are gone, so it
    # ends now: wait for it.
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(max(grace_s, 10.0))


def _run_pool(
    jobs: list[str],
    detectors: list[str],
    config: ReplayConfig,
    workers: int,
    broken: list[str],
) -> Iterator[tuple[str, list[dict] | CallFailure, list[str]]]:
    """One pool over ``jobs``; the jobs lost to a worker that died (killed,
    out of memory) go to ``broken`` instead of being yielded."""
    ctx = get_context("spawn")  # onnxruntime sessions must not cross a fork
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)), mp_context=ctx, initializer=_worker_init
    )
    try:
        # Workers start on submit. Started with SIGINT ignored, they keep
        # ignoring it from their first instruction (a Ctrl-C to the process
        # group during their imports would print a traceback each).
        with _sigint_ignored():
            futures = {pool.submit(_replay_job, p, detectors, config): p for p in jobs}
        waiting = set(futures)
        with _signals_flagged() as stop:
            while waiting:
                # A signal only sets a flag; it is acted on here, between
                # waits: an exception raised inside the pool's own locking
                # could leave a lock held and hang the shutdown for good.
                done, waiting = wait(waiting, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    p = futures[fut]
                    try:
                        yield fut.result()
                    except BrokenProcessPool:
                        broken.append(p)
                    except Exception as exc:  # e.g. a result that did not pickle
                        why = f"{type(exc).__name__}: {_one_line(exc)}"
                        yield (p, CallFailure(p, f"{p}: replay failed: {why}"), [])
                    stop.check()
                stop.check()
    except BaseException:
        # Ctrl-C, SIGTERM, or the consumer stopped iterating: no worker
        # may outlive the batch.
        _end_workers(pool)
        raise
    pool.shutdown(wait=True)


def replay_many(
    paths: list[Path],
    detectors: list[str],
    config: ReplayConfig,
    workers: int,
    warnings: list[dict[str, str]] | None = None,
) -> Iterator[tuple[str, list[CallScore] | CallFailure]]:
    """Replay every call through every detector; yields per call as done
    (in completion order with several workers). Each call's warnings
    (:attr:`Recording.warnings`) are appended to ``warnings`` as
    ``{"path", "warning"}``.

    Every call is yielded once, as scores or as a :class:`CallFailure`: a
    worker that dies takes only its own call with it (the others are run
    again, and a call that kills a worker twice is run alone, then failed).
    SIGTERM raises :class:`ReplayInterrupted` and Ctrl-C
    ``KeyboardInterrupt``, after every worker has been ended."""
    jobs = [str(p) for p in paths]
    sink = warnings if warnings is not None else []

    def unpack(path: str, res: list[dict] | CallFailure, notes: list[str]) -> tuple[str, Any]:
        sink.extend({"path": path, "warning": w} for w in notes)
        return _unpack(path, res)

    with _sigterm_raises():
        if workers <= 1 or len(jobs) <= 1:
            for p in jobs:
                yield unpack(*_replay_job(p, detectors, config))
            return
        tries: dict[str, int] = {}
        pending = jobs
        while pending:
            broken: list[str] = []
            shared = [p for p in pending if tries.get(p, 0) < 2]
            for item in _run_pool(shared, detectors, config, workers, broken):
                yield unpack(*item)
            for p in (p for p in pending if tries.get(p, 0) >= 2):
                lost: list[str] = []
                for item in _run_pool([p], detectors, config, 1, lost):
                    yield unpack(*item)
                for q in lost:
                    yield (
                        q,
                        CallFailure(
                            q,
                            f"{q}: the worker process replaying it died (killed, or out of memory)",
                        ),
                    )
            for p in broken:
                tries[p] = tries.get(p, 0) + 1
            pending = broken


def _unpack(path: str, res: list[dict] | CallFailure) -> tuple[str, list[CallScore] | CallFailure]:
    if isinstance(res, CallFailure):
        return path, res
    return path, [CallScore.from_dict(d) for d in res]
