"""Prewarm (turnkit.llm.prewarm) on the real engine (llama-server + SmolLM2,
tests/engine.py): after a 1-token prewarm of the first request's shape, the
real first request finds the stable part in the cache; without one it does
not. A fake transport checks the routing headers and the request shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
from engine import closed_port, running_llama_server

from turnkit.llm.client import ChatClient
from turnkit.llm.prewarm import prewarm
from turnkit.llm.prompt import PromptLayout
from turnkit.llm.routing import routing_headers, routing_key

TOOL = {"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}}


def agent(name: str) -> PromptLayout:
    reference = " ".join(
        f"Item {i}: {name} confirms the date, the time and the reason for the visit."
        for i in range(14)
    )
    return PromptLayout(
        persona=f"You are {name}, the receptionist at Acme Dental. Greet {{caller_name}}.",
        reference=reference,
        tools=[TOOL],
    )


def fake_ok_sse() -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "length"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
    return (
        f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()
    )


def test_fake_transport_sees_shape_headers_and_repeats() -> None:
    seen: list[tuple[dict, dict]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((json.loads(req.content), dict(req.headers)))
        return httpx.Response(200, content=fake_ok_sse())

    lay = agent("Ava")
    call = lay.start_call({"caller_name": "Dana"})
    call.add("assistant", "Acme Dental, this is Ava.")
    req = call.request()
    key = routing_key("dental", lay.stable_hash)

    async def run() -> None:
        async with ChatClient(
            "http://fake/v1", transport=httpx.MockTransport(handler)
        ) as c:
            res = await prewarm(c, req, repeats=3, headers=routing_headers(key))
            assert res.ok and len(res.shots) == 3
            assert res.shots[0].prompt_tokens == 10

    asyncio.run(run())
    assert len(seen) == 3
    for body, headers in seen:
        assert body["messages"] == req.messages and body["tools"] == req.tools
        assert body["max_tokens"] == 1
        assert headers["x-smg-routing-key"] == key and headers["x-session-id"] == key


def test_prewarm_failure_is_reported_not_raised() -> None:
    async def run() -> None:
        async with ChatClient(f"http://127.0.0.1:{closed_port()}/v1") as c:
            res = await prewarm(c, {"messages": [{"role": "user", "content": "hi"}]})
        assert not res.ok and res.error and "prewarm 1/1" in res.error

    asyncio.run(run())
    with pytest.raises(ValueError):
        asyncio.run(prewarm(ChatClient("http://x/v1"), {"messages": []}))


# --------------------------------------------------------------------------
# Real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server() as base_url:
        yield base_url


def test_prewarm_fills_the_cache_for_the_first_turn(engine: str) -> None:
    async def first_turn(c: ChatClient, name: str, warm: bool) -> dict[str, object]:
        lay = agent(name)
        call = lay.start_call({"caller_name": "Dana"})
        call.add("assistant", f"Acme Dental, this is {name}.")
        headers = routing_headers(routing_key(name, lay.stable_hash))
        out: dict[str, object] = {}
        if warm:
            res = await prewarm(c, call.request(), repeats=2, headers=headers)
            assert res.ok, res.error
            out["shots"] = res.shots
        call.add("user", "Hi, can I book a cleaning for Tuesday?")
        req = call.request()
        r = await c.complete(req.messages, tools=req.tools, max_tokens=1, headers=headers)
        out["prompt"], out["cached"] = r.usage["prompt_tokens"], r.cached_tokens or 0
        return out

    async def run() -> tuple[dict[str, object], dict[str, object]]:
        async with ChatClient(engine, timeout_s=120, first_token_timeout_s=120) as c:
            cold = await first_turn(c, "Bea", warm=False)
            warm = await first_turn(c, "Cal", warm=True)
            return cold, warm

    cold, warm = asyncio.run(run())
    shots = warm["shots"]
    assert isinstance(shots, list) and len(shots) == 2
    # The second shot found the first one's prompt (all but the last token).
    assert shots[1].cached_tokens >= shots[1].prompt_tokens - 1
    # The real first request: stable part + greeting from the cache; only the
    # caller's words and the call details are new.
    assert warm["cached"] >= warm["prompt"] - 40, warm  # type: ignore[operator]
    assert warm["prompt"] > 150  # type: ignore[operator]
    assert cold["cached"] < 20, cold  # type: ignore[operator]
