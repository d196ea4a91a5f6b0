"""What the caller heard of an interrupted reply, and the history cut to it.

After a barge-in the chat history must hold what the caller *heard*, not what
the LLM wrote: otherwise the agent believes it said sentences that never
played (and refers to them), or, if the whole reply is dropped, answers the
old question again. This module decides which words were heard and rewrites
the history accordingly.

Evidence, best first:

1. **TTS word timestamps** (:class:`~turnkit.frames.Word`, seconds from the
   reply's first audio sample): a word is heard when enough of it played
   (:attr:`TruncationConfig.min_word_fraction`; default: its end played).
   Exact up to the accuracy of the timestamps.
2. **Anchors** ``(played_s, text_offset)`` from the output (a streaming TTS
   that renders sentence by sentence knows where each sentence's audio ends),
   plus the reply's total audio duration when known: inside each anchored
   stretch the words are placed by :func:`estimate_word_timings`.
3. **Nothing but the text**: the same estimate at the speaking rate measured
   on earlier anchored stretches, else a nominal rate.

The estimate (documented because it decides what the LLM is told it said):
each word costs ``syllables + 0.6`` units
(:mod:`turnkit.text.spoken_length`), where syllables are vowel groups (a
final silent "e" dropped, at least one per word; digits count 1.5 each,
``%``/``$``/``&`` two); punctuation adds a pause after its word: ``, ; :``
and a lone dash 1.0 unit, ``. ! ?`` 1.5 units; the reply starts with a
0.5-unit lead-in. Units are stretched to fill each anchored stretch exactly;
after the last anchor they last what they lasted on average so far, or
``nominal_unit_s`` (0.15 s: about 170 words a minute at the ~2.3 units a word
of conversational replies) when nothing was measured. The weights were chosen
on the corpus replies rendered by two engines (Piper, espeak-ng) so that the
mean signed error is near zero on both (no held-out set). It ignores stress
and phrase-final lengthening, so it is a ±1-word tool; a
character-proportional split (the usual shortcut) is its baseline in
``benchmarks/bench_truncation.py``.

Example::

    heard = heard_prefix("Sure, seven o'clock for two.", played_s=0.9, duration_s=2.0)
    heard.text         # "Sure, seven"  (estimate: words whose end played)
    new = truncate_history(messages, heard)   # last assistant message cut
    realtime_truncate_event("item_12", heard)  # conversation.item.truncate
"""

from __future__ import annotations

import copy
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from turnkit.frames import Word
from turnkit.text.spoken_length import pause_units, word_units

__all__ = [
    "Heard",
    "ReplyProgress",
    "TruncationConfig",
    "align_timestamps",
    "char_proportional_words",
    "estimate_word_timings",
    "heard_prefix",
    "realtime_truncate_event",
    "reply_span",
    "tokens",
    "truncate_history",
]

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"\S+")
_EPS = 1e-6

# Estimate weights, in "syllable units" (see the module docstring).
LEAD_IN_UNITS = 0.5
NOMINAL_UNIT_S = 0.15  # about 170 words a minute at ~2.3 units a word


class TruncationConfig(BaseModel):
    """How an interrupted reply is cut and what the LLM sees of it.

    * ``min_word_fraction`` — share of a word's audio that must have played
      for it to count as heard: 1.0 keeps only words whose end played (the
      caller cannot know a half word); 0.5 keeps a word once half played;
      0.0 keeps every word that started.
    * ``note`` — appended to a cut reply so the LLM knows it was stopped
      (None: no note). ``{heard}`` is not needed: the note follows the words.
    * ``unheard`` — a reply of which nothing was heard is ``"remove"``-d
      (the default: the caller never heard it) or ``"mark"``-ed: kept,
      prefixed with ``unheard_note``, so the LLM knows what it meant to say
      but that it was not said.
    * ``mark_key`` — also set ``message[mark_key] = {"interrupted": True,
      "heard_words": k, "words": n}`` on the cut message. Off by default:
      strict OpenAI-compatible servers reject unknown message keys.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_word_fraction: float = Field(1.0, ge=0.0, le=1.0)
    note: str | None = " [interrupted by the caller]"
    unheard: Literal["remove", "mark"] = "remove"
    unheard_note: str = "[not heard by the caller, interrupted before it played]"
    mark_key: str | None = None
    nominal_unit_s: float = Field(NOMINAL_UNIT_S, gt=0.0)


@dataclass(slots=True, frozen=True)
class Heard:
    """What the caller heard of one reply.

    ``cut`` is the character offset in ``text`` after the last heard word
    (its trailing punctuation included); ``audio_end_s`` is where that
    word's audio ends (0 when none was heard); ``method`` names the evidence:
    ``timestamps``, ``anchors``, ``estimate`` or ``char-proportional``.
    """

    text_full: str
    cut: int
    words_kept: int
    words_total: int
    played_s: float
    audio_end_s: float
    method: str

    @property
    def text(self) -> str:
        return self.text_full[: self.cut]

    @property
    def complete(self) -> bool:
        return self.words_kept >= self.words_total

    @property
    def nothing(self) -> bool:
        return self.words_kept == 0


def tokens(text: str) -> list[tuple[int, int]]:
    """Whitespace-separated tokens of ``text`` as ``(start, end)`` offsets."""
    return [(m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _knots(
    n_chars: int, anchors: Sequence[tuple[float, int]], duration_s: float | None
) -> list[tuple[float, int]]:
    """Monotone (time, char) points the estimate must pass through."""
    pts = [(0.0, 0)]
    for t, c in sorted(anchors, key=lambda a: (a[1], a[0])):
        c = min(max(int(c), 0), n_chars)
        if c > pts[-1][1] and t > pts[-1][0]:
            pts.append((float(t), c))
    if duration_s is not None and duration_s > pts[-1][0] and pts[-1][1] < n_chars:
        pts.append((float(duration_s), n_chars))
    return pts


def estimate_word_timings(
    text: str,
    *,
    duration_s: float | None = None,
    anchors: Sequence[tuple[float, int]] = (),
    nominal_unit_s: float = NOMINAL_UNIT_S,
) -> list[Word]:
    """Estimated timings for each token of ``text`` (see the module docstring).

    ``anchors`` are ``(seconds, char offset)`` points known to coincide (the
    audio up to ``seconds`` covers the first ``char offset`` characters);
    ``duration_s`` is the whole reply's audio length, if known.
    """
    toks = tokens(text)
    if not toks:
        return []
    units = [word_units(text[s:e]) for s, e in toks]
    pauses = [pause_units(text[s:e]) for s, e in toks]
    knots = _knots(len(text), anchors, duration_s)
    # Each token belongs to the stretch that holds its first character.
    stretch = []
    k = 0
    for s, _ in toks:
        while k + 1 < len(knots) and s >= knots[k + 1][1]:
            k += 1
        stretch.append(k)
    # Units per stretch: a lead-in before the reply's first word, then each
    # token's word units and the pause after it.
    total: dict[int, float] = {}
    for i, k in enumerate(stretch):
        total[k] = total.get(k, 0.0) + units[i] + pauses[i] + (LEAD_IN_UNITS if i == 0 else 0.0)
    measured_s = sum(knots[k + 1][0] - knots[k][0] for k in range(len(knots) - 1) if k in total)
    measured_u = sum(total[k] for k in range(len(knots) - 1) if k in total)
    open_unit_s = measured_s / measured_u if measured_u > 0 and measured_s > 0 else nominal_unit_s
    out: list[Word] = []
    t = 0.0
    for i, (s, e) in enumerate(toks):
        k = stretch[i]
        if i == 0 or stretch[i - 1] != k:
            t = knots[k][0]
        closed = k + 1 < len(knots)
        scale = (
            (knots[k + 1][0] - knots[k][0]) / total[k]
            if closed and total[k] > 0
            else open_unit_s
        )
        if i == 0:
            t += LEAD_IN_UNITS * scale
        start = t
        t += units[i] * scale
        out.append(Word(text=text[s:e], start=start, end=t))
        t += pauses[i] * scale
    return out


def char_proportional_words(text: str, duration_s: float) -> list[Word]:
    """Baseline: each character of ``text`` takes the same share of the audio."""
    n = max(len(text), 1)
    return [
        Word(text=text[s:e], start=duration_s * s / n, end=duration_s * e / n)
        for s, e in tokens(text)
    ]


def align_timestamps(text: str, words: Sequence[Word]) -> list[Word | None]:
    """Attach TTS word timestamps to the tokens of ``text``.

    TTS engines tokenise their own way (punctuation split off, "o'clock" one
    word or two), so each timestamp word is found in the text in order
    (letters and digits only, case-folded); a token covered by several
    timestamp words gets their union, a token no timestamp word reached gets
    None (it is not counted as heard).
    """
    toks = tokens(text)
    norm = [(re.sub(r"\W", "", text[s:e]).casefold(), s, e) for s, e in toks]
    out: list[Word | None] = [None] * len(toks)
    ti, pos = 0, 0  # token index, chars of that token's norm consumed
    for w in words:
        key = re.sub(r"\W", "", w.text).casefold()
        if not key:
            continue
        # Search forward (a few tokens) for the token this word belongs to.
        j, p = ti, pos
        found = False
        while j < len(norm) and j <= ti + 3:
            at = norm[j][0].find(key, p)
            if at >= 0:
                found = True
                p = at + len(key)
                break
            j, p = j + 1, 0
        if not found:
            log.debug("TTS word %r not found in reply text; skipped", w.text)
            continue
        cur = out[j]
        out[j] = (
            Word(text=text[norm[j][1] : norm[j][2]], start=w.start, end=w.end)
            if cur is None
            else Word(text=cur.text, start=min(cur.start, w.start), end=max(cur.end, w.end))
        )
        ti, pos = (j, p) if p < len(norm[j][0]) else (j + 1, 0)
    if pos > 0 and ti < len(out):
        out[ti] = None  # the timestamps stop inside this token: its end is unknown
    # Punctuation-only tokens ("-", "—") carry no sound: heard with the word before.
    last: Word | None = None
    for i, (n, s, e) in enumerate(norm):
        if not n:
            if out[i] is None and last is not None:
                out[i] = Word(text=text[s:e], start=last.end, end=last.end)
        else:
            last = out[i]
    return out


def _timeline(
    text: str,
    timestamps: Sequence[Word] | None,
    anchors: Sequence[tuple[float, int]],
    duration_s: float | None,
    cfg: TruncationConfig,
) -> tuple[list[Word | None], str]:
    """Each word of ``text`` on the reply's audio, and by what method."""
    if timestamps is not None:
        return list(align_timestamps(text, timestamps)), "timestamps"
    timed = estimate_word_timings(
        text, duration_s=duration_s, anchors=anchors, nominal_unit_s=cfg.nominal_unit_s
    )
    return list(timed), "anchors" if anchors else "estimate"


def heard_prefix(
    text: str,
    played_s: float,
    *,
    timestamps: Sequence[Word] | None = None,
    anchors: Sequence[tuple[float, int]] = (),
    duration_s: float | None = None,
    config: TruncationConfig | None = None,
) -> Heard:
    """Which words of ``text`` the caller heard after ``played_s`` seconds.

    With ``timestamps`` (from the TTS) the cut is exact; otherwise it is
    estimated from ``anchors`` and ``duration_s`` (see the module docstring).
    A reply played to its end (``played_s >= duration_s``) is heard whole.
    """
    cfg = config or TruncationConfig()
    timed, method = _timeline(text, timestamps, anchors, duration_s, cfg)
    return _cut(text, tokens(text), timed, played_s, duration_s, cfg, method)


class ReplyProgress:
    """:func:`heard_prefix` for a reply asked after every played frame (a
    host telling the barge-in controller where the agent is in its text):
    the words' timings are worked out again only when the reply's text,
    word times, anchors or length change, not on every frame (aligning or
    estimating them is ~60 times the cost of the cut itself)."""

    def __init__(self, config: TruncationConfig | None = None) -> None:
        self.config = config or TruncationConfig()
        self._key: tuple[Any, ...] | None = None
        self._toks: list[tuple[int, int]] = []
        self._timed: list[Word | None] = []
        self._method = ""

    def heard(
        self,
        text: str,
        played_s: float,
        *,
        timestamps: Sequence[Word] | None = None,
        anchors: Sequence[tuple[float, int]] = (),
        duration_s: float | None = None,
    ) -> Heard:
        """As :func:`heard_prefix` with this object's config."""
        key = (
            text,
            None if timestamps is None else tuple((w.text, w.start, w.end) for w in timestamps),
            tuple(anchors),
            duration_s,
        )
        if key != self._key:
            self._timed, self._method = _timeline(
                text, timestamps, anchors, duration_s, self.config
            )
            self._toks = tokens(text)
            self._key = key
        return _cut(
            text, self._toks, self._timed, played_s, duration_s, self.config, self._method
        )


def _cut(
    text: str,
    toks: list[tuple[int, int]],
    timed: Sequence[Word | None],
    played_s: float,
    duration_s: float | None,
    cfg: TruncationConfig,
    method: str,
) -> Heard:
    if duration_s is not None and played_s >= duration_s - _EPS:
        end = max((w.end for w in timed if w is not None), default=0.0)
        return Heard(text, len(text.rstrip()), len(toks), len(toks), played_s, end, method)
    kept, end_s = 0, 0.0
    for w in timed:
        if w is None:
            break
        span = w.end - w.start
        if span <= _EPS:
            ok = played_s >= w.end - _EPS
        elif cfg.min_word_fraction <= 0.0:
            ok = played_s > w.start + _EPS
        else:
            ok = (played_s - w.start) >= cfg.min_word_fraction * span - _EPS
        if not ok:
            break
        kept += 1
        end_s = w.end
    cut = toks[kept - 1][1] if kept else 0
    return Heard(text, cut, kept, len(toks), played_s, end_s, method)


# --- chat history ------------------------------------------------------------


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content)


def _with_text(content: Any, text: str) -> Any:
    """``content`` with its text replaced (list content: first text part
    gets it, other text parts are emptied; non-text parts stay)."""
    if not isinstance(content, list):
        return text
    out, done = [], False
    for p in content:
        if isinstance(p, dict) and p.get("type") == "text":
            if done:
                continue
            out.append({**p, "text": text})
            done = True
        else:
            out.append(p)
    return out


def reply_span(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the last reply's assistant messages: every assistant
    message after the last user message (a reply streamed as several
    messages, or split around tool calls, is one reply)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    after = range(last_user + 1, len(messages))
    return [i for i in after if messages[i].get("role") == "assistant"]


def truncate_history(
    messages: Sequence[dict[str, Any]],
    heard: Heard | int,
    config: TruncationConfig | None = None,
    *,
    span: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """A copy of ``messages`` (OpenAI chat format) with the last reply cut
    to what was heard; ``messages`` itself is not changed.

    ``heard`` is a :class:`Heard` or a count of heard words. Words are
    counted across the reply's assistant messages in order (``span``, by
    default :func:`reply_span`), so a reply streamed as several messages or
    around tool-call messages is cut at the right message. Messages after
    the cut lose their text; a message left with neither text nor
    ``tool_calls`` is dropped (tool results need their call, so calls stay).
    A reply heard whole is returned unchanged.
    """
    cfg = config or TruncationConfig()
    out = [copy.deepcopy(dict(m)) for m in messages]
    idx = list(reply_span(out) if span is None else span)
    if not idx:
        return out
    words_heard = heard.words_kept if isinstance(heard, Heard) else int(heard)
    texts = [_content_text(out[i].get("content")) for i in idx]
    total = sum(len(tokens(t)) for t in texts)
    if words_heard >= total:
        return out
    drop: set[int] = set()
    if words_heard <= 0 and cfg.unheard == "mark":
        # The whole reply, in its first message with text, behind the note.
        first = next((i for i, t in zip(idx, texts, strict=True) if t.strip()), idx[0])
        whole = " ".join(t.strip() for t in texts if t.strip())
        for i, t in zip(idx, texts, strict=True):
            if i == first:
                out[i]["content"] = _with_text(
                    out[i].get("content"), f"{cfg.unheard_note} {whole}".strip()
                )
            elif t:
                _blank(out, i, drop)
        _mark(out[first], cfg, 0, total)
        return [m for j, m in enumerate(out) if j not in drop]
    left = words_heard
    cut_at: int | None = None
    for i, t in zip(idx, texts, strict=True):
        toks = tokens(t)
        if left >= len(toks):
            left -= len(toks)
            if toks:
                cut_at = i
            continue
        if left > 0:
            out[i]["content"] = _with_text(out[i].get("content"), t[: toks[left - 1][1]])
            cut_at = i
        elif t:
            _blank(out, i, drop)
        left = 0
    if cut_at is not None:
        msg = out[cut_at]
        if cfg.note:
            msg["content"] = _with_text(
                msg.get("content"), _content_text(msg.get("content")) + cfg.note
            )
        _mark(msg, cfg, words_heard, total)
    return [m for j, m in enumerate(out) if j not in drop]


def _blank(out: list[dict[str, Any]], i: int, drop: set[int]) -> None:
    if out[i].get("tool_calls"):
        # The call happened (its result is in the history): keep it, silently.
        out[i]["content"] = None
    else:
        drop.add(i)


def _mark(msg: dict[str, Any], cfg: TruncationConfig, kept: int, total: int) -> None:
    if cfg.mark_key:
        msg[cfg.mark_key] = {"interrupted": True, "heard_words": kept, "words": total}


# --- OpenAI Realtime ---------------------------------------------------------


def realtime_truncate_event(
    item_id: str,
    heard: Heard | float,
    *,
    content_index: int = 0,
    audio_duration_s: float | None = None,
    snap_to_word: bool = False,
    event_id: str | None = None,
) -> dict[str, Any]:
    """An OpenAI Realtime ``conversation.item.truncate`` client event.

    ``audio_end_ms`` is the audio actually played (from a :class:`Heard` or
    seconds), floored to whole milliseconds and clamped to the item's audio
    length (the server rejects a longer one). With ``snap_to_word`` it is
    the end of the last heard word instead, so the server's transcript does
    not keep a half word. The server deletes its text transcript of the
    item; turnkit's own history is cut with :func:`truncate_history`.
    """
    if isinstance(heard, Heard):
        seconds = heard.audio_end_s if snap_to_word else heard.played_s
    else:
        seconds = float(heard)
    if audio_duration_s is not None:
        seconds = min(seconds, audio_duration_s)
    event: dict[str, Any] = {
        "type": "conversation.item.truncate",
        "item_id": item_id,
        "content_index": int(content_index),
        "audio_end_ms": max(0, math.floor(seconds * 1000 + _EPS)),
    }
    if event_id is not None:
        event["event_id"] = event_id
    return event
