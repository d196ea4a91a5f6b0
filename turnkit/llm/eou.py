"""Ask a language model whether the caller has finished: P(end of turn).

:class:`LLMEndOfTurn` renders the conversation so far — a short fixed system
prompt, the agent's last message, the caller's words — with the model's chat
template, **stopping right after the caller's text**, where the template
would put its end-of-turn token (``<|im_end|>`` for ChatML models such as
SmolLM2 and Qwen). One ``/v1/completions`` request with ``max_tokens=1``,
``temperature=0`` and ``logprobs=k`` returns the model's top-``k`` next
tokens; the probability it gives the end-of-turn token is P(the caller's
message ends here). A model that expects more words ("for", "my number is")
puts its mass on them instead.

Why ``/v1/completions`` with a rendered prompt rather than chat completions:
a chat endpoint always closes the user's message itself, so the end token
could never be scored; raw completions with a text prompt work the same on
llama-server, vLLM and SGLang (all tokenise special-token text in prompts).

The end token in the answer: vLLM and SGLang list special tokens in
``top_logprobs`` by their text (``"<|im_end|>"``), but llama-server renders
them as the empty string (with their id). Candidates are matched on their
text (whitespace stripped) or on the end token's id: given as
``eot_token_id``, or asked of llama-server's ``/tokenize`` once (it is id 2
in SmolLM2).

Punctuation (``count_punct``, on by default): a streaming recogniser's
transcript has no punctuation, and a chat model reading one writes the full
stop or question mark the recogniser left out before it would close the
message. Measured on SmolLM2-135M-Instruct with this module's prompt: after
"i'd like to book a table for two please" P(<|im_end|>) is below 1e-4 (not
among the top 200) while P(. ? !) is 0.76; after "i'd like to book a table
for" both are ~0. So by default P(end) = P(end token) + P(``.``/``?``/``!``
next) — the probability that the message is complete at this word, the end
token included. ``count_punct=False`` gives the end token's mass alone (for
engines fed punctuated text, or larger models).

When the end token is not among the top ``k`` (``k=20`` by default, vLLM's
usual cap): its probability is unknown but at most the smallest listed one.
:attr:`EouResult.probability` is then **0.0** (a detector treats the turn as
unfinished, which is what a model that puts twenty other tokens first means)
and :attr:`EouResult.upper_bound` carries the bound.

The system prompt is short and stable and comes first, so every request
shares a prefix the engine's prefix cache keeps (llama-server by default,
vLLM with ``--enable-prefix-caching``, SGLang's radix cache); the number of
cached prompt tokens is reported where the engine says
(:attr:`EouResult.cached_tokens`).

Example::

    eou = LLMEndOfTurn("http://127.0.0.1:8080/v1", timeout_ms=300)
    p = await eou.predict("i'd like to book a table for two please",
                          agent_text="Hi! How can I help?")
    p_now = eou.predict_sync("i'd like to book a table for")   # blocking twin
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import httpx

from turnkit.llm.logprobs import (
    EngineError,
    NextToken,
    next_token_logprobs,
    next_token_logprobs_sync,
)

__all__ = [
    "CHAT_TEMPLATES",
    "DEFAULT_AGENT_TEXT",
    "DEFAULT_SYSTEM",
    "ChatTemplate",
    "EouResult",
    "LLMEndOfTurn",
    "resolve_template",
]

DEFAULT_SYSTEM = "You are a helpful voice assistant on a phone call."
# Used when the agent has not spoken yet, so that every prompt has the same
# shape (and the same cacheable prefix up to the agent's words).
DEFAULT_AGENT_TEXT = "Hello! How can I help you today?"


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """A chat layout as a format string with ``{system}``, ``{assistant}``
    and ``{user}`` that ends with ``{user}`` (the end-of-turn token would
    come next), and the text of that token.

    Example::

        ChatTemplate("<|system|>{system}<|end|><|assistant|>{assistant}<|end|><|user|>{user}",
                     eot_token="<|end|>")
    """

    format: str
    eot_token: str

    def __post_init__(self) -> None:
        if not self.format.endswith("{user}"):
            raise ValueError("a chat template must end with {user}: the end token comes next")
        for key in ("{system}", "{assistant}"):
            if key not in self.format:
                raise ValueError(f"a chat template needs {key}")
        if not self.eot_token.strip():
            raise ValueError("a chat template needs its end-of-turn token (eot_token)")
        try:
            self.format.format(system="", assistant="", user="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"bad chat template: {exc!r} (only {{system}}, {{assistant}}, {{user}})"
            ) from None

    def render(self, system: str, assistant: str, user: str) -> str:
        return self.format.format(system=system, assistant=assistant, user=user)


CHAT_TEMPLATES: dict[str, ChatTemplate] = {
    # SmolLM2, Qwen2/2.5/3, Hermes, ... (SmolLM2's own template adds no BOS).
    "chatml": ChatTemplate(
        "<|im_start|>system\n{system}<|im_end|>\n"
        "<|im_start|>assistant\n{assistant}<|im_end|>\n"
        "<|im_start|>user\n{user}",
        eot_token="<|im_end|>",
    ),
}


def resolve_template(template: str | ChatTemplate, eot_token: str = "") -> ChatTemplate:
    """A built-in name (``"chatml"``) or a format string (``\\n`` written as
    a literal backslash-n is a newline, for spec strings) with ``eot_token``."""
    if isinstance(template, ChatTemplate):
        return template
    builtin = CHAT_TEMPLATES.get(template)
    if builtin is not None:
        if eot_token and eot_token != builtin.eot_token:
            return ChatTemplate(builtin.format, eot_token)
        return builtin
    if "{user}" not in template:
        known = ", ".join(CHAT_TEMPLATES)
        raise ValueError(
            f"unknown chat template {template!r} (built in: {known}; or a format string with {{user}})"
        )
    return ChatTemplate(template.replace("\\n", "\n"), eot_token)


@dataclass(frozen=True, slots=True)
class EouResult:
    """One verdict: P(the caller's message ends here) and how it was got."""

    probability: float  # P(end): p_eot (+ p_punct when counted); 0.0 if none listed
    p_eot: float  # the end-of-turn token's probability (0.0 when not among the top-k)
    p_punct: float  # sentence-final punctuation's probability (. ? !)
    found: bool  # the end token was among the top-k
    upper_bound: float  # P(end) is at most this
    top_token: str | None  # the model's most likely next token
    prompt_tokens: int | None
    cached_tokens: int | None
    elapsed_ms: float


SENTENCE_END = frozenset({".", "?", "!"})


def _norm_token(tok: str) -> str:
    return tok.strip()


class LLMEndOfTurn:
    """P(end of turn) from any OpenAI-compatible engine's next-token logprobs.

    Decides nothing by itself (the ``llm-eou`` detector does): it scores the
    caller's words so far, in the context of the agent's last message.
    One request per call, with a total deadline of ``timeout_ms`` and, by
    default, no retries; failures raise :class:`~turnkit.llm.EngineError`.

    Example::

        eou = LLMEndOfTurn("http://127.0.0.1:8080/v1")
        r = await eou.score("my card number is four one", "What is your card number?")
        r.probability, r.cached_tokens
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080/v1",
        *,
        model: str = "",
        template: str | ChatTemplate = "chatml",
        eot_token: str = "",
        system: str = DEFAULT_SYSTEM,
        top_k: int = 20,
        count_punct: bool = True,
        eot_token_id: int | None = None,
        timeout_ms: float = 300.0,
        retries: int = 0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.template = resolve_template(template, eot_token)
        self.eot = _norm_token(self.template.eot_token)
        self.system = system
        self.top_k = top_k
        self.count_punct = count_punct
        self.eot_id = eot_token_id
        self._eot_id_asked = eot_token_id is not None
        self.timeout_ms = float(timeout_ms)
        self.retries = retries
        self._given = client
        self._aclient: httpx.AsyncClient | None = None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
        self._sclient: httpx.Client | None = None

    # -- prompt ----------------------------------------------------------------
    def render(self, text: str, agent_text: str = "") -> str:
        """The prompt: the conversation up to the end of the caller's words,
        without the end-of-turn token."""
        agent = " ".join(agent_text.split()) or DEFAULT_AGENT_TEXT
        user = " ".join(text.split())
        return self.template.render(self.system, agent, user)

    def _result(self, nxt: NextToken) -> EouResult:
        p_eot = 0.0
        found = False
        for tok, lp in nxt.top.items():
            if _norm_token(tok) == self.eot:
                p_eot += math.exp(lp)
                found = True
        if not found and self.eot_id is not None and self.eot_id in nxt.ids:
            p_eot = math.exp(nxt.ids[self.eot_id])
            found = True
        p_punct = sum(
            math.exp(lp) for tok, lp in nxt.top.items() if _norm_token(tok) in SENTENCE_END
        )
        p = min(1.0, p_eot + (p_punct if self.count_punct else 0.0))
        top = next(iter(nxt.top), None)
        bound = nxt.floor if not found else 0.0
        return EouResult(
            probability=p,
            p_eot=min(1.0, p_eot),
            p_punct=min(1.0, p_punct),
            found=found,
            upper_bound=min(1.0, p + bound),
            top_token=top,
            prompt_tokens=nxt.prompt_tokens,
            cached_tokens=nxt.cached_tokens,
            elapsed_ms=nxt.elapsed_ms,
        )

    def _root(self) -> str:
        root = self.base_url
        return root[: -len("/v1")] if root.endswith("/v1") else root

    def _tokenize_body(self) -> dict:
        return {"content": self.template.eot_token, "add_special": False, "parse_special": True}

    def _eot_id_from(self, resp: httpx.Response) -> int | None:
        try:
            toks = resp.json().get("tokens") if resp.status_code == 200 else None
        except ValueError:
            return None
        if isinstance(toks, list) and len(toks) == 1:
            t = toks[0]
            t = t.get("id") if isinstance(t, dict) else t
            return t if isinstance(t, int) else None
        return None

    async def _learn_eot_id(self, client: httpx.AsyncClient, nxt: NextToken) -> None:
        """llama-server renders special tokens as "": ask its /tokenize for
        the end token's id, once (engines that name the token never need it)."""
        if self._eot_id_asked or not nxt.ids or self.eot in map(_norm_token, nxt.top):
            return
        self._eot_id_asked = True
        try:
            resp = await client.post(self._root() + "/tokenize", json=self._tokenize_body())
        except httpx.HTTPError:
            return
        self.eot_id = self._eot_id_from(resp)

    def _learn_eot_id_sync(self, client: httpx.Client, nxt: NextToken) -> None:
        if self._eot_id_asked or not nxt.ids or self.eot in map(_norm_token, nxt.top):
            return
        self._eot_id_asked = True
        try:
            resp = client.post(self._root() + "/tokenize", json=self._tokenize_body())
        except httpx.HTTPError:
            return
        self.eot_id = self._eot_id_from(resp)

    # -- clients ---------------------------------------------------------------
    def _timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout_ms / 1000)

    def _async_client(self) -> httpx.AsyncClient:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        # A client's connections belong to one event loop; replay runs each
        # call in its own loop, so a new loop gets a new client.
        if self._aclient is None or self._aclient_loop is not loop:
            self._aclient = httpx.AsyncClient(
                base_url=self.base_url + "/",
                timeout=self._timeout(),
                transport=httpx.AsyncHTTPTransport(retries=self.retries),
            )
            self._aclient_loop = loop
        return self._aclient

    def _sync_client(self) -> httpx.Client:
        if self._sclient is None:
            self._sclient = httpx.Client(
                base_url=self.base_url + "/",
                timeout=self._timeout(),
                transport=httpx.HTTPTransport(retries=self.retries),
            )
        return self._sclient

    async def aclose(self) -> None:
        if self._aclient is not None and self._aclient_loop is asyncio.get_running_loop():
            await self._aclient.aclose()
        self._aclient = None
        self.close()

    def close(self) -> None:
        if self._sclient is not None:
            self._sclient.close()
            self._sclient = None

    # -- scoring ---------------------------------------------------------------
    async def score(self, text: str, agent_text: str = "") -> EouResult:
        """Score the caller's ``text`` after the agent's ``agent_text``.
        Raises :class:`~turnkit.llm.EngineError` (``timeout`` past
        ``timeout_ms`` in all)."""
        prompt = self.render(text, agent_text)
        client = self._async_client()
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_ms / 1000):
                nxt = await next_token_logprobs(client, prompt, model=self.model, top_k=self.top_k)
                await self._learn_eot_id(client, nxt)
        except TimeoutError:
            ms = (time.perf_counter() - t0) * 1000
            raise EngineError(
                "timeout", f"no answer in {ms:.0f} ms (timeout_ms={self.timeout_ms:g})"
            ) from None
        return self._result(nxt)

    async def predict(self, text: str, agent_text: str = "") -> float:
        """P(end of turn) in [0, 1] (see :meth:`score`)."""
        return (await self.score(text, agent_text)).probability

    def score_sync(self, text: str, agent_text: str = "") -> EouResult:
        """Blocking twin of :meth:`score` (its own connection pool; the
        per-phase httpx timeout is ``timeout_ms``)."""
        client = self._sync_client()
        nxt = next_token_logprobs_sync(
            client, self.render(text, agent_text), model=self.model, top_k=self.top_k
        )
        self._learn_eot_id_sync(client, nxt)
        return self._result(nxt)

    def predict_sync(self, text: str, agent_text: str = "") -> float:
        """Blocking twin of :meth:`predict`, for scripts and ``turnkit eot-score``."""
        return self.score_sync(text, agent_text).probability
