"""What each host decided in one call, and how two hosts' decisions compare.

A host run (``turnkit replay``, the Pipecat replay host, a LiveKit
``AgentSession``) is watched by :class:`Watch`: while it is active, the
policy objects' own entry points report what they decided, whichever host
runs them, so nothing in the hosts is changed for the test:

* ``Endpointing.on_audio`` / ``on_transcript`` — every ``TurnEndFrame``
  (``turn_end``), ``TurnEagerFrame`` (``eager``) and ``TurnResumedFrame``
  (``resumed``) the detector emits, stamped with the host's audio clock;
* ``BargeInController._act`` — every action that is not *keep*
  (``barge_in:<action>``), on the controller's clock;
* ``EagerDrafter.on_eager`` — every draft started (``draft:<final state>``:
  used or cancelled, read when the call is over);
* the replay's tool backends (``ToolLog``) — every execution
  (``tool:<name>:<effect>``);
* the replay agent (``SimulatedAgent``) — each reply's first audio
  (``reply_audio``) and how it ended (``reply_end:<reason>``).

:func:`compare` pairs two traces event by event (same kind, nearest in
time) and classes each pair: ``equal``, ``within frame`` (one 32 ms frame
or less apart), ``differs``, or only in one of them. A difference is
allowed only where :class:`Allowed` lists it, with the framework source
line that owns the decision.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from turnkit.barge_in.controller import BargeInController
from turnkit.detectors.endpointing import Endpointing
from turnkit.drafting.drafter import Draft, EagerDrafter
from turnkit.frames import TurnEagerFrame, TurnEndFrame, TurnResumedFrame
from turnkit.replay.agent import SimulatedAgent
from turnkit.replay.engine import ToolLog

FRAME_S = 0.032  # turnkit's VAD frame: the parity tolerance
MATCH_S = 1.0  # two events further apart than this are not the same event


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    at: float
    detail: str = ""


@dataclass
class Trace:
    """One host's decisions in one call, in time order."""

    host: str
    events: list[Event] = field(default_factory=list)

    def kinds(self) -> set[str]:
        return {e.kind for e in self.events}

    def of(self, kind: str) -> list[Event]:
        return sorted((e for e in self.events if e.kind == kind), key=lambda e: e.at)


class Watch:
    """Records the decisions of every policy object used while active
    (see the module docstring). One host run at a time per process."""

    _active: Watch | None = None

    def __init__(self, host: str) -> None:
        self.host = host
        self.signals: list[Event] = []
        self.controllers: list[BargeInController] = []
        self.drafts: list[Draft] = []
        self.tool_logs: list[ToolLog] = []
        self.agents: list[SimulatedAgent] = []
        self._undo: list[Callable[[], None]] = []

    # -- instrumentation ------------------------------------------------------
    def _wrap(self, cls: type, name: str, make: Callable[[Any], Any]) -> None:
        orig = cls.__dict__[name]
        setattr(cls, name, make(orig))
        self._undo.append(lambda: setattr(cls, name, orig))

    def __enter__(self) -> Watch:
        if Watch._active is not None:
            raise RuntimeError("one Watch at a time")
        Watch._active = self
        watch = self

        def signals(orig: Any) -> Any:
            @functools.wraps(orig)
            async def wrapper(ep: Endpointing, *args: Any, **kwargs: Any) -> Any:
                out = await orig(ep, *args, **kwargs)
                for s in out:
                    kind = (
                        "turn_end"
                        if isinstance(s, TurnEndFrame)
                        else "eager"
                        if isinstance(s, TurnEagerFrame)
                        else "resumed"
                        if isinstance(s, TurnResumedFrame)
                        else None
                    )
                    if kind is not None:
                        why = getattr(s, "reason", "") or ""
                        p = getattr(s, "probability", None)
                        if p is not None:
                            why = f"p={p:.2f} {why}".strip()
                        watch.signals.append(Event(kind, round(float(s.at), 4), why))
                return out

            return wrapper

        def register(store: list[Any]) -> Callable[[Any], Any]:
            def make(orig: Any) -> Any:
                @functools.wraps(orig)
                def init(obj: Any, *args: Any, **kwargs: Any) -> None:
                    orig(obj, *args, **kwargs)
                    store.append(obj)

                return init

            return make

        def on_eager(orig: Any) -> Any:
            @functools.wraps(orig)
            def wrapper(d: EagerDrafter, *args: Any, **kwargs: Any) -> Any:
                draft = orig(d, *args, **kwargs)
                if draft is not None:
                    watch.drafts.append(draft)
                return draft

            return wrapper

        self._wrap(Endpointing, "on_audio", signals)
        self._wrap(Endpointing, "on_transcript", signals)
        self._wrap(BargeInController, "__init__", register(self.controllers))
        self._wrap(EagerDrafter, "on_eager", on_eager)
        self._wrap(ToolLog, "__init__", register(self.tool_logs))
        self._wrap(SimulatedAgent, "__init__", register(self.agents))
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        Watch._active = None

    # -- the result -----------------------------------------------------------
    def trace(self) -> Trace:
        ev = list(self.signals)
        for ctl in self.controllers:
            if len(ctl.log) == ctl.log.maxlen:
                raise RuntimeError("barge-in log full: the trace would miss actions")
            ev += [Event(f"barge_in:{a.value}", round(at, 4), why) for at, a, why in ctl.log]
        ev += [Event(f"draft:{d.state}", round(d.started_at, 4), d.text) for d in self.drafts]
        for log in self.tool_logs:
            ev += [
                Event(f"tool:{x.name}:{x.effect}", round(x.started_at, 4), str(x.args))
                for x in log.executions
            ]
        for agent in self.agents:
            for r in agent.replies:
                if r.first_audio_at is not None:
                    ev.append(Event("reply_audio", round(r.first_audio_at, 4), f"turn {r.turn}"))
                if r.stopped_at is not None:
                    ev.append(Event(f"reply_end:{r.stop_reason}", round(r.stopped_at, 4)))
        return Trace(self.host, sorted(ev, key=lambda e: (e.at, e.kind)))


@contextlib.contextmanager
def watching(host: str) -> Iterator[Watch]:
    with Watch(host) as w:
        yield w


# -- comparison ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Allowed:
    """A listed difference: in ``call`` (``*``: any), events of ``kind``
    (a prefix: ``barge_in:`` covers every action) may differ between the
    reference and ``host``, because ``reason`` (the framework's source line
    that owns the decision)."""

    call: str
    host: str
    kind: str
    reason: str
    max_ms: float | None = None  # the largest difference measured (None: an event may be missing)
    # Only events inside these (start, end) audio stretches (None: anywhere).
    windows: tuple[tuple[float, float], ...] | None = None

    def covers(self, call: str, host: str, row: Row) -> bool:
        if not (
            (self.call == "*" or self.call == call)
            and self.host == host
            and row.kind.startswith(self.kind)
        ):
            return False
        if self.windows is not None:
            at = row.ref if row.ref is not None else row.other
            if at is None or not any(a <= at < b for a, b in self.windows):
                return False
        d = row.diff_ms
        if d is None:
            return self.max_ms is None
        return self.max_ms is None or abs(d) <= self.max_ms + 1e-6


@dataclass(slots=True)
class Row:
    kind: str
    ref: float | None
    other: float | None
    host: str
    status: str  # equal | within frame | differs | only <host>
    reason: str = ""

    @property
    def diff_ms(self) -> float | None:
        if self.ref is None or self.other is None:
            return None
        return round((self.other - self.ref) * 1000, 1)

    @property
    def ok(self) -> bool:
        return self.status in ("equal", "within frame") or bool(self.reason)


def compare(
    call: str, ref: Trace, other: Trace, allowed: list[Allowed], kinds: set[str] | None = None
) -> list[Row]:
    """Pair ``other``'s events with ``ref``'s: per kind, in time order, each
    reference event with the nearest unpaired one (within :data:`MATCH_S`).
    ``kinds``: compare only these kinds (prefixes), e.g. what a host runs."""
    rows: list[Row] = []
    all_kinds = sorted(ref.kinds() | other.kinds())
    for kind in all_kinds:
        if kinds is not None and not any(kind.startswith(k) for k in kinds):
            continue
        a, b = ref.of(kind), other.of(kind)
        used = [False] * len(b)
        for ea in a:
            best = None
            for j, eb in enumerate(b):
                if used[j] or abs(eb.at - ea.at) > MATCH_S:
                    continue
                if best is None or abs(eb.at - ea.at) < abs(b[best].at - ea.at):
                    best = j
            if best is None:
                rows.append(Row(kind, ea.at, None, other.host, f"only {ref.host}"))
                continue
            used[best] = True
            d = abs(b[best].at - ea.at)
            status = "equal" if d < 1e-6 else "within frame" if d <= FRAME_S + 1e-6 else "differs"
            rows.append(Row(kind, ea.at, b[best].at, other.host, status))
        rows += [
            Row(kind, None, eb.at, other.host, f"only {other.host}")
            for j, eb in enumerate(b)
            if not used[j]
        ]
    for r in rows:
        if r.status not in ("equal", "within frame"):
            hit = next((x for x in allowed if x.covers(call, other.host, r)), None)
            if hit is not None:
                r.reason = hit.reason
    rows.sort(key=lambda r: (r.ref if r.ref is not None else r.other or 0.0, r.kind))
    return rows


def _t(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _diff(r: Row) -> str:
    if r.status == "equal":
        return "equal"
    if r.diff_ms is not None:
        return f"{r.diff_ms:+.0f} ms"
    return r.status


def table(
    call: str,
    ref_host: str,
    rows_by_host: dict[str, list[Row]],
    not_run: dict[str, tuple[tuple[str, ...], str]],
) -> str:
    """One call's table: event kind, the reference host's time, each other
    host's time, the difference, the listed reason (``UNLISTED`` where a
    difference has none). A host's cell is ``n/r`` for an event kind it
    does not run (``not_run``: host -> the kinds' prefixes and why, printed
    below the table)."""
    hosts = list(rows_by_host)
    merged: dict[tuple[str, float | None, int], dict[str, Row]] = {}
    for host, rows in rows_by_host.items():
        for i, r in enumerate(rows):
            key = (r.kind, r.ref, 0) if r.ref is not None else (r.kind, r.other, i + 1)
            merged.setdefault(key, {})[host] = r
    head = ["event kind", ref_host, *hosts, "difference", "listed reason"]
    out: list[list[str]] = [head]
    notes: list[str] = []  # the listed reasons used, printed in full below

    def order(k: tuple[str, float | None, int]) -> tuple[float, str]:
        return (k[1] if k[1] is not None else 0.0, k[0])

    for key in sorted(merged, key=order):
        by = merged[key]
        ref = next((r.ref for r in by.values()), None)
        cells = [key[0], _t(ref)]
        diffs, reasons = [], []
        for h in hosts:
            r = by.get(h)
            if r is None:
                skip = any(key[0].startswith(k) for k in not_run.get(h, ((), ""))[0])
                cells.append("n/r" if skip else "")
                continue
            cells.append(_t(r.other))
            if r.status != "equal" or len(hosts) > 1:
                diffs.append(f"{h} {_diff(r)}" if len(hosts) > 1 else _diff(r))
            if r.reason:
                if r.reason not in notes:
                    notes.append(r.reason)
                reasons.append(f"{h}: [{notes.index(r.reason) + 1}]")
            elif not r.ok:
                reasons.append(f"{h}: UNLISTED")
        cells += ["; ".join(diffs) or "equal", " | ".join(reasons)]
        out.append(cells)
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    lines = [f"== {call}"]
    for row in out:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    for i, why in enumerate(notes):
        lines.append(f"[{i + 1}] {why}")
    for h, (kinds, why) in not_run.items():
        lines.append(f"n/r {h} ({', '.join(kinds)}): {why}")
    return "\n".join(lines)


def summary(rows: list[Row]) -> dict[str, int]:
    s = {"events": len(rows), "equal": 0, "within frame": 0, "listed": 0, "unlisted": 0}
    for r in rows:
        if r.status == "equal":
            s["equal"] += 1
        elif r.status == "within frame":
            s["within frame"] += 1
        elif r.reason:
            s["listed"] += 1
        else:
            s["unlisted"] += 1
    return s
