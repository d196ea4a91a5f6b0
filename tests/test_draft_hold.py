"""A drafting host's commit waits for its draft's first token, and a commit
due within that time drafts first (``DraftParams.first_token_ms``, read by
the detector the drafter is attached to): replies come as soon as before,
callers who go on inside that time are not cut off, and turns that wait
long get their draft. Where the host renders the draft's speech before the
commit (preemptive TTS: ``DraftParams.first_audio_ms``), the commit waits
for the draft's first audio instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

from turnkit.clock import VirtualClock
from turnkit.detectors.registry import create_detector
from turnkit.drafting.drafter import FIRST_TOKEN_WINDOW, DraftParams, EagerDrafter
from turnkit.frames import TranscriptFrame
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

CORPUS = Path(__file__).resolve().parent.parent / "recordings"


async def test_a_caller_going_on_inside_the_drafts_time_is_not_cut_off() -> None:
    """travel-natural-16's "From Chicago, | and uh I'd like to leave in the
    morning." (0.26 s after the comma, audio 0.99 and words 0.98 finished):
    committed at the comma without a drafter (a cut: that reply is cancelled
    before its audio); with one, the commit waits for the draft's first
    token, the caller goes on first, and the turn's end is answered as
    quickly as the cut reply would have been."""
    rec = load_recording(CORPUS / "travel-natural-16")
    plain = await replay_call(rec, "fused", ReplayConfig(compute="fixed", eager=False))
    drafted = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    assert plain.turns[1].interrupted
    assert not drafted.turns[1].interrupted
    assert drafted.turns[1].response_ms is not None and plain.turns[1].response_ms is not None
    assert drafted.turns[1].response_ms <= plain.turns[1].response_ms
    replies = [r for r in drafted.replies if r.get("turn") == 1]
    assert len(replies) == 1 and replies[0]["drafted"]
    assert drafted.drafts is not None and drafted.drafts["cancelled"] >= 1  # the one at the comma


async def test_a_turn_that_waits_its_ceiling_is_drafted_before_it() -> None:
    """order-natural-15's order number read out ("It's uh B as in boy seven
    two five"): the digit run waits its ceiling, too unsure for an eager
    signal; the commit is due within the draft's time, so the draft starts
    then and the reply comes ~300 ms sooner."""
    rec = load_recording(CORPUS / "order-natural-15")
    plain = await replay_call(rec, "fused", ReplayConfig(compute="fixed", eager=False))
    drafted = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    before, after = plain.turns[1].response_ms, drafted.turns[1].response_ms
    assert before is not None and after is not None
    assert after <= before - 250
    assert [r["drafted"] for r in drafted.replies if r.get("turn") == 1] == [True]


async def test_without_a_first_token_time_the_drafter_holds_nothing() -> None:
    """A drafter that does not know its engine's first-token time (the
    default) leaves every commit where the wait puts it."""
    clock = VirtualClock()
    det = create_detector("fused", clock)
    det.attach_drafter(EagerDrafter(clock))
    ep = det.endpointing
    assert ep.drafts is not None and ep.drafts.ready_at() is None
    assert not ep._draft_holds(clock.now())
    held = EagerDrafter(clock, DraftParams(first_token_ms=350))
    det.attach_drafter(held)
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert held.on_eager("a table for two") is not None
    assert ep._draft_holds(clock.now())
    # Words the draft does not answer: no hold, whether or not the host has
    # voided the draft yet (hosts tell the drafter a frame apart).
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two at", spoken_until=0.0))
    assert held.current is not None and not ep._draft_holds(clock.now())
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert ep._draft_holds(clock.now())
    await clock.advance_to(0.35)
    assert not ep._draft_holds(clock.now())


async def test_a_learning_drafter_holds_for_the_engines_measured_first_tokens() -> None:
    """``learn_first_token``: the hold is the lowest of the engine's last
    measured first tokens (a live host reports each request's); the fixed
    figure stands until one is measured, and the detector's "draft first"
    lead follows the learned figure too."""
    clock = VirtualClock()
    det = create_detector("fused", clock)
    drafter = EagerDrafter(clock, DraftParams(learn_first_token=True))
    det.attach_drafter(drafter)
    ep = det.endpointing
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert drafter.on_eager("a table for two") is not None
    assert not ep._draft_holds(clock.now()) and not ep._commit_due(100.0)  # none measured
    for ms in (900.0, 240.0, 610.0):
        drafter.on_first_token(ms)
    assert drafter.first_token_ms == 240.0
    assert ep._draft_holds(0.239) and not ep._draft_holds(0.241)
    drafter.on_end("a table for two")  # used: a new turn's draft is not out yet
    assert ep._commit_due(240.0) and not ep._commit_due(241.0)
    for _ in range(FIRST_TOKEN_WINDOW):  # the engine got slower: 240 ms falls out
        drafter.on_first_token(500.0)
    assert drafter.first_token_ms == 500.0
    fixed = EagerDrafter(clock, DraftParams(first_token_ms=350))
    fixed.on_first_token(120.0)  # not learning: the fixed figure stands
    assert fixed.first_token_ms == 350.0
    assert (
        EagerDrafter(clock, DraftParams(first_token_ms=350, learn_first_token=True)).first_token_ms
        == 350.0
    )


async def test_a_mirroring_drafter_holds_but_asks_for_no_draft() -> None:
    """``drafts_on_eager=False`` (LiveKit: its framework drafts at final
    transcripts; the drafter mirrors them): a draft it was told of holds
    the commit as any, but a commit due within the draft's time is not put
    off a frame for an eager signal no one drafts on."""
    clock = VirtualClock()
    det = create_detector("fused", clock)
    mirror = EagerDrafter(clock, DraftParams(first_token_ms=300, drafts_on_eager=False))
    det.attach_drafter(mirror)
    ep = det.endpointing
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert not ep._commit_due(100.0)
    drafting = EagerDrafter(clock, DraftParams(first_token_ms=300))
    det.attach_drafter(drafting)
    assert ep._commit_due(100.0)
    det.attach_drafter(mirror)
    assert mirror.on_eager("a table for two", at=0.0) is not None
    assert ep._draft_holds(0.299) and not ep._draft_holds(0.301)
    assert mirror.cancel("livekit cancelled") is not None and not ep._draft_holds(0.1)
    assert mirror.stats.cancel_reasons == {"livekit cancelled": 1}


async def test_with_preemptive_tts_the_commit_waits_for_the_drafts_first_audio() -> None:
    """``first_audio_ms``: the hold (and the "draft first" lead) is the first
    token plus the TTS's time to first audio; without a first-token time,
    still none."""
    clock = VirtualClock()
    det = create_detector("fused", clock)
    drafter = EagerDrafter(clock, DraftParams(first_token_ms=350, first_audio_ms=150))
    det.attach_drafter(drafter)
    ep = det.endpointing
    assert drafter.hold_ms == 500.0
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert drafter.on_eager("a table for two") is not None
    assert drafter.ready_at("a table for two") == 0.5
    assert ep._draft_holds(0.499) and not ep._draft_holds(0.501)
    drafter.on_end("a table for two")
    assert ep._commit_due(500.0) and not ep._commit_due(501.0)
    assert EagerDrafter(clock, DraftParams(first_audio_ms=150)).hold_ms == 0.0
    # learn_first_audio: the lowest of the TTS's measured render times,
    # the fixed figure until one is measured.
    learning = EagerDrafter(
        clock, DraftParams(first_token_ms=350, first_audio_ms=150, learn_first_audio=True)
    )
    assert learning.hold_ms == 500.0
    for ms in (90.0, 40.0, 70.0):
        learning.on_first_audio(ms)
    assert learning.first_audio_ms == 40.0 and learning.hold_ms == 390.0
    fixed = EagerDrafter(clock, DraftParams(first_token_ms=350, first_audio_ms=150))
    fixed.on_first_audio(40.0)
    assert fixed.hold_ms == 500.0


async def test_the_commit_lands_on_the_last_frame_before_the_drafts_first_audio() -> None:
    """Commits land on the host's frames: the last one that ends by the
    draft's first audio, not the first after it (which would hold the
    reply back for the rest of that frame); a frame that ends exactly on it
    holds once more."""
    clock = VirtualClock()
    det = create_detector("fused", clock)
    drafter = EagerDrafter(clock, DraftParams(first_token_ms=350, first_audio_ms=150))
    det.attach_drafter(drafter)
    ep = det.endpointing
    await det.on_transcript(TranscriptFrame(at=0.0, text="a table for two", spoken_until=0.0))
    assert drafter.on_eager("a table for two") is not None  # first audio at 0.5
    frame = 0.032
    assert ep._draft_holds(0.448, frame)  # the frame to 0.48 ends before it: wait
    assert not ep._draft_holds(0.480, frame)  # the next ends at 0.512: commit now
    late = EagerDrafter(clock, DraftParams(first_token_ms=362, first_audio_ms=150))
    det.attach_drafter(late)
    assert late.on_eager("a table for two") is not None  # first audio at 0.512
    assert ep._draft_holds(0.480, frame) and not ep._draft_holds(0.512, frame)


async def test_a_drafted_reply_is_committed_in_the_frame_before_its_audio() -> None:
    """In the replay (LLM 350 ms, TTS 150 ms, preemptive TTS) every reply
    of easy-short-08 is a draft's, and each is committed in the last frame
    before its first audio: not a frame after it (the reply held back for
    the rest of that frame), and not sooner, as when the hold counted from
    the eager signal while the draft's request left after the model's
    compute (live, the signal comes once the model has run)."""
    rec = load_recording(CORPUS / "easy-short-08")
    res = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    gaps = [r["first_audio_at"] - r["decision_at"] for r in res.replies]
    assert gaps and all(r["drafted"] for r in res.replies)
    assert all(0.0 <= g < 0.032 for g in gaps), gaps
    assert any(g > 0.005 for g in gaps), gaps


rv = load_script("realcall_variants")


@pytest.mark.parametrize(
    ("call", "turn", "gap"),
    [
        # "Hi, I want to book a flight to Boston for next Friday." 0.45 s "From Chicago, ..."
        ("travel-natural-16", 0, 0.45),
        # "It's March March twelfth nineteen eighty four." 0.5 s "The uh the blood pressure ..."
        ("pharmacy-natural-17", 1, 0.5),
    ],
)
async def test_a_pause_between_sentences_the_drafts_audio_outlasts_is_not_cut(
    tmp_path: Path, call: str, turn: int, gap: float
) -> None:
    """Two of the caller's sentences joined by a pause of 0.45-0.5 s (real
    pauses inside a turn: p90 0.45 s): the first reads finished, its draft
    starts at once, and the commit waited for the draft's first token (~0.38
    s of silence) cut the caller off. With the draft's speech rendered
    before the commit (`turnkit replay`'s default, --preemptive-tts), the
    commit waits for its first audio, ~0.15 s more, the caller goes on
    first, and the whole turn is answered no later than one frame after."""
    src = rv.long_turn(rv.Call.load(CORPUS / call), turn, 2, [gap])
    src.meta["id"] = f"{call}-gap{gap}"
    src.save(tmp_path / "call")
    rec = load_recording(tmp_path / "call")
    tts_at_commit = await replay_call(
        rec, "fused", ReplayConfig(compute="fixed", preemptive_tts=False)
    )
    preemptive = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    assert tts_at_commit.turns[turn].interrupted
    after = preemptive.turns[turn]
    assert not after.interrupted and not after.missed
    before = tts_at_commit.turns[turn].response_ms
    assert after.response_ms is not None and before is not None
    assert after.response_ms <= before + 32
