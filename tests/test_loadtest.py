"""``turnkit loadtest`` (turnkit.llm.loadtest).

The plan (arrivals, request mix, changing context) and the report's
arithmetic are checked directly; small runs go against the real engine
(llama-server + SmolLM2 with two slots, tests/engine.py).
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from engine import running_llama_server

from turnkit.llm.loadtest import (
    LoadConfig,
    LoadReport,
    RemoteURLRefused,
    RequestRecord,
    agent_layout,
    arrival_times,
    check_target,
    plan_calls,
    run_load,
)

LOCAL = "http://127.0.0.1:9/v1"


def turnkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def test_arrivals_are_staggered() -> None:
    rng = random.Random(1)
    uni = arrival_times(5, 2.0, "uniform", rng)
    assert uni == [0.0, 2.0, 4.0, 6.0, 8.0]
    poi = arrival_times(4000, 0.5, "poisson", rng)
    gaps = np.diff(poi)
    assert np.all(gaps > 0)  # never two at once
    assert statistics.fmean(gaps) == pytest.approx(0.5, rel=0.06)
    assert statistics.pstdev(gaps) == pytest.approx(0.5, rel=0.1)  # exponential: sd = mean


def test_plan_mix_and_changing_context() -> None:
    cfg = LoadConfig(
        base_url=LOCAL, calls=40, agents=3, turns=6, context="changing",
        tool_share=0.5, background_share=0.25, seed=3,
    )  # fmt: skip
    plans = plan_calls(cfg)
    assert plans == plan_calls(cfg)  # deterministic
    assert [p.agent for p in plans[:6]] == [0, 1, 2, 0, 1, 2]
    for p in plans:
        versions = [t.context_version for t in p.turns]
        bumps = sum(b > a for a, b in zip([0, *versions], versions, strict=False))
        assert bumps == 3  # half of 6 turns change the block
    turns = [t for p in plans for t in p.turns]
    assert 0.35 < sum(t.tool for t in turns) / len(turns) < 0.65
    assert 0.12 < sum(t.background for t in turns) / len(turns) < 0.38
    stable = plan_calls(cfg.model_copy(update={"context": "stable"}))
    assert all(t.context_version == 0 for p in stable for t in p.turns)
    assert len({p.values["caller_number"] for p in plans}) == 40  # per-call values differ


def test_agent_layout_block_in_the_middle() -> None:
    a1, a2 = agent_layout(0, 300, 1), agent_layout(0, 300, 2)
    t1, t2 = a1.stable_text(), a2.stable_text()
    cut = next(i for i, (x, y) in enumerate(zip(t1, t2, strict=False)) if x != y)
    assert 0.15 < cut / len(t1) < 0.6  # the live-status block sits mid-prompt
    assert agent_layout(0, 300, 1).stable_hash == a1.stable_hash
    assert agent_layout(1, 300, 1).stable_hash != a1.stable_hash


def test_targets() -> None:
    for ok in ("http://127.0.0.1:8000/v1", "http://localhost:1/v1", "http://10.1.2.3/v1",
               "http://[::1]:8000/v1", "http://192.168.1.5:30000/v1"):  # fmt: skip
        check_target(ok)
    with pytest.raises(RemoteURLRefused, match="--allow-remote"):
        check_target("http://gpu.example.com:8000/v1")
    check_target("http://gpu.example.com:8000/v1", allow_remote=True)
    with pytest.raises(RemoteURLRefused, match="third-party"):
        check_target("https://api.openai.com/v1", allow_remote=True)


def test_summary_arithmetic() -> None:
    cfg = LoadConfig(base_url=LOCAL, slo_ttft_ms=100)
    recs = [
        RequestRecord(0, 0, -1, "prewarm", 0.0, 50, 50, 1000, 0),
        RequestRecord(0, 0, 0, "reply", 1.0, 80, 90, 1000, 900),
        RequestRecord(0, 0, 0, "background", 1.1, 300, 300, 100, 0),
        RequestRecord(0, 0, 1, "tool_call", 2.0, 120, 130, 1100, 1000),
        RequestRecord(0, 0, 1, "tool_followup", 2.5, 60, 70, 1200, 1100),
        RequestRecord(1, 1, 0, "reply", 1.5, None, None, error="HTTP 500"),
    ]
    s = LoadReport(cfg, recs, duration_s=10.0, calls_done=1).summary()
    assert s["caller_facing_requests"] == 4 and s["failed"] == 1
    assert s["slo_attainment"] == 0.5  # 80 and 60 of 4 caller-facing (one failed)
    assert s["request_goodput"] == pytest.approx(0.2)
    assert s["p50_ttft_ms"] == pytest.approx(80.0)
    assert s["p99_ttft_ms"] == pytest.approx(float(np.percentile([80, 120, 60], 99)), abs=0.01)
    assert s["per_turn"]["0"]["n"] == 1 and s["per_turn"]["1"]["p50_ttft_ms"] == 120
    assert s["total_input_tokens"] == 1000 + 100 + 1100 + 1200  # prewarm not counted
    assert s["cached_share"] == pytest.approx(3000 / 3400, abs=1e-4)
    assert s["uncached_prompt_tokens_per_s"] == pytest.approx(40.0)


def test_cli_refuses_bad_input() -> None:
    res = turnkit("loadtest", "--base-url", "http://gpu.example.com/v1")
    assert res.returncode == 2 and "--allow-remote" in res.stderr
    res = turnkit("loadtest", "--base-url", LOCAL, "--slo", "latency:5")
    assert res.returncode == 2 and "ttft:MS" in res.stderr
    res = turnkit("loadtest", "--base-url", LOCAL, "--calls", "0")
    assert res.returncode == 2 and "--calls" in res.stderr
    assert "Traceback" not in res.stderr
    res = turnkit("loadtest")
    assert res.returncode == 2  # no default URL


# --------------------------------------------------------------------------
# Real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server(parallel=2, ctx_size=4096) as base_url:
        yield base_url


def small(engine: str, **kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "base_url": engine, "calls": 3, "concurrency": 2, "agents": 1, "turns": 2,
        "think_s": 0.2, "stagger_s": 0.3, "arrival": "uniform", "prompt_tokens": 150,
        "reply_tokens": 3, "tool_share": 0.5, "background_share": 0.5, "slo_ttft_ms": 60_000,
        "request_timeout_s": 120, "seed": 1,
    }  # fmt: skip
    base.update(kw)
    return LoadConfig(**base)  # type: ignore[arg-type]


def test_small_run_on_the_engine(engine: str) -> None:
    cfg = small(engine, prewarm=True)
    report = asyncio.run(run_load(cfg))
    s = report.summary()
    plans = plan_calls(cfg)
    n_turns = sum(len(p.turns) for p in plans)
    n_tools = sum(t.tool for p in plans for t in p.turns)
    n_bg = sum(t.background for p in plans for t in p.turns)
    assert s["failed"] == 0, [r.error for r in report.records if r.error]
    assert s["calls_completed"] == 3 and s["prewarm_requests"] == 3
    assert s["caller_facing_requests"] == n_turns + n_tools
    assert s["background_requests"] == n_bg
    assert set(s["per_turn"]) == {"0", "1"} and s["per_turn"]["0"]["n"] == 3
    assert s["slo_attainment"] == 1.0 and s["request_goodput"] > 0
    assert s["p50_ttft_ms"] <= s["p90_ttft_ms"] <= s["p99_ttft_ms"]
    # One agent, stable context, prewarmed: most prompt tokens come from the cache.
    assert s["cached_share"] > 0.6, s
    # No call started before its arrival time.
    starts = {r.call: r.start_s for r in report.records if r.kind == "prewarm"}
    for p in plans:
        assert starts[p.index] >= p.arrival_s - 0.05


def test_changing_context_caches_less_and_bounds_hold(engine: str) -> None:
    stable = asyncio.run(run_load(small(engine, calls=2, turns=4, background_share=0)))
    changing = asyncio.run(
        run_load(small(engine, calls=2, turns=4, background_share=0, context="changing"))
    )
    s, c = stable.summary(), changing.summary()
    assert s["failed"] == 0 and c["failed"] == 0
    assert c["cached_share"] < s["cached_share"], (c, s)
    bounded = asyncio.run(run_load(small(engine, calls=3, max_requests=4)))
    b = bounded.summary()
    assert len(bounded.records) == 4 and b["stopped"] == "max_requests reached"


def test_a_rerun_is_new_to_the_engine(engine: str) -> None:
    # llama-server keeps earlier prompts (slots, host-memory cache): the same
    # run_id repeats the run's prompts and finds them cached; a new run_id
    # makes the calls and their changed blocks new, only the stable part hits.
    kw: dict[str, object] = {"calls": 1, "turns": 3, "tool_share": 0, "background_share": 0,
                             "context": "changing", "concurrency": 1}  # fmt: skip
    first = asyncio.run(run_load(small(engine, run_id="rerun-a", **kw))).summary()
    repeat = asyncio.run(run_load(small(engine, run_id="rerun-a", **kw))).summary()
    fresh = asyncio.run(run_load(small(engine, **kw))).summary()
    assert first["failed"] == repeat["failed"] == fresh["failed"] == 0
    assert repeat["run_id"] == "rerun-a" and fresh["run_id"] not in (None, "rerun-a")
    assert repeat["cached_share"] > first["cached_share"], (repeat, first)
    assert fresh["cached_share"] < repeat["cached_share"] - 0.1, (fresh, repeat)


def test_cli_json_on_the_engine(engine: str) -> None:
    res = turnkit(
        "loadtest", "--base-url", engine, "--calls", "1", "--turns", "1", "--agents", "1",
        "--prompt-tokens", "100", "--reply-tokens", "2", "--think-s", "0",
        "--tool-share", "0", "--background-share", "0", "--slo", "ttft:60000", "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    for key in ("p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "request_goodput",
                "slo_attainment", "cached_share", "uncached_prompt_tokens_per_s", "per_turn"):  # fmt: skip
        assert key in d
    assert d["completed"] == 1 and d["slo_attainment"] == 1.0
