"""``turnkit replay --llm-url``: the replay's LLM requests (drafts included)
go to a live engine and its measured TTFTs replace the latency model.

Against the real local engine (llama-server + SmolLM2-135M), and against
:class:`FakeEngine` for an engine that fails every request (the replay falls
back to the latency model, counts the errors, and loses nothing)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import closed_port, running_llama_server
from fake_engine import FakeEngine

from turnkit.replay.metrics import aggregate
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

CALL = Path(__file__).resolve().parent.parent / "recordings" / "easy-short-08"


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server() as base_url:
        yield base_url


async def test_live_engine_ttfts_drive_the_replay(engine: str) -> None:
    rec = load_recording(CALL)
    score = await replay_call(rec, "fused:audio=off", ReplayConfig(eager=True, llm_url=engine))
    live = score.live_llm
    assert live is not None
    # Every LLM request of the replay, drafts included, went to the engine.
    assert live["requests"] == score.llm_requests > 0
    assert live["errors"] == 0
    assert len(live["ttft_ms"]) == live["requests"]
    assert all(t > 0 for t in live["ttft_ms"])
    agg = aggregate("x", [score])
    assert agg["llm_live"]["requests"] == live["requests"]
    assert agg["drafts"]["used"] > 0
    assert agg["missed_rate"] == 0.0
    # The reply's first audio is the decision + measured TTFT + TTS, so the
    # measured figures show up in the response latencies.
    model = await replay_call(rec, "fused:audio=off", ReplayConfig(eager=True))
    assert [t.missed for t in score.turns] == [t.missed for t in model.turns]
    assert [t.response_ms for t in score.turns] != [t.response_ms for t in model.turns]


async def test_failing_engine_falls_back_and_counts_errors() -> None:
    fake = FakeEngine()
    try:
        rec = load_recording(CALL)
        cfg = ReplayConfig(eager=True, llm_url=fake.url("fail1000000"), count_compute=False)
        score = await replay_call(rec, "fused:audio=off", cfg)
        baseline = await replay_call(
            rec, "fused:audio=off", ReplayConfig(eager=True, count_compute=False)
        )
    finally:
        fake.close()
    assert score.live_llm is not None
    assert score.live_llm["errors"] == score.live_llm["requests"] == score.llm_requests
    assert score.live_llm["ttft_ms"] == []
    # Fallback = the latency model with the same seed: nothing lost, same result.
    assert [t.response_ms for t in score.turns] == [t.response_ms for t in baseline.turns]


def test_cli_llm_url_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    r = subprocess.run(
        [sys.executable, "-m", "turnkit.cli", "replay", str(CALL), "--llm-url", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--llm-url" in lines[0] and "Traceback" not in r.stderr
