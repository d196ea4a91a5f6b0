"""A segmented STT's slow transcript of speech the detector has already
ended (Whisper behind a VAD on a busy CPU: 1.2 s for "I'd like to check on
my order." in a live call) reaches Pipecat after the bot began answering.
The barge-in controller reads those words over the bot as a bid, and the
start strategy begins a user turn on them; no speech follows for the
detector to end that turn on, so Pipecat's stop timeout answered it 5 s
later (`turnkit dial` of the example agent: 5.4-5.9 s on 1 turn in 8). The
stop strategy now ends such a turn on the frame that began it. Real
``LLMUserAggregator`` with the turnkit strategies, the demo call's audio
and words; the bot speaks where the recorded agent did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot_frames import with_bot
from pipecat.frames.frames import (
    Frame,
    TranscriptionFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from turnkit.replay.recording import Recording, load_recording

from turnkit_pipecat import TurnkitTurnEngine, TurnkitUserTurnStartStrategy
from turnkit_pipecat.replay import recording_frames, replay_user_aggregator, run_frames
from turnkit_pipecat.strategies import TurnkitUserTurnStopStrategy

ROOT = Path(__file__).resolve().parents[3]
CALL = ROOT / "recordings" / "easy-order-status-01"


def _frames(rec: Recording, stt_delay_s: float) -> list[Frame]:
    """The call with a segmented STT ``stt_delay_s`` slow, the bot speaking
    over every recorded agent turn."""
    frames = recording_frames(
        rec, until_s=rec.duration + 2.0, segmented=True, stt_delay_s=stt_delay_s, close_s=0.1
    )
    return with_bot(frames, [(a.start, a.end) for a in rec.agent_turns])


async def _turns(
    rec: Recording, stt_delay_s: float
) -> tuple[list[tuple[str, bool, float]], TurnkitUserTurnStopStrategy, list[float]]:
    """Each user turn the aggregator wrote (its text, whether a turn
    strategy ended it, the audio time), the stop strategy, and the audio
    times of the final transcripts."""
    engine = TurnkitTurnEngine("silence")
    context = LLMContext()
    start = TurnkitUserTurnStartStrategy(engine)
    stop = TurnkitUserTurnStopStrategy(engine, context=context)
    agg = replay_user_aggregator(context, start, stop)
    written: list[tuple[str, bool, float]] = []
    finals: list[float] = []

    @agg.event_handler("on_user_turn_stopped")
    async def _stopped(_agg: Any, strategy: Any, message: Any) -> None:
        written.append((message.content or "", strategy is stop, engine.now))

    frames = _frames(rec, stt_delay_s)
    fed = engine.feed
    seen: set[int] = set()

    async def feed(frame: Frame) -> Any:
        step = await fed(frame)
        if isinstance(frame, TranscriptionFrame) and id(frame) not in seen:
            seen.add(id(frame))
            finals.append(engine.now)
        return step

    engine.feed = feed  # type: ignore[method-assign]
    await run_frames([agg], engine, frames)
    return written, stop, finals


async def test_late_words_read_as_a_bid_are_a_turn_ended_at_once() -> None:
    rec = load_recording(CALL)
    first, reply = rec.caller_turns[0], rec.agent_turns[0]
    assert first.text.startswith("Hi, I'd like to check on my order")
    written, stop, finals = await _turns(rec, stt_delay_s=2.0)
    # The first turn's last words ("I'd like to check on my order", a run of
    # speech of its own after "Hi,") come after the bot began its reply.
    late = min(t for t in finals if t > reply.start)
    assert late < reply.end and late - first.end > 1.5, (finals, first.end)
    # A user turn on those words, ended by turnkit where they came (Pipecat's
    # stop timeout is off here: without the end it was flushed at the close).
    turn = next(w for w in written if "check on my order" in w[0])
    assert turn[1], written
    assert abs(turn[2] - late) < 0.05, (turn, late)
    # The last turn's words come 2 s late too, after the detector's end,
    # each run on its own. "that's all", with the bot silent, is answered
    # as it comes: the detector ends the turn again on it (``late_words``,
    # now that it has learnt the STT writes runs whole; it was left to the
    # session's flush). "thank you" comes as the bot's reply to it plays:
    # said before the reply began, it is no bid (it stopped the bot while
    # this strategy, not the detector, ended late turns), and the end on
    # it is the bot's to talk through (kept, not owed: a murmur dropped).
    assert all(by_turn for _, by_turn, _ in written), written
    assert written[-1][0] == "that's all", written
    assert [w for w, _, _ in written].count("thank you") == 0, written
    assert stop.late_words == 1  # "i'd like to check on my order": not learnt yet
    assert stop.ignored == 1


async def test_words_on_time_start_no_such_turn() -> None:
    """With the words before the detector's end, nothing is late."""
    rec = load_recording(CALL)
    written, stop, _ = await _turns(rec, stt_delay_s=0.0)
    assert stop.late_words == 0
    assert all(by_turn for _, by_turn, _ in written), written
