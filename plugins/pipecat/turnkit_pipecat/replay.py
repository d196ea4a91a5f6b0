"""Replaying a recorded call through a real Pipecat pipeline, offline.

The call's caller audio goes in as ``InputAudioRawFrame`` chunks of 32 ms
(turnkit's VAD frame, so the detector decides at the same instants as in
``turnkit replay``), with the manifest's words as Pipecat transcription
frames when they have been spoken (the same oracle ``turnkit replay`` uses),
into Pipecat's own ``LLMUserAggregator`` running the turnkit strategies. No
transport, no network: the LLM and TTS are the replay's latency model,
hosted by :class:`LatencyModelAgent` — turnkit's simulated agent, fed the
turn ends *Pipecat* emitted (``UserStoppedSpeakingFrame``) — and the call is
scored by turnkit's metrics. Same labels, same latency model, same scorer:
what differs from ``turnkit replay`` is the decision path, which is
Pipecat's.

Example::

    score = await replay_in_pipecat(load_recording(path), "fused", ReplayConfig(preemptive_tts=False))
    for turn in score.turns:
        print(turn.turn, turn.response_ms)
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable

import numpy as np
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    STTMetadataFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from turnkit.audio import SAMPLE_RATE
from turnkit.audio.wav import to_pcm16
from turnkit.barge_in.controller import BargeInController
from turnkit.clock import VirtualClock
from turnkit.detectors.endpointing import ComputeMode
from turnkit.frames import (
    AgentTextFrame,
    AudioInFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
)
from turnkit.frames import Frame as TurnkitFrame
from turnkit.pipeline import CollectSink
from turnkit.pipeline import FrameDirection as TurnkitDirection
from turnkit.pipeline import FrameProcessor as TurnkitProcessor
from turnkit.pipeline import Pipeline as TurnkitPipeline
from turnkit.replay.agent import SimulatedAgent
from turnkit.replay.latency import LatencyModel
from turnkit.replay.llm_source import ModelTTFT
from turnkit.replay.metrics import CallScore, score_call
from turnkit.replay.oracle import SpeechRun, oracle_words, schedule, vad_runs
from turnkit.replay.recording import Recording
from turnkit.replay.simulator import (
    ReplayConfig,
    barge_in_filters,
    call_seed,
    open_line_until,
    recogniser_runs,
    replay_agent,
    replay_vad_params,
    segmented_p99_ms,
)

from turnkit_pipecat.engine import TurnkitTurnEngine
from turnkit_pipecat.strategies import TurnkitUserTurnStartStrategy, TurnkitUserTurnStopStrategy

__all__ = [
    "LatencyModelAgent",
    "feed_frames",
    "recording_frames",
    "replay_frames",
    "replay_in_pipecat",
    "replay_user_aggregator",
    "run_frames",
]


def _compute(config: ReplayConfig) -> ComputeMode:
    return config.compute if config.count_compute else "none"


def recording_frames(
    rec: Recording,
    *,
    chunk_samples: int = 512,
    stt_delay_s: float = 0.0,
    until_s: float | None = None,
    stt_jitter_s: float = 0.0,
    seed: int = 0,
    segmented: bool = False,
    close_s: float = 0.0,
    runs: list[SpeechRun] | None = None,
) -> list[Frame]:
    """The call as Pipecat would see it from a transport and an STT: 16-bit
    audio chunks at 16 kHz (the pipeline's input rate: a telephone
    serializer resamples an 8 kHz line to it, so the engine does not learn
    the line's rate as turnkit replay's detector does), and after the chunk
    in which a word is due (:func:`turnkit.replay.oracle.schedule`: its end
    plus ``stt_delay_s`` and up to ``stt_jitter_s``), an interim transcript
    (a final one for the last word before a pause). Word times and the
    utterance id ride in ``result`` (see :meth:`TurnkitTurnEngine._transcript`).
    ``segmented`` (Whisper behind a VAD): each run of speech the VAD hears
    (``runs``: :func:`turnkit.replay.simulator.recogniser_runs`, or by
    default :func:`turnkit.replay.oracle.vad_runs` with no echo filter) as
    one final transcript of that run's words once the VAD closed it and the
    delay has passed, with the utterance id and no word times (the engine
    stamps it with its arrival), as ``turnkit replay --stt segmented``
    writes it; ``close_s`` (the VAD's stop time) only for words no run
    holds. With ``until_s``, silence follows the file to that time (the
    line stays open after the recording ends:
    :func:`turnkit.replay.simulator.open_line_until`)."""
    audio = rec.caller_audio(SAMPLE_RATE)
    pcm = to_pcm16(audio)  # the same levels turnkit replay reads (on_pcm16_grid)
    if until_s is not None and until_s * SAMPLE_RATE > len(pcm):
        pcm = np.pad(pcm, (0, math.ceil(until_s * SAMPLE_RATE) - len(pcm)))
    words, due = schedule(
        oracle_words(rec),
        stt_delay_s,
        stt_jitter_s,
        seed,
        segmented=segmented,
        close_s=close_s,
        runs=(runs if runs is not None else vad_runs(rec)) if segmented else None,
    )
    frames: list[Frame] = []
    seg_words: dict[int, list[tuple[str, float, float]]] = {}
    wi = 0
    for i in range(0, len(pcm), chunk_samples):
        chunk = pcm[i : i + chunk_samples]
        if len(chunk) < chunk_samples:
            chunk = np.pad(chunk, (0, chunk_samples - len(chunk)))
        frames.append(
            InputAudioRawFrame(audio=chunk.tobytes(), sample_rate=SAMPLE_RATE, num_channels=1)
        )
        end = (i + chunk_samples) / SAMPLE_RATE
        while wi < len(words) and due[wi] <= end + 1e-9:
            w = words[wi]
            wi += 1
            pending = seg_words.setdefault(w.segment, [])
            pending.append((w.text, w.start, w.end))
            if segmented:
                more = wi < len(words) and due[wi] <= end + 1e-9
                if not more or words[wi].segment != w.segment:
                    # The run written whole (an utterance's words due in
                    # one chunk go out together, as turnkit replay's oracle
                    # sends them): its text only (the engine joins a turn's
                    # finals), no word times.
                    frames.append(
                        TranscriptionFrame(
                            text=" ".join(p[0] for p in pending),
                            user_id="caller",
                            timestamp="",
                            result={"segment": w.segment},
                        )
                    )
                    pending.clear()
                continue
            # Each carries the words of its span so far and the utterance
            # (labelled turn or backchannel) they belong to, as the oracle
            # transcriber of turnkit replay gives them.
            result = {"spoken_until": w.end, "words": list(pending), "segment": w.segment}
            if w.last_in_span:
                frames.append(
                    TranscriptionFrame(
                        text=" ".join(p[0] for p in pending),
                        user_id="caller",
                        timestamp="",
                        result=result,
                    )
                )
                pending.clear()
            else:
                frames.append(
                    InterimTranscriptionFrame(
                        text=" ".join(p[0] for p in pending),
                        user_id="caller",
                        timestamp="",
                        result=result,
                    )
                )
    return frames


async def feed_frames(
    task: PipelineTask,
    engine: TurnkitTurnEngine,
    frames: list[Frame],
    agent: LatencyModelAgent | None = None,
) -> None:
    """Queue ``frames`` in order, waiting after each transcript until the
    engine heard it (audio frames are system frames and would overtake it),
    and, with ``agent``, after each audio chunk until the agent has played
    its part of that instant (the bot's words reach the detector in time, as
    in ``turnkit replay``'s lock step)."""
    for f in frames:
        await task.queue_frame(f)
        if isinstance(f, TranscriptionFrame | InterimTranscriptionFrame):
            await engine.wait_fed(f)
        elif agent is not None and isinstance(f, InputAudioRawFrame):
            await agent.wait_seen(f)


def replay_user_aggregator(
    context: LLMContext,
    start: TurnkitUserTurnStartStrategy,
    stop: TurnkitUserTurnStopStrategy,
) -> LLMUserAggregator:
    """Pipecat's user aggregator running the turnkit strategies, for a
    recorded call fed faster than real time: Pipecat's wall-clock watchdogs
    (the user turn's stop timeout, the audio idle timeout) would fire on the
    compressed time, so they are off."""
    return LLMUserAggregator(
        context,
        params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(start=[start], stop=[stop]),
            user_turn_stop_timeout=3600.0,
            audio_idle_timeout=0,
        ),
    )


async def run_frames(
    processors: list[FrameProcessor],
    engine: TurnkitTurnEngine,
    frames: list[Frame],
    agent: LatencyModelAgent | None = None,
) -> None:
    """Run ``processors`` as a Pipecat pipeline over ``frames`` (a recorded
    call: :func:`recording_frames`), fed in lock step (:func:`feed_frames`),
    then ended; returns once the pipeline has stopped."""
    task = PipelineTask(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=SAMPLE_RATE),
        cancel_on_idle_timeout=False,
    )

    async def feed() -> None:
        await feed_frames(task, engine, frames, agent)
        await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    await asyncio.gather(runner.run(), feed())


class _AgentTextTap(TurnkitProcessor):
    """Hands the simulated agent's reply text (sent upstream) to a callback."""

    def __init__(self, fn: Callable[[str], None]) -> None:
        super().__init__()
        self.fn = fn

    async def process_frame(self, frame: TurnkitFrame, direction: TurnkitDirection) -> None:
        if isinstance(frame, AgentTextFrame):
            self.fn(frame.text)
        await self.push_frame(frame, direction)


class LatencyModelAgent(FrameProcessor):
    """Stands in for LLM + TTS after the user aggregator: turnkit's
    :class:`~turnkit.replay.agent.SimulatedAgent` on the audio's clock.

    Each caller chunk hands the agent the very 32 ms frames the turn engine
    analysed (echo-gated, with the engine's VAD verdicts: one VAD, as in
    ``turnkit replay``), advancing its clock; each
    ``UserStoppedSpeakingFrame`` that Pipecat emits is a committed turn end
    at that instant, its model cost taken from the engine's decision.
    ``barge_in`` is the policy the agent stops its reply with (the same one
    ``turnkit replay`` builds for the call).
    """

    def __init__(
        self,
        engine: TurnkitTurnEngine,
        rec: Recording,
        detector_spec: str,
        config: ReplayConfig,
        barge_in: BargeInController | None = None,
        clock: VirtualClock | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        engine.keep_audio_steps = True
        self.clock = clock if clock is not None else VirtualClock()
        self._rec, self._config = rec, config
        self._rng = random.Random(call_seed(config, rec.id, detector_spec))
        self._barge_in = barge_in if barge_in is not None else BargeInController.raw_vad(self.clock)
        # Built in start_sim: turnkit replay's own reply path (Responder over
        # the simulated engine, played by SimulatedAgent), not a copy of it.
        self.agent: SimulatedAgent | None = None
        self.sim: TurnkitPipeline | None = None
        self.context: LLMContext | None = None
        # What the engine heard and decided, in the order it did: its 32 ms
        # caller frames, whole-turn transcripts (the barge-in controller's
        # words, as the oracle's are in turnkit replay) and its eager /
        # resumed signals (the Responder's drafts). Handed to the agent in
        # that order as the audio reaches it, so the agent hears exactly
        # the sequence turnkit replay's pipeline gives it.
        self._heard: list[AudioInFrame | TranscriptFrame | TurnEagerFrame | TurnResumedFrame] = []
        engine.on_signal(self._engine_frame)
        self._seen: set[int] = set()
        self._seen_event = asyncio.Event()
        self.stops = 0

    def _engine_frame(self, item: object) -> None:
        if isinstance(item, AudioInFrame | TranscriptFrame | TurnEagerFrame | TurnResumedFrame):
            self._heard.append(item)

    async def _flush_heard(self) -> None:
        """Hand the agent everything the engine heard and signalled so far,
        in order; each caller frame first moves the agent's clock to its end.
        (A turn end is not among them: Pipecat's ``UserStoppedSpeakingFrame``
        is the commit, see :meth:`process_frame`.)"""
        assert self.sim is not None
        heard, self._heard = self._heard, []
        for item in heard:
            if isinstance(item, AudioInFrame):
                await self.clock.advance_to(item.end)
            await self.sim.queue_frame(item)
            await self.sim.wait_idle()
            self.sim.processors[-1].frames.clear()  # type: ignore[attr-defined]

    def _agent_text(self, text: str) -> None:
        # The bot's reply starts playing: its words are the detector's context
        # now (as in turnkit replay) and the assistant turn in Pipecat's context.
        self.engine.set_agent_text(text)
        if self.context is not None and text:
            self.context.add_message({"role": "assistant", "content": text})

    async def wait_seen(self, frame: Frame) -> None:
        while id(frame) not in self._seen:
            self._seen_event.clear()
            await self._seen_event.wait()
        self._seen.discard(id(frame))

    async def start_sim(self) -> None:
        config = self._config
        self.agent, _ = await replay_agent(
            self._rec,
            self.clock,
            self._barge_in,
            ModelTTFT(LatencyModel.parse(config.llm_ttft_ms), self._rng),
            self._rng,
            config,
            count_compute=_compute(config) != "none",
        )
        self.sim = TurnkitPipeline([_AgentTextTap(self._agent_text), self.agent, CollectSink()])
        await self.sim.start()

    async def stop_sim(self, until: float) -> None:
        await self.clock.advance_to(max(self.clock.now(), until))
        await self.sim.wait_idle()
        await self.sim.stop()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame) and direction is FrameDirection.DOWNSTREAM:
            await self.engine.audio_of(frame)  # the engine has framed and judged it
            await self._flush_heard()
            await self.push_frame(frame, direction)
            self._seen.add(id(frame))
            self._seen_event.set()
            return
        elif isinstance(frame, UserStoppedSpeakingFrame):
            await self._flush_heard()
            self.stops += 1
            now = self.clock.now()
            made = [d for d in self.engine.decisions if abs(d.at - now) < 1e-6]
            compute = made[-1].compute_ms if made else 0.0
            reason = made[-1].reason if made else "pipecat"
            await self.sim.queue_frame(TurnEndFrame(at=now, compute_ms=compute, reason=reason))
            await self.sim.wait_idle()
        await self.push_frame(frame, direction)


def replay_frames(rec: Recording, config: ReplayConfig) -> list[Frame]:
    """The caller audio and transcripts ``turnkit replay`` with ``config``
    feeds its detector (the recogniser's delay, jitter and kind; the line
    open after the file as far as the replay keeps it), as frames: what a
    framework host is fed to decide alike."""
    segmented = config.stt == "segmented"
    return recording_frames(
        rec,
        stt_delay_s=config.stt_delay_ms / 1000,
        until_s=open_line_until(rec, config.timeout_s),
        stt_jitter_s=config.stt_jitter_ms / 1000,
        seed=call_seed(config, rec.id, "stt"),
        segmented=segmented,
        close_s=config.vad_stop_ms / 1000,
        runs=recogniser_runs(rec, config) if segmented else None,
    )


async def replay_in_pipecat(
    rec: Recording,
    detector_spec: str,
    config: ReplayConfig | None = None,
    *,
    drafting: bool = False,
) -> CallScore:
    """Replay one call through Pipecat's user aggregator with the turnkit
    strategies and score it exactly as ``turnkit replay`` does. The default
    configuration is ``turnkit replay``'s but ``preemptive_tts``: Pipecat's
    speculation holds the LLM's output, so its TTS starts at the commit."""
    config = config or ReplayConfig(preemptive_tts=False)
    t0 = time.perf_counter()
    engine = TurnkitTurnEngine(
        detector_spec,
        vad_params=replay_vad_params(config),
        # a telephone recording's line rate, as a deployment behind a
        # telephone serializer passes it (the frames come resampled to 16 kHz)
        line_rate=rec.line_rate,
        recogniser=config.stt,  # the STT the frames below stand for
    )
    # The model cost charged to decisions, as turnkit replay charges it.
    engine.detector.set_compute(_compute(config))
    # The same barge-in filters as turnkit replay: the echo filter (reference:
    # the recorded agent.wav) in front of the engine's VAD, the filtered
    # policy in the agent.
    agent_clock = VirtualClock()
    barge_in, gate, echo_reference = barge_in_filters(
        rec, len(rec.caller_audio(SAMPLE_RATE)), agent_clock, config
    )
    if gate:
        engine.echo = gate[0].echo
    context = LLMContext()
    user = replay_user_aggregator(
        context,
        TurnkitUserTurnStartStrategy(engine),
        TurnkitUserTurnStopStrategy(engine, context=context),
    )
    agent = LatencyModelAgent(engine, rec, detector_spec, config, barge_in, agent_clock)
    agent.context = context
    await agent.start_sim()
    # The Responder's drafter (its first-token time set as turnkit replay
    # sets it): the detector's commits wait for its drafts, as there.
    assert agent.agent is not None
    engine.detector.attach_drafter(agent.agent._r().drafter)
    frames = replay_frames(rec, config)
    if config.stt == "segmented":
        # A segmented STT service tells the pipeline how late its words may
        # come, as turnkit replay tells its detector.
        p99_s = segmented_p99_ms(config) / 1000
        frames.insert(0, STTMetadataFrame(service_name="stt", ttfs_p99_latency=p99_s))
    await run_frames([user, agent], engine, frames, agent)
    await agent.stop_sim(max(agent.clock.now(), rec.duration) + config.timeout_s + 60.0)
    score = score_call(
        rec,
        agent.agent.replies,
        timeout_s=config.timeout_s,
        grace_s=config.grace_s,
        wall_seconds=time.perf_counter() - t0,
        llm_requests=agent.agent.llm_requests,
        ignored_decisions=agent.agent.ignored_ends,
    )
    score.echo_reference = echo_reference
    return score
