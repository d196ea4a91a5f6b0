"""Stable-prefix prompt layout: what goes where in a chat request so the engine's
prefix cache can skip it.

Engines reuse only an exact token prefix (vLLM only whole blocks of it: 16
tokens on GPU, 128 on its CPU backend), so one per-call value near the top
(number dialled, time, caller name) makes every call pay the whole prefill.
:class:`PromptLayout` decides the order:

1. the **stable part** — persona, rules, call flow, reference material in one
   system message, tool definitions in ``tools`` — rendered once, byte-identical
   for every call of the agent; it may name per-call values only through
   placeholders (``{caller_name}``), never contain them;
2. the **conversation**, append-only (:class:`CallPrompt` only appends, so turn
   N+1's request starts with turn N's);
3. the **per-call block** last: ``Call details:`` with one ``name: value`` line
   per placeholder, as its own message.

``per_call_position="after_stable"`` puts the block right after the stable part
instead: across calls that caches the same stable part, and within a call the
block never moves (the ``"end"`` block is re-read after each new turn, a few
dozen tokens); ``"end"`` also lets a fixed opening (the agent's greeting) be
shared across calls.

Example::

    layout = PromptLayout(
        persona="You are Ava, the receptionist at Acme Dental.",
        rules=["Greet the caller by {caller_name}.", "Never give medical advice."],
        tools=[BOOK_TOOL],
    )
    call = layout.start_call({"caller_name": "Dana", "caller_number": "+1 555 0100"})
    call.add("assistant", "Acme Dental, this is Ava.")
    call.add("user", "Hi, I'd like to book a cleaning.")
    req = call.request()                 # ChatRequest: messages, tools
    await client.stream(req.messages, tools=req.tools)
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import string
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

__all__ = ["CallPrompt", "ChatRequest", "LayoutError", "PromptLayout", "fill_placeholders"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Values this short are too likely to appear in ordinary text by chance
# ("no", "2") to be treated as a leaked per-call value.
_MIN_LEAK_CHARS = 4


class LayoutError(ValueError):
    """A layout or a call's values that would break the stable prefix."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat request body's prompt: ``messages`` and ``tools``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)

    def body(self, **extra: Any) -> dict[str, Any]:
        """An OpenAI chat body (``extra`` merged: ``max_tokens``, ``model``...)."""
        out: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            out["tools"] = self.tools
        out.update(extra)
        return out


class PromptLayout(BaseModel):
    """An agent's prompt, laid out stable part first (see the module docstring).

    Fields are the stable part's sections, in this order; ``placeholders``
    lists the per-call values the call must supply (found in the text when
    not given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    persona: str
    rules: list[str] = Field(default_factory=list)
    call_flow: str = ""
    reference: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    placeholders: tuple[str, ...] = ()
    per_call_title: str = "Call details"
    per_call_role: Literal["system", "user", "developer"] = "system"
    per_call_position: Literal["end", "after_stable"] = "end"
    _system: dict[str, Any] = PrivateAttr(default_factory=dict)
    _tools: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @field_validator("persona")
    @classmethod
    def _persona_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("persona must not be empty")
        return v

    def model_post_init(self, __context: Any) -> None:
        found = tuple(dict.fromkeys(_PLACEHOLDER.findall(self.stable_text())))
        if not self.placeholders:
            object.__setattr__(self, "placeholders", found)
        else:
            unknown = [p for p in found if p not in self.placeholders]
            if unknown:
                raise LayoutError(f"placeholders used but not declared: {', '.join(unknown)}")
        # Frozen copies: the stable part is rendered once and never changes.
        self._system = {"role": "system", "content": self.stable_text()}
        self._tools = copy.deepcopy(self.tools)

    # -- the stable part ----------------------------------------------------------

    def stable_text(self) -> str:
        """The stable system message: sections in a fixed order, no values."""
        parts = [self.persona.strip()]
        if self.rules:
            parts.append("Rules:\n" + "\n".join(f"- {r.strip()}" for r in self.rules))
        if self.call_flow.strip():
            parts.append("Call flow:\n" + self.call_flow.strip())
        if self.reference.strip():
            parts.append("Reference:\n" + self.reference.strip())
        if self.placeholders_in_text():
            parts.append(
                f"Values in braces, like {{{self.placeholders_in_text()[0]}}}, are given "
                f'under "{self.per_call_title}".'
            )
        return "\n\n".join(parts)

    def placeholders_in_text(self) -> list[str]:
        text = "\n".join([self.persona, *self.rules, self.call_flow, self.reference])
        return list(dict.fromkeys(_PLACEHOLDER.findall(text)))

    @property
    def stable_hash(self) -> str:
        """sha256 of the stable part (system text + tools, canonical JSON):
        equal hashes mean byte-identical stable parts (a routing key input)."""
        blob = json.dumps(
            {"system": self._system["content"], "tools": self._tools},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def stable_messages(self) -> list[dict[str, Any]]:
        return [dict(self._system)]

    def stable_tools(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self._tools)

    # -- per call -----------------------------------------------------------------

    def per_call_block(self, values: dict[str, Any]) -> dict[str, Any]:
        """The per-call message: ``name: value`` lines in placeholder order,
        then any extra values in the order given."""
        missing = [p for p in self.placeholders if p not in values]
        if missing:
            raise LayoutError(f"no value for placeholder(s): {', '.join(missing)}")
        names = [*self.placeholders, *(k for k in values if k not in self.placeholders)]
        lines = [f"{n}: {_one_line(values[n])}" for n in names]
        return {"role": self.per_call_role, "content": f"{self.per_call_title}:\n" + "\n".join(lines)}

    def check_values(self, values: dict[str, Any]) -> None:
        """Raise :class:`LayoutError` if a per-call value already appears in
        the stable part (someone formatted it in: every call would differ)."""
        stable = self._system["content"] + json.dumps(self._tools)
        for name, value in values.items():
            text = _one_line(value)
            if len(text) >= _MIN_LEAK_CHARS and text in stable:
                raise LayoutError(
                    f"per-call value {name}={text!r} appears in the stable part; "
                    f"use the placeholder {{{name}}} there"
                )

    def start_call(self, values: dict[str, Any] | None = None) -> CallPrompt:
        """A :class:`CallPrompt` for one call with its per-call ``values``."""
        values = dict(values or {})
        self.check_values(values)
        return CallPrompt(self, self.per_call_block(values))

    def render(
        self, conversation: list[dict[str, Any]], values: dict[str, Any] | None = None
    ) -> ChatRequest:
        """The request for ``conversation`` (messages after the stable part)."""
        call = self.start_call(values)
        for m in conversation:
            call.append(m)
        return call.request()


def _one_line(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split())


class CallPrompt:
    """One call's prompt: the layout's stable part, an append-only
    conversation, the per-call block. :meth:`request` is the next request."""

    def __init__(self, layout: PromptLayout, per_call: dict[str, Any]) -> None:
        self.layout = layout
        self.per_call = per_call
        self._conversation: list[dict[str, Any]] = []

    @property
    def conversation(self) -> tuple[dict[str, Any], ...]:
        return tuple(self._conversation)

    def add(self, role: str, content: str, **fields: Any) -> None:
        self.append({"role": role, "content": content, **fields})

    def append(self, message: dict[str, Any]) -> None:
        if not isinstance(message, dict) or "role" not in message:
            raise LayoutError(f"not a chat message: {message!r:.80}")
        self._conversation.append(copy.deepcopy(message))

    def request(self) -> ChatRequest:
        stable = self.layout.stable_messages()
        conv = copy.deepcopy(self._conversation)
        if self.layout.per_call_position == "after_stable":
            messages = [*stable, dict(self.per_call), *conv]
        else:
            messages = [*stable, *conv, dict(self.per_call)]
        return ChatRequest(messages=messages, tools=self.layout.stable_tools())


def fill_placeholders(text: str, values: dict[str, Any]) -> str:
    """``text`` with ``{name}`` replaced — for showing a prompt to a person,
    never for sending (that would put values into the stable part)."""
    return string.Formatter().vformat(text, (), _Default(values))


class _Default(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
