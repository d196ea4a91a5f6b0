#!/usr/bin/env python3
"""Real-call-like variants of the natural demo calls, for replay checks.

    python scripts/realcall_variants.py --out /tmp/realcalls [--only NAME]
        [--noisy | --drawl | --fillhold | --lines | --plain]

Real telephone calls are not shaped like the demo corpus: a caller says two
or three things in a row while the clerk says nothing, talks over the end of
the agent's turn, hangs up right after the last word; transcripts come
without word times and with annotations; audio is 8 kHz, μ-law, stereo, or
has no agent track. Each variant here edits a copy of a natural demo call
(``recordings/*-natural-*``) into one of those shapes: the audio is cut, not
synthesised, so every second of speech is the demo call's own, and every
label is moved with the audio it describes. The output is for /tmp; it is
not committed.

The edit primitive is :func:`cut`: remove ``[t0, t0 + d)`` from one channel
(caller.wav with the caller's events, agent.wav with the agent's), or from
both. Events inside the removed stretch go; events after it move back by
``d``. Cutting the caller channel alone, in the silence before a caller
turn, moves that turn earlier than the agent's audio (an overlap); cutting
both, across an agent turn, removes the agent's reply (back-to-back caller
turns).

``--drawl`` writes another: the natural calls with each of the caller's
fillers held 0.9 s (its own sound repeated, wavering), the recogniser
writing them (``drawl-kept``) or leaving them out (``drawl-dropped``).

``--lines`` writes the natural calls through a poor line: a DC offset,
mains hum, hiss, clipping on the caller's channel.

``--plain`` writes the natural calls with the agent's lines as many corpora
and recognisers write them: lower case, no punctuation ("sorry about that
have you restarted the router"); the audio and every time are the call's.

``--noisy`` writes another set: the natural calls with a steady background
under the caller's line, mixed in (not cut): pink noise (a car, a fan),
other voices (a television, an office: the demo's other agent tracks,
three at once) or a recorded room (a crowd, an office, a street: the
ambience recordings in the livekit-agents wheel), 10-20 dB under the
caller's speech.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import itertools
import json
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parent.parent
CALLER_EVENTS = {"caller_turn", "backchannel", "noise", "echo"}


@dataclass
class Call:
    """One call being edited: its manifest and both channels (float32)."""

    meta: dict[str, Any]
    caller: np.ndarray
    caller_rate: int
    agent: np.ndarray | None
    agent_rate: int

    @classmethod
    def load(cls, folder: Path) -> Call:
        meta = json.loads((folder / "call.json").read_text())
        caller, cr = sf.read(str(folder / meta["audio"]["caller"]), dtype="float32")
        agent, ar = None, cr
        if meta["audio"].get("agent"):
            agent, ar = sf.read(str(folder / meta["audio"]["agent"]), dtype="float32")
        return cls(meta, caller, cr, agent, ar)

    def copy(self) -> Call:
        return Call(
            copy.deepcopy(self.meta),
            self.caller.copy(),
            self.caller_rate,
            None if self.agent is None else self.agent.copy(),
            self.agent_rate,
        )

    @property
    def events(self) -> list[dict[str, Any]]:
        ev: list[dict[str, Any]] = self.meta["events"]
        return ev

    def of(self, kind: str) -> list[dict[str, Any]]:
        return sorted((e for e in self.events if e["type"] == kind), key=lambda e: e["start"])

    @property
    def duration(self) -> float:
        return len(self.caller) / self.caller_rate

    def save(self, folder: Path, *, subtype: str = "PCM_16") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        sf.write(str(folder / "caller.wav"), self.caller, self.caller_rate, subtype=subtype)
        if self.agent is not None:
            self.meta["audio"]["agent"] = "agent.wav"
            sf.write(str(folder / "agent.wav"), self.agent, self.agent_rate, subtype="PCM_16")
        else:
            self.meta["audio"].pop("agent", None)
        self.meta["audio"]["caller"] = "caller.wav"
        (folder / "call.json").write_text(json.dumps(self.meta, indent=1))
        return folder


def _shift(x: Any, t0: float, d: float) -> Any:
    return round(x - d, 4) if x >= t0 + d - 1e-9 else x


def _shifted(e: dict[str, Any], t0: float, d: float) -> dict[str, Any]:
    """A copy of ``e`` with every time of it past the cut moved back by ``d``."""
    out = copy.deepcopy(e)
    out["start"] = _shift(out["start"], t0, d)
    if "end" in out:
        out["end"] = _shift(out["end"], t0, d)
    for key in ("words", "holds"):
        for w in out.get(key) or []:
            w["start"], w["end"] = _shift(w["start"], t0, d), _shift(w["end"], t0, d)
    if out.get("spans"):
        out["spans"] = [[_shift(a, t0, d), _shift(b, t0, d)] for a, b in out["spans"]]
    return out


def _move(e: dict[str, Any], t0: float, d: float) -> dict[str, Any] | None:
    """``e`` after removing ``[t0, t0 + d)``: None when inside it; an error
    when it straddles a cut edge (that would corrupt its audio)."""
    s = e["start"]
    end = e.get("end", s + e.get("duration_s", 0.0) if e.get("type") == "tool_call" else s)
    if end <= t0 + 1e-9:
        return e
    if s >= t0 + d - 1e-9:
        return _shifted(e, t0, d)
    if s >= t0 - 1e-9 and end <= t0 + d + 1e-9:
        return None
    if e.get("type") == "tool_call":
        return None
    raise ValueError(f"{e['type']} [{s}, {end}] straddles the cut [{t0}, {t0 + d})")


def cut(call: Call, t0: float, d: float, channel: str = "both") -> Call:
    """Remove ``[t0, t0 + d)`` from ``channel`` ("caller", "agent", "both");
    the other channel loses ``d`` seconds at its end (both stay one length)."""
    out = call.copy()
    for name, rate in (("caller", out.caller_rate), ("agent", out.agent_rate)):
        audio = getattr(out, name)
        if audio is None:
            continue
        a, b = round(t0 * rate), round((t0 + d) * rate)
        if channel in (name, "both"):
            audio = np.concatenate([audio[:a], audio[b:]])
        else:
            audio = audio[: len(audio) - (b - a)]
        setattr(out, name, audio)
    events = []
    for e in out.events:
        side = "caller" if e["type"] in CALLER_EVENTS else "agent"
        if channel not in (side, "both"):
            events.append(e)
            continue
        moved = _move(e, t0, d)
        if moved is not None:
            events.append(moved)
    out.meta["events"] = events
    abc = []
    for e in out.meta.get("agent_backchannels", []):
        if channel in ("agent", "both"):
            m = _move(e, t0, d)
            if m is not None:
                abc.append(m)
        else:
            abc.append(e)
    if abc or "agent_backchannels" in out.meta:
        out.meta["agent_backchannels"] = abc
    return out


def shorten_hold(call: Call, turn: int, hold: int, keep: float) -> Call:
    """Caller turn ``turn``'s hold ``hold`` left ``keep`` seconds of its
    silence: the rest is removed from both channels, and the turn's later
    spans, words and holds, and every later event, move back with it."""
    t = call.of("caller_turn")[turn]
    h = (t.get("holds") or [])[hold]
    d = round(h["end"] - h["start"] - keep, 4)
    if d <= 0:
        return call.copy()
    t0 = h["start"] + keep
    # The turn spans the cut by design: it is set aside and moved here.
    rest = call.copy()
    rest.meta["events"] = [e for e in call.events if e is not t]
    out = cut(rest, t0, d)
    # Back in its place (events before it are not moved by the cut), its
    # times past the cut moved (its start is before it).
    out.events.insert(next(i for i, e in enumerate(call.events) if e is t), _shifted(t, t0, d))
    return out


def truncate(call: Call, t: float) -> Call:
    """The call ends at ``t``: audio cut there, later events dropped."""
    out = call.copy()
    out.caller = out.caller[: round(t * out.caller_rate)]
    if out.agent is not None:
        out.agent = out.agent[: round(t * out.agent_rate)]
    out.meta["events"] = [
        e for e in out.events if e.get("end", e["start"]) <= t + 1e-6 and e["start"] < t
    ]
    return out


# -- the variants -------------------------------------------------------------


def insert(call: Call, t: float, d: float) -> Call:
    """``d`` seconds of silence inserted at ``t`` in both channels (the
    caller's at its background level); later events move on by ``d``."""
    out = call.copy()
    rng = np.random.default_rng(int(t * 1000))
    for name, rate in (("caller", out.caller_rate), ("agent", out.agent_rate)):
        audio = getattr(out, name)
        if audio is None:
            continue
        n = round(d * rate)
        fill = np.zeros(n, np.float32)
        if name == "caller":
            win = int(0.1 * rate)
            rms = [
                float(np.sqrt(np.mean(audio[k : k + win] ** 2)))
                for k in range(0, len(audio) - win, win)
            ]
            fill = (rng.standard_normal(n) * min(rms)).astype(np.float32)
        a = round(t * rate)
        setattr(out, name, np.concatenate([audio[:a], fill, audio[a:]]))
    for e in out.events:
        if e["start"] >= t - 1e-9:
            e["start"] = round(e["start"] + d, 4)
            if "end" in e:
                e["end"] = round(e["end"] + d, 4)
            for key in ("words", "holds"):
                for w in e.get(key) or []:
                    w["start"], w["end"] = round(w["start"] + d, 4), round(w["end"] + d, 4)
            if e.get("spans"):
                e["spans"] = [[round(a + d, 4), round(b + d, 4)] for a, b in e["spans"]]
    for e in out.meta.get("agent_backchannels", []):
        if e["start"] >= t - 1e-9:
            e["start"], e["end"] = round(e["start"] + d, 4), round(e["end"] + d, 4)
    return out


def back_to_back(call: Call, first: int, count: int, gap: float) -> Call:
    """Caller turns ``first`` .. ``first + count - 1`` in a row, ``gap``
    seconds apart: the agent turns (and anything else) between them are
    cut from both channels (the clerk said nothing)."""
    out = call
    for k in range(count - 1):
        turns = out.of("caller_turn")
        a, b = turns[first + k], turns[first + k + 1]
        t0 = a["end"] + 0.001
        out = cut(out, t0, b["start"] - t0)
        out = insert(out, t0, gap - 0.001)
    return out


def caller_overlaps(call: Call, turn: int, overlap: float) -> Call:
    """Caller turn ``turn`` starts ``overlap`` s before the agent turn
    before it ends (the caller talks over the agent's last words)."""
    turns = call.of("caller_turn")
    c = turns[turn]
    a = max((x for x in call.of("agent_turn") if x["end"] <= c["start"]), key=lambda x: x["end"])
    d = c["start"] - (a["end"] - overlap)
    # Silence of the caller channel before the turn: [c.start - d, c.start).
    out = cut(call, c["start"] - d, d, "caller")
    # The agent channel stays aligned before the cut; after the agent turn
    # its audio moves back by d as the caller's did.
    fix = cut(call, a["end"] + 1e-3, d, "agent")
    out.agent = fix.agent
    out.meta["events"] = [e for e in out.events if e["type"] in CALLER_EVENTS] + [
        e for e in fix.events if e["type"] not in CALLER_EVENTS
    ]
    return out


def agent_early(call: Call, turn: int, early: float) -> Call:
    """The agent turn after caller turn ``turn`` starts ``early`` s before
    that caller turn ends."""
    c = call.of("caller_turn")[turn]
    a = min((x for x in call.of("agent_turn") if x["start"] >= c["end"]), key=lambda x: x["start"])
    d = a["start"] - (c["end"] - early)
    out = cut(call, a["start"] - d, d, "agent")
    fix = cut(call, c["end"] + 1e-3, d, "caller")
    out.caller = fix.caller
    out.meta["events"] = [e for e in out.events if e["type"] not in CALLER_EVENTS] + [
        e for e in fix.events if e["type"] in CALLER_EVENTS
    ]
    return out


def early_answer(call: Call, turn: int, lead: float, tail: float = 6.0) -> Call:
    """Caller turn ``turn``'s first word (an "okay") said ``lead`` s before
    the agent turn before it ends, as the whole turn, and the call ending
    ``tail`` s after that agent turn (nothing more is said): the caller
    answers over the agent's last words, then waits for a reply."""
    out = call.copy()
    c = out.of("caller_turn")[turn]
    a = max((x for x in out.of("agent_turn") if x["end"] <= c["start"]), key=lambda x: x["end"])
    w0 = c["words"][0]
    r = out.caller_rate
    word = out.caller[round(w0["start"] * r) : round(w0["end"] * r)].copy()
    at = round(a["end"] - lead, 4)
    out = truncate(out, a["end"] + tail)
    out.meta["events"] = [e for e in out.events if e["start"] < c["start"]]
    # Nothing said after the agent turn: the caller's later speech and the
    # agent's later audio are replaced by the line's background.
    quiet = out.caller[round((a["end"] - 1.2) * r) : round((a["end"] - 0.9) * r)]
    k = round(c["start"] * r)
    out.caller[k:] = np.resize(quiet, len(out.caller) - k)
    if out.agent is not None:
        out.agent[round((a["end"] + 0.05) * out.agent_rate) :] = 0.0
    i = round(at * r)
    out.caller[i : i + len(word)] += word
    end = round(at + len(word) / r, 4)
    out.meta["events"].append(
        {
            "type": "caller_turn",
            "start": at,
            "end": end,
            "text": w0["text"],
            "words": [{"text": w0["text"], "start": at, "end": end}],
        }
    )
    return out


def split_agent_turns(call: Call, min_s: float = 2.0) -> Call:
    """Each agent turn longer than ``min_s`` written as two ``agent_turn``
    events, split at the quietest 50 ms of agent.wav near its middle (a
    transcript that segments the clerk's speech); the audio is unchanged."""
    out = call.copy()
    assert out.agent is not None
    r = out.agent_rate
    events = []
    for e in out.events:
        if e["type"] != "agent_turn" or e["end"] - e["start"] < min_s:
            events.append(e)
            continue
        lo, hi = (
            e["start"] + 0.35 * (e["end"] - e["start"]),
            e["start"] + 0.65 * (e["end"] - e["start"]),
        )
        win = int(0.05 * r)
        cands = np.arange(round(lo * r), round(hi * r) - win, win // 2)
        energy = [float(np.mean(out.agent[k : k + win] ** 2)) for k in cands]
        mid = (cands[int(np.argmin(energy))] + win / 2) / r
        words = e.get("text", "").split()
        k = max(1, round(len(words) * (mid - e["start"]) / (e["end"] - e["start"])))
        events.append({**e, "end": round(mid - 0.02, 4), "text": " ".join(words[:k])})
        events.append({**e, "start": round(mid + 0.02, 4), "text": " ".join(words[k:])})
    out.meta["events"] = events
    return out


def quiet_turn(call: Call, turn: int, db: float) -> Call:
    """Caller turn ``turn`` ``db`` dB quieter (a caller who drops their
    voice, or moves off the microphone, for one short answer)."""
    out = call.copy()
    t = out.of("caller_turn")[turn]
    r = out.caller_rate
    a, b = round((t["start"] - 0.05) * r), round((t["end"] + 0.05) * r)
    out.caller[a:b] *= np.float32(10 ** (-db / 20))
    return out


def agent_backchannels(call: Call, per_turn: int = 1) -> Call:
    """The agent says a short acknowledgement (the first 0.35 s of one of
    its turns) inside each caller turn's last span or hold, written to
    agent.wav and listed in ``agent_backchannels``; caller backchannels
    get transcriber annotations ("mm-hm [laughter]")."""
    out = call.copy()
    assert out.agent is not None
    src = out.of("agent_turn")[0]
    r = out.agent_rate
    snip = out.agent[int(src["start"] * r) : int((src["start"] + 0.35) * r)].copy()
    abc = []
    for t in out.of("caller_turn"):
        if t["end"] - t["start"] < 1.2:
            continue
        holds = t.get("holds") or []
        places = [h["start"] + 0.02 for h in holds][:per_turn] or [t["start"] + 0.8]
        for at in places:
            i = int(at * r)
            out.agent[i : i + len(snip)] += snip[: len(out.agent) - i]
            abc.append({"start": round(at, 4), "end": round(at + 0.35, 4)})
    out.meta["agent_backchannels"] = abc
    for e in out.events:
        if e["type"] == "backchannel":
            e["text"] = "mm-hm [laughter]"
    return out


def annotated_text(call: Call) -> Call:
    """No word timings; transcriber annotations in the text; one turn with
    only an annotation, one with empty text."""
    out = call.copy()
    turns = out.of("caller_turn")
    for k, t in enumerate(turns):
        t.pop("words", None)
        words = t["text"].split()
        if k == 1:
            t["text"] = (
                "[noise] %HESITATION " + " ".join(words[:3]) + " <unk> " + " ".join(words[3:])
            )
        elif k == 2:
            t["text"] = "[noise]"
        elif k == 3:
            t["text"] = ""
        else:
            t["text"] = " ".join(words) + " [laughter]"
    return out


# First words that make a whole answer on their own.
ANSWERS = {"yes", "yeah", "no", "okay", "ok", "right", "perfect", "great", "sure", "thanks"}


def short_answers(call: Call) -> Call:
    """Caller turns cut to their first word where it is an answer on its
    own ("yeah", "okay", "perfect"): the rest of the turn is removed from
    both channels, so the agent's next turn follows the short answer."""
    out = call
    k = 0
    while k < len(out.of("caller_turn")):
        t = out.of("caller_turn")[k]
        k += 1
        words = t.get("words") or []
        if len(words) < 3 or words[0]["text"].strip(",.!?").lower() not in ANSWERS:
            continue
        w0 = words[0]
        if words[1]["start"] - w0["end"] < 0.05:
            continue  # no clean boundary after the first word
        t0 = w0["end"] + 0.03
        d = t["end"] - t0
        # The turn becomes its first word; its tail is removed with the audio.
        new = copy.deepcopy(t)
        new.update(end=w0["end"], text=w0["text"], words=[w0], spans=None, holds=None)
        new = {k2: v for k2, v in new.items() if v is not None}
        rest = [e for e in out.events if e is not t]
        out.meta["events"] = rest
        out = cut(out, t0, d)
        out.meta["events"].append(new)
    return out


def long_turn(call: Call, first: int, count: int, gaps: list[float]) -> Call:
    """Caller turns ``first`` .. in a row, labelled as ONE turn (a
    meeting-like 10-30 s stretch with holds between its sentences)."""
    out = back_to_back(call, first, 2, gaps[0])
    for k in range(1, count - 1):
        out = back_to_back(out, first + k, 2, gaps[k % len(gaps)])
    turns = out.of("caller_turn")[first : first + count]
    spans: list[list[float]] = []
    words: list[dict[str, Any]] = []
    for t in turns:
        spans += [list(s) for s in t.get("spans") or [[t["start"], t["end"]]]]
        words += t.get("words") or []
    # A turn's own labelled holds keep their kind; the seams between the
    # turns (where the clerk's turn was) are pauses between sentences.
    own = {(h["start"], h["end"]): h["kind"] for t in turns for h in t.get("holds") or []}
    holds = [
        {"start": a[1], "end": b[0], "kind": own.get((a[1], b[0]), "between-sentences")}
        for a, b in itertools.pairwise(spans)
    ]
    merged = {
        "type": "caller_turn",
        "start": turns[0]["start"],
        "end": turns[-1]["end"],
        "text": " ".join(t["text"] for t in turns),
        "spans": spans,
        "words": words,
        "holds": holds,
    }
    out.meta["events"] = [
        e for e in out.events if not any(e is t for t in turns) and e["type"] != "tool_call"
    ] + [merged]
    return out


def concat(a: Call, b: Call) -> Call:
    """``b`` appended after ``a`` (same rates), its events moved by ``a``'s
    duration: one longer call. Tool calls are dropped (their turn indices
    would not survive)."""
    assert a.caller_rate == b.caller_rate and a.agent_rate == b.agent_rate
    shift = a.duration
    moved = insert(b, 0.0, shift)  # b's events move by shift
    out = a.copy()
    n = round(shift * a.caller_rate)
    out.caller = np.concatenate([a.caller, moved.caller[n:]])
    if a.agent is not None and moved.agent is not None:
        m = round(shift * a.agent_rate)
        head = np.pad(a.agent, (0, max(0, m - len(a.agent))))[:m]
        out.agent = np.concatenate([head, moved.agent[m:]])
    out.meta["events"] = [e for e in [*a.events, *moved.events] if e["type"] != "tool_call"]
    return out


def last_turn_tail(call: Call, tail: float) -> Call:
    """The call ends ``tail`` s after the last caller turn's end (the agent
    turn after it is gone: the recording stopped, or the caller hung up)."""
    last = call.of("caller_turn")[-1]
    return truncate(call, last["end"] + tail)


def to_rate(call: Call, rate: int) -> Call:
    out = call.copy()
    if out.caller_rate != rate:
        out.caller = soxr.resample(out.caller, out.caller_rate, rate).astype(np.float32)
        out.caller_rate = rate
    return out


def no_agent(call: Call) -> Call:
    out = call.copy()
    out.agent = None
    return out


def _pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """Pink (1/f) noise, unit RMS."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec), dtype=np.float64)
    spec[1:] /= np.sqrt(f[1:])
    spec[0] = 0.0
    x = np.fft.irfft(spec, n)
    return (x / (np.sqrt(np.mean(x**2)) + 1e-12)).astype(np.float32)


# Recorded (not synthesised) rooms, from the livekit-agents wheel
# (Apache-2.0; LiveKit's background-audio player ships them): a crowd's
# babble, an office (voices, keyboards, a phone), a street. Real rooms are
# not stationary as pink noise is, nor all speech as ``talk`` is.
AMBIENCE = {
    "crowd": "crowded-room.ogg",
    "office": "office-ambience.ogg",
    "city": "city-ambience.ogg",
}


def _ambience(name: str, n: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """A LiveKit ambience recording, mono at ``rate``, looped from a seeded
    offset to ``n`` samples, unit RMS."""
    spec = importlib.util.find_spec("livekit.agents")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the recorded-room variants need livekit-agents (pip install -e '.[livekit]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / name
    a, r = sf.read(str(path), dtype="float32", always_2d=True)
    a = a.mean(axis=1)
    if r != rate:
        a = soxr.resample(a, r, rate).astype(np.float32)
    a = np.roll(a, -int(rng.integers(0, len(a))))
    a = np.resize(a, n)
    return (a / (float(np.sqrt(np.mean(a**2))) + 1e-12)).astype(np.float32)


def background(call: Call, kind: str, snr_db: float, seed: int = 0) -> Call:
    """The caller's line with a steady background under it, ``snr_db`` below
    the caller's speech (RMS over their turns): ``pink`` (a car, a fan, line
    hiss), ``talk`` (a television or a room of other people: the demo's
    other calls' agent voices, overlapped and looped, so it is speech that
    is neither the caller's nor this call's agent) or a recorded room
    (``crowd``, ``office``, ``city``: :data:`AMBIENCE`). Labels unchanged:
    the caller said the same words at the same times, in a noisier place."""
    out = call.copy()
    rate, x = out.caller_rate, out.caller
    rng = np.random.default_rng(seed)
    spans = [(round(e["start"] * rate), round(e["end"] * rate)) for e in out.of("caller_turn")]
    speech = np.concatenate([x[a:b] for a, b in spans]) if spans else x
    level = float(np.sqrt(np.mean(np.square(speech, dtype=np.float64))))
    if kind == "pink":
        bg = _pink(len(x), rng)
    elif kind in AMBIENCE:
        bg = _ambience(AMBIENCE[kind], len(x), rate, rng)
    else:
        others = sorted(p for p in (ROOT / "recordings").glob("*/agent.wav"))
        voices = []
        for path in others:
            a, r = sf.read(str(path), dtype="float32")
            if r != rate:
                a = soxr.resample(a, r, rate).astype(np.float32)
            voices.append(a)
        bg = np.zeros(len(x), dtype=np.float32)
        for k in range(3):  # three talkers at once: no gap long enough to be silence
            v = np.concatenate(voices[k::3])
            off = int(rng.integers(0, len(v)))
            v = np.roll(v, -off)
            bg += np.resize(v, len(x))
        bg /= float(np.sqrt(np.mean(bg**2))) + 1e-12
    out.caller = (x + bg * level * 10 ** (-snr_db / 20)).astype(np.float32)
    return out


Variant = tuple[str, str, Callable[[Call], Call], dict[str, Any]]
NATURAL = [
    "appointment-natural-13",
    "billing-natural-12",
    "internet-natural-14",
    "order-natural-15",
    "pharmacy-natural-17",
    "travel-natural-16",
]

# (name, source call, edit, save options)
VARIANTS: list[Variant] = [
    ("b2b2-gap0.3", "appointment-natural-13", lambda c: back_to_back(c, 1, 2, 0.3), {}),
    ("b2b2-gap0.8", "appointment-natural-13", lambda c: back_to_back(c, 1, 2, 0.8), {}),
    ("b2b2-gap1.5", "appointment-natural-13", lambda c: back_to_back(c, 1, 2, 1.5), {}),
    ("b2b3-gap0.6", "billing-natural-12", lambda c: back_to_back(c, 2, 3, 0.6), {}),
    ("b2b3-gap1.2", "internet-natural-14", lambda c: back_to_back(c, 0, 3, 1.2), {}),
    ("overlap0.5", "order-natural-15", lambda c: caller_overlaps(c, 2, 0.5), {}),
    ("overlap1.0", "pharmacy-natural-17", lambda c: caller_overlaps(c, 3, 1.0), {}),
    ("agentearly0.4", "travel-natural-16", lambda c: agent_early(c, 1, 0.4), {}),
    ("early-okay0.8", "order-natural-15", lambda c: early_answer(c, 3, 0.8), {}),
    ("early-okay1.3", "order-natural-15", lambda c: early_answer(c, 3, 1.3), {}),
    ("agentsplit", "billing-natural-12", split_agent_turns, {}),
    ("agentsplit", "order-natural-15", split_agent_turns, {}),
    ("agentsplit", "internet-natural-14", split_agent_turns, {}),
    ("agentbc", "billing-natural-12", agent_backchannels, {}),
    ("agentbc", "internet-natural-14", agent_backchannels, {}),
    ("annot", "order-natural-15", annotated_text, {}),
    ("annot", "travel-natural-16", annotated_text, {}),
    ("stereo", "pharmacy-natural-17", lambda c: c, {"stereo": True}),
    ("ulaw8k", "billing-natural-12", lambda c: to_rate(c, 8000), {"subtype": "ULAW"}),
    ("pcm8k", "travel-natural-16", lambda c: to_rate(c, 8000), {}),
    ("noagent", "internet-natural-14", no_agent, {}),
    ("short", "appointment-natural-13", short_answers, {}),
    ("short", "order-natural-15", short_answers, {}),
    ("long", "internet-natural-14", lambda c: long_turn(c, 0, 4, [0.6, 0.9, 0.5]), {}),
    ("long", "travel-natural-16", lambda c: long_turn(c, 0, 5, [0.7, 0.5, 0.8, 1.1]), {}),
    (
        "long25s",
        "appointment-natural-13",
        lambda c: long_turn(
            concat(c, Call.load(ROOT / "recordings" / "pharmacy-natural-17")),
            0,
            10,
            [0.6, 0.9, 0.5, 0.7, 1.2, 0.4, 0.8],
        ),
        {},
    ),
    ("tail0.05", "pharmacy-natural-17", lambda c: last_turn_tail(c, 0.05), {}),
    ("tail0.3", "order-natural-15", lambda c: last_turn_tail(c, 0.3), {}),
    ("tail1.0", "billing-natural-12", lambda c: last_turn_tail(c, 1.0), {}),
    ("tail3.0", "travel-natural-16", lambda c: last_turn_tail(c, 3.0), {}),
]

# A caller in a noisy place (--noisy; apart from VARIANTS, whose figures
# they would swamp): steady noise is harmless, other voices under the
# caller's are not (the VAD hears them as the caller still speaking).
NOISY: list[Variant] = [
    ("pink20", "appointment-natural-13", lambda c: background(c, "pink", 20.0), {}),
    ("pink10", "billing-natural-12", lambda c: background(c, "pink", 10.0), {}),
    ("pink10", "travel-natural-16", lambda c: background(c, "pink", 10.0), {}),
    ("talk20", "internet-natural-14", lambda c: background(c, "talk", 20.0), {}),
    ("talk15", "order-natural-15", lambda c: background(c, "talk", 15.0), {}),
    ("talk15", "pharmacy-natural-17", lambda c: background(c, "talk", 15.0), {}),
    ("crowd15", "billing-natural-12", lambda c: background(c, "crowd", 15.0), {}),
    ("office15", "travel-natural-16", lambda c: background(c, "office", 15.0), {}),
    ("city10", "appointment-natural-13", lambda c: background(c, "city", 10.0), {}),
    ("crowd10", "order-natural-15", lambda c: background(c, "crowd", 10.0), {}),
    ("office10", "internet-natural-14", lambda c: background(c, "office", 10.0), {}),
    ("city15", "pharmacy-natural-17", lambda c: background(c, "city", 15.0), {}),
]

FILLERS = {"uh", "um", "uhm", "er", "erm", "hmm"}


def _is_filler(word: dict[str, Any]) -> bool:
    return str(word["text"]).lower().strip(",.!?") in FILLERS


def _lengthen(
    call: Call, at: float, extra: float, chunk_s: float = 0.12, source: float | None = None
) -> Call:
    """``extra`` seconds more of the caller's sound at ``at``: up to
    ``chunk_s`` around it (around ``source`` if given) repeated with 10 ms
    crossfades, each copy
    retimed by up to ±5 % and scaled by up to ±10 % (a held vowel wavers; a
    copy looped unchanged is a steady tone, and Silero stops calling it
    speech after ~0.3 s); silence on the agent's channel. Every label after
    ``at`` moves on, one across it grows. Seeded by ``at``: the same edit
    writes the same audio."""
    out = call.copy()
    rate = out.caller_rate
    rng = np.random.default_rng(round(at * 1000))
    a, n = round(at * rate), round(extra * rate)
    half, xf = int(chunk_s / 2 * rate), int(0.01 * rate)
    c = a if source is None else round(source * rate)
    src = out.caller[c - half : c + half].astype(np.float64)
    fade = np.linspace(0.0, 1.0, xf)
    held = src.copy()
    while len(held) < n:
        step = 1.0 + rng.uniform(-0.05, 0.05)
        copy_ = np.interp(np.arange(0.0, len(src) - 1, step), np.arange(len(src)), src)
        copy_ *= 1.0 + rng.uniform(-0.1, 0.1)
        held[-xf:] = held[-xf:] * (1 - fade) + copy_[:xf] * fade
        held = np.concatenate([held, copy_[xf:]])
    held = held.astype(np.float32)
    out.caller = np.concatenate([out.caller[:a], held[:n], out.caller[a:]])
    if out.agent is not None:
        b = round(at * out.agent_rate)
        out.agent = np.concatenate(
            [out.agent[:b], np.zeros(round(extra * out.agent_rate), np.float32), out.agent[b:]]
        )

    def moved(x: float) -> float:
        return round(x + extra, 4) if x >= at - 1e-9 else x

    for e in out.events:
        start = e["start"]
        e["start"] = moved(start)
        if "end" in e:
            e["end"] = round(e["end"] + extra, 4) if e["end"] > at else e["end"]
        for key in ("words", "holds"):
            for w in e.get(key) or []:
                w["start"] = moved(w["start"])
                w["end"] = round(w["end"] + extra, 4) if w["end"] > at else w["end"]
        if e.get("spans"):
            e["spans"] = [[moved(x), round(y + extra, 4) if y > at else y] for x, y in e["spans"]]
    for e in out.meta.get("agent_backchannels", []):
        e["start"], e["end"] = moved(e["start"]), moved(e["end"])
    return out


def drawn_fillers(call: Call, seconds: float = 0.9, written: bool = True) -> Call:
    """Every filler of the caller's ("uh", "um") drawn out to ``seconds``,
    as non-native callers hold them; ``written=False``: the recogniser
    leaves them out of the words (Deepgram's default, and most others')."""
    out = call
    while True:
        short = [
            w
            for t in out.of("caller_turn")
            for w in t.get("words") or []
            if _is_filler(w) and w["end"] - w["start"] < seconds - 0.05
        ]
        if not short:
            break
        w = short[0]
        dur = w["end"] - w["start"]
        # The filler's own sound only: a short "uh" gives less than 120 ms.
        out = _lengthen(
            out,
            (w["start"] + w["end"]) / 2,
            seconds - dur,
            chunk_s=min(0.12, max(0.03, dur - 0.01)),
        )
    if not written:
        out = out.copy()
        for t in out.of("caller_turn"):
            if t.get("words"):
                t["words"] = [w for w in t["words"] if not _is_filler(w)]
    return out


def filler_in_hold(call: Call, seconds: float = 1.2, written: bool = True) -> Call:
    """A held "uhhhh" of ``seconds`` in each of the caller's comma holds
    ("From Chicago, uhhhh, and uh I'd like…"): the caller's own filler sound
    (the call's first "uh"/"um", drawn out as :func:`drawn_fillers` does)
    put in 50 ms into the hold, after words that often read finished, as a
    non-native caller holds a filler while finding the next words.
    ``written``: the recogniser writes it, as one "uh" at its end; else it
    is left out."""
    if not any(_is_filler(w) for t in call.of("caller_turn") for w in t.get("words") or []):
        return call
    out = call
    done = 0
    while True:
        holds = [
            h
            for t in out.of("caller_turn")
            for h in t.get("holds") or []
            if h.get("kind") == "comma"
        ][done:]
        if not holds:
            return out
        h = holds[0]
        at = h["start"] + 0.05
        f = next(w for t in out.of("caller_turn") for w in t.get("words") or [] if _is_filler(w))
        out = _lengthen(
            out,
            at,
            seconds,
            chunk_s=min(0.12, max(0.03, f["end"] - f["start"] - 0.01)),
            source=(f["start"] + f["end"]) / 2,
        )
        turn = next(t for t in out.of("caller_turn") if t["start"] <= at <= t["end"])
        # The hold is now speech, then what was left of the pause.
        for hold in turn.get("holds") or []:
            if abs(hold["start"] - h["start"]) < 1e-6:
                hold["start"] = round(at + seconds, 4)
        spans = []
        for x, y in turn["spans"]:
            if abs(y - h["start"]) < 1e-6:
                spans += [[x, y], [round(at, 4), round(at + seconds, 4)]]
            else:
                spans.append([x, y])
        turn["spans"] = spans
        if written:
            words = turn["words"]
            k = next(i for i, w in enumerate(words) if w["start"] > at)
            words.insert(k, {"text": "uh", "start": round(at, 4), "end": round(at + seconds, 4)})
        done += 1


def line(call: Call, kind: str, seed: int = 0) -> Call:
    """The caller's channel through a poor line (labels unchanged): a DC
    offset of 0.05 ("dc"), mains hum at 60 Hz, -35 dBFS ("hum60"), hiss at
    -45 or -60 dBFS ("hiss45", "hiss60"), or 12 dB of gain clipped at half
    scale ("clip")."""
    out = call.copy()
    x = out.caller.astype(np.float64)
    rng = np.random.default_rng(seed)
    t = np.arange(len(x)) / out.caller_rate
    if kind == "dc":
        x = x + 0.05
    elif kind == "hum60":
        x = x + 10 ** (-35 / 20) * np.sqrt(2) * np.sin(2 * np.pi * 60 * t)
    elif kind in ("hiss45", "hiss60"):
        x = x + rng.normal(0.0, 10 ** (-int(kind[4:]) / 20), len(x))
    elif kind == "clip":
        x = np.clip(x * 4, -0.5, 0.5)
    else:
        raise ValueError(f"unknown line kind {kind!r}")
    out.caller = np.clip(x, -1.0, 1.0).astype(np.float32)
    return out


# A poor line (--lines): the natural calls' caller channel with a DC offset,
# hum, hiss or clipping.
LINES: list[Variant] = [
    (kind, source, lambda c, k=kind: line(c, k), {})
    for kind in ("dc", "hum60", "hiss45", "hiss60", "clip")
    for source in NATURAL
]


def plain_agent_text(call: Call) -> Call:
    """The agent's lines lower-cased, punctuation dropped (apostrophes kept)."""
    out = call.copy()
    for t in out.of("agent_turn"):
        t["text"] = " ".join(re.sub(r"[^\w' ]+", " ", t["text"].lower()).split())
    return out


PLAIN: list[Variant] = [("plain", source, plain_agent_text, {}) for source in NATURAL]


# A caller who holds "uhhhh" (--drawl): the recogniser writes the fillers,
# or drops them, as most do by default.
DRAWL: list[Variant] = [
    (f"drawl-{kind}", source, lambda c, w=(kind == "kept"): drawn_fillers(c, 0.9, w), {})
    for source in NATURAL
    for kind in ("kept", "dropped")
]
# ...and one who holds "uhhhh" for 1.2 s in a pause after a phrase that
# reads finished (--fillhold): the filler written or dropped.
FILLHOLD: list[Variant] = [
    (f"fillhold-{kind}", source, lambda c, w=(kind == "kept"): filler_in_hold(c, 1.2, w), {})
    for source in NATURAL
    for kind in ("kept", "dropped")
]


def build(
    name: str, source: str, edit: Callable[[Call], Call], opts: dict[str, Any], out: Path
) -> Path:
    call = edit(Call.load(ROOT / "recordings" / source))
    call.meta["id"] = f"{source}-{name}"
    call.meta["tags"] = [*call.meta.get("tags", []), "realcall-variant", name]
    call.meta.pop("generator", None)
    if opts.get("stereo"):
        call.caller = np.stack([call.caller, 0.5 * call.caller], axis=1)
    return call.save(out / f"{source}-{name}", subtype=opts.get("subtype", "PCM_16"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/realcalls"))
    ap.add_argument("--only", default=None, help="variant names containing this")
    ap.add_argument(
        "--noisy",
        action="store_true",
        help="write the noisy-place variants (NOISY: steady noise, other voices) instead",
    )
    ap.add_argument(
        "--drawl",
        action="store_true",
        help="write the drawn-out filler variants (DRAWL: fillers held 0.9 s, "
        "written or dropped by the recogniser) instead",
    )
    ap.add_argument(
        "--fillhold",
        action="store_true",
        help="write the held-filler variants (FILLHOLD: a 1.2 s 'uhhhh' in each comma "
        "pause, written or dropped by the recogniser) instead",
    )
    ap.add_argument(
        "--lines",
        action="store_true",
        help="write the poor-line variants (LINES: DC offset, hum, hiss, clipping) instead",
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="write the unpunctuated agent-line variants (PLAIN: lower case, no punctuation) "
        "instead",
    )
    args = ap.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    sets = {
        "noisy": NOISY,
        "drawl": DRAWL,
        "fillhold": FILLHOLD,
        "lines": LINES,
        "plain": PLAIN,
    }
    chosen = next((v for flag, v in sets.items() if getattr(args, flag)), VARIANTS)
    for name, source, edit, opts in chosen:
        if args.only and args.only not in f"{source}-{name}":
            continue
        print(build(name, source, edit, opts, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
