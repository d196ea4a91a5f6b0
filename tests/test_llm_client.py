"""The streaming chat client (turnkit.llm.client).

Against the real local engine (llama-server + SmolLM2-135M, tests/engine.py;
skipped without it unless TURNKIT_REQUIRE_ENGINE=1): text streams, TTFT and
usage are reported, a repeated prefix is served from the cache, and a
cancelled stream stops the engine — proven by the engine's own Prometheus
counters, not by the client's word.

Against :class:`FakeEngine` (a threaded ``http.server`` speaking SSE, and an
``httpx.MockTransport`` twin for volume): retries before the first token,
mid-stream disconnects, first-token stalls, tool-call deltas, cancellation
from another task, and 10,000 cancelled streams leaving no task behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator

import httpx
import pytest
from engine import closed_port, engine_metrics, running_llama_server
from fake_engine import FakeEngine, mock_transport

from turnkit.llm import EngineError
from turnkit.llm.client import ChatClient, LLMError, LLMTimeout

USER = [{"role": "user", "content": "Say hello."}]
STORY = [
    {
        "role": "user",
        "content": "Write a very long story about a dragon and a knight, with many chapters.",
    }
]


@pytest.fixture
def fake() -> Iterator[FakeEngine]:
    eng = FakeEngine()
    yield eng
    eng.close()


# --------------------------------------------------------------------------
# Fake engine: protocol, errors, timeouts, cancellation


async def test_fake_stream_text_usage_cached(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("ok")) as c:
        s = c.stream(USER, max_tokens=8)
        deltas = [d async for d in s]
    assert deltas == ["Hel", "lo", "!"]
    assert s.text == "Hello!" and s.finish_reason == "stop" and s.done and not s.cancelled
    assert s.usage["prompt_tokens"] == 7 and s.usage["completion_tokens"] == 3
    assert s.cached_tokens == 5  # timings.cache_n beats a reported 0
    assert s.request_id == "chatcmpl-fake"
    assert s.ttft_ms is not None and s.total_ms is not None and 0 < s.ttft_ms <= s.total_ms


async def test_fake_complete_and_tool_calls(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("tools")) as c:
        r = await c.complete(USER, tools=[{"type": "function", "function": {"name": "book"}}])
    assert r.finish_reason == "tool_calls" and r.text == ""
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert (call.id, call.name) == ("call_1", "book")
    assert call.parsed_arguments() == {"party": 2}
    assert r.ttft_ms is not None  # a tool-call delta is the first token


async def test_fake_5xx_retried_then_succeeds(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("fail2"), max_retries=2, retry_backoff_s=0.01) as c:
        r = await c.complete(USER)
    assert r.text == "Hello!"
    assert fake.requests == 3


async def test_fake_5xx_retries_exhausted_raise_llm_error(fake: FakeEngine) -> None:
    url = fake.url("fail9")
    async with ChatClient(url, max_retries=2, retry_backoff_s=0.01) as c:
        with pytest.raises(LLMError) as ei:
            await c.complete(USER)
    assert fake.requests == 3  # one try + two retries
    err = ei.value
    assert isinstance(err, EngineError) and not isinstance(err, LLMTimeout)
    assert err.status == 503 and err.kind == "http"
    msg = str(err)
    assert "\n" not in msg and "503" in msg and url in msg and "overloaded" in msg


async def test_fake_no_retry_by_default(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("fail1")) as c:
        with pytest.raises(LLMError):
            await c.stream(USER)
    assert fake.requests == 1


async def test_fake_disconnect_before_first_token_is_retried(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("cutfirst"), max_retries=1, retry_backoff_s=0.0) as c:
        with pytest.raises(LLMError, match=r"before \[DONE\]|broken"):
            await asyncio.wait_for(c.complete(USER), 60)
    assert fake.requests == 2


async def test_fake_mid_stream_disconnect_raises_without_retry(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("cut"), max_retries=3, retry_backoff_s=0.0) as c:
        s = c.stream(USER)
        got: list[str] = []
        with pytest.raises(LLMError) as ei:
            async with asyncio.timeout(5):  # no hang
                async for d in s:
                    got.append(d)
    assert got == ["a", "b"]  # what was yielded stays yielded
    assert fake.requests == 1  # never retried after tokens
    assert ei.value.kind in ("connect", "protocol")
    assert s.done


async def test_fake_first_token_stall_times_out(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("stall"), first_token_timeout_s=0.3, max_retries=2) as c:
        t = time.perf_counter()
        with pytest.raises(LLMTimeout) as ei:
            await c.complete(USER)
        elapsed = time.perf_counter() - t
    assert ei.value.stage == "first_token"
    # The stall is endless: only the timeout ends it (the upper bound leaves a
    # loaded CI machine its scheduling delays).
    assert 0.25 <= elapsed < 15.0
    assert fake.requests == 1  # timeouts are not retried


async def test_fake_total_timeout(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("endless"), timeout_s=0.3) as c:
        with pytest.raises(LLMTimeout) as ei:
            await c.complete(USER)
    assert ei.value.stage == "total"


async def test_connection_refused_is_llm_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with ChatClient(url, max_retries=1, retry_backoff_s=0.0) as c:
        with pytest.raises(LLMError) as ei:
            await c.complete(USER)
    assert ei.value.kind == "connect" and url in str(ei.value)


async def _wait_for(cond: object, timeout: float = 60.0) -> bool:
    # Waits for an event; the bound only stops a hang (a loaded CI machine
    # may take seconds to schedule a local task).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return False


async def test_fake_cancel_closes_connection(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("endless")) as c:
        async with c.stream(STORY) as s:
            async for _ in s:
                if len(s.text) >= 3:
                    break
        assert s.cancelled and s.finish_reason == "cancelled" and s.text == "xxx"
        assert [d async for d in s] == []  # a cancelled stream is over
        assert await _wait_for(lambda: fake.disconnects == 1)


async def test_fake_cancel_from_another_task_ends_reader(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("endless")) as c:
        s = await c.stream(STORY)
        got: list[str] = []

        async def reader() -> None:
            async for d in s:
                got.append(d)

        task = asyncio.create_task(reader())
        await _wait_for(lambda: len(got) >= 2)
        await s.cancel()
        await asyncio.wait_for(task, 60)  # ends quietly, no hang
        assert s.cancelled
        assert await _wait_for(lambda: fake.disconnects == 1)


async def test_fake_task_cancellation_closes_stream(fake: FakeEngine) -> None:
    async with ChatClient(fake.url("endless")) as c:

        async def consume() -> None:
            async for _ in c.stream(STORY):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert await _wait_for(lambda: fake.disconnects == 1)


async def test_ten_thousand_cancelled_streams_leak_no_tasks() -> None:
    stats = {"opened": 0, "closed": 0}
    baseline = len(asyncio.all_tasks())
    async with ChatClient("http://fake/v1", transport=mock_transport(stats)) as c:
        for i in range(10_000):
            if i % 2:
                s = await c.stream(STORY)
                await anext(s)
                await s.cancel()
            else:
                async with c.stream(STORY) as s:
                    await anext(s)
    assert stats == {"opened": 10_000, "closed": 10_000}
    # httpx's nested byte-stream generators left suspended by an early close
    # are finalised by asyncio as short tasks (they close once and end);
    # what must not exist is a task that stays.
    gc.collect()
    assert await _wait_for(lambda: len(asyncio.all_tasks()) == baseline)


async def test_cancelled_streams_on_sockets_leak_nothing(fake: FakeEngine) -> None:
    baseline = len(asyncio.all_tasks())
    async with ChatClient(fake.url("endless")) as c:
        for _ in range(100):
            async with c.stream(STORY) as s:
                await anext(s)
    assert await _wait_for(lambda: fake.disconnects == 100)
    gc.collect()
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == baseline


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ChatClient("http://x/v1", timeout_s=0)
    with pytest.raises(ValueError):
        ChatClient("http://x/v1", max_retries=-1)


# --------------------------------------------------------------------------
# The real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server(metrics=True) as base_url:
        yield base_url




async def test_engine_streams_text_ttft_usage(engine: str) -> None:
    async with ChatClient(engine, first_token_timeout_s=30) as c:
        s = c.stream(USER, max_tokens=16)
        deltas = [d async for d in s]
    assert deltas and "".join(deltas) == s.text and s.text.strip()
    assert s.finish_reason in ("stop", "length")
    assert s.ttft_ms is not None and s.total_ms is not None
    assert 0 < s.ttft_ms <= s.total_ms
    assert s.usage["prompt_tokens"] > 0 and 0 < s.usage["completion_tokens"] <= 16
    assert s.request_id


async def test_engine_prefix_cache_reported(engine: str) -> None:
    system = "You are a helpful restaurant booking assistant for Luigi's. " * 20
    async with ChatClient(engine, first_token_timeout_s=30) as c:
        first = await c.complete(
            [{"role": "system", "content": system}, {"role": "user", "content": "Hi there."}],
            max_tokens=4,
        )
        second = await c.complete(
            [{"role": "system", "content": system}, {"role": "user", "content": "A table?"}],
            max_tokens=4,
        )
    assert first.usage["prompt_tokens"] > 200
    assert second.cached_tokens is not None and second.cached_tokens > 200
    assert second.total_ms >= (second.ttft_ms or 0) > 0


async def test_engine_cancel_stops_generation(engine: str) -> None:
    """Cancel after a few tokens: the engine's own counters show the request
    gone (waited for, 30 s at most on a busy machine), far fewer tokens than
    asked for generated, and none after that."""
    before = engine_metrics(engine)
    async with ChatClient(engine, first_token_timeout_s=30) as c:
        s = await c.stream(STORY, max_tokens=2000, temperature=0.8, extra={"ignore_eos": True})
        n = 0
        async for _ in s:
            n += 1
            if n == 5:
                break
        assert engine_metrics(engine)["requests_processing"] == 1
        await s.cancel()
        t_cancel = time.perf_counter()
        while True:
            m = engine_metrics(engine)
            if m["requests_processing"] == 0:
                break
            assert time.perf_counter() - t_cancel < 30, "engine still processing 30 s after cancel"
            await asyncio.sleep(0.01)
    assert s.cancelled
    await asyncio.sleep(0.5)
    after = engine_metrics(engine)
    assert after["tokens_predicted_total"] == m["tokens_predicted_total"]
    assert after["n_decode_total"] == m["n_decode_total"]
    generated = after["tokens_predicted_total"] - before["tokens_predicted_total"]
    assert 5 <= generated < 500  # stopped long before max_tokens
    root = engine.removesuffix("/v1")
    slots = httpx.get(f"{root}/slots", timeout=5).json()
    assert not any(slot["is_processing"] for slot in slots)
