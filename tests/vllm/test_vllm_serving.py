"""``turnkit loadtest``, ``llm-eou`` and ``ChatClient`` cancel against a real vLLM."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
from vllm_helpers import turnkit, wait_for

from turnkit.llm import LLMEndOfTurn
from turnkit.llm.client import ChatClient

# -- loadtest -------------------------------------------------------------------------


def test_loadtest_reports_goodput_and_ttft(
    vllm_url: str, vllm_model: str, record: Callable[..., None]
) -> None:
    """Call-shaped load (tools, background requests, prewarm) through the real CLI: every
    request answered, TTFT percentiles and goodput reported, the stable agent prompt
    served from vLLM's prefix cache after the first call."""
    p = turnkit(
        "loadtest", "--base-url", vllm_url, "--model", vllm_model,
        "--calls", "4", "--concurrency", "2", "--turns", "3", "--agents", "1",
        "--stagger-s", "1", "--think-s", "0.5", "--reply-tokens", "8",
        "--prompt-tokens", "400", "--prewarm", "--slo", "ttft:2000",
        "--max-duration-s", "400", "--json",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["failed"] == 0, p.stderr
    assert s["calls_completed"] == 4
    assert s["p50_ttft_ms"] is not None and s["p90_ttft_ms"] >= s["p50_ttft_ms"] > 0
    assert s["request_goodput"] is not None and s["slo_attainment"] is not None
    assert s["cached_tokens"] > 0  # one agent prompt shared by four calls
    record(
        "loadtest",
        **{k: s[k] for k in (
            "completed", "failed", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "slo_ttft_ms",
            "slo_attainment", "request_goodput", "cached_share", "duration",
        )},
    )  # fmt: skip


# -- llm-eou --------------------------------------------------------------------------


def test_llm_eou_reads_vllm_logprobs(
    vllm_url: str, vllm_model: str, record: Callable[..., None]
) -> None:
    """vLLM's /v1/completions ``logprobs`` (legacy format) lists special tokens by their
    text: ``"<|im_end|>"`` is a key of ``top_logprobs``. ``LLMEndOfTurn`` finds it there
    (no /tokenize needed), and a finished request scores above a cut one."""
    eou = LLMEndOfTurn(vllm_url, model=vllm_model, timeout_ms=120_000)
    # the raw format, on a prompt the model closes with its end token
    prompt = eou.render("yes", "Shall I book it for seven?")
    body = {
        "model": vllm_model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": 20,
    }
    raw = httpx.post(f"{vllm_url}/completions", json=body, timeout=300).json()
    top = raw["choices"][0]["logprobs"]["top_logprobs"][0]
    assert "<|im_end|>" in top, (
        f"end token not named in vLLM's top_logprobs: {json.dumps(raw)[:800]}"
    )

    async def run() -> dict[str, Any]:
        try:
            out = {}
            for key, text, agent in (
                ("yes", "yes", "Shall I book it for seven?"),
                ("complete", "i'd like to book a table for two please", "How can I help?"),
                ("cut", "i'd like to book a table for", "How can I help?"),
            ):
                out[key] = await eou.score(text, agent)
            return out
        finally:
            await eou.aclose()

    r = asyncio.run(run())
    assert r["yes"].found, f"LLMEndOfTurn missed '<|im_end|>' listed as {top.get('<|im_end|>')}"
    assert math.isclose(r["yes"].p_eot, math.exp(top["<|im_end|>"]), rel_tol=1e-3)
    assert eou.eot_id is None  # never needed llama-server's /tokenize
    assert r["complete"].probability > r["cut"].probability
    record(
        "llm_eou",
        p_eot_yes=round(r["yes"].p_eot, 5),
        p_end_complete=round(r["complete"].probability, 4),
        p_end_cut=round(r["cut"].probability, 4),
        elapsed_ms=[round(x.elapsed_ms, 1) for x in r.values()],
        cached_tokens=[x.cached_tokens for x in r.values()],
    )


# -- cancel ---------------------------------------------------------------------------


def test_cancel_frees_the_engine(
    vllm_url: str,
    vllm_model: str,
    scrape: Callable[[], dict[str, float]],
    record: Callable[..., None],
) -> None:
    """A long answer cancelled after a few tokens: ``vllm:num_requests_running`` goes
    back to 0 and generation stops well short of ``max_tokens``. Measured in the same
    run: cancel-to-idle time and one generated token's time (mean gap between deltas)."""
    max_tokens = 1500
    messages = [{"role": "user", "content": "Count from 1 to 2000, one number per line."}]
    before = scrape()
    assert before["vllm:num_requests_running"] == 0

    async def run() -> dict[str, float]:
        async with ChatClient(
            vllm_url, model=vllm_model, first_token_timeout_s=300, timeout_s=600
        ) as c:
            s = await c.stream(messages, max_tokens=max_tokens, extra={"ignore_eos": True})
            stamps: list[float] = []
            async for _ in s:
                stamps.append(time.perf_counter())
                if len(stamps) >= 12:
                    break
            assert scrape()["vllm:num_requests_running"] == 1
            t_cancel = time.perf_counter()
            await s.cancel()
            assert s.cancelled and s.finish_reason == "cancelled"
            idle = await asyncio.to_thread(
                wait_for, lambda: scrape()["vllm:num_requests_running"] == 0, 120, 0.01
            )
            assert idle, "vllm:num_requests_running still > 0 120 s after the cancel"
            t_idle = time.perf_counter()
            gaps = [b - a for a, b in itertools.pairwise(stamps[1:])]
            return {
                "cancel_to_idle_ms": (t_idle - t_cancel) * 1000,
                "token_ms": 1000 * sum(gaps) / len(gaps),
            }

    r = asyncio.run(run())
    after = scrape()
    generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert generated < max_tokens / 2, f"{generated} tokens generated after the cancel"
    # the engine still serves
    ok = httpx.post(
        f"{vllm_url}/chat/completions",
        json={"model": vllm_model, "messages": messages, "max_tokens": 2},
        timeout=300,
    )
    assert ok.status_code == 200
    record(
        "cancel",
        cancel_to_idle_ms=round(r["cancel_to_idle_ms"], 1),
        one_token_ms=round(r["token_ms"], 1),
        ratio=round(r["cancel_to_idle_ms"] / r["token_ms"], 2),
        tokens_generated=int(generated),
        max_tokens=max_tokens,
    )
