"""End to end: hand-built calls from real speech through the real Silero VAD,
the silence detector and the simulated agent, with answers known from how
the call was built (VAD edges are allowed their frame-sized slack)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from turnkit.audio.wav import read_wav
from turnkit.replay.metrics import aggregate
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

SR = 16000
SOURCE = Path(__file__).resolve().parent.parent / "recordings" / "easy-short-08"
# The VAD confirms speech 64 ms after onset and its probability decays for a
# few frames after the last phoneme: allow up to this much slack on edges.
VAD_SLACK_MS = 160.0


def _clip(index: int) -> np.ndarray:
    """Caller turn ``index`` of a committed demo call, cut at its labelled edges."""
    manifest = json.loads((SOURCE / "call.json").read_text())
    turns = [e for e in manifest["events"] if e["type"] == "caller_turn"]
    audio = read_wav(SOURCE / "caller.wav")
    t = turns[index]
    return audio[int(t["start"] * SR) : int(t["end"] * SR)]


@pytest.fixture(scope="module")
def sentence() -> np.ndarray:
    return _clip(0)  # "Can I change my appointment?" (about 1.3 s)


@pytest.fixture(scope="module")
def word() -> np.ndarray:
    return _clip(1)  # "No." (about 0.3 s)


class CallBuilder:
    """Places clips on a silent timeline and writes a call folder whose
    labels are the placement times."""

    def __init__(self, duration: float) -> None:
        self.audio = np.zeros(int(duration * SR), dtype=np.float32)
        self.events: list[dict] = []

    def place(self, clip: np.ndarray, at: float, gain: float = 1.0) -> tuple[float, float]:
        i = round(at * SR)
        self.audio[i : i + len(clip)] += clip * gain
        return i / SR, (i + len(clip)) / SR

    def turn(
        self, *pieces: tuple[np.ndarray, float], kinds: list[str] | None = None, text: str = ""
    ) -> None:
        spans = [self.place(c, at) for c, at in pieces]
        event: dict = {
            "type": "caller_turn",
            "start": spans[0][0],
            "end": spans[-1][1],
            "text": text or "can i change my appointment",
            "spans": [list(s) for s in spans],
        }
        if kinds:
            event["holds"] = [
                {"start": a, "end": b, "kind": k}
                for (_, a), (b, _), k in zip(spans, spans[1:], kinds, strict=False)
            ]
        self.events.append(event)

    def event(self, kind: str, start: float, end: float, **extra: object) -> None:
        self.events.append({"type": kind, "start": start, "end": end, **extra})

    def write(self, folder: Path, call_id: str = "hand") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        sf.write(folder / "caller.wav", self.audio, SR, subtype="PCM_16")
        manifest = {
            "format": "turnkit.recording/v1",
            "id": call_id,
            "audio": {"caller": "caller.wav"},
            "events": sorted(self.events, key=lambda e: e["start"]),
        }
        (folder / "call.json").write_text(json.dumps(manifest))
        return folder


async def run(folder: Path, spec: str, **cfg: object) -> dict:
    rec = load_recording(folder)
    score = await replay_call(rec, spec, ReplayConfig(**cfg))
    return aggregate(spec, [score])


async def test_response_latency_is_silence_plus_llm_plus_tts(
    tmp_path: Path, sentence: np.ndarray
) -> None:
    b = CallBuilder(6.0)
    b.turn((sentence, 0.5))
    end = b.events[0]["end"]
    b.event("agent_turn", end + 1.3, end + 3.0, text="sure")
    folder = b.write(tmp_path / "c")
    for stop_ms in (500, 800):
        res = await run(folder, f"silence:stop_ms={stop_ms}")
        (row,) = res["per_turn"]
        assert not row["interrupted"] and not row["missed"]
        expected = stop_ms + 350 + 150
        assert expected <= row["response_ms"] <= expected + VAD_SLACK_MS
        # The latency model adds exactly TTFT + TTFB after the decision.
        assert row["response_ms"] - row["eot_delay_ms"] == pytest.approx(500.0)


async def test_hold_longer_than_the_timer_is_a_false_cutoff(
    tmp_path: Path, sentence: np.ndarray
) -> None:
    b = CallBuilder(8.0)
    first_end = 0.5 + len(sentence) / SR
    b.turn((sentence, 0.5), (sentence, first_end + 1.0), kinds=["mid-sentence"])
    folder = b.write(tmp_path / "c")

    short = await run(folder, "silence:stop_ms=500")
    assert short["interruption_rate"] == 1.0
    assert short["hold_cutoff_rate"]["mid-sentence"] == {"holds": 1, "cutoffs": 1, "rate": 1.0}
    # It still answers after the real end.
    assert short["missed_rate"] == 0.0

    patient = await run(folder, "silence:stop_ms=1500")
    assert patient["interruption_rate"] == 0.0
    assert patient["hold_cutoff_rate"]["mid-sentence"]["cutoffs"] == 0
    assert 2000 <= patient["response_ms"]["p50"] <= 2000 + VAD_SLACK_MS


async def test_no_reply_within_the_timeout_is_missed(tmp_path: Path, sentence: np.ndarray) -> None:
    b = CallBuilder(6.0)
    b.turn((sentence, 0.5))
    folder = b.write(tmp_path / "c")
    res = await run(folder, "silence", timeout_s=1.0)
    assert res["missed_rate"] == 1.0
    assert res["per_turn"][0]["response_ms"] is None
    res = await run(folder, "silence", timeout_s=2.0)
    assert res["missed_rate"] == 0.0


def _agent_call(sentence: np.ndarray) -> tuple[CallBuilder, float]:
    """Caller turn, then a long recorded agent turn the replayed reply
    plays until (9.5 s)."""
    b = CallBuilder(12.0)
    b.turn((sentence, 0.5))
    end = b.events[0]["end"]
    b.event("agent_turn", end + 1.2, 9.5, text="a long answer")
    return b, end


async def test_baseline_agent_stops_for_a_backchannel(
    tmp_path: Path, sentence: np.ndarray, word: np.ndarray
) -> None:
    b, _ = _agent_call(sentence)
    s, e = b.place(word, 4.5)
    b.event("backchannel", s, e, text="no")
    res = await run(b.write(tmp_path / "c"), "silence:stop_ms=500")
    assert res["false_barge_in_rate"]["backchannel"] == 1.0
    assert res["false_barge_in_counts"]["backchannel"] == {"events": 1, "stopped": 1}
    # ...and then treats "no" as a turn and answers it: a reply to nothing.
    assert res["spurious_replies"] == 1


async def test_echo_loud_enough_for_the_vad_stops_the_baseline_agent(
    tmp_path: Path, sentence: np.ndarray
) -> None:
    b, _ = _agent_call(sentence)
    s, e = b.place(sentence, 4.0, gain=0.5)
    b.event("echo", s, e)
    res = await run(b.write(tmp_path / "c"), "silence:stop_ms=500")
    assert res["false_barge_in_rate"]["echo"] == 1.0


async def test_quiet_noise_does_not_stop_the_agent(tmp_path: Path, sentence: np.ndarray) -> None:
    b, _ = _agent_call(sentence)
    rng = np.random.default_rng(0)
    burst = (rng.standard_normal(int(0.3 * SR)) * 10 ** (-50 / 20)).astype(np.float32)
    s, e = b.place(burst, 4.5)
    b.event("noise", s, e, label="hiss")
    res = await run(b.write(tmp_path / "c"), "silence:stop_ms=500")
    assert res["false_barge_in_rate"]["noise"] == 0.0
    assert res["spurious_replies"] == 0


async def test_real_barge_in_stops_the_agent_fast(tmp_path: Path, sentence: np.ndarray) -> None:
    b, _ = _agent_call(sentence)
    b.turn((sentence, 5.0))
    # The raw VAD baseline (--no-filters): the filters listen longer by design.
    res = await run(b.write(tmp_path / "c"), "silence:stop_ms=500", filters=False)
    assert res["barge_in_count"] == 1
    assert res["barge_in_recall"] == 1.0
    # VAD start window (64 ms) plus frame granularity.
    assert 0 < res["barge_in_stop_ms"]["p50"] <= VAD_SLACK_MS
    # The barge-in itself is then answered like any turn.
    assert res["per_turn"][1]["missed"] is False


async def test_replay_is_deterministic_with_sampled_latency(
    tmp_path: Path, sentence: np.ndarray
) -> None:
    b = CallBuilder(8.0)
    b.turn((sentence, 0.5))
    b.turn((sentence, 4.5))
    folder = b.write(tmp_path / "c")
    cfg = {"llm_ttft_ms": "p50=300,p95=900", "seed": 7}
    a = await run(folder, "silence", **cfg)
    c = await run(folder, "silence", **cfg)
    assert a["per_turn"] == c["per_turn"]
    d = await run(folder, "silence", llm_ttft_ms="p50=300,p95=900", seed=8)
    assert [t["response_ms"] for t in d["per_turn"]] != [t["response_ms"] for t in a["per_turn"]]


async def test_a_bid_whose_words_come_after_its_end_is_answered(tmp_path: Path) -> None:
    """Regression (issue 12, "never strand the caller"): on the telephone
    copy of address-to-06 with the recogniser 300 ms late, fused cuts in at
    the hold in "Portland, ... Oregon."; the caller's "Oregon" holds the
    agent's reply, and its turn ends before its word is recognised. The
    agent was still (paused) "talking" at that end, so the end was ignored;
    when the late word then stopped the agent nobody answered the caller.
    The commit now confirms a held stop, and an end ignored while the agent
    talked is answered once the agent stops for it."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    src = tmp_path / "src" / "address-to-06"
    src.mkdir(parents=True)
    for name in ("call.json", "caller.wav", "agent.wav"):
        (src / name).write_bytes((repo / "recordings" / "address-to-06" / name).read_bytes())
    dst = tmp_path / "nb"
    proc = subprocess.run(
        [sys.executable, str(repo / "scripts" / "narrowband.py"), str(tmp_path / "src"), str(dst)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rec = load_recording(dst / "address-to-06")
    score = await replay_call(rec, "fused", ReplayConfig(compute="fixed", stt_delay_ms=300))
    assert not [t.turn for t in score.turns if t.missed]
