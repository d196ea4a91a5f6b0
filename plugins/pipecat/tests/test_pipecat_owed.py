"""A caller turn the bot talked through is answered once the bot stops, when
turnkit's rule says it is owed (:class:`turnkit.drafting.owed.OwedTurn`, the
rule the Responder applies in ``turnkit replay``): "Okay" said over the bot's
closing words, then silence, gets its answer from Pipecat's LLM; an
"uh-huh" from the middle of the reply does not. Real ``LLMUserAggregator``
with the turnkit strategies, the real-call variant's audio and words; the
bot speaks where the recorded agent did (``BotStarted/StoppedSpeakingFrame``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pipecat.frames.frames import (
    Frame,
    FunctionCallInProgressFrame,
    LLMFullResponseStartFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from turnkit.replay.recording import Recording, load_recording

from turnkit_pipecat import TurnkitTurnEngine, TurnkitUserTurnStartStrategy
from turnkit_pipecat.replay import recording_frames, replay_user_aggregator, run_frames
from turnkit_pipecat.reply_text import ReplyTextTap
from turnkit_pipecat.strategies import TurnkitUserTurnStopStrategy

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from bot_frames import with_bot  # noqa: E402
from conftest import load_script  # noqa: E402  (the committed scripts, as the core tests load them)


def _variant(tmp: Path, name: str) -> Recording:
    rv = load_script("realcall_variants")
    [(n, source, edit, opts)] = [v for v in rv.VARIANTS if v[0] == name]
    return load_recording(rv.build(n, source, edit, opts, tmp))


def _frames_with_bot(
    rec: Recording, until_s: float, longer_s: float, pending: str | None = None
) -> list[Frame]:
    """The call's audio and words, the bot speaking over every recorded agent
    turn (its last one ``longer_s`` longer; with ``pending``, its reply
    still waits when it stops: on a function call (``"tool"``), or on an
    LLM response that has not ended (``"llm"``))."""
    turns = [(a.start, a.end) for a in rec.agent_turns]
    turns[-1] = (turns[-1][0], turns[-1][1] + longer_s)

    def waits(i: int) -> list[Frame]:
        if i < len(turns) - 1:
            return []
        if pending == "tool":
            return [
                FunctionCallInProgressFrame(
                    function_name="order_status",
                    tool_call_id="call-1",
                    arguments={},
                    cancel_on_interruption=True,
                )
            ]
        return [LLMFullResponseStartFrame()] if pending == "llm" else []

    return with_bot(recording_frames(rec, until_s=until_s), turns, waits)


async def _user_turns(
    rec: Recording, until_s: float, longer_s: float = 0.0, pending: str | None = None
) -> tuple[list[tuple[str, bool]], list[float], TurnkitUserTurnStartStrategy]:
    """Each user turn Pipecat's aggregator wrote (its text, and whether a
    turn strategy ended it: False for what is flushed as the session ends),
    the audio times the start strategy started user turns at, and the
    start strategy."""
    engine = TurnkitTurnEngine("silence")
    context = LLMContext()
    start = TurnkitUserTurnStartStrategy(engine)
    stop = TurnkitUserTurnStopStrategy(engine, context=context)
    agg = replay_user_aggregator(context, start, stop)
    written: list[tuple[str, bool]] = []

    @agg.event_handler("on_user_turn_stopped")
    async def _stopped(_agg: Any, strategy: Any, message: Any) -> None:
        written.append((message.content or "", strategy is stop))

    starts: list[float] = []
    started = start.trigger_user_turn_started

    async def spy() -> None:
        starts.append(engine.now)
        await started()

    start.trigger_user_turn_started = spy  # type: ignore[method-assign]
    await run_frames(
        [agg, ReplyTextTap(engine)], engine, _frames_with_bot(rec, until_s, longer_s, pending)
    )
    return written, starts, start


@pytest.mark.parametrize(("variant", "owed"), [("early-okay1.3", 1), ("early-okay0.8", 0)])
async def test_okay_over_the_bots_closing_words_is_answered_when_it_stops(
    tmp_path: Path, variant: str, owed: int
) -> None:
    """order-natural-15, its last caller turn an "Okay" said 1.3 s (0.8 s)
    before the bot's last reply ends, then silence. Said 1.3 s before, the
    detector ends it while the bot talks, so Pipecat starts no user turn for
    it: once the bot stops, the owed "okay" is a user turn, ended at once,
    and goes to the LLM. Said 0.8 s before, the detector ends it just after
    the bot stopped: a turn Pipecat never saw begin (it began under the
    bot), started then and answered. Before, both were only flushed when
    the session ended (a live caller waits until they speak again). The
    "uh-huh" 1.5 s before the end of the reply before is not owed: it
    reaches the LLM neither as a turn of its own nor with the caller's next."""
    rec = _variant(tmp_path, variant)
    okay = rec.caller_turns[-1]
    last = rec.agent_turns[-1]
    assert okay.text.lower().startswith("okay") and last.start < okay.start < okay.end < last.end
    written, starts, start = await _user_turns(rec, rec.duration + 3.0)
    assert written[-1] == ("okay", True), written  # a turn, not the session's flush
    assert start.owed_answered == owed
    # At the bot's stop, or (0.8 s) at the detector's end just after it.
    assert last.end <= starts[-1] < last.end + (0.064 if owed else 0.6), (starts, last.end)
    assert all(by_turn for _, by_turn in written), written
    # The mid-reply "uh-huh" was no turn of its own, and does not open the
    # caller's next one (dropped when the bot stopped, as LiveKit drops it).
    assert written[2] == ("oh good so when should i expect it", True), written
    assert start.murmurs_dropped == 1
    assert len(written) == len(rec.caller_turns), written


async def test_a_murmur_from_the_middle_of_the_reply_is_not_answered(tmp_path: Path) -> None:
    """The same call with its last agent turn going on 1.5 s past the
    "Okay": said with a phrase of the reply still to come, it acknowledged
    that phrase, so the bot stopping is no cue to answer it (turnkit replay
    does not answer it either), and its words do not open the caller's
    next turn."""
    rec = _variant(tmp_path, "early-okay1.3")
    written, _, start = await _user_turns(rec, rec.duration + 3.0, longer_s=1.5)
    assert start.owed_answered == 0
    assert start.murmurs_dropped == 2  # the "uh-huh" and this "okay"
    assert "okay" not in [text for text, _ in written], written


@pytest.mark.parametrize("pending", ["tool", "llm"])
async def test_a_bot_silent_mid_reply_has_not_ended_it(tmp_path: Path, pending: str) -> None:
    """The same "Okay", but the bot fell silent because its reply waits on a
    function call ("let me check that"), or on an LLM response still
    streaming (a ReplyTextTap in the pipeline tells): its reply is not over,
    so the "okay" is not answered there — that would interrupt the reply —
    and waits for the reply's end (here none comes: flushed at the session's
    end)."""
    rec = _variant(tmp_path, "early-okay1.3")
    written, _, start = await _user_turns(rec, rec.duration + 3.0, pending=pending)
    assert start.owed_answered == 0
    assert written[-1] == ("okay", False), written
