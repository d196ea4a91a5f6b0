"""``turnkit cache-report`` (turnkit.llm.cache_report).

SGLang log lines are written in SGLang's own format (the scheduler's
``Prefill batch. #new-seq: ..., #new-token: ..., #cached-token: ...`` and its
mixed-batch and DP variants). The Prometheus path runs against the real
llama-server (``--metrics``): its counter deltas must equal the usage the
engine reported for the same requests, and real responses make the usage
JSONL.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from engine import closed_port, running_llama_server

from turnkit.llm.cache_report import (
    ReportError,
    metrics_stats,
    metrics_url_for,
    parse_prometheus,
    parse_sglang_log,
    parse_usage_lines,
    scrape_metrics,
    window_stats,
)

SGLANG_LOG = """\
[2025-05-12 14:03:20] INFO:     Started server process [4121]
[2025-05-12 14:03:21] INFO:     127.0.0.1:53412 - "GET /health HTTP/1.1" 200 OK
[2025-05-12 14:03:22 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, 
[2025-05-12 14:03:25 TP0] Prefill batch. #new-seq: 1, #new-token: 1920, #cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0, 
[2025-05-12 14:03:26 TP0] Decode batch. #running-req: 1, #token: 1950, token usage: 0.01, cuda graph: True, gen throughput (token/s): 95.12, #queue-req: 0, 
[2025-05-12 14:03:30 TP0] Prefill batch. #new-seq: 1, #new-token: 64, #cached-token: 1856, token usage: 0.01, #running-req: 0, #queue-req: 0, 
[2025-05-12 14:03:31 TP0] Prefill batch(mixed #running-req: 1). #new-seq: 1, #new-token: 128, #cached-token: 1792, cache hit rate: 48.12%, #queue-req: 0
[2025-05-12 14:03:32 DP0 TP0] Prefill batch. #new-seq: 2, #new-token: 3000, #cached-token: 900, full token usage: 0.02, swa token usage: 0.01, #running-req: 1, #queue-req: 0, input throughput (token/s): 1234.56, 
[2025-05-12 14:03:33 TP0] Prefill batch. #new-seq: 1, #new-token: 12, #cached-token: 988, token usage: 0.02, #running-req: 0, #queue-req: 0, 
"""  # noqa: W291 (SGLang's lines end with ", ")


def turnkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def test_sglang_log_counts_and_skips_pings() -> None:
    s = parse_sglang_log(SGLANG_LOG.splitlines())
    # 7 and 12+988=1000 tokens are <= 1000: pings, skipped.
    assert (s.prefills, s.skipped) == (4, 2)
    assert s.new_tokens == 1920 + 64 + 128 + 3000
    assert s.cached_tokens == 1856 + 1792 + 900
    assert s.cached_share == pytest.approx(4548 / 9660)
    assert "ALERT" in (s.alert() or "")
    everything = parse_sglang_log(SGLANG_LOG.splitlines(), min_tokens=0)
    assert (everything.prefills, everything.skipped) == (6, 0)
    with pytest.raises(ReportError, match="no SGLang 'Prefill batch"):
        parse_sglang_log(["[2025-05-12 14:03:21] INFO: Decode batch. #running-req: 1"], "x.log")


def test_usage_lines_and_alert_threshold() -> None:
    lines = [
        json.dumps({"usage": {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1900}}}),
        json.dumps({"prompt_tokens": 1500, "completion_tokens": 3}),  # bare usage, no cache
        json.dumps({"usage": {"prompt_tokens": 1200}, "timings": {"cache_n": 1100}}),  # llama-server
        json.dumps({"usage": {"prompt_tokens": 5}}),  # a ping
        "",
    ]  # fmt: skip
    s = parse_usage_lines(lines)
    assert (s.prefills, s.skipped) == (3, 1)
    assert (s.new_tokens, s.cached_tokens) == (100 + 1500 + 100, 1900 + 1100)
    with pytest.raises(ReportError, match=r"u.jsonl:2: not JSON"):
        parse_usage_lines(["{}", "oops"], "u.jsonl")
    with pytest.raises(ReportError, match="no line has usage"):
        parse_usage_lines(['{"a": 1}'], "u.jsonl")


def test_prometheus_parsing_and_engine_families() -> None:
    text = """\
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 500.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 700.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 200.0
vllm:request_success_total{finished_reason="stop",model_name="m"} 3.0
vllm:request_success_total{finished_reason="length",model_name="m"} 2.0
"""
    m = parse_prometheus(text)
    assert m["vllm:prefix_cache_queries_total"] == 1500.0
    assert "vllm:prefix_cache_queries_created" not in m
    s = metrics_stats({}, m)
    assert (s.engine, s.cached_tokens, s.new_tokens, s.prefills) == ("vllm", 900, 600, 5)
    old = {"vllm:gpu_prefix_cache_hits_total": 30.0, "vllm:gpu_prefix_cache_queries_total": 40.0}
    assert metrics_stats({}, old).engine == "vllm-old"
    sg0 = {"sglang:cached_tokens_total": 100.0, "sglang:prompt_tokens_total": 400.0}
    sg1 = {"sglang:cached_tokens_total": 1900.0, "sglang:prompt_tokens_total": 2400.0,
           "sglang:num_requests_total": 1.0}  # fmt: skip
    s = metrics_stats(sg0, sg1)
    assert (s.engine, s.cached_tokens, s.new_tokens, s.prefills) == ("sglang", 1800, 200, 1)
    with pytest.raises(ReportError, match="no prefix-cache counters"):
        metrics_stats({}, {"process_cpu_seconds_total": 1.0})
    with pytest.raises(ReportError, match="went down"):
        metrics_stats(sg1, sg0)
    assert metrics_url_for("http://h:8/v1/") == "http://h:8/metrics"


def test_cli_bad_inputs_each_one_line_rest_processed(tmp_path: Path) -> None:
    good = tmp_path / "sglang.log"
    good.write_text(SGLANG_LOG)
    empty = tmp_path / "quiet.log"
    empty.write_text("[2025-05-12 14:03:21] INFO: Uvicorn running on http://0.0.0.0:30000\n")
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    res = turnkit(
        "cache-report", str(empty), str(good), "--metrics-url", url, "--window-s", "0", "--json"
    )
    assert res.returncode == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2, res.stderr
    assert "quiet.log" in errors[0] and "Prefill batch" in errors[0]
    assert url in errors[1] and "did not answer" in errors[1]
    assert "Traceback" not in res.stderr
    d = json.loads(res.stdout)
    assert set(d) >= {"cached_share", "prefills", "skipped", "new_tokens", "cached_tokens"}
    assert (d["prefills"], d["skipped"]) == (4, 2)
    assert d["cached_share"] == pytest.approx(4548 / 9660, abs=1e-4)
    assert d["alerts"] and "ALERT" in res.stderr  # 47 % < 90 %
    res = turnkit("cache-report", str(good))  # human output
    assert res.returncode == 0 and "ALERT" in res.stdout and "47.1%" in res.stdout


# --------------------------------------------------------------------------
# Real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server(metrics=True) as base_url:
        yield base_url


SYSTEM = " ".join(f"Rule {i}: confirm the caller's details before booking." for i in range(20))


def chat(base_url: str, user: str) -> dict:
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "max_tokens": 1,
        "temperature": 0,
    }
    r = httpx.post(f"{base_url}/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    return r.json()


def test_metrics_window_equals_engine_usage(engine: str, tmp_path: Path) -> None:
    # The window is bounded by events, not by time: scrape, run the two
    # requests to completion (llama-server counts a prompt in /metrics before
    # it answers), scrape again. A fixed window missed requests on a busy host.
    url = metrics_url_for(engine)
    before = asyncio.run(scrape_metrics(url))
    responses = [
        chat(engine, user) for user in ("Book me for Tuesday.", "Can I come Friday instead?")
    ]
    stats = metrics_stats(before, asyncio.run(scrape_metrics(url)), source=url)
    new = sum(r["usage"]["prompt_tokens"] - r["timings"]["cache_n"] for r in responses)
    cached = sum(r["timings"]["cache_n"] for r in responses)
    assert stats.engine == "llama.cpp"
    assert (stats.new_tokens, stats.cached_tokens) == (new, cached)
    assert cached > 200  # the second request reused the system prompt

    # window_stats counts deltas: requests that finished before the window
    # opened are not in it, and nothing is sent during it.
    quiet = asyncio.run(window_stats(url, window_s=0.2))
    assert (quiet.engine, quiet.new_tokens, quiet.cached_tokens) == ("llama.cpp", 0, 0)

    # The same responses as a usage JSONL give the same share.
    usage = tmp_path / "usage.jsonl"
    usage.write_text("\n".join(json.dumps(r) for r in responses) + "\n")
    res = turnkit("cache-report", str(usage), "--min-tokens", "0", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert (d["new_tokens"], d["cached_tokens"], d["prefills"]) == (new, cached, 2)

    # --window-s 0: totals since the engine started (only these requests).
    before = asyncio.run(scrape_metrics(url))
    res = turnkit("cache-report", "--metrics-url", url, "--window-s", "0", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["cached_tokens"] == before["llamacpp:prompt_tokens_cached_total"]
    assert d["new_tokens"] == before["llamacpp:prompt_tokens_total"]
    assert d["sources"][0]["engine"] == "llama.cpp"
