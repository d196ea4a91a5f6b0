"""Where the replay's LLM answers come from: the latency model or a live engine.

The replay runs on a virtual clock, so an LLM request is a time to first
token and a stream of tokens at virtual instants, not a wait. Two sources:

* :class:`ModelTTFT` — the latency model (``--llm-ttft-ms``): fixed or a
  fitted log-normal, seeded; the default, fast and deterministic. The reply's
  tokens are then the recorded agent reply
  (:class:`~turnkit.replay.engine.SimulatedEngine`).
* :class:`LiveEngine` — a live OpenAI-compatible engine (``--llm-url``):
  every text request of the replay (eager drafts included) is sent to the
  engine with the conversation as the :class:`~turnkit.drafting.responder.Responder`'s
  history holds it (system prompt, caller turns, the agent's replies cut to
  the words the caller heard), and the engine's own tokens are the reply
  (:meth:`LiveEngine.open`, :class:`LiveStream`). Each token's arrival,
  measured from the request's send, is mapped onto the virtual clock by the
  simulated engine; the clock does not move while the replay waits for the
  engine (:class:`~turnkit.replay.engine.HeldClock`), so the engine and the
  replay stay within one token of each other. A stream the replay leaves
  before the engine finished it (a draft the detector discarded, a reply
  stopped by a barge-in or superseded) is closed at once, which makes the
  engine abort the request; those are counted in :attr:`LiveEngine.aborted`.
  A tool round (the recording's ``tool_call`` events still decide which tools
  run: a small model would not call them) only measures its TTFT on the
  engine (:meth:`LiveEngine.ttft_ms`: closed after the first token).
  A failed request (timeout, 5xx, refused) is counted in
  :attr:`LiveEngine.errors` and the turn falls back to the latency model and
  the recorded reply, as a live agent falls back to a fresh request or an
  apology line — the replay must not hang or lose the call.

Requests run one at a time from a call's pipeline (the virtual clock is
frozen while one is awaited), so with ``--workers N`` the engine sees up to
N calls' requests; ``turnkit replay --llm-url`` uses one worker unless told
otherwise, so TTFTs are not inflated by the replay's own parallelism.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from turnkit.llm.client import ChatClient, ChatStream, LLMError
from turnkit.replay.latency import LatencyModel

__all__ = [
    "SYSTEM_PROMPT",
    "LiveEngine",
    "LiveRequest",
    "LiveStream",
    "ModelTTFT",
    "TTFTSource",
    "live_messages",
]

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are a helpful phone agent for a small business. Answer the caller in one or two "
    "short spoken sentences."
)


class TTFTSource(Protocol):
    """Time to first token, in ms, of an LLM request for ``messages``."""

    async def ttft_ms(self, messages: list[dict[str, Any]]) -> float: ...

    async def aclose(self) -> None: ...


class ModelTTFT:
    """TTFTs drawn from a :class:`LatencyModel` with the call's seeded rng."""

    def __init__(self, model: LatencyModel, rng: random.Random) -> None:
        self.model = model
        self.rng = rng

    async def ttft_ms(self, messages: list[dict[str, Any]]) -> float:
        return self.model.sample(self.rng)

    async def aclose(self) -> None:
        pass


def live_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as plain chat turns for the live engine.

    The Responder's history holds tool rounds (an assistant message with
    ``tool_calls`` and no content, ``tool`` results) that the replay's
    recorded tools produced; a small engine's chat template need not accept
    them. They are sent as text: the call as an assistant line, the result
    as a user line saying it is a tool result. Everything else is sent as is."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            calls = ", ".join(
                f"{(c.get('function') or {}).get('name')}"
                f"({(c.get('function') or {}).get('arguments') or ''})"
                for c in m["tool_calls"]
            )
            text = str(m.get("content") or "").strip()
            out.append({"role": "assistant", "content": f"{text} [calling {calls}]".strip()})
        elif role == "tool":
            out.append({"role": "user", "content": f"[tool result] {m.get('content') or ''}"})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return out


@dataclass(slots=True)
class LiveRequest:
    """One request the live engine got: what kind, when its first token came
    (ms from the send), the text and how many deltas it streamed, whether it
    ended on its own (``finished``), was closed while the engine still
    generated (``aborted``), or failed (``error``)."""

    kind: str  # "text" (the engine's tokens are the reply) or "ttft" (a tool round)
    ttft_ms: float | None = None
    end_ms: float | None = None
    tokens: int = 0
    text: str = ""
    finished: bool = False
    aborted: bool = False
    error: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None  # the engine's own usage count, if it said
    messages: list[dict[str, Any]] = field(default_factory=list)  # what was sent


class LiveStream:
    """One text request on the live engine, read a delta at a time.

    :meth:`first` sends it and waits for the first token (its TTFT, ms);
    :meth:`next` gives each following delta with its arrival time in ms
    from the send, and ``None`` at the end (:attr:`LiveRequest.end_ms`);
    :meth:`close` closes it — if the engine had not finished, that aborts
    the request on the engine (:attr:`LiveRequest.aborted`)."""

    def __init__(self, engine: LiveEngine, stream: ChatStream, req: LiveRequest) -> None:
        self._engine = engine
        self._stream = stream
        self.request = req
        self._t_first: float | None = None
        self._first: str | None = None
        self._closed = False

    def _offset_ms(self) -> float:
        assert self._t_first is not None and self.request.ttft_ms is not None
        return self.request.ttft_ms + (time.perf_counter() - self._t_first) * 1000

    async def first(self) -> float:
        """Send the request and wait for its first token; its TTFT in ms.
        Raises :class:`LLMError` (counted) when the engine fails."""
        try:
            async for delta in self._stream:
                self._t_first = time.perf_counter()
                self._first = delta
                break
        except LLMError as exc:
            self._fail(str(exc))
            raise
        ttft = self._stream.ttft_ms
        if self._first is None or ttft is None:
            self._finish()
            msg = f"{self._engine.client.base_url}: empty answer"
            self._fail(msg)
            raise LLMError("protocol", msg)
        self.request.ttft_ms = ttft
        self._engine.measured_ms.append(ttft)
        self._count(self._first)
        return ttft

    async def next(self) -> tuple[str, float] | None:
        """The next delta and its arrival (ms from the send), or ``None``
        when the answer ended (or failed after some tokens: counted, and the
        text so far stands)."""
        if self._first is not None:
            delta, self._first = self._first, None
            return delta, self.request.ttft_ms or 0.0
        if self.request.finished or self._closed:
            return None
        try:
            async for delta in self._stream:
                out = (delta, self._offset_ms())
                self._count(delta)
                return out
        except LLMError as exc:
            self._fail(f"stream broke after {self.request.tokens} deltas: {exc}")
            self._closed = True
            return None
        self._finish()
        return None

    async def close(self) -> None:
        """Leave the stream; if the engine is still generating, it aborts."""
        if self._closed:
            return
        self._closed = True
        if not self.request.finished and self.request.error is None:
            self.request.aborted = True
            self._engine.aborted += 1
        await self._stream.cancel()

    def _count(self, delta: str) -> None:
        self.request.tokens += 1
        self.request.text += delta

    def _finish(self) -> None:
        req, s = self.request, self._stream
        req.finished = True
        if self._t_first is not None:
            req.end_ms = self._offset_ms()
        req.finish_reason = s.finish_reason
        ct = s.usage.get("completion_tokens") if isinstance(s.usage, dict) else None
        req.completion_tokens = ct if isinstance(ct, int) else None

    def _fail(self, why: str) -> None:
        self.request.error = why
        self._engine.errors.append(why)
        log.warning("live engine request failed: %s", why)


class LiveEngine:
    """A live engine's answers for the replay (see the module docstring):
    :meth:`open` for a text request whose tokens are the reply,
    :meth:`ttft_ms` for a tool round (first token only). ``fallback`` is the
    latency model a failed request falls back to."""

    def __init__(
        self,
        base_url: str,
        fallback: ModelTTFT,
        *,
        model: str = "",
        max_tokens: int = 32,
        first_token_timeout_s: float = 10.0,
        client: ChatClient | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.client = client or ChatClient(
            base_url, model=model, first_token_timeout_s=first_token_timeout_s
        )
        self.fallback = fallback
        self.max_tokens = max_tokens  # a tool round's request (first token only)
        self.extra = dict(extra or {})  # merged into every request body (e.g. sampling)
        self.requests = 0
        self.aborted = 0  # streams closed while the engine was still generating
        self.errors: list[str] = []
        self.measured_ms: list[float] = []
        self.log: list[LiveRequest] = []

    def open(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        extra: dict[str, Any] | None = None,
    ) -> LiveStream:
        """A text request for ``messages`` (not sent until :meth:`LiveStream.first`)."""
        self.requests += 1
        req = LiveRequest(kind="text", messages=live_messages(messages))
        self.log.append(req)
        stream = self.client.stream(
            req.messages,
            max_tokens=max_tokens,
            temperature=temperature,
            extra={**self.extra, **(extra or {})} or None,
        )
        return LiveStream(self, stream, req)

    async def ttft_ms(self, messages: list[dict[str, Any]]) -> float:
        """A tool round's TTFT: measured on the engine, the stream closed
        after its first token (the recorded tool calls answer the round)."""
        self.requests += 1
        req = LiveRequest(kind="ttft", messages=live_messages(messages))
        self.log.append(req)
        stream = self.client.stream(
            req.messages, max_tokens=self.max_tokens, extra=self.extra or None
        )
        try:
            async with stream:
                async for _ in stream:
                    break  # first token is all a tool round needs; leaving cancels
        except LLMError as exc:
            req.error = str(exc)
            self.errors.append(str(exc))
            log.warning("live engine request failed, using the latency model: %s", exc)
            return await self.fallback.ttft_ms(messages)
        ttft = stream.ttft_ms
        if ttft is None:  # the engine answered with no token at all
            req.error = f"{self.client.base_url}: empty answer"
            self.errors.append(req.error)
            return await self.fallback.ttft_ms(messages)
        req.ttft_ms = ttft
        self.measured_ms.append(ttft)
        return ttft

    async def aclose(self) -> None:
        await self.client.aclose()
