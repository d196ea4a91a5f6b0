"""A streaming OpenAI-compatible chat client: TTFT, prefix-cache hits, cancellation.

:class:`ChatClient` POSTs ``/chat/completions`` with ``stream: true`` and
``stream_options: {"include_usage": true}`` to llama-server, vLLM or SGLang
(or OpenAI) and hands back a :class:`ChatStream`: an async iterator of text
deltas that also keeps what a turn-taking agent needs to know about the
answer — the time to first token (:attr:`ChatStream.ttft_ms`), the text so
far, tool calls (accumulated from their deltas), ``finish_reason``, the
engine's ``usage`` and how many prompt tokens its prefix cache served
(:attr:`ChatStream.cached_tokens`: ``usage.prompt_tokens_details.cached_tokens``,
else llama-server's ``timings.cache_n``).

Cancellation is closing the HTTP response: :meth:`ChatStream.cancel` (or
leaving ``async with``) closes the connection at once, which is how
llama-server, vLLM and SGLang learn that nobody listens any more and free the
slot (measured on llama-server: ``requests_processing`` drops to 0 within a
few generated-token times; see ``benchmarks/bench_llm_cancel.py``). A
cancelled stream ends iteration quietly with ``finish_reason == "cancelled"``.

Timeouts are explicit: ``connect_timeout_s`` (TCP connect),
``first_token_timeout_s`` (request sent → first content or tool-call token)
and ``timeout_s`` (request sent → last byte). Any of them raises
:class:`LLMTimeout`. HTTP errors, refused/reset connections and malformed or
truncated streams raise :class:`LLMError`; both are
:class:`~turnkit.llm.logprobs.EngineError` (with its ``kind``) and carry a
one-line message naming the URL and status. HTTP >= 500 and connection
failures are retried up to ``max_retries`` times with exponential backoff
(``retry_backoff_s * 2**attempt``) — only while no token has been received;
a stream that fails after yielding tokens is never retried (the caller has
already acted on them). Timeouts and 4xx are not retried.

``ttft_ms`` and ``total_ms`` are measurements (``time.perf_counter``), from
the first attempt's send, so retries count against them as the caller
experiences it.

Three ways to use a stream::

    async with ChatClient("http://127.0.0.1:8080/v1") as client:
        async with client.stream(messages, max_tokens=64) as s:   # leaving cancels
            async for delta in s:
                speak(delta)
        s.ttft_ms, s.cached_tokens, s.usage

        s = await client.stream(messages)       # opened (response headers in)
        first = await anext(aiter(s))
        await s.cancel()                        # the engine stops generating

        r = await client.complete(messages)     # ChatResult: text, ttft_ms, total_ms, ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from turnkit.llm.logprobs import EngineError

__all__ = [
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "LLMError",
    "LLMTimeout",
    "ToolCall",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 2.0
DEFAULT_FIRST_TOKEN_TIMEOUT_S = 10.0
DEFAULT_RETRY_BACKOFF_S = 0.05


class LLMError(EngineError):
    """The engine failed us: ``kind`` is ``http``, ``connect``, ``protocol``
    or ``timeout``; ``url`` and ``status`` (HTTP status, if any) say where."""

    def __init__(self, kind: str, message: str, *, url: str = "", status: int | None = None):
        where = f"{url}" + (f" HTTP {status}" if status is not None else "")
        super().__init__(kind, f"{message} ({where})" if where else message)
        self.url = url
        self.status = status


class LLMTimeout(LLMError):
    """No connection, first token or end of stream within its deadline."""

    def __init__(self, message: str, *, url: str = "", stage: str = "") -> None:
        super().__init__("timeout", message, url=url)
        self.stage = stage  # "connect", "first_token" or "total"


@dataclass(slots=True)
class ToolCall:
    """One tool call, accumulated from its streamed deltas."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""  # JSON text as streamed (complete once the stream ends)

    def parsed_arguments(self) -> Any:
        return json.loads(self.arguments) if self.arguments else {}


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A whole answer (:meth:`ChatClient.complete`): its text and tool calls,
    when the first token and the last arrived, the engine's usage and cached
    prompt tokens, and why it stopped."""

    text: str
    ttft_ms: float | None
    total_ms: float
    usage: dict[str, Any]
    cached_tokens: int | None
    finish_reason: str | None
    request_id: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)


def _cached_tokens(usage: dict[str, Any], timings: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        cached = details["cached_tokens"]
        # llama-server reports 0 there in some builds while timings.cache_n
        # has the real count; take the larger where both are given.
        cache_n = timings.get("cache_n")
        return max(cached, cache_n) if isinstance(cache_n, int) else cached
    cache_n = timings.get("cache_n")
    return cache_n if isinstance(cache_n, int) else None


class ChatStream:
    """One streamed chat completion. Awaitable (opens the request and returns
    itself once the response headers are in), an async context manager
    (opens; leaving the block cancels) and an async iterator of text deltas
    (opens on first use). See the module docstring."""

    def __init__(
        self,
        client: ChatClient,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        self._client = client
        self._body = body
        # Per-request headers (e.g. a gateway routing key) over the client's.
        self._headers = {**client.headers, **headers} if headers else client.headers
        self._url = client.url("chat/completions")
        self._resp: httpx.Response | None = None
        self._lines: AsyncIterator[str] | None = None
        self._reading = False
        self._opened = False
        self._done = False
        self._cancelled = False
        self._got_token = False
        self._attempt = 0
        self._t0: float | None = None
        self._t_first: float | None = None
        self._t_end: float | None = None
        self._parts: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.timings: dict[str, Any] = {}
        self.request_id: str | None = None
        self.status_code: int | None = None

    # -- what we know so far -------------------------------------------------

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def ttft_ms(self) -> float | None:
        """Request sent → first content (or tool-call) token, ms; None before it."""
        if self._t0 is None or self._t_first is None:
            return None
        return (self._t_first - self._t0) * 1000

    @property
    def total_ms(self) -> float | None:
        """Request sent → end of stream (or cancel), ms; None while running."""
        if self._t0 is None or self._t_end is None:
            return None
        return (self._t_end - self._t0) * 1000

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens served from the engine's prefix cache, where it says."""
        return _cached_tokens(self.usage, self.timings)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def done(self) -> bool:
        return self._done

    # -- protocols -----------------------------------------------------------

    def __await__(self) -> Generator[Any, None, ChatStream]:
        return self._open_once().__await__()

    async def __aenter__(self) -> ChatStream:
        return await self._open_once()

    async def __aexit__(self, *exc: object) -> None:
        await self.cancel()

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> str:
        while True:
            if self._done:
                raise StopAsyncIteration
            try:
                if not self._opened:
                    await self._open_once()
                    continue
                delta = await self._next_delta()
            except BaseException:
                await self._close()
                raise
            if delta is None:
                await self._close()
                raise StopAsyncIteration
            return delta

    async def cancel(self) -> None:
        """Stop: close the HTTP response now (the engine aborts the request).
        Idempotent; after the stream ended it only releases the connection."""
        if not self._done:
            self._cancelled = True
            if self.finish_reason is None:
                self.finish_reason = "cancelled"
            log.debug("cancel %s (request %s)", self._url, self.request_id)
        await self._close()

    aclose = cancel

    # -- internals -------------------------------------------------------------

    def _deadline(self) -> float:
        c = self._client
        assert self._t0 is not None
        total = self._t0 + c.timeout_s
        if not self._got_token and c.first_token_timeout_s is not None:
            return min(total, self._t0 + c.first_token_timeout_s)
        return total

    def _timeout(self) -> LLMTimeout:
        c = self._client
        if not self._got_token and (
            c.first_token_timeout_s is not None and c.first_token_timeout_s < c.timeout_s
        ):
            return LLMTimeout(
                f"no first token within {c.first_token_timeout_s:g} s",
                url=self._url,
                stage="first_token",
            )
        return LLMTimeout(
            f"stream not finished within {c.timeout_s:g} s", url=self._url, stage="total"
        )

    async def _open_once(self) -> ChatStream:
        if self._opened or self._done:
            return self
        if self._t0 is None:
            self._t0 = time.perf_counter()
        try:
            await self._open_with_retries()
        except BaseException:
            await self._close()
            raise
        return self

    async def _open_with_retries(self) -> None:
        while True:
            try:
                await self._open()
                return
            except LLMError as exc:
                if not self._may_retry(exc):
                    raise
                await self._backoff(exc)

    def _may_retry(self, exc: LLMError) -> bool:
        if self._got_token or self._cancelled or self._attempt >= self._client.max_retries:
            return False
        if isinstance(exc, LLMTimeout):
            return False
        return exc.kind == "connect" or (exc.status is not None and exc.status >= 500)

    async def _backoff(self, exc: LLMError) -> None:
        delay = self._client.retry_backoff_s * (2**self._attempt)
        self._attempt += 1
        log.info("retry %d after %s (in %.0f ms)", self._attempt, exc, delay * 1000)
        await self._close_response()
        remaining = self._deadline() - time.perf_counter()
        if delay >= remaining:
            raise self._timeout()
        await asyncio.sleep(delay)

    async def _open(self) -> None:
        c = self._client
        req = c.http.build_request("POST", self._url, json=self._body, headers=self._headers)
        remaining = self._deadline() - time.perf_counter()
        if remaining <= 0:
            raise self._timeout()
        try:
            async with asyncio.timeout(remaining):
                resp = await c.http.send(req, stream=True)
        except TimeoutError:
            raise self._timeout() from None
        except httpx.ConnectTimeout:
            raise LLMTimeout(
                f"no connection within {c.connect_timeout_s:g} s", url=self._url, stage="connect"
            ) from None
        except httpx.TimeoutException:
            raise self._timeout() from None
        except httpx.HTTPError as exc:
            raise LLMError("connect", f"{type(exc).__name__}: {exc}", url=self._url) from None
        if self._cancelled:  # cancelled (from another task) while we waited
            await resp.aclose()
            return
        self._resp = resp
        self.status_code = resp.status_code
        self.request_id = resp.headers.get("x-request-id") or self.request_id
        if resp.status_code != 200:
            detail = ""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(
                    max(0.05, min(1.0, self._deadline() - time.perf_counter()))
                ):
                    detail = (await resp.aread()).decode("utf-8", "replace")
            detail = " ".join(detail.split())[:200]
            raise LLMError(
                "http",
                f"engine answered {resp.status_code}" + (f": {detail}" if detail else ""),
                url=self._url,
                status=resp.status_code,
            )
        self._lines = resp.aiter_lines()
        self._opened = True

    async def _next_delta(self) -> str | None:
        """The next text delta; None at the end. Retries (reopens) on a
        failure before the first token."""
        while True:
            try:
                line = await self._read_line()
            except LLMError as exc:
                if self._cancelled:
                    return None
                if not self._may_retry(exc):
                    raise
                await self._backoff(exc)
                self._opened = False
                await self._open_with_retries()
                if self._cancelled:
                    return None
                continue
            if line is None:
                self._finish()
                return None
            delta = self._handle_line(line)
            if delta is not None:
                return delta
            if self._done:
                return None

    async def _read_line(self) -> str | None:
        if self._lines is None:
            if self._cancelled:
                return None
            raise LLMError("protocol", "stream not open", url=self._url)
        remaining = self._deadline() - time.perf_counter()
        if remaining <= 0:
            raise self._timeout()
        self._reading = True
        try:
            async with asyncio.timeout(remaining):
                return await anext(self._lines)
        except StopAsyncIteration:
            if self._cancelled:
                return None
            if self.finish_reason is not None:
                return None  # an engine that sends no [DONE]
            raise LLMError(
                "protocol", "stream ended before [DONE]", url=self._url, status=self.status_code
            ) from None
        except TimeoutError:
            raise self._timeout() from None
        except httpx.HTTPError as exc:
            if self._cancelled:
                return None
            raise LLMError(
                "connect",
                f"stream broken: {type(exc).__name__}: {exc}",
                url=self._url,
                status=self.status_code,
            ) from None
        except Exception:
            if self._cancelled:  # the response was closed under us
                return None
            raise
        finally:
            self._reading = False

    def _handle_line(self, line: str) -> str | None:
        line = line.strip()
        if not line or line.startswith(":"):
            return None
        if not line.startswith("data:"):
            return None  # event:/id:/retry: fields carry nothing we use
        data = line[5:].strip()
        if data == "[DONE]":
            self._finish()
            return None
        try:
            chunk = json.loads(data)
        except ValueError:
            raise LLMError(
                "protocol", f"not JSON in stream: {data[:80]!r}", url=self._url
            ) from None
        if not isinstance(chunk, dict):
            return None
        if "error" in chunk and not chunk.get("choices"):
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else str(err)
            raise LLMError("http", f"engine error in stream: {msg}", url=self._url)
        if self.request_id is None and isinstance(chunk.get("id"), str):
            self.request_id = chunk["id"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        text: str | None = None
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            content = delta.get("content")
            if isinstance(content, str) and content:
                text = content if text is None else text + content
            for tc in delta.get("tool_calls") or []:
                self._merge_tool_call(tc)
        if text is not None:
            self._mark_first()
            self._parts.append(text)
        return text

    def _merge_tool_call(self, tc: Any) -> None:
        if not isinstance(tc, dict):
            return
        index = tc.get("index", len(self.tool_calls))
        call = next((t for t in self.tool_calls if t.index == index), None)
        if call is None:
            call = ToolCall(index=index)
            self.tool_calls.append(call)
        if isinstance(tc.get("id"), str):
            call.id = tc["id"]
        fn = tc.get("function") or {}
        if isinstance(fn, dict):
            if isinstance(fn.get("name"), str):
                call.name += fn["name"]
            if isinstance(fn.get("arguments"), str):
                call.arguments += fn["arguments"]
        self._mark_first()

    def _mark_first(self) -> None:
        if not self._got_token:
            self._got_token = True
            self._t_first = time.perf_counter()

    def _finish(self) -> None:
        if not self._done:
            self._t_end = time.perf_counter()
            self._done = True

    async def _close(self) -> None:
        if self._t0 is not None and self._t_end is None:
            self._t_end = time.perf_counter()
        self._done = True
        await self._close_response()

    async def _close_response(self) -> None:
        lines, self._lines = self._lines, None
        resp, self._resp = self._resp, None
        # A line iterator being read by another task cannot be closed here;
        # closing the response under it wakes that reader (it then ends).
        if lines is not None and not self._reading:
            with contextlib.suppress(Exception):
                await lines.aclose()  # type: ignore[attr-defined]
        if resp is not None:
            with contextlib.suppress(Exception):
                await resp.aclose()


class ChatClient:
    """Streaming chat completions from one OpenAI-compatible engine; one
    ``httpx.AsyncClient`` (connection pool) per instance.

    Example::

        async with ChatClient("http://127.0.0.1:8080/v1", first_token_timeout_s=2) as c:
            r = await c.complete([{"role": "user", "content": "hi"}], max_tokens=16)
            r.text, r.ttft_ms, r.cached_tokens
    """

    def __init__(
        self,
        base_url: str,
        model: str = "",
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        first_token_timeout_s: float | None = DEFAULT_FIRST_TOKEN_TIMEOUT_S,
        max_retries: int = 0,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = 100,
    ) -> None:
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        if first_token_timeout_s is not None and first_token_timeout_s <= 0:
            raise ValueError("first_token_timeout_s must be positive (or None)")
        if max_retries < 0 or retry_backoff_s < 0:
            raise ValueError("max_retries and retry_backoff_s must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.first_token_timeout_s = (
            None if first_token_timeout_s is None else float(first_token_timeout_s)
        )
        self.max_retries = int(max_retries)
        self.retry_backoff_s = float(retry_backoff_s)
        self.headers: dict[str, str] = {"Accept": "text/event-stream"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        # Read/write deadlines are ours (first token, total); httpx only
        # bounds the connect and waiting for a pooled connection.
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=self.connect_timeout_s, read=None, write=None, pool=self.timeout_s
            ),
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections),
        )

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def request_body(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        if max_tokens is not None:
            body["max_tokens"] = int(max_tokens)
        if temperature is not None:
            body["temperature"] = float(temperature)
        if tools:
            body["tools"] = tools
        if extra:
            body.update(extra)
        return body

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ChatStream:
        """A :class:`ChatStream` for ``messages``: ``await`` it (opens the
        request), ``async with`` it (leaving cancels) or iterate it.
        ``extra`` is merged into the JSON body (e.g. ``{"top_p": 0.9}``);
        ``headers`` are sent with this request only (e.g. a gateway routing
        key, :func:`turnkit.llm.routing.routing_headers`)."""
        body = self.request_body(
            messages, max_tokens=max_tokens, temperature=temperature, tools=tools, extra=extra
        )
        return ChatStream(self, body, headers)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ChatResult:
        """The whole answer, streamed and collected (TTFT measured on the way)."""
        s = self.stream(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            tools=tools,
            extra=extra,
            headers=headers,
        )
        async with s:
            async for _ in s:
                pass
        return ChatResult(
            text=s.text,
            ttft_ms=s.ttft_ms,
            total_ms=s.total_ms or 0.0,
            usage=dict(s.usage),
            cached_tokens=s.cached_tokens,
            finish_reason=s.finish_reason,
            request_id=s.request_id,
            tool_calls=list(s.tool_calls),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
