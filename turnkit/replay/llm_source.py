"""Where the replay's LLM first-token times come from.

The replay runs on a virtual clock, so an LLM request is a time to first
token, not a wait. Two sources decide it:

* :class:`ModelTTFT` — the latency model (``--llm-ttft-ms``): fixed or a
  fitted log-normal, seeded; the default, fast and deterministic.
* :class:`LiveTTFT` — a live OpenAI-compatible engine (``--llm-url``): every
  LLM request of the replay (eager drafts included) is sent to the engine
  with the call's conversation so far (system prompt, caller transcripts,
  the agent's recorded replies); its measured TTFT becomes the virtual
  latency. The stream is closed after the first token, which makes the
  engine abort the request: the replay plays the recorded reply's audio, so
  the rest of the answer is not needed. A failed request (timeout, 5xx,
  refused) is counted in :attr:`LiveTTFT.errors` and the turn falls back to
  the latency model, as a live agent falls back to a fresh request or an
  apology line — the replay must not hang or lose the call.

Requests run one at a time from a call's pipeline (the virtual clock is
frozen while one is measured), so with ``--workers N`` the engine sees up to
N concurrent requests; ``turnkit replay --llm-url`` uses one worker unless
told otherwise, so TTFTs are not inflated by the replay's own parallelism.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Protocol

from turnkit.llm.client import ChatClient, LLMError
from turnkit.replay.latency import LatencyModel

__all__ = ["SYSTEM_PROMPT", "LiveTTFT", "ModelTTFT", "TTFTSource"]

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


class LiveTTFT:
    """TTFTs measured on a live engine (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        fallback: ModelTTFT,
        *,
        model: str = "",
        max_tokens: int = 32,
        first_token_timeout_s: float = 10.0,
        client: ChatClient | None = None,
    ) -> None:
        self.client = client or ChatClient(
            base_url, model=model, first_token_timeout_s=first_token_timeout_s
        )
        self.fallback = fallback
        self.max_tokens = max_tokens
        self.requests = 0
        self.errors: list[str] = []
        self.measured_ms: list[float] = []

    async def ttft_ms(self, messages: list[dict[str, Any]]) -> float:
        self.requests += 1
        stream = self.client.stream(messages, max_tokens=self.max_tokens)
        try:
            async with stream:
                async for _ in stream:
                    break  # first token is all the replay needs; leaving cancels
        except LLMError as exc:
            self.errors.append(str(exc))
            log.warning("live engine request failed, using the latency model: %s", exc)
            return await self.fallback.ttft_ms(messages)
        ttft = stream.ttft_ms
        if ttft is None:  # the engine answered with no token at all
            self.errors.append(f"{self.client.base_url}: empty answer")
            return await self.fallback.ttft_ms(messages)
        self.measured_ms.append(ttft)
        return ttft

    async def aclose(self) -> None:
        await self.client.aclose()
