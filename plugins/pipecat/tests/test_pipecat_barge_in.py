"""Barge-in in Pipecat with turnkit's filters: the start strategy decides
interruptions while the bot speaks (real LLMUserAggregator, corpus audio with
its recorded echo, backchannel, cough and barge-in), and the output tap
feeds the engine's echo filter the bot's played audio."""

from __future__ import annotations

import asyncio

import numpy as np
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    OutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.tests.utils import run_test
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from test_pipecat_plugin import CORPUS
from turnkit.audio.wav import read_wav
from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.replay.recording import load_recording

from turnkit_pipecat import TurnkitTurnEngine, TurnkitUserTurnStartStrategy
from turnkit_pipecat.echo import EchoReferenceTap
from turnkit_pipecat.replay import feed_frames, recording_frames
from turnkit_pipecat.strategies import TurnkitUserTurnStopStrategy

NAME = "account-bargein-07"


def _frames_with_bot(rec) -> list[Frame]:
    """The call's caller audio and words, with the bot speaking (Pipecat's
    BotStarted/Stopped frames) over the recording's first agent turn."""
    agent = rec.agent_turns[0]
    out: list[Frame] = []
    t = 0.0
    started = stopped = False
    for f in recording_frames(rec):
        if isinstance(f, InputAudioRawFrame):
            if not started and t >= agent.start:
                out.append(BotStartedSpeakingFrame())
                started = True
            if started and not stopped and t >= agent.end:
                out.append(BotStoppedSpeakingFrame())
                stopped = True
            t += f.num_frames / f.sample_rate
        out.append(f)
    return out


async def _interruptions(policy_for, echo: bool) -> tuple[TurnkitUserTurnStartStrategy, list]:
    rec = load_recording(CORPUS / NAME)
    filt = None
    if echo:
        n = len(rec.caller_audio(16000))
        filt = EchoFilter()
        filt.set_reference(align_reference(read_wav(rec.agent_path, 16000), 16000, n))
    engine = TurnkitTurnEngine("silence", echo=filt)
    policy: BargeInController = policy_for(engine)
    start = TurnkitUserTurnStartStrategy(engine, barge_in=policy)
    agg = LLMUserAggregator(
        LLMContext(),
        params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(
                start=[start], stop=[TurnkitUserTurnStopStrategy(engine)]
            ),
            user_turn_stop_timeout=3600.0,
            audio_idle_timeout=0,
        ),
    )
    at: list[float] = []
    orig = start._interrupt

    async def spy() -> None:
        at.append(engine.now)
        await orig()

    start._interrupt = spy  # type: ignore[method-assign]
    # Lock step (transcripts are data frames; audio would overtake them).
    task = PipelineTask(
        Pipeline([agg]),
        params=PipelineParams(audio_in_sample_rate=16000),
        cancel_on_idle_timeout=False,
    )

    async def feed() -> None:
        await feed_frames(task, engine, _frames_with_bot(rec))
        await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    await asyncio.gather(runner.run(), feed())
    return start, at


async def test_filtered_barge_in_talks_through_backchannel_echo_and_cough() -> None:
    """With turnkit's echo filter and acknowledgement filter, the bot's
    first reply is interrupted once, by the caller's "Wait, ..." — not by its
    own echo, the "mm-hmm" or the cough; raw VAD barge-in stops it earlier."""
    rec = load_recording(CORPUS / NAME)
    barge = rec.caller_turns[1]
    start, at = await _interruptions(lambda e: BargeInController(e.clock), echo=True)
    assert len(at) == 1, at
    assert start.ignored >= 1  # onsets it talked through
    assert barge.start <= at[0] <= barge.start + 1.0
    raw, raw_at = await _interruptions(lambda e: BargeInController.raw_vad(e.clock), echo=False)
    assert raw_at and raw_at[0] < barge.start  # echo / mm-hmm / cough cut the bot
    # The strategy only executed the controller's actions: each interruption
    # is a stop or a confirm it returned, at that instant.
    for s, times in ((start, at), (raw, raw_at)):
        ends = [t for t, a in s.actions if a in (Action.STOP, Action.CONFIRM)]
        assert ends[: len(times)] == times
    assert {a for _, a in raw.actions} == {Action.STOP}  # the raw baseline never holds


async def test_output_tap_feeds_echo_reference_and_bot_words() -> None:
    engine = TurnkitTurnEngine("silence", echo=EchoFilter())
    words: list[str] = []
    engine.on_bot_words(words.append)
    tone = (0.3 * np.sin(np.arange(4800) * 2 * np.pi * 440 / 24000) * 32767).astype("<i2")
    frames: list[Frame] = [
        BotStartedSpeakingFrame(),
        OutputAudioRawFrame(audio=tone.tobytes(), sample_rate=24000, num_channels=1),
        TTSTextFrame(text="Shall", aggregated_by="word"),
        TTSTextFrame(text="I?", aggregated_by="word"),
    ]
    tap = EchoReferenceTap(engine)
    await run_test(tap, frames_to_send=frames)
    assert engine.echo is not None and engine.echo.has_reference
    assert abs(tap.reference_s - 0.2) < 0.02  # 0.2 s at 24 kHz, resampled to 16 kHz
    ref = engine.echo.reference.read(0, 3200)
    assert np.sqrt(np.mean(ref**2)) > 0.1
    assert words[-1] == "Shall I?"
