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
import hashlib
import logging
import os
import random
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from turnkit.audio.vad import VADAnalyzer, VADParams
from turnkit.audio.wav import AudioError, iter_frames, read_wav
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.barge_in.policy import BargeInPolicy, FilteredBargeIn, VADBargeIn
from turnkit.barge_in.processors import EchoGateProcessor
from turnkit.clock import VirtualClock
from turnkit.detectors.registry import DetectorSpecError, create_detector
from turnkit.drafting.drafter import EagerDrafter
from turnkit.frames import AudioInFrame, EndFrame, StartFrame
from turnkit.pipeline import CollectSink, Pipeline
from turnkit.processors import TurnDetectorProcessor, VADProcessor
from turnkit.replay.agent import SimulatedAgent
from turnkit.replay.latency import LatencyModel
from turnkit.replay.llm_source import LiveTTFT, ModelTTFT, TTFTSource
from turnkit.replay.metrics import CallScore, score_call
from turnkit.replay.oracle import OracleTranscriber, oracle_words
from turnkit.replay.recording import AgentTurn, Recording, RecordingError, load_recording

__all__ = [
    "LabelPlanner",
    "ReplayConfig",
    "barge_in_filters",
    "call_seed",
    "replay_call",
    "replay_many",
]

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
CHARS_PER_SECOND = 15.0


class ReplayConfig(BaseModel):
    """Everything a replay depends on besides the calls and the detector."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm_ttft_ms: str = "350"
    tts_ttfb_ms: str = "150"
    stt_delay_ms: float = Field(0.0, ge=0)
    timeout_s: float = Field(5.0, gt=0, description="no audio this long after a turn's end: missed")
    grace_s: float = Field(
        0.5, ge=0, description="a stop this long after an event's end still counts for it"
    )
    count_compute: bool = True
    eager: bool = Field(False, description="start drafts on eager signals (EagerDrafter)")
    filters: bool = Field(
        True, description="echo + acknowledgement filters for barge-in (False: raw VADBargeIn)"
    )
    llm_url: str | None = Field(
        None, description="live OpenAI-compatible engine for LLM TTFTs instead of the model"
    )
    llm_model: str = ""
    default_reply_s: float = Field(2.0, gt=0)
    seed: int = 0
    vad_threshold: float = Field(0.5, gt=0, lt=1)
    vad_start_ms: float = Field(64.0, ge=0)
    vad_stop_ms: float = Field(96.0, ge=0)


class LabelPlanner:
    """What the recording says about a reply: which caller turn a decision
    answers (the latest one begun by then) and how long the reply plays
    (until the end of the original agent turn after that caller turn; if
    that is already past, or there is none, for its text at 15 characters a
    second, or ``default_reply_s``)."""

    def __init__(self, rec: Recording, default_reply_s: float) -> None:
        self.turns = rec.caller_turns
        self.agent_turns = rec.agent_turns
        self.default_reply_s = default_reply_s

    def turn_for(self, decision_at: float) -> int | None:
        idx = None
        for i, t in enumerate(self.turns):
            if t.start <= decision_at + 1e-9:
                idx = i
        return idx

    def _agent_turn(self, turn: int | None) -> AgentTurn | None:
        if turn is None:
            return None
        t = self.turns[turn]
        nxt = self.turns[turn + 1].start if turn + 1 < len(self.turns) else float("inf")
        return next((a for a in self.agent_turns if t.start < a.start < nxt), None)

    def reply_text(self, turn: int | None) -> str:
        agent = self._agent_turn(turn)
        return agent.text if agent is not None else ""

    def play_until(self, turn: int | None, first_audio_at: float) -> float:
        agent = self._agent_turn(turn)
        if agent is None:
            return first_audio_at + self.default_reply_s
        if agent.end > first_audio_at:
            return agent.end
        text_s = len(agent.text) / CHARS_PER_SECOND
        return first_audio_at + (text_s if text_s > 0 else self.default_reply_s)


def call_seed(config: ReplayConfig, call_id: str, detector: str) -> int:
    digest = hashlib.sha256(f"{config.seed}|{call_id}|{detector}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def barge_in_filters(
    rec: Recording, n_samples: int, clock: VirtualClock, config: ReplayConfig
) -> tuple[BargeInPolicy, list[EchoGateProcessor], str]:
    """The barge-in policy and the echo gate in front of the VAD, and what
    the echo filter's reference was: "agent.wav", "missing" (transcript
    check only) or "off" (``filters=False``: the raw VAD baseline)."""
    if not config.filters:
        return VADBargeIn(clock), [], "off"
    policy = FilteredBargeIn(clock, language=rec.manifest.language)
    if rec.agent_path is None:
        return policy, [], "missing"
    # The recorded agent's audio is what the loudspeaker played: the echo
    # in caller.wav is of it, whatever the replayed agent says.
    ref = align_reference(
        read_wav(rec.agent_path, SAMPLE_RATE), SAMPLE_RATE, n_samples, name=str(rec.agent_path)
    )
    echo = EchoFilter(rate=SAMPLE_RATE, frame_samples=512)
    echo.set_reference(ref)
    return policy, [EchoGateProcessor(echo)], "agent.wav"


async def replay_call(rec: Recording, detector_spec: str, config: ReplayConfig) -> CallScore:
    """Replay one call through one detector and score it."""
    t0 = time.perf_counter()
    audio = rec.caller_audio(SAMPLE_RATE)
    clock = VirtualClock()
    detector = create_detector(detector_spec, clock)
    vad = VADAnalyzer(
        params=VADParams(
            threshold=config.vad_threshold, start_ms=config.vad_start_ms, stop_ms=config.vad_stop_ms
        )
    )
    rng = random.Random(call_seed(config, rec.id, detector_spec))
    model_ttft = ModelTTFT(LatencyModel.parse(config.llm_ttft_ms), rng)
    llm: TTFTSource = (
        model_ttft
        if config.llm_url is None
        else LiveTTFT(config.llm_url, model_ttft, model=config.llm_model)
    )
    barge_in, gate, echo_reference = barge_in_filters(rec, len(audio), clock, config)
    agent = SimulatedAgent(
        clock,
        LabelPlanner(rec, config.default_reply_s),
        barge_in,
        llm,
        LatencyModel.parse(config.tts_ttfb_ms),
        rng,
        count_compute=config.count_compute,
        drafter=EagerDrafter(clock) if config.eager else None,
    )
    pipeline = Pipeline(
        [
            *gate,
            VADProcessor(vad),
            OracleTranscriber(oracle_words(rec), config.stt_delay_ms / 1000),
            TurnDetectorProcessor(detector),
            agent,
            CollectSink(),
        ]
    )
    sink = pipeline.processors[-1]
    assert isinstance(sink, CollectSink)
    await pipeline.start()
    try:
        pipeline.queue_frame_nowait(StartFrame(sample_rate=SAMPLE_RATE))
        await pipeline.wait_idle()
        n = vad.frame_samples
        for start, chunk in iter_frames(audio, n):
            at = start / SAMPLE_RATE
            # A frame is available once its last sample has arrived.
            await clock.advance_to(at + n / SAMPLE_RATE)
            await pipeline.queue_frame(AudioInFrame(at=at, audio=chunk, sample_rate=SAMPLE_RATE))
            await pipeline.wait_idle()
            sink.frames.clear()  # nothing downstream reads them; keep memory flat
        # Let replies that are due or playing finish.
        await clock.advance_to(max(clock.now(), rec.duration) + config.timeout_s + 60.0)
        pipeline.queue_frame_nowait(EndFrame(at=clock.now()))
        await pipeline.wait_idle()
    finally:
        await pipeline.stop()
        await llm.aclose()
    live = None
    if isinstance(llm, LiveTTFT):
        live = {
            "requests": llm.requests,
            "errors": len(llm.errors),
            "ttft_ms": [round(x, 3) for x in llm.measured_ms],
        }
    score = score_call(
        rec,
        agent.replies,
        timeout_s=config.timeout_s,
        grace_s=config.grace_s,
        wall_seconds=time.perf_counter() - t0,
        llm_requests=agent.llm_requests,
        drafts=None
        if agent.drafter is None
        else {
            "started": agent.drafter.stats.started,
            "used": agent.drafter.stats.used,
            "cancelled": agent.drafter.stats.cancelled,
        },
        live_llm=live,
        ignored_decisions=agent.ignored_ends,
    )
    score.echo_reference = echo_reference
    return score


@dataclass
class CallFailure:
    path: str
    error: str


def _replay_job(
    path: str, detectors: list[str], config: ReplayConfig
) -> tuple[str, list[dict] | CallFailure]:
    """Worker entry: one call through every detector (the audio is read once)."""
    try:
        rec = load_recording(Path(path))
    except RecordingError as exc:
        return path, CallFailure(path, str(exc))
    out: list[dict] = []
    try:
        for spec in detectors:
            out.append(asyncio.run(replay_call(rec, spec, config)).to_dict())
    except (AudioError, RecordingError, DetectorSpecError) as exc:
        return path, CallFailure(path, str(exc))
    except Exception as exc:  # one broken call must not sink the batch
        log.debug("replay of %s failed", path, exc_info=True)
        return path, CallFailure(path, f"{path}: replay failed: {type(exc).__name__}: {exc}")
    return path, out


def _worker_init() -> None:
    # Each worker is one core's worth of work; keep numeric libraries from
    # spawning their own thread pools on top.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    logging.basicConfig(level=logging.ERROR)


def replay_many(
    paths: list[Path],
    detectors: list[str],
    config: ReplayConfig,
    workers: int,
) -> Iterator[tuple[str, list[CallScore] | CallFailure]]:
    """Replay every call through every detector; yields per call as done
    (in completion order with several workers)."""
    jobs = [str(p) for p in paths]
    if workers <= 1 or len(jobs) <= 1:
        for p in jobs:
            yield _unpack(*_replay_job(p, detectors, config))
        return
    ctx = get_context("spawn")  # onnxruntime sessions must not cross a fork
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
        futures = [pool.submit(_replay_job, p, detectors, config) for p in jobs]
        for fut in as_completed(futures):
            yield _unpack(*fut.result())


def _unpack(path: str, res: list[dict] | CallFailure) -> tuple[str, list[CallScore] | CallFailure]:
    if isinstance(res, CallFailure):
        return path, res
    return path, [CallScore.from_dict(d) for d in res]
