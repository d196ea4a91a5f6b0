"""Playback-aware truncation in the replay: a reply the caller barged into
is cut, in the agent's LLM history, to the words the caller heard."""

from __future__ import annotations

from pathlib import Path

from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

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
