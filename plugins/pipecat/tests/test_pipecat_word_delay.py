"""Barge-in in a live Pipecat host whose STT is late: the start strategy's
barge-in controller is not told the STT's delay (``word_delay_s`` None, as
the plugin builds it) and learns it from the caller's turns, so it takes no
early hold on a backchannel that a late word would turn into a gap the
caller hears. Real ``LLMUserAggregator`` with the turnkit strategies, the
demo call's audio and words (a streaming STT 150 ms late), the bot speaking
where the recorded agent did."""

from __future__ import annotations

from bot_frames import with_bot
from pipecat.processors.aggregators.llm_context import LLMContext
from test_pipecat_plugin import CORPUS
from turnkit.barge_in.controller import Action, BargeInController, BargeInParams
from turnkit.replay.recording import load_recording

from turnkit_pipecat import TurnkitTurnEngine, TurnkitUserTurnStartStrategy
from turnkit_pipecat.replay import recording_frames, replay_user_aggregator, run_frames
from turnkit_pipecat.strategies import TurnkitUserTurnStopStrategy

# phone-digits-02: "okay" (16.717-17.070 s) while the bot reads the number back.
OKAY = (16.717, 17.07)


async def _actions(params: BargeInParams) -> list[tuple[float, Action]]:
    rec = load_recording(CORPUS / "phone-digits-02")
    engine = TurnkitTurnEngine("fused")
    start = TurnkitUserTurnStartStrategy(engine, barge_in=BargeInController(engine.clock, params=params))
    agg = replay_user_aggregator(LLMContext(), start, TurnkitUserTurnStopStrategy(engine))
    frames = recording_frames(rec, stt_delay_s=0.15, until_s=rec.duration + 1.0)
    await run_frames([agg], engine, with_bot(frames, [(a.start, a.end) for a in rec.agent_turns]))
    return start.actions


async def test_a_late_stt_is_learnt_and_the_backchannel_is_not_held() -> None:
    # Told its words are on time, the controller holds "okay" 0.2 s in and
    # the hold stands until the late word comes: the bot stops and resumes.
    told = await _actions(BargeInParams(word_delay_s=0.0))
    held = [(t, a) for t, a in told if OKAY[0] < t < OKAY[1] + 0.6]
    assert held and held[0][1] is Action.PAUSE, told
    # As the plugin builds it (nothing told), "okay" goes by with the bot
    # talking; and so it does on the learnt delay alone, with the older
    # rule (the caller's first words typically later than 0.47 s after
    # their onset) off. Before the delay was learnt, the plugin's
    # controller held it: a pause at 16.928 s, resumed at 17.248 s.
    for params in (BargeInParams(), BargeInParams(hold_word_lag_s=None)):
        learnt = await _actions(params)
        assert not [a for t, a in learnt if OKAY[0] < t < OKAY[1] + 0.6], (params, learnt)
