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
