"""Playback-aware truncation in the replay: a reply the caller barged into
is cut, in the agent's LLM history, to the words the caller heard."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import LabelPlanner, ReplayConfig, replay_call

CORPUS = Path(__file__).resolve().parent.parent / "recordings"


async def test_barged_in_reply_keeps_only_the_words_heard() -> None:
    rec = load_recording(CORPUS / "headset-bargein-11")
    score = await replay_call(rec, "silence", ReplayConfig(count_compute=False))
    stopped = [r for r in score.replies if r["stop_reason"] == "interrupted"]
    assert stopped, "the barge-in must stop a reply"
    for r in stopped:
        assert r["heard_words"] is not None and 0 <= r["heard_words"] <= r["words"]
        # Heard whole only when the stop came within a word of the end.
        if r["heard_words"] == r["words"]:
            assert r["planned_end"] - r["stopped_at"] < 0.5
    assert any(r["heard_words"] < r["words"] for r in stopped)
    done = [r for r in score.replies if r["stop_reason"] == "completed"]
    assert all(r["heard_words"] is None for r in done)


async def test_acknowledgements_the_agent_talked_through_get_no_reply() -> None:
    """With the filters the agent keeps talking over "uh-huh" and its own
    echo, and the detector's end of that speech is not answered; the raw VAD
    baseline stops for it and answers it (a spurious reply)."""
    filtered = raw = 0
    ignored = 0
    for call in ("account-bargein-07", "address-to-06", "booking-think-03"):
        rec = load_recording(CORPUS / call)
        on = await replay_call(rec, "silence", ReplayConfig(count_compute=False))
        off = await replay_call(rec, "silence", ReplayConfig(count_compute=False, filters=False))
        filtered += on.spurious_replies
        ignored += on.ignored_decisions
        raw += off.spurious_replies
        assert off.ignored_decisions == 0  # the baseline never keeps talking over speech
    assert filtered == 0 and ignored > 0 and raw > 0


def test_a_replayed_reply_says_each_word_where_the_recorded_agent_did() -> None:
    """The recorded caller's backchannels and bids were timed to the
    recorded agent's audio, so the replayed reply's words play where the
    recorded agent said them: none before it began (a reply that starts
    early), squeezed into what is left of it (a reply that starts late),
    spread over the reply where the recording has nothing left to follow."""
    planner = LabelPlanner(load_recording(CORPUS / "address-to-06"), 2.0)
    start, end = 15.822, 20.383  # the recorded answer to caller turn 1
    text = planner.reply_text(1)
    for first_audio in (start - 0.5, start + 0.5):
        until = planner.play_until(1, first_audio)
        assert until == pytest.approx(end)
        words = planner.reply_words(1, first_audio, until)
        assert [w.text for w in words] == text.split()
        assert all(a.end <= b.start + 1e-9 for a, b in itertools.pairwise(words))
        assert words[-1].end <= end - first_audio + 1e-9
        assert words[-1].end > end - first_audio - 0.5
        if first_audio < start:
            assert words[0].start >= start - first_audio  # silent until the agent began
        else:
            assert 0 <= words[0].start < 0.2  # the first word at once
    # The answer to caller turn 2 ended at 26.806: a reply starting after it
    # spreads its text over its own length.
    until = planner.play_until(2, 27.0)
    words = planner.reply_words(2, 27.0, until)
    assert [w.text for w in words] == planner.reply_text(2).split()
    assert words[0].start >= 0 and words[-1].end <= until - 27.0 + 1e-9


def test_a_reply_the_recorded_agent_broke_off_goes_at_its_own_pace() -> None:
    """bargein-friday-05: the recorded agent stopped 0.4 s into "Sorry,
    actually make that Friday"; its ``agent_turn`` holds the whole reply it
    meant to say, 140 characters over the 4.0 s it spoke (2.2 times the
    nominal rate). Spread over that span, its first sentence would be over
    1.4 s before the cut; its audio has no pause before the cut (8.68 s):
    "doctor Patel." was still being said when the caller began (8.273 s).
    So its words go from its start at the agent's pace on its other turns,
    and the last of them were never said."""
    rec = load_recording(CORPUS / "bargein-friday-05")
    planner = LabelPlanner(rec, 2.0)
    assert 0.9 < planner.agent_pace() < 1.2  # its two turns said whole
    first_audio = 4.2
    words = planner.reply_words(0, first_audio, planner.play_until(0, first_audio))
    assert [w.text for w in words] == planner.reply_text(0).split()
    patel = next(w for w in words if w.text == "Patel.")
    assert patel.end + first_audio > 8.273 + 0.15
    assert words[-1].end + first_audio > 8.682  # never said: cut off
    assert words[0].start + first_audio >= 4.673  # from the recorded start


async def test_the_barge_in_policy_reads_the_agents_place_from_the_playback_cursor() -> None:
    """bargein-friday-05: "Sorry, actually make that Friday" starts while
    the recorded agent is still saying "doctor Patel." (above). The
    replayed reply began 0.5 s before the recorded one; reading its place
    at a nominal 15 characters a second from there put the caller just
    after "Patel." (a phrase boundary, where acknowledgements come, so the
    audio did not hold the agent and the stop waited for the word "sorry",
    399 ms). The cursor, on the recorded timeline, puts it mid-sentence: the
    audio holds the agent 0.2 s into the bid."""
    rec = load_recording(CORPUS / "bargein-friday-05")
    score = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    (stop,) = [t.stop_latency_ms for t in score.turns if t.stop_latency_ms is not None]
    assert stop < 350
