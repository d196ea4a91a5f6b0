"""Pairing a replay's decisions with the live host's (turnkit.replay.live)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from turnkit.replay.live import (
    LiveAgreement,
    agreement,
    combine,
    live_decisions,
    live_reply_latencies_ms,
)
from turnkit.replay.metrics import CallScore, agreement_row
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import LabelPlanner, ReplayConfig, replay_call

CORPUS = Path(__file__).resolve().parent.parent / "recordings"


def test_decisions_pair_in_time_order_within_the_window() -> None:
    a = agreement([1.0, 3.0, 6.0], [1.016, 2.2, 3.4, 9.0])
    # 1.0 ~ 1.016; 3.0 ~ 3.4 (2.2 is 800 ms early: the replay's alone);
    # 6.0 has no replayed decision within 500 ms; 9.0 none live
    assert a.deltas_ms == pytest.approx([16.0, 400.0])
    assert (a.live, a.replayed, a.matched, a.live_only, a.replay_only) == (3, 4, 2, 1, 2)
    row = agreement_row(a)
    assert row["within_frame"] == 1
    assert row["abs_delta_ms"]["max"] == pytest.approx(400.0)


def test_no_decisions_on_either_side() -> None:
    empty = agreement_row(agreement([], []))["abs_delta_ms"]
    assert empty == {"p50": None, "p95": None, "mean": None, "max": None}
    assert combine([None, None]) is None
    both = combine([agreement([1.0], [1.0]), None, agreement([2.0], [])])
    assert isinstance(both, LiveAgreement)
    assert (both.calls, both.live, both.replayed, both.matched) == (2, 2, 1, 1)


def _with_live(tmp_path: Path, events: object) -> Path:
    dst = tmp_path / "call"
    shutil.copytree(CORPUS / "easy-order-status-01", dst)
    m = json.loads((dst / "call.json").read_text())
    m["live"] = {"turn_events": events}
    (dst / "call.json").write_text(json.dumps(m))
    return dst


async def test_a_recording_with_live_decisions_is_held_against_the_replay(
    tmp_path: Path,
) -> None:
    """The replay's own decisions written back as the 'live' ones pair
    one for one; another detector's replay, and malformed entries, are
    left out."""
    src = load_recording(CORPUS / "easy-order-status-01")
    first = await replay_call(src, "silence", ReplayConfig())
    times = [r["decision_at"] for r in first.replies]
    events = [{"kind": "end", "at": t, "detector": "silence"} for t in times]
    events += [
        {"kind": "end", "at": "soon", "detector": "silence"},  # not a time: skipped
        {"kind": "user_turn_end", "at": 1.0, "detector": "silence"},  # a commit, not a decision
        {"kind": "end", "at": 2.0, "detector": "fused"},  # another detector's
    ]
    rec = load_recording(_with_live(tmp_path, events))
    assert live_decisions(rec, "silence") == sorted(times)
    score = await replay_call(rec, "silence", ReplayConfig())
    a = score.live_agreement
    assert a is not None and a.matched == a.live == len(times) >= 2
    assert all(d == 0.0 for d in a.deltas_ms)
    other = await replay_call(rec, "silence:stop_ms=300", ReplayConfig())
    assert other.live_agreement is None
    assert live_decisions(load_recording(CORPUS / "easy-order-status-01"), "silence") is None


async def test_a_replay_answers_at_the_live_hosts_measured_latency(tmp_path: Path) -> None:
    """--latency-from-live: each commit's time to its reply's first audio is
    read off the recording (a commit whose reply never played gives none),
    and the replay answers at their median instead of 350 + 150 ms."""
    src = load_recording(CORPUS / "easy-order-status-01")
    starts = [t.start for t in src.agent_turns]
    events = [
        {"kind": "user_turn_end", "at": starts[0] - 0.060},
        {"kind": "end", "at": starts[1] - 0.500, "detector": "silence"},  # not a commit
        {"kind": "user_turn_end", "at": starts[1] - 0.900},  # cut: the next commit first
        {"kind": "user_turn_end", "at": starts[1] - 0.080},
        {"kind": "user_turn_end", "at": True},  # not a time: skipped
        {"kind": "user_turn_end", "at": starts[2] - 0.070},
    ]
    rec = load_recording(_with_live(tmp_path, events))
    assert live_reply_latencies_ms(rec) == pytest.approx([60.0, 80.0, 70.0])
    assert live_reply_latencies_ms(src) == []

    fed = await replay_call(rec, "silence", ReplayConfig(compute="none", latency_from_live=True))
    assert fed.live_latency_ms == pytest.approx(70.0)
    # the same replay as one told the host's figure by hand
    by_hand = ReplayConfig(compute="none", llm_ttft_ms="70", tts_ttfb_ms="0")
    assert fed.replies == (await replay_call(rec, "silence", by_hand)).replies
    plain = await replay_call(rec, "silence", ReplayConfig(compute="none"))
    assert plain.live_latency_ms is None

    def lags(score: CallScore) -> list[float]:  # replies with no tool before them
        return [
            round(r["first_audio_at"] - r["decision_at"], 3)
            for r in score.replies
            if not r["filler"]
        ]

    assert lags(fed) == [0.07, 0.07] and lags(plain) == [0.5, 0.5]
    # a call not recorded live keeps the latency model
    other = await replay_call(src, "silence", ReplayConfig(compute="none", latency_from_live=True))
    assert other.live_latency_ms is None and lags(other) == [0.5, 0.5]


def _with_agent_inside_turn(tmp_path: Path) -> Path:
    """address-to-06 with the agent speaking inside caller turn 1's hold (a
    live host's cutoff that got out, then its answer after the turn)."""
    dst = tmp_path / "split"
    shutil.copytree(CORPUS / "address-to-06", dst)
    m = json.loads((dst / "call.json").read_text())
    m["events"].append(
        {"type": "agent_turn", "start": 12.9, "end": 13.4, "text": "Okay, let me note that."}
    )
    m["events"].sort(key=lambda e: e["start"])
    (dst / "call.json").write_text(json.dumps(m))
    return dst


async def test_a_cutoff_says_what_the_agent_said_inside_the_turn(tmp_path: Path) -> None:
    """Two answers to one caller turn (one inside it, one after its end): a
    decision inside the turn gets the first, one after its end the second —
    not both joined, which read the caller's words after the cutoff against
    the later question (LiveKit live vs replay, travel-natural-16: wait
    250 ms in the replay where the live detector waited 120 ms)."""
    rec = load_recording(_with_agent_inside_turn(tmp_path))
    planner = LabelPlanner(rec, 2.0)
    turn = rec.caller_turns[1]  # 10.955-14.591, hold 12.503-13.737
    answer = "Twelve forty Main Street, suite two hundred. And which city is that in?"
    assert planner.reply_text(1, 12.8) == "Okay, let me note that."
    assert planner.play_until(1, 12.9, 12.8) == pytest.approx(13.4)
    assert planner.reply_text(1, turn.end + 0.2) == answer
    assert planner.play_until(1, 15.0, turn.end + 0.2) == pytest.approx(20.383)
    assert planner.reply_text(1) == f"Okay, let me note that. {answer}"  # no decision: all
    # one answer (the corpus as written): every decision gets it
    plain = LabelPlanner(load_recording(CORPUS / "address-to-06"), 2.0)
    assert plain.reply_text(1, 12.8) == plain.reply_text(1, 15.0) == answer

    replies = []
    await replay_call(
        rec,
        "silence:stop_ms=300",
        ReplayConfig(compute="none"),
        observe=lambda agent: replies.extend(agent.replies),
    )
    inside = [r for r in replies if r.turn == 1 and r.decision_at < turn.end]
    after = [r for r in replies if r.turn == 1 and r.decision_at >= turn.end]
    assert inside and after
    assert all(r.text in ("", "Okay, let me note that.") for r in inside)
    assert any(r.text == "Okay, let me note that." for r in inside)  # it got out
    assert [r.text for r in after] == [answer]


async def test_a_draft_says_what_the_engine_streamed_for_it(tmp_path: Path) -> None:
    """With eager drafts, a reply drafted inside the turn and confirmed
    after its end plays the text its draft streamed into the history (the
    recording's answer at the draft's time), never another one."""
    rec = load_recording(_with_agent_inside_turn(tmp_path))
    got: list = []
    await replay_call(rec, "fused", ReplayConfig(compute="none", eager=True), observe=got.append)
    agent = got[0]
    played = [r for r in agent.replies if r.audible and r.id in agent.cursor]
    assert any(r.drafted for r in played)
    assert all(r.text == agent.cursor.reply(r.id).text for r in played)
