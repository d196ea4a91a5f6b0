"""One next-token distribution from an OpenAI-compatible ``/v1/completions``.

:func:`next_token_logprobs` sends ``prompt`` with ``max_tokens=1``,
``temperature=0`` and ``logprobs=k`` and returns the engine's top-``k``
candidates for the next token as ``{token text: logprob}``, plus the prompt's
token counts (how many came from the engine's prefix cache, where it says).

Engines disagree on the shape of ``logprobs``; :func:`parse_completion`
accepts all of these:

* OpenAI legacy completions (vLLM, SGLang, OpenAI):
  ``{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{tok: lp}]}``;
* chat-style entries (recent llama-server, also for ``/v1/completions``):
  ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}``;
* llama.cpp's native ``completion_probabilities`` (``probs`` with
  ``tok_str``/``prob`` or ``top_logprobs`` with ``token``/``logprob``).

Token ids are kept where the engine gives them (:attr:`NextToken.ids`):
llama-server renders special tokens such as ``<|im_end|>`` as the empty
string in ``top_logprobs`` (checked on llama.cpp from llama-cpp-python
0.3.36), so they can only be told apart by id.

Cached prompt tokens come from ``usage.prompt_tokens_details.cached_tokens``
(OpenAI, vLLM with prefix caching stats, llama-server) or llama-server's
``timings.cache_n``.

Every failure — connection refused, timeout, HTTP error status, a body that
is not a completion — raises :class:`EngineError` with a short ``kind``; no
request is retried.

Example::

    async with httpx.AsyncClient(base_url="http://127.0.0.1:8080/v1", timeout=0.3) as c:
        nxt = await next_token_logprobs(c, "<|im_start|>user\\nhi", top_k=20)
        nxt.top["<|im_end|>"]      # logprob, if among the top 20
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "EngineError",
    "NextToken",
    "completion_request",
    "next_token_logprobs",
    "next_token_logprobs_sync",
    "parse_completion",
]


class EngineError(RuntimeError):
    """The engine gave no usable answer. ``kind`` is one of ``timeout``,
    ``connect``, ``http``, ``protocol``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass(frozen=True, slots=True)
class NextToken:
    """The engine's view of the next token after a prompt."""

    top: dict[str, float]  # token text -> natural-log probability, best first
    ids: dict[int, float] = field(default_factory=dict)  # token id -> logprob, where given
    sampled: str | None = None  # the token the engine picked (greedy)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the prefix cache
    elapsed_ms: float = 0.0  # wall-clock time of the request
    raw_usage: dict[str, Any] = field(default_factory=dict)

    def prob(self, token: str) -> float | None:
        """P(token) if it is among the top candidates, else None."""
        lp = self.top.get(token)
        return None if lp is None else math.exp(lp)

    @property
    def floor(self) -> float:
        """The smallest listed probability: any token not listed is at most
        this likely (an upper bound for it)."""
        return math.exp(min(self.top.values())) if self.top else 1.0


def completion_request(prompt: str, *, model: str = "", top_k: int = 20) -> dict[str, Any]:
    """The JSON body: one greedy token and its top-``top_k`` alternatives."""
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": int(top_k),
        "stream": False,
    }
    if model:
        body["model"] = model
    return body


def _merge(top: dict[str, float], token: Any, logprob: Any) -> None:
    if not isinstance(token, str) or not isinstance(logprob, int | float):
        return
    lp = float(logprob)
    if math.isnan(lp):
        return
    # Two ids can render to the same text; their probabilities add.
    if token in top:
        top[token] = math.log(math.exp(top[token]) + math.exp(lp))
    else:
        top[token] = lp


def _entries_top(entries: list[Any], ids: dict[int, float]) -> tuple[dict[str, float], str | None]:
    """Chat-style / native entries: a list with one item per generated token."""
    top: dict[str, float] = {}
    sampled = None
    if not entries or not isinstance(entries[0], dict):
        return top, sampled
    first = entries[0]
    sampled = first.get("token", first.get("content"))
    for cand in first.get("top_logprobs") or []:
        if isinstance(cand, dict):
            _merge(top, cand.get("token"), cand.get("logprob"))
            tid, lp = cand.get("id"), cand.get("logprob")
            if isinstance(tid, int) and isinstance(lp, int | float):
                ids[tid] = float(lp)
    for cand in first.get("probs") or []:  # llama.cpp native, older builds
        if isinstance(cand, dict):
            prob = cand.get("prob")
            if isinstance(prob, int | float) and prob > 0:
                _merge(top, cand.get("tok_str", cand.get("token")), math.log(prob))
    if sampled is not None and sampled not in top and isinstance(first.get("logprob"), int | float):
        _merge(top, sampled, first["logprob"])
    return top, sampled if isinstance(sampled, str) else None


def parse_completion(body: Any) -> NextToken:
    """Normalise a completion response (see the module docstring)."""
    if not isinstance(body, dict):
        raise EngineError("protocol", "response is not a JSON object")
    top: dict[str, float] = {}
    ids: dict[int, float] = {}
    sampled: str | None = None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        lps = choices[0].get("logprobs")
        if isinstance(lps, dict):
            if isinstance(lps.get("content"), list):
                top, sampled = _entries_top(lps["content"], ids)
            elif isinstance(lps.get("top_logprobs"), list):
                first = lps["top_logprobs"][0] if lps["top_logprobs"] else None
                if isinstance(first, dict):
                    for tok, lp in first.items():
                        _merge(top, tok, lp)
                toks = lps.get("tokens") or []
                sampled = toks[0] if toks and isinstance(toks[0], str) else None
                tlps = lps.get("token_logprobs") or []
                if sampled is not None and sampled not in top and tlps:
                    _merge(top, sampled, tlps[0])
        if sampled is None and isinstance(choices[0].get("text"), str):
            sampled = choices[0]["text"]
    elif isinstance(body.get("completion_probabilities"), list):
        top, sampled = _entries_top(body["completion_probabilities"], ids)
    if not top:
        raise EngineError(
            "protocol", "no top logprobs in the response (does the engine support logprobs?)"
        )
    top = dict(sorted(top.items(), key=lambda kv: -kv[1]))
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    prompt_tokens = usage.get("prompt_tokens")
    cached = None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        cached = details["cached_tokens"]
    timings = body.get("timings")
    if cached is None and isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = timings["cache_n"]
    return NextToken(
        top=top,
        ids=ids,
        sampled=sampled,
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        cached_tokens=cached,
        raw_usage=dict(usage),
    )


def _raise_for(exc: Exception) -> EngineError:
    if isinstance(exc, httpx.TimeoutException):
        return EngineError("timeout", f"no answer in time ({type(exc).__name__})")
    # Refused, reset, closed mid-answer: the engine is not there for us.
    return EngineError("connect", f"{type(exc).__name__}: {exc}")


def _check(resp: httpx.Response) -> Any:
    if resp.status_code != 200:
        raise EngineError("http", f"HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        return resp.json()
    except ValueError as exc:
        raise EngineError("protocol", f"response is not JSON: {exc}") from None


def request_timeout(timeout_s: float | None) -> httpx.Timeout | Any:
    """One request's timeout: the client's own (None) or ``timeout_s``."""
    return httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(timeout_s)


async def next_token_logprobs(
    client: httpx.AsyncClient,
    prompt: str,
    *,
    model: str = "",
    top_k: int = 20,
    path: str = "completions",
    timeout_s: float | None = None,
) -> NextToken:
    """POST ``prompt`` to ``<client.base_url>/completions``; the client's
    timeout applies, or ``timeout_s`` for this request. Raises
    :class:`EngineError`."""
    t0 = time.perf_counter()
    try:
        resp = await client.post(
            path,
            json=completion_request(prompt, model=model, top_k=top_k),
            timeout=request_timeout(timeout_s),
        )
    except httpx.HTTPError as exc:
        raise _raise_for(exc) from None
    out = parse_completion(_check(resp))
    return _with_elapsed(out, t0)


def next_token_logprobs_sync(
    client: httpx.Client,
    prompt: str,
    *,
    model: str = "",
    top_k: int = 20,
    path: str = "completions",
) -> NextToken:
    """Blocking twin of :func:`next_token_logprobs` (for CLIs and scripts)."""
    t0 = time.perf_counter()
    try:
        resp = client.post(path, json=completion_request(prompt, model=model, top_k=top_k))
    except httpx.HTTPError as exc:
        raise _raise_for(exc) from None
    out = parse_completion(_check(resp))
    return _with_elapsed(out, t0)


def _with_elapsed(out: NextToken, t0: float) -> NextToken:
    return NextToken(
        top=out.top,
        ids=out.ids,
        sampled=out.sampled,
        prompt_tokens=out.prompt_tokens,
        cached_tokens=out.cached_tokens,
        elapsed_ms=(time.perf_counter() - t0) * 1000,
        raw_usage=out.raw_usage,
    )
