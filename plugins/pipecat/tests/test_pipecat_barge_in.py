"""Barge-in in Pipecat with turnkit's filters: the start strategy decides
interruptions while the bot speaks (real LLMUserAggregator, corpus audio with
its recorded echo, backchannel, cough and barge-in), and the output tap
feeds the engine's echo filter the bot's played audio."""

from __future__ import annotations

import numpy as np
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
    OutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test
from test_pipecat_plugin import CORPUS
from turnkit.audio.wav import read_wav
from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.replay.recording import load_recording

from turnkit_pipecat import TurnkitTurnEngine, TurnkitUserTurnStartStrategy
from turnkit_pipecat.echo import EchoReferenceTap
from turnkit_pipecat.replay import recording_frames, replay_user_aggregator, run_frames
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
    agg = replay_user_aggregator(LLMContext(), start, TurnkitUserTurnStopStrategy(engine))
    at: list[float] = []
    orig = start._interrupt

    async def spy() -> None:
        at.append(engine.now)
        await orig()

    start._interrupt = spy  # type: ignore[method-assign]
    # Lock step (transcripts are data frames; audio would overtake them).
    await run_frames([agg], engine, _frames_with_bot(rec))
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


async def _starts_over_a_pending_reply(sound_db: float) -> tuple[list[float], float]:
    """Pipecat's start strategy alone (its user-turn starts spied on): a
    real caller turn (headset-bargein-11's first) that the ``silence``
    detector commits, the bot not yet speaking, then that turn's first 1.5 s
    again ``sound_db`` dB from its level (-24: a voice under the line; 0:
    the caller going on). Returns the start times and when the sound began."""
    rec = load_recording(CORPUS / "headset-bargein-11")
    audio = rec.caller_audio(16000)
    first = rec.caller_turns[0]
    turn = audio[round((first.start - 0.3) * 16000) : round((first.end + 1.0) * 16000)]
    other = audio[round(first.start * 16000) : round((first.start + 1.5) * 16000)]
    signal = np.concatenate([turn, other * 10 ** (sound_db / 20), np.zeros(8000)])
    pcm = (np.clip(signal, -1, 1) * 32767).astype(np.int16)
    engine = TurnkitTurnEngine("silence")
    start = TurnkitUserTurnStartStrategy(engine)
    starts: list[float] = []

    async def spy() -> None:
        starts.append(engine.now)
        await start.handle_user_turn_started()

    start.trigger_user_turn_started = spy  # type: ignore[method-assign]
    for i in range(0, len(pcm) - 511, 512):
        chunk = pcm[i : i + 512].tobytes()
        await start.process_frame(
            InputAudioRawFrame(audio=chunk, sample_rate=16000, num_channels=1)
        )
    # The detector committed the turn before the sound (the reply is pending).
    assert any(first.end - first.start < d.at < len(turn) / 16000 for d in engine.decisions)
    return starts, len(turn) / 16000


async def test_a_voice_under_the_line_does_not_drop_the_reply_on_its_way() -> None:
    """Pipecat drops the reply on its way when a user turn starts. Over a
    reply the detector committed (the bot not speaking yet), the start
    strategy starts one when the barge-in controller cancels the pending
    reply: for the caller's own voice at its onset, not for a sound far
    under their last turn (a television: each onset dropped the reply the
    caller waited for)."""
    going_on, at = await _starts_over_a_pending_reply(0.0)
    after = [t for t in going_on if t >= at]
    assert after and after[0] < at + 0.3, going_on  # at the caller's onset
    under, at = await _starts_over_a_pending_reply(-24.0)
    assert not [t for t in under if t >= at], under
