"""Metric definitions (RECORDING_FORMAT.md) on hand-built replies whose right
answer is known exactly: no audio, no VAD, just labels and agent timelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkit.replay.agent import Reply
from turnkit.replay.metrics import aggregate, score_call
from turnkit.replay.recording import Manifest, Recording


def recording(events: list[dict], duration: float = 30.0) -> Recording:
    manifest = Manifest.model_validate(
        {"format": "turnkit.recording/v1", "id": "hand", "events": events}
    )
    return Recording(Path("/nonexistent"), manifest, duration)


def reply(
    rid: int,
    decision_at: float,
    turn: int | None,
    first_audio_at: float | None = None,
    stopped_at: float | None = None,
    stop_reason: str | None = None,
    planned_end: float | None = None,
) -> Reply:
    return Reply(
        id=rid,
        decision_at=decision_at,
        compute_ms=0.0,
        latency_ms=500.0,
        audio_due=decision_at + 0.5,
        turn=turn,
        first_audio_at=first_audio_at,
        planned_end=planned_end,
        stopped_at=stopped_at,
        stop_reason=stop_reason,
    )


TWO_TURNS = [
    {
        "type": "caller_turn",
        "start": 1.0,
        "end": 4.0,
        "spans": [[1.0, 2.0], [3.0, 4.0]],
        "holds": [{"start": 2.0, "end": 3.0, "kind": "mid-sentence"}],
    },
    {"type": "agent_turn", "start": 5.0, "end": 8.0, "text": "ok"},
    {"type": "caller_turn", "start": 10.0, "end": 11.0},
    {"type": "agent_turn", "start": 12.0, "end": 14.0, "text": "bye"},
]


def score(rec: Recording, replies: list[Reply], timeout_s: float = 5.0, grace_s: float = 0.5):
    return score_call(rec, replies, timeout_s=timeout_s, grace_s=grace_s)


def test_response_latency_is_turn_end_to_first_audio() -> None:
    rec = recording(TWO_TURNS)
    s = score(
        rec,
        [
            reply(
                0,
                4.8,
                0,
                first_audio_at=5.3,
                planned_end=8.0,
                stop_reason="completed",
                stopped_at=8.0,
            ),
            reply(1, 11.5, 1, first_audio_at=12.25, planned_end=14.0),
        ],
    )
    assert [t.response_ms for t in s.turns] == pytest.approx([1300.0, 1250.0])
    assert [t.eot_delay_ms for t in s.turns] == pytest.approx([800.0, 500.0])
    assert not any(t.interrupted or t.missed for t in s.turns)
    assert s.spurious_replies == 0


def test_commit_inside_a_hold_is_a_false_cutoff_even_if_no_audio_got_out() -> None:
    rec = recording(TWO_TURNS)
    s = score(
        rec,
        [
            # Decided at the hold, cancelled before its audio: still a cutoff.
            reply(0, 2.6, 0, stopped_at=3.05, stop_reason="cancelled"),
            reply(1, 4.8, 0, first_audio_at=5.3, planned_end=8.0),
        ],
    )
    t0 = s.turns[0]
    assert t0.interrupted and t0.cutoffs == 1
    assert t0.response_ms == pytest.approx(1300.0)
    assert t0.cut_hold_kinds == ["mid-sentence"]
    assert s.holds == {"mid-sentence": [1, 1]}


def test_cutoff_whose_audio_played_is_not_the_response() -> None:
    rec = recording(TWO_TURNS)
    s = score(
        rec,
        [
            reply(0, 2.5, 0, first_audio_at=2.9, stopped_at=3.1, stop_reason="interrupted"),
            reply(1, 4.6, 0, first_audio_at=5.1, planned_end=8.0),
        ],
    )
    assert s.turns[0].interrupted
    assert s.turns[0].response_ms == pytest.approx(1100.0)


def test_no_audio_within_timeout_is_a_missed_turn() -> None:
    rec = recording(TWO_TURNS)
    s = score(rec, [reply(0, 4.8, 0, first_audio_at=9.5, planned_end=12.0)], timeout_s=5.0)
    assert s.turns[0].missed and s.turns[0].response_ms is None
    # turn 1 got nothing at all
    assert s.turns[1].missed
    s2 = score(rec, [reply(0, 4.8, 0, first_audio_at=9.0, planned_end=12.0)], timeout_s=5.0)
    assert not s2.turns[0].missed and s2.turns[0].response_ms == pytest.approx(5000.0)


def test_cancelled_reply_after_end_is_no_response() -> None:
    rec = recording(TWO_TURNS)
    s = score(rec, [reply(0, 4.8, 0, stopped_at=5.0, stop_reason="cancelled")])
    assert s.turns[0].missed and not s.turns[0].interrupted


def test_false_barge_in_per_kind_only_counts_events_that_meet_the_agent() -> None:
    events = [
        *TWO_TURNS,
        {"type": "backchannel", "start": 6.0, "end": 6.3, "text": "uh-huh"},
        {"type": "noise", "start": 7.0, "end": 7.2, "label": "cough"},
        {"type": "echo", "start": 15.0, "end": 16.0},  # agent silent then
    ]
    rec = recording(events)
    s = score(
        rec,
        [
            reply(
                0,
                4.8,
                0,
                first_audio_at=5.3,
                planned_end=8.0,
                stopped_at=6.1,
                stop_reason="interrupted",
            )
        ],
    )
    by_kind = {e.kind: e for e in s.events}
    assert by_kind["backchannel"].agent_speaking and by_kind["backchannel"].stopped
    # The agent had already stopped before the cough: no opportunity.
    assert not by_kind["noise"].agent_speaking and not by_kind["noise"].stopped
    assert not by_kind["echo"].agent_speaking
    res = aggregate("x", [s])
    assert res["false_barge_in_rate"] == {"backchannel": 1.0, "echo": None, "noise": None}


def test_agent_that_keeps_talking_through_noise_is_no_false_barge_in() -> None:
    events = [*TWO_TURNS, {"type": "noise", "start": 6.0, "end": 6.2, "label": "door"}]
    s = score(recording(events), [reply(0, 4.8, 0, first_audio_at=5.3, planned_end=8.0)])
    (ev,) = s.events
    assert ev.agent_speaking and not ev.stopped
    assert aggregate("x", [s])["false_barge_in_rate"]["noise"] == 0.0


def test_stop_long_after_the_event_is_not_blamed_on_it() -> None:
    events = [*TWO_TURNS, {"type": "backchannel", "start": 6.0, "end": 6.3, "text": "ok"}]
    s = score(
        recording(events),
        [reply(0, 4.8, 0, first_audio_at=5.3, stopped_at=7.5, stop_reason="interrupted")],
        grace_s=0.5,
    )
    assert s.events[0].agent_speaking and not s.events[0].stopped


def test_barge_in_recall_and_stop_latency() -> None:
    events = [
        {"type": "caller_turn", "start": 1.0, "end": 2.0},
        {"type": "agent_turn", "start": 3.0, "end": 9.0, "text": "long answer"},
        {"type": "caller_turn", "start": 6.0, "end": 7.0},  # barge-in
        {"type": "caller_turn", "start": 12.0, "end": 13.0},  # not during agent speech
    ]
    s = score(
        recording(events),
        [
            reply(0, 2.8, 0, first_audio_at=3.3, stopped_at=6.12, stop_reason="interrupted"),
            reply(1, 7.8, 1, first_audio_at=8.3, planned_end=10.0),
        ],
    )
    barge = s.turns[1]
    assert barge.barge_in and barge.barge_in_stopped
    assert barge.stop_latency_ms == pytest.approx(120.0)
    assert not s.turns[2].barge_in
    res = aggregate("x", [s])
    assert res["barge_in_recall"] == 1.0 and res["barge_in_count"] == 1


def test_barge_in_the_agent_talks_over_counts_against_recall() -> None:
    events = [
        {"type": "caller_turn", "start": 1.0, "end": 2.0},
        {"type": "agent_turn", "start": 3.0, "end": 9.0, "text": "long answer"},
        {"type": "caller_turn", "start": 6.0, "end": 7.0},
    ]
    s = score(recording(events), [reply(0, 2.8, 0, first_audio_at=3.3, planned_end=9.0)])
    assert s.turns[1].barge_in and not s.turns[1].barge_in_stopped
    assert aggregate("x", [s])["barge_in_recall"] == 0.0


def test_reply_to_nothing_is_spurious() -> None:
    events = [*TWO_TURNS, {"type": "backchannel", "start": 6.0, "end": 6.3, "text": "uh-huh"}]
    s = score(
        recording(events),
        [
            reply(0, 4.8, 0, first_audio_at=5.3, stopped_at=6.1, stop_reason="interrupted"),
            # the agent then "answers" the uh-huh: attributed to turn 0 again
            reply(1, 7.1, 0, first_audio_at=7.6, planned_end=9.6),
        ],
    )
    assert s.spurious_replies == 1
    assert s.turns[0].response_ms == pytest.approx(1300.0)


def test_aggregate_rates_and_percentiles() -> None:
    rec = recording(TWO_TURNS)
    a = score(rec, [reply(0, 2.5, 0), reply(1, 4.5, 0, first_audio_at=5.0, planned_end=8.0)])
    b = score(rec, [reply(0, 4.9, 0, first_audio_at=6.0, planned_end=8.0)])
    res = aggregate("silence", [a, b])
    assert res["turns"] == 4
    assert res["interruption_rate"] == 0.25
    assert res["missed_rate"] == 0.5  # turn 1 of both calls got nothing
    assert res["response_ms"]["p50"] == pytest.approx(1500.0)
    assert res["response_ms"]["mean"] == pytest.approx(1500.0)
    assert res["response_ms"]["p95"] == pytest.approx(1950.0)
    assert res["false_barge_in_rate"] == {"backchannel": None, "echo": None, "noise": None}
    assert res["barge_in_recall"] is None
    assert res["hold_cutoff_rate"]["mid-sentence"] == {"holds": 2, "cutoffs": 1, "rate": 0.5}
    rows = res["per_turn"]
    assert set(rows[0]) >= {"call", "turn", "end", "response_ms", "interrupted", "missed"}
    assert rows[0]["interrupted"] is True and rows[1]["missed"] is True


def test_unlabelled_gaps_count_as_holds_of_unknown_kind() -> None:
    rec = recording([{"type": "caller_turn", "start": 1.0, "end": 5.0, "spans": [[1, 2], [3, 5]]}])
    s = score(rec, [reply(0, 2.6, 0), reply(1, 5.8, 0, first_audio_at=6.3, planned_end=8)])
    assert s.holds == {"unlabelled": [1, 1]}
