"""Prompt lint: how much of one call's request the engine's prefix cache can
serve for the next, where the first difference is, and what near the top
looks like it changes per call.

Input is OpenAI chat request bodies (``messages``, optional ``tools``), e.g.
the first request of several calls to the same agent. For each consecutive
pair (A, B) the shared prefix is the longest common prefix of their
renderings; its share of B is what A's cache could skip for B. The overall
``shared_prefix_ratio`` is the sum of shared prefixes over the sum of B
lengths.

Units: **tokens** when given an engine (``base_url``): llama-server renders
the body with its own chat template (``/apply-template``) and tokenizes it
(``/tokenize``) — the very tokens its cache compares; an engine that
tokenizes chat bodies itself (vLLM's ``/tokenize`` with ``messages``) is
asked that way; else the canonical rendering below is tokenized. Without an
engine, **chars** of the canonical rendering: the leading system message(s),
then the tool definitions (where most chat templates put them), then the
other messages in order, each field as ``<role> field: value``. The first
difference is always located in the canonical rendering, which knows which
message and field every character came from.

Warnings flag values that look per-call (timestamps, dates, ids, phone
numbers, personal names) in the top of the prompt: the leading system
messages and the tools — the part every call should share byte for byte.

Example::

    report = lint_files([Path("call1.json"), Path("call2.json")])
    report.shared_prefix_ratio, report.first_divergence["field"]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.net import FetchError, fetch_sync

__all__ = [
    "CanonicalRendering",
    "EngineTokenizer",
    "LintReport",
    "RequestError",
    "canonical_render",
    "find_warnings",
    "lint_bodies",
    "lint_files",
    "load_request",
]

EXCERPT_CHARS = 40
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


class RequestError(ValueError):
    """A file that is not an OpenAI chat request body (message names file and field)."""


def load_request(path: Path) -> dict[str, Any]:
    """The chat body in ``path``; :class:`RequestError` naming the file and
    the field when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RequestError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise RequestError(f"{path}: not JSON ({exc})") from None
    return check_body(data, str(path))


def check_body(data: Any, name: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RequestError(f"{name}: not a chat request body (a JSON object with 'messages')")
    msgs = data.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise RequestError(f"{name}: field 'messages' missing or not a non-empty list")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise RequestError(f"{name}: messages[{i}] is not an object")
        if not isinstance(m.get("role"), str):
            raise RequestError(f"{name}: messages[{i}].role missing or not a string")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise RequestError(f"{name}: messages[{i}].content is not a string or a list")
    tools = data.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError(f"{name}: field 'tools' is not a list")
    return data


# -- canonical rendering --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """Where one field of a chat body (a message's content, a tool) lies in
    its canonical rendering: the label's start, the value's start and end,
    the field's name, and its message index and role."""

    start: int  # the label ("<system> content: ")
    value_start: int
    end: int  # after the value's newline
    field: str  # "messages[2].content", "tools[0]"
    message_index: int | None
    role: str | None


@dataclass(slots=True)
class CanonicalRendering:
    """Text of a body plus, for every character range, the field it came from."""

    text: str = ""
    spans: list[Span] = field(default_factory=list)
    stable_end: int = 0  # end of the leading system messages + tools ("the top")

    def add(self, label: str, value: str, fld: str, index: int | None, role: str | None) -> None:
        start = len(self.text)
        self.text += label + value + "\n"
        self.spans.append(Span(start, start + len(label), len(self.text), fld, index, role))

    def locate(self, offset: int) -> Span | None:
        for s in self.spans:
            if s.start <= offset < s.end:
                return s
        return self.spans[-1] if self.spans and offset >= len(self.text) else None

    def value(self, span: Span) -> str:
        return self.text[span.value_start : span.end - 1]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append(str(p.get("text", "")))
            elif isinstance(p, dict):
                parts.append(f"[{p.get('type', 'part')}]")
        return "\n".join(parts)
    return ""


def _json(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, sort_keys=False, separators=(",", ":"))


def canonical_render(body: dict[str, Any]) -> CanonicalRendering:
    """The canonical rendering (see the module docstring)."""
    r = CanonicalRendering()
    msgs: list[dict[str, Any]] = body["messages"]
    lead = 0
    while lead < len(msgs) and msgs[lead].get("role") in ("system", "developer"):
        lead += 1

    def message(i: int) -> None:
        m = msgs[i]
        role = str(m.get("role"))
        for key in ("name", "tool_call_id"):
            if isinstance(m.get(key), str):
                r.add(f"<{role}> {key}: ", m[key], f"messages[{i}].{key}", i, role)
        r.add(f"<{role}> content: ", _content_text(m.get("content")), f"messages[{i}].content", i, role)
        for j, tc in enumerate(m.get("tool_calls") or []):
            r.add(f"<{role}> tool_call: ", _json(tc), f"messages[{i}].tool_calls[{j}]", i, role)

    for i in range(lead):
        message(i)
    for j, tool in enumerate(body.get("tools") or []):
        r.add("<tools> tool: ", _json(tool), f"tools[{j}]", None, None)
    r.stable_end = len(r.text)
    for i in range(lead, len(msgs)):
        message(i)
    return r


# -- tokens from an engine ------------------------------------------------------------


class EngineError(RuntimeError):
    """The engine could not tokenize or template a body (unreachable,
    an HTTP error, an answer of the wrong shape): the lint falls back or
    reports it, in one line."""


class EngineTokenizer:
    """Tokens of a chat body as an OpenAI-compatible engine sees them.

    ``base_url`` is the ``/v1`` URL; ``/tokenize`` and ``/apply-template``
    live at the server root on llama-server, vLLM and SGLang."""

    def __init__(self, base_url: str, model: str = "", timeout_s: float = 10.0) -> None:
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        self.timeout_s = timeout_s  # each request's total deadline
        self.method = ""  # "engine-template", "engine-chat" or "canonical"

    def close(self) -> None:
        pass

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        url = f"{self.root}{path}"
        try:
            resp = fetch_sync("POST", url, json=body, deadline_s=self.timeout_s)
        except FetchError as exc:
            raise EngineError(f"engine did not answer: {exc}") from None
        if resp.status_code != 200:
            return None
        try:
            data = resp.json()
        except (ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def tokenize_text(self, text: str, special: bool = False) -> list[int]:
        body: dict[str, Any] = {"content": text, "add_special": False, "parse_special": special}
        data = self._post("/tokenize", body)  # llama-server
        if data is None:  # vLLM / SGLang name it "prompt"
            data = self._post(
                "/tokenize", {"prompt": text, "add_special_tokens": False, **self._model()}
            )
        tokens = data.get("tokens") if data else None
        if not isinstance(tokens, list):
            raise EngineError(f"engine at {self.root}/tokenize gave no tokens")
        try:
            return [t if isinstance(t, int) else int(t.get("id", -1)) for t in tokens]
        except (AttributeError, TypeError, ValueError):
            raise EngineError(f"engine at {self.root}/tokenize gave malformed tokens") from None

    def _model(self) -> dict[str, Any]:
        return {"model": self.model} if self.model else {}

    def tokens(self, body: dict[str, Any]) -> list[int]:
        chat = {"messages": body["messages"], **({"tools": body["tools"]} if body.get("tools") else {})}
        if self.method in ("", "engine-template"):
            data = self._post("/apply-template", chat)  # llama-server
            if data is not None and isinstance(data.get("prompt"), str):
                self.method = "engine-template"
                return self.tokenize_text(data["prompt"], special=True)
        if self.method in ("", "engine-chat"):
            data = self._post("/tokenize", {**chat, **self._model()})  # vLLM chat tokenize
            if data is not None and isinstance(data.get("tokens"), list):
                try:
                    ids = [int(t) for t in data["tokens"]]
                except (TypeError, ValueError):
                    raise EngineError(f"engine at {self.root}/tokenize gave malformed tokens") from None
                self.method = "engine-chat"
                return ids
        self.method = "canonical"
        return self.tokenize_text(canonical_render(body).text)


# -- warnings -------------------------------------------------------------------------

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_WARN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("timestamp", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?\S*)?")),
    ("timestamp", re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("timestamp", re.compile(rf"\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b")),
    ("timestamp", re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:{_MONTHS})\b")),
    ("timestamp", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s?(?:[AaPp]\.?[Mm]\.?)?(?![\d:])")),
    ("timestamp", re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b")),  # unix seconds / ms
    ("timestamp", re.compile(r"\b(?:today|now) is\b", re.I)),
    ("id", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)),
    (
        "id",
        re.compile(
            r"\b(?:call|req|request|session|sess|conv|cust|customer|user|order|ticket|chatcmpl)"
            r"[-_#]?(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{4,}\b",
            re.I,
        ),
    ),
    ("id", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")),
    ("id", re.compile(r"\b(?:ID|id|Id)\s*[:#]\s*[A-Za-z0-9-]{3,}")),
    ("phone", re.compile(r"\+\d[\d ().-]{7,}\d")),
    ("phone", re.compile(r"(?<!\d)\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?!\d)")),
    (
        "name",
        re.compile(
            r"\b(?:caller|customer|patient|user|client|member)(?:'s)?\s+(?:name\s+)?(?:is|:)\s+"
            r"[A-Z][a-z]+(?:\s[A-Z][a-z]+)?"
        ),
    ),
    ("name", re.compile(r"\b(?:[Nn]ame is|[Nn]ame:|Dear|Hello|Hi|Hey),?\s+[A-Z][a-z]+\b")),
]


@dataclass(frozen=True, slots=True)
class Warning_:
    """A value in the shared top of a prompt (leading system messages and
    tools) that looks per-call (a timestamp, an id, a phone number): it would break the
    prefix cache across calls. ``kind`` says what it looks like."""

    file: str
    kind: str
    field: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"file": self.file, "kind": self.kind, "field": self.field, "text": self.text}


def find_warnings(name: str, rendering: CanonicalRendering) -> list[Warning_]:
    """Per-call-looking values in the top (leading system messages + tools)."""
    out: list[Warning_] = []
    seen: set[tuple[str, str]] = set()
    for span in rendering.spans:
        if span.start >= rendering.stable_end:
            break
        value = rendering.value(span)
        # Placeholders ({caller_name}) are the fix, not the problem.
        taken = [(m.start(), m.end()) for m in _PLACEHOLDER.finditer(value)]
        for kind, pat in _WARN_PATTERNS:
            for m in pat.finditer(value):
                if any(a < m.end() and m.start() < b for a, b in taken):
                    continue  # one finding per stretch of text
                taken.append((m.start(), m.end()))
                key = (span.field, m.group(0))
                if key not in seen:
                    seen.add(key)
                    out.append(Warning_(name, kind, span.field, m.group(0).strip()))
    return out


# -- the report -----------------------------------------------------------------------


@dataclass(slots=True)
class LintReport:
    """The prompt lint's verdict over a set of chat bodies: how much of each
    pair's prompt is shared (in tokens or characters, and by which method),
    where they first diverge, the per-call-looking values, and any errors."""

    unit: str  # "tokens" | "chars"
    method: str  # "engine-template", "engine-chat", "canonical" (tokens) or "canonical-chars"
    files: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def shared_prefix_ratio(self) -> float | None:
        total = sum(p["total"] for p in self.pairs)
        return sum(p["shared"] for p in self.pairs) / total if total else None

    @property
    def first_divergence(self) -> dict[str, Any] | None:
        divs = [p["first_divergence"] for p in self.pairs if p["first_divergence"]]
        return min(divs, key=lambda d: d["char_offset"]) if divs else None

    def as_dict(self) -> dict[str, Any]:
        ratio = self.shared_prefix_ratio
        return {
            "unit": self.unit,
            "method": self.method,
            "shared_prefix_ratio": None if ratio is None else round(ratio, 4),
            "pairs": self.pairs,
            "first_divergence": self.first_divergence,
            "files": self.files,
            "warnings": self.warnings,
            "errors": self.errors,
        }


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    i = 0
    # Compare in chunks first (fast path for long shared prefixes).
    step = 256
    while i + step <= n and a[i : i + step] == b[i : i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _divergence(
    a_name: str, b_name: str, ra: CanonicalRendering, rb: CanonicalRendering, position: int
) -> dict[str, Any] | None:
    c = _common_prefix(ra.text, rb.text)
    if c == len(ra.text) == len(rb.text):
        return None
    span = rb.locate(c) if c < len(rb.text) else ra.locate(c)
    out: dict[str, Any] = {
        "a": a_name,
        "b": b_name,
        "position": position,
        "char_offset": c,
        "message_index": span.message_index if span else None,
        "role": span.role if span else None,
        "field": span.field if span else None,
        "in_top": c < max(ra.stable_end, rb.stable_end),
        "a_text": ra.text[c : c + EXCERPT_CHARS],
        "b_text": rb.text[c : c + EXCERPT_CHARS],
    }
    if span:
        out["offset_in_field"] = max(0, c - span.value_start)
    return out


def lint_bodies(
    named: Sequence[tuple[str, dict[str, Any]]],
    tokenizer: EngineTokenizer | None = None,
    on_error: Callable[[str], None] | None = None,
) -> LintReport:
    """Lint already-loaded bodies in order (see the module docstring)."""
    renders = [(n, canonical_render(b)) for n, b in named]
    units: list[Sequence[Any]] = [r.text for _, r in renders]
    unit, method = "chars", "canonical-chars"
    errors: list[str] = []
    if tokenizer is not None:
        try:
            units = [tokenizer.tokens(b) for _, b in named]
            unit, method = "tokens", tokenizer.method
        except EngineError as exc:
            msg = f"{exc}; measuring in chars instead"
            errors.append(msg)
            if on_error:
                on_error(msg)
    report = LintReport(unit=unit, method=method, errors=errors)
    for (name, r), u in zip(renders, units, strict=True):
        report.files.append({"file": name, "length": len(u)})
        report.warnings.extend(w.as_dict() for w in find_warnings(name, r))
    for i in range(1, len(renders)):
        (a_name, ra), (b_name, rb) = renders[i - 1], renders[i]
        shared = _common_prefix(units[i - 1], units[i])
        total = len(units[i])
        report.pairs.append(
            {
                "a": a_name,
                "b": b_name,
                "shared": shared,
                "total": total,
                "ratio": round(shared / total, 4) if total else 1.0,
                "first_divergence": _divergence(a_name, b_name, ra, rb, shared),
            }
        )
    return report


def lint_files(
    paths: Sequence[Path],
    base_url: str | None = None,
    model: str = "",
    on_error: Callable[[str], None] | None = None,
) -> LintReport:
    """Load and lint ``paths``; a file that is not a chat body is reported
    (``on_error`` and ``report.errors``) and left out, the rest still linted."""
    named: list[tuple[str, dict[str, Any]]] = []
    errors: list[str] = []
    for p in paths:
        try:
            named.append((str(p), load_request(p)))
        except RequestError as exc:
            errors.append(str(exc))
            if on_error:
                on_error(str(exc))
    tok = EngineTokenizer(base_url, model) if base_url else None
    try:
        report = lint_bodies(named, tok, on_error)
    finally:
        if tok:
            tok.close()
    report.errors[:0] = errors
    return report
