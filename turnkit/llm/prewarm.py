"""Prewarm: fill the engine's prefix cache at call setup, before the caller speaks.

While the phone rings or the greeting plays, send the request the call's first
turn will start with — the same stable part, tools and per-call block, in the
same order (:meth:`~turnkit.llm.prompt.CallPrompt.request`) — with
``max_tokens=1``, and the same routing-key header as the call's real requests,
so a gateway sends it to the engine that will serve the call. The real first
request then finds all but its new tail in the cache.

``repeats``: hybrid models (state-space / linear-attention layers) keep a
reusable state only after the same prefix has missed more than once on some
engines; send the prewarm ``repeats`` times, one after another. Each
:class:`PrewarmShot` records what the engine said: TTFT, prompt tokens and how
many it served from its cache (the second shot's ``cached_tokens`` shows the
cache took it).

Example::

    call = layout.start_call(values)
    call.add("assistant", GREETING)
    headers = routing_headers(routing_key("dental", layout.stable_hash))
    task = asyncio.create_task(prewarm(client, call.request(), headers=headers))
    ...                                      # greeting plays; the caller answers
    call.add("user", first_words)
    stream = client.stream(call.request().messages, tools=..., headers=headers)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from turnkit.llm.client import ChatClient, LLMError
from turnkit.llm.prompt import ChatRequest

__all__ = ["PrewarmResult", "PrewarmShot", "prewarm"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PrewarmShot:
    """One prewarm request: its TTFT and total time, and how many of its
    prompt tokens the engine's prefix cache already held."""

    ttft_ms: float | None
    total_ms: float
    prompt_tokens: int | None
    cached_tokens: int | None


@dataclass(slots=True)
class PrewarmResult:
    """What the prewarm requests met; ``error`` is the one-line reason when
    one failed (a prewarm failure never raises: the call goes on cold)."""

    shots: list[PrewarmShot] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.shots)


def _body_parts(request: ChatRequest | dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    if isinstance(request, ChatRequest):
        return request.messages, request.tools
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("prewarm needs a chat request with 'messages'")
    return messages, list(request.get("tools") or [])


async def prewarm(
    client: ChatClient,
    request: ChatRequest | dict[str, Any],
    *,
    repeats: int = 1,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> PrewarmResult:
    """Send ``request`` ``repeats`` times with ``max_tokens=1`` (see the
    module docstring). ``extra`` should carry the call's other body fields
    that change the rendered prompt (e.g. ``chat_template_kwargs``)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    messages, tools = _body_parts(request)
    result = PrewarmResult()
    for i in range(repeats):
        try:
            r = await client.complete(
                messages,
                max_tokens=1,
                temperature=0.0,
                tools=tools or None,
                extra=extra,
                headers=headers,
            )
        except LLMError as exc:
            result.error = f"prewarm {i + 1}/{repeats}: {exc}"
            log.warning("%s", result.error)
            break
        result.shots.append(
            PrewarmShot(
                ttft_ms=r.ttft_ms,
                total_ms=r.total_ms,
                prompt_tokens=r.usage.get("prompt_tokens"),
                cached_tokens=r.cached_tokens,
            )
        )
    return result
