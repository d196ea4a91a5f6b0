"""Discard-only tool gating: what an eager draft may do, and when writes run.

A voice agent may start its reply before the caller's turn is confirmed (an
*eager draft*) and throw it away when the caller goes on. So a draft may only
do work that can be thrown away. :class:`ToolGate` is the one place tool calls
go through, and it decides, per call, from three pieces of evidence:

* the tool's declared ``effect`` (``"read"`` or ``"write"``) and ``confirm``
  flag, fixed when the tool is registered;
* the call's *context*: an open :class:`DraftContext` (speculative), or a confirmed
  :class:`Turn` (a draft that was confirmed routes to its turn);
* the gate's own records: the read cache of the turn, the pending spoken
  confirmations, and the ledger of writes already executed, keyed by an
  idempotency key derived from (session id, turn id, tool name, canonical args).

Rules:

* In an open draft, reads run (bounded by their timeout) and successful results
  are cached for that turn; writes **never** run: the LLM gets a ``deferred``
  result to speak around, and the draft records the intended call.
* :meth:`ToolGate.discard_draft`: nothing the draft recorded is ever executed;
  its in-flight reads are cancelled and its cache is dropped.
* :meth:`ToolGate.confirm_draft`: the draft becomes the reply of its turn. Its
  cached reads are reused for *identical* calls (same name, same canonical
  JSON args) in that turn only; its deferred writes start now, except
  ``confirm=True`` writes, which wait for :meth:`ToolGate.confirm_spoken`.
* A write in a confirmed turn starts only once the caller has been silent
  for ``write_hold_s`` since the turn was confirmed (the commit): a turn
  ends on a guess, and a caller who was only pausing speaks again soon
  after it. Where the host reports the caller's speech
  (:meth:`ToolGate.on_caller_speech`, from its VAD), a write waits while the
  caller speaks and ``write_hold_s`` after they stop; where the caller goes
  on (the host interrupts the turn: a barge-in, or a reply dropped before it
  played), the held write is **withdrawn**, never run, and the continued
  turn asks again if it still wants it. A write asked for after that
  silence (a fresh reply's tool call, one LLM first token after the commit,
  the caller quiet) is not delayed.
* In a confirmed turn, writes run at most once per idempotency key (a retried
  or re-drafted turn asking for the same write gets the stored result), inside
  a task protected by :func:`asyncio.shield`: a barge-in or the cancellation of
  the caller never cuts a running write in half, and its outcome is recorded.
* Every execution is bounded by the tool's ``timeout_s``, raced against the
  injected clock's ``sleep`` (so replay on a VirtualClock is deterministic and
  live calls on a RealClock behave the same). A timed-out read yields text the
  LLM can speak; a timed-out write is recorded as **unknown outcome** and is
  never retried automatically under the same key.

State transitions (:meth:`~ToolGate.start_draft`, :meth:`~ToolGate.confirm_draft`,
:meth:`~ToolGate.discard_draft`, :meth:`~ToolGate.begin_turn`,
:meth:`~ToolGate.confirm_spoken`, :meth:`~ToolGate.interrupt`) are synchronous
and atomic: a host can call them from a frame handler without awaiting, and no
tool call can slip in between a decision and its bookkeeping. Executions run
in tasks; :meth:`ToolGate.wait_writes` awaits the writes of a turn.

Host wiring (with :class:`~turnkit.drafting.drafter.EagerDrafter`): on a new
draft, ``ctx = gate.start_draft(turn_id, draft.id)`` and make every tool call of
that draft's LLM stream with ``ctx``; when the drafter cancels the draft,
``gate.discard_draft(ctx)``; on ``("use", draft)``, ``gate.confirm_draft(ctx)``
(keep calling with ``ctx``: it now routes to the turn); on ``("fresh", None)``,
``gate.begin_turn(turn_id)``; on an engine error, discard and begin the turn
afresh (same ``turn_id``: the ledger keeps repeated writes from running twice).
Before beginning the next turn, pass the caller's yes/no to
:meth:`ToolGate.confirm_spoken` if ``turn.awaiting_confirmation``.

Example::

    @tool(effect="read", timeout_s=2)
    async def find_slots(day: str) -> list[str]:
        return ["10:00", "14:30"]

    @tool(effect="write", timeout_s=5)
    async def book(day: str, time: str) -> str:
        return "booking #123"

    gate = ToolGate([find_slots, book], clock, session_id="call-42")
    draft = gate.start_draft(turn_id=3)                 # eager: caller probably done
    await gate.call(draft, "find_slots", {"day": "mon"})    # runs, cached
    r = await gate.call(draft, "book", {"day": "mon", "time": "10:00"})
    assert r.deferred                                   # nothing booked yet
    turn = gate.confirm_draft(draft)                    # caller really was done
    results = await gate.wait_writes(turn)              # booking runs, exactly once
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from turnkit.clock import Clock

__all__ = [
    "WITHDRAWN_REASON",
    "WRITE_HOLD_S",
    "Confirmed",
    "DraftContext",
    "Tool",
    "ToolGate",
    "ToolResult",
    "Turn",
    "WriteRecord",
    "canonical_args",
    "tool",
    "withdrawn_text",
]

log = logging.getLogger(__name__)

Effect = Literal["read", "write"]

# How long the caller must be silent after a commit before a write runs. A
# turn is ended on a guess, and a caller who was only pausing resumes soon
# after it: of the premature ends on the demo and real-call variants
# (`fused`, 2026-12-07), half had the caller speaking again within 0.35 s
# of the commit and 14 of 24 within 0.45 s. A host's VAD confirms a start
# one start window (~0.1 s) after the speech began, so 0.5 s of silence it
# can vouch for takes 0.6 s: at 0.5 s a caller who resumed 0.46 s after a
# 500 ms timer's commit (refund-mixed-10) was heard 44 ms after the refund
# had started. The caller's speech holds a write meanwhile
# (ToolGate.on_caller_speech), and the host's stop of the reply withdraws
# it. Writes from a fresh request come one LLM first token (~0.35 s) after
# the commit, so they wait ~0.25 s more; a write an eager draft asked for
# waits the whole hold.
WRITE_HOLD_S = 0.6


# Why a write was withdrawn, in what the LLM is told (withdrawn_text); the
# replay's simulated engine reads a tool message holding it as "not done".
WITHDRAWN_REASON = "the caller went on speaking before it started"


def withdrawn_text(name: str) -> str:
    """What the LLM is told of a write withdrawn after its commit."""
    return (
        f"{name} was not carried out: {WITHDRAWN_REASON}. "
        "Do not say it is done; ask again if they still want it."
    )


def canonical_args(args: Mapping[str, Any]) -> str:
    """Canonical JSON of a call's arguments: sorted keys, no whitespace.

    Two calls are *identical* when their tool names and canonical args are
    equal. Raises ``TypeError`` for arguments that are not JSON values.
    """
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the LLM may use, with the effect it has on the world.

    ``effect="read"`` declares the call side-effect free (safe to run in a draft
    that may be thrown away, and safe to cancel); ``effect="write"`` means it
    changes something (booking, payment, message) and only runs in a confirmed
    turn. ``confirm=True`` (writes only) additionally requires the caller's
    spoken yes. ``fn`` is an async callable taking the call's arguments as
    keywords; if it accepts an ``idempotency_key`` keyword, writes receive
    their key (pass it on to the remote API where it supports one).

    Example::

        lookup = Tool(name="lookup", fn=lookup_fn, effect="read", timeout_s=2.0)
    """

    name: str
    fn: Callable[..., Awaitable[Any]]
    effect: Effect
    confirm: bool = False
    timeout_s: float = 5.0
    description: str = ""
    parameters: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.effect not in ("read", "write"):
            raise ValueError(
                f"tool {self.name!r}: effect must be 'read' or 'write', not {self.effect!r}"
            )
        if self.confirm and self.effect != "write":
            raise ValueError(f"tool {self.name!r}: confirm=True only applies to write tools")
        if not self.timeout_s > 0:
            raise ValueError(f"tool {self.name!r}: timeout_s must be > 0, got {self.timeout_s!r}")
        if not callable(self.fn):
            raise TypeError(f"tool {self.name!r}: fn must be an async callable")

    @property
    def accepts_key(self) -> bool:
        """Whether ``fn`` takes an ``idempotency_key`` keyword."""
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return False
        return "idempotency_key" in params

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style function spec to offer the LLM."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters or {"type": "object", "properties": {}},
            },
        }


def tool(
    *,
    effect: Effect,
    timeout_s: float = 5.0,
    confirm: bool = False,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> Callable[[Callable[..., Awaitable[Any]]], Tool]:
    """Decorator: turn an async function into a :class:`Tool`.

    The name defaults to the function's name and the description to the first
    paragraph of its docstring.

    Example::

        @tool(effect="read", timeout_s=2)
        async def weather(city: str) -> str:
            "Today's weather in a city."
            return "sunny"
    """

    def wrap(fn: Callable[..., Awaitable[Any]]) -> Tool:
        doc = inspect.getdoc(fn) or ""
        return Tool(
            name=name or fn.__name__,
            fn=fn,
            effect=effect,
            confirm=confirm,
            timeout_s=float(timeout_s),
            description=description if description is not None else doc.split("\n\n")[0],
            parameters=parameters,
        )

    return wrap


@dataclass(slots=True, kw_only=True)
class ToolResult:
    """What a gated call returned, and why.

    ``ok`` and ``value``/``error`` describe the outcome; ``deferred`` says the
    call did not run (a write in a draft, or a write awaiting the caller's
    yes: ``awaiting_confirmation``); ``timed_out`` says it ran past its
    ``timeout_s``; ``from_draft_cache`` says an identical earlier read in the
    same turn answered it; ``replayed`` says the write ledger answered it
    (same idempotency key, not executed again); ``withdrawn`` says a write
    held after its commit was never run because the caller went on.
    :meth:`for_llm` is the text
    to put in the LLM's tool message.
    """

    name: str
    args: dict[str, Any]
    ok: bool
    value: Any = None
    error: str = ""
    deferred: bool = False
    awaiting_confirmation: bool = False
    timed_out: bool = False
    from_draft_cache: bool = False
    replayed: bool = False
    declined: bool = False
    withdrawn: bool = False
    idempotency_key: str | None = None

    def for_llm(self) -> str:
        if self.ok and not self.deferred:
            try:
                return json.dumps(self.value, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                return str(self.value)
        return self.error


WriteStatus = Literal["running", "ok", "error", "unknown"]


@dataclass(slots=True, kw_only=True)
class WriteRecord:
    """One executed write in the ledger. ``status`` is ``"running"``, ``"ok"``,
    ``"error"`` (the tool raised) or ``"unknown"`` (timed out: it may or may not
    have taken effect; never retried under the same key)."""

    key: str
    name: str
    args: dict[str, Any]
    turn_id: int
    started_at: float
    finished_at: float | None = None
    status: WriteStatus = "running"
    result: ToolResult | None = None
    task: asyncio.Task[ToolResult] | None = field(default=None, repr=False)


@dataclass(slots=True, kw_only=True)
class _Intent:
    tool: Tool
    args: dict[str, Any]
    canon: str


@dataclass(slots=True, kw_only=True)
class _Held:
    """A write waiting out the caller's silence after its commit
    (``committed_at``): ``go`` resolves False when the caller went on
    (withdraw it); ``task`` yields the write's result either way."""

    turn: Turn
    intent: _Intent
    committed_at: float
    go: asyncio.Future[bool]
    task: asyncio.Task[ToolResult] | None = None


class DraftContext:
    """The tool-call context of a speculative reply for caller turn ``turn_id``.

    One per eager draft (:class:`~turnkit.drafting.drafter.Draft` is the
    drafter's record of the same draft); discardable.

    ``state`` is ``"open"``, ``"confirmed"`` (then ``turn`` is set and calls on
    the draft go to that turn) or ``"discarded"``. ``intended_writes`` lists the
    writes it asked for, none of which ran while it was open.
    """

    def __init__(self, draft_id: int, turn_id: int) -> None:
        self.draft_id = draft_id
        self.turn_id = turn_id
        self.state: Literal["open", "confirmed", "discarded"] = "open"
        self.turn: Turn | None = None
        self.intended_writes: list[tuple[str, dict[str, Any]]] = []
        self._intents: list[_Intent] = []
        self._reads: dict[tuple[str, str], ToolResult] = {}
        self._inflight: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"DraftContext(id={self.draft_id}, turn={self.turn_id}, {self.state})"


class Turn:
    """The confirmed reply to caller turn ``turn_id``.

    ``state`` is ``"live"``, ``"interrupted"`` (barge-in: no new calls; running
    writes finish) or ``"closed"`` (a newer turn began).
    """

    def __init__(self, turn_id: int) -> None:
        self.turn_id = turn_id
        self.state: Literal["live", "interrupted", "closed"] = "live"
        self.write_keys: list[str] = []
        self._pending: dict[str, _Intent] = {}
        self._declined: dict[str, ToolResult] = {}
        self._reads: dict[tuple[str, str], ToolResult] = {}
        self._inflight: set[asyncio.Task[Any]] = set()

    @property
    def awaiting_confirmation(self) -> list[tuple[str, dict[str, Any]]]:
        """Writes waiting for the caller's spoken yes, as (name, args)."""
        return [(i.tool.name, i.args) for i in self._pending.values()]

    def __repr__(self) -> str:
        return f"Turn(id={self.turn_id}, {self.state})"


Confirmed = Turn  # the confirmed-turn context, by its role
Context = DraftContext | Turn


class ToolGate:
    """The single gate every tool call goes through; see the module docstring.

    Decides whether a call runs, is deferred, awaits a spoken yes, is answered
    from the turn's read cache or from the write ledger, or is refused, on the
    evidence of the tool's declared effect, the call's context (open draft or
    confirmed turn) and the gate's records.

    ``write_hold_s`` (default :data:`WRITE_HOLD_S`; 0: writes start as soon
    as they are asked for in a confirmed turn): how long after the commit a
    write waits for the caller to go on (see the module docstring).

    Counters: ``reads_run``, ``reads_reused``, ``executed_writes`` (real
    executions started), ``deferred_writes`` (write calls held back in drafts),
    ``withdrawn_writes`` (writes held after a commit that the caller's going
    on withdrew, never run; ``withdrawn_keys`` their idempotency keys),
    ``discarded_writes`` (held-back writes of discarded drafts), ``declined_writes``
    (``confirm=True`` writes cancelled by a no or a new turn),
    ``deduplicated_writes`` (write requests answered by the ledger),
    ``refused_calls`` (calls in a discarded draft or a finished turn),
    ``calls`` (every call made through the gate), ``draft_reads`` (reads run
    inside an open draft). ``discarded_write_keys`` holds the idempotency
    keys of the writes discarded drafts asked for (none of which may run
    unless a confirmed turn asks for the same write again).

    Example::

        gate = ToolGate([lookup, book, pay], clock, session_id="call-1")
        turn = gate.begin_turn(1)
        r = await gate.call(turn, "pay", {"amount": 20})
        assert r.awaiting_confirmation       # agent asks "shall I pay 20?"
        gate.confirm_spoken(turn, yes=True)  # caller: "yes"
        [paid] = await gate.wait_writes(turn)
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        clock: Clock,
        *,
        session_id: str = "session",
        write_hold_s: float = WRITE_HOLD_S,
    ) -> None:
        if not write_hold_s >= 0:
            raise ValueError(f"write_hold_s must be >= 0, got {write_hold_s!r}")
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"duplicate tool name {t.name!r}")
            self._tools[t.name] = t
        self._clock = clock
        self.session_id = session_id
        self._draft_ids = 0
        self._drafts: list[DraftContext] = []
        self._turn: Turn | None = None
        self._ledger: dict[str, WriteRecord] = {}
        self.write_hold_s = float(write_hold_s)
        self._committed_at = clock.now()
        self._held: dict[str, _Held] = {}
        # The caller's speech as the host's VAD reports it (on_caller_speech).
        self._caller_speaking = False
        self._quiet_since = -float("inf")
        self._speech_changed = asyncio.Event()
        self.reads_run = 0
        self.reads_reused = 0
        self.executed_writes = 0
        self.deferred_writes = 0
        self.discarded_writes = 0
        self.declined_writes = 0
        self.deduplicated_writes = 0
        self.withdrawn_writes = 0
        self.refused_calls = 0
        self.calls = 0
        self.draft_reads = 0
        self.discarded_write_keys: set[str] = set()
        self.withdrawn_keys: set[str] = set()
        # The latest confirmed turns (their write_keys: the writes they asked for).
        self.recent_turns: deque[Turn] = deque(maxlen=256)

    # --- introspection -------------------------------------------------------

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    @property
    def current_turn(self) -> Turn | None:
        return self._turn

    @property
    def ledger(self) -> list[WriteRecord]:
        """Every executed write, in start order."""
        return list(self._ledger.values())

    def idempotency_key(self, turn_id: int, name: str, args: Mapping[str, Any]) -> str:
        """The key of a write: (session id, turn id, tool name, canonical args)."""
        canon = canonical_args(args)
        digest = hashlib.sha256(
            json.dumps([self.session_id, turn_id, name, canon]).encode()
        ).hexdigest()[:24]
        return f"{self.session_id}:{turn_id}:{name}:{digest}"

    def specs(self) -> list[dict[str, Any]]:
        """Function specs of every tool, for the LLM request."""
        return [t.spec() for t in self._tools.values()]

    # --- state transitions (synchronous, atomic) ----------------------------

    def start_draft(self, turn_id: int, draft_id: int | None = None) -> DraftContext:
        """Open a speculative draft for caller turn ``turn_id``.

        ``draft_id`` is for the host's bookkeeping (e.g. the
        :class:`~turnkit.drafting.drafter.EagerDrafter` draft's ``id``); by
        default the gate numbers drafts itself.
        """
        if self._turn is not None and turn_id < self._turn.turn_id:
            raise ValueError(f"turn {turn_id} is older than the current turn {self._turn.turn_id}")
        self._draft_ids += 1
        draft = DraftContext(self._draft_ids if draft_id is None else draft_id, turn_id)
        self._drafts.append(draft)
        return draft

    def discard_draft(self, draft: DraftContext) -> None:
        """Throw a draft away: none of its writes ever run, its in-flight reads
        are cancelled and its read cache is dropped. Idempotent. A confirmed
        draft cannot be discarded (its turn is real; interrupt it instead)."""
        if draft.state == "discarded":
            return
        if draft.state == "confirmed":
            raise ValueError(f"{draft!r} was confirmed; interrupt its turn instead")
        draft.state = "discarded"
        self.discarded_writes += len(draft._intents)
        for intent in draft._intents:
            self.discarded_write_keys.add(
                self.idempotency_key(draft.turn_id, intent.tool.name, intent.args)
            )
        draft._intents.clear()
        draft._reads.clear()
        self._cancel_all(draft._inflight)
        self._drafts.remove(draft)

    def begin_turn(self, turn_id: int) -> Turn:
        """Confirm caller turn ``turn_id`` without a draft (or retry it).

        The same id as the current turn returns the current turn (a retry of
        the reply: its ledger answers repeated writes). A newer id closes the
        current turn: its pending ``confirm=True`` writes are declined, its
        in-flight reads cancelled, its read cache dropped; open drafts for
        older turns are discarded. An older id raises ``ValueError``. Either
        way the caller's turn was committed now: writes asked for from here
        wait ``write_hold_s`` from now.
        """
        cur = self._turn
        self._commit()
        if cur is not None:
            if turn_id == cur.turn_id:
                return cur
            if turn_id < cur.turn_id:
                raise ValueError(f"turn {turn_id} is older than the current turn {cur.turn_id}")
            self._close(cur)
        turn = Turn(turn_id)
        self._turn = turn
        self.recent_turns.append(turn)
        for d in [d for d in self._drafts if d.turn_id < turn_id]:
            self.discard_draft(d)
        return turn

    def confirm_draft(self, draft: DraftContext) -> Turn:
        """The draft is the confirmed reply of its turn; returns that turn.

        Its cached reads move to the turn (reused for identical calls only);
        its deferred writes start now (``confirm=True`` ones wait for
        :meth:`confirm_spoken`). Confirming twice returns the same turn.
        Raises ``ValueError`` for a discarded draft.
        """
        if draft.state == "confirmed":
            assert draft.turn is not None
            return draft.turn
        if draft.state == "discarded":
            raise ValueError(f"{draft!r} was discarded and cannot be confirmed")
        turn = self.begin_turn(draft.turn_id)
        draft.state = "confirmed"
        draft.turn = turn
        self._drafts.remove(draft)
        for k, r in draft._reads.items():
            turn._reads.setdefault(k, r)
        draft._reads = turn._reads
        turn._inflight |= draft._inflight
        draft._inflight = turn._inflight
        intents, draft._intents = draft._intents, []
        for intent in intents:
            self._request_write(turn, intent)
        return turn

    def confirm_spoken(self, turn: Turn, yes: bool) -> list[str]:
        """The caller answered the confirmation question: yes runs every write
        of ``turn`` awaiting confirmation, no declines them all without running.
        Returns their idempotency keys; :meth:`wait_writes` gives the results.
        The answer is a commit of the caller's turn: a yes's writes wait
        ``write_hold_s`` from now, and are withdrawn if the caller goes on
        ("yes, | but on the other card")."""
        self._commit()
        pending, turn._pending = turn._pending, {}
        for key, intent in pending.items():
            if yes and turn.state != "closed":
                self._start_write(turn, key, intent)
            else:
                self._decline(turn, key, intent, "the caller did not confirm")
        return list(pending)

    def reopen(self, turn: Turn) -> None:
        """The caller's turn goes on after its reply was dropped before any
        of it played (the end was premature): the current ``turn``, if
        interrupted, takes calls again. Its ledger still answers a write it
        already ran, so the continued turn asking for it again does not run
        it twice."""
        if turn is self._turn and turn.state == "interrupted":
            turn.state = "live"

    def on_caller_speech(self, speaking: bool) -> None:
        """The host's VAD: the caller started (True) or stopped (False)
        speaking. A write held after a commit does not start while the
        caller speaks, and waits ``write_hold_s`` after they stop (a murmur
        over the reply delays it; a caller going on is withdrawn by
        :meth:`interrupt` when the host stops the reply)."""
        if speaking == self._caller_speaking:
            return
        self._caller_speaking = speaking
        if not speaking:
            self._quiet_since = self._clock.now()
        event, self._speech_changed = self._speech_changed, asyncio.Event()
        event.set()

    def interrupt(self, turn: Turn) -> None:
        """Barge-in on ``turn``, or the caller going on before its reply
        played: its in-flight reads are cancelled and it takes no new calls;
        running writes finish (or time out) and are recorded; writes still in
        their hold after the commit are withdrawn (never run); writes
        awaiting confirmation still wait for :meth:`confirm_spoken`."""
        if turn.state == "live":
            turn.state = "interrupted"
        self._cancel_all(turn._inflight)
        # The caller went on before the hold ran out: the commit was wrong,
        # so no write it released may run (whichever turn asked for it: a
        # spoken yes releases the asking turn's writes at the answer's
        # commit).
        for key, held in self._held.items():
            if not held.go.done():
                held.go.set_result(False)
                self.withdrawn_writes += 1
                self.withdrawn_keys.add(key)

    async def wait_writes(self, turn: Turn) -> list[ToolResult]:
        """Await and return the results of every write started or declined in
        ``turn``, in request order (awaiting-confirmation ones are not included)."""
        out: list[ToolResult] = []
        for key in list(turn.write_keys):
            held = self._held.get(key)
            if held is not None and held.task is not None:
                out.append(await asyncio.shield(held.task))
                continue
            rec = self._ledger.get(key)
            if rec is not None and rec.task is not None:
                out.append(await asyncio.shield(rec.task))
            elif key in turn._declined:
                out.append(turn._declined[key])
        return out

    # --- the call -----------------------------------------------------------

    async def call(
        self, context: Context, name: str, args: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """Run, defer, reuse or refuse one tool call made in ``context``.

        Never raises for tool failures (they come back as ``ok=False`` with
        text for the LLM); raises ``CancelledError`` only when the caller itself
        is cancelled, in which case a running write still completes and is
        recorded in the ledger.
        """
        args = dict(args or {})
        self.calls += 1
        t = self._tools.get(name)
        if t is None:
            return ToolResult(
                name=name, args=args, ok=False, error=f"There is no tool called {name!r}."
            )
        try:
            canon = canonical_args(args)
        except (TypeError, ValueError) as exc:
            return ToolResult(
                name=name, args=args, ok=False, error=f"Invalid arguments for {name}: {exc}"
            )

        if isinstance(context, DraftContext) and context.state == "confirmed":
            assert context.turn is not None
            context = context.turn

        if isinstance(context, DraftContext):
            if context.state == "discarded":
                if t.effect == "write":
                    self.discarded_writes += 1
                return self._refuse(t, args, "This draft was discarded; nothing was done.")
            if t.effect == "write":
                context._intents.append(_Intent(tool=t, args=args, canon=canon))
                context.intended_writes.append((name, args))
                self.deferred_writes += 1
                return ToolResult(
                    name=name,
                    args=args,
                    ok=True,
                    deferred=True,
                    idempotency_key=self.idempotency_key(context.turn_id, name, args),
                    error=(
                        f"Not done yet: {name} will be carried out once the caller's turn "
                        "is confirmed"
                        + (" and they say yes" if t.confirm else "")
                        + ". Do not say it is done."
                    ),
                )
            return await self._read(context, t, args, canon)

        turn = context
        if turn.state != "live":
            why = "was interrupted" if turn.state == "interrupted" else "is over"
            return self._refuse(t, args, f"That turn {why}; {name} was not run.")
        if t.effect == "read":
            return await self._read(turn, t, args, canon)
        key = self._request_write(turn, _Intent(tool=t, args=args, canon=canon))
        held = self._held.get(key)
        if held is not None and held.task is not None:
            return await asyncio.shield(held.task)
        rec = self._ledger.get(key)
        if rec is None or rec.task is None:
            return ToolResult(
                name=name,
                args=args,
                ok=True,
                deferred=True,
                awaiting_confirmation=True,
                idempotency_key=key,
                error=(
                    f"Not done yet: ask the caller to confirm {name} out loud; "
                    "it runs only after they say yes."
                ),
            )
        return await asyncio.shield(rec.task)

    # --- internals ----------------------------------------------------------

    def _refuse(self, t: Tool, args: dict[str, Any], why: str) -> ToolResult:
        self.refused_calls += 1
        return ToolResult(name=t.name, args=args, ok=False, error=why)

    def _close(self, turn: Turn) -> None:
        turn.state = "closed"
        pending, turn._pending = turn._pending, {}
        for key, intent in pending.items():
            self._decline(turn, key, intent, "a new turn began before the caller confirmed")
        self._cancel_all(turn._inflight)
        turn._reads.clear()

    def _decline(self, turn: Turn, key: str, intent: _Intent, why: str) -> None:
        self.declined_writes += 1
        turn._declined[key] = ToolResult(
            name=intent.tool.name,
            args=intent.args,
            ok=False,
            declined=True,
            idempotency_key=key,
            error=f"{intent.tool.name} was not carried out: {why}.",
        )
        if key not in turn.write_keys:
            turn.write_keys.append(key)

    @staticmethod
    def _cancel_all(tasks: set[asyncio.Task[Any]]) -> None:
        for task in list(tasks):
            task.cancel()

    def _request_write(self, turn: Turn, intent: _Intent) -> str:
        """A write asked for in a confirmed turn: start it, hold it for a yes,
        or (same key already in the ledger) leave it to the ledger."""
        key = self.idempotency_key(turn.turn_id, intent.tool.name, intent.args)
        if key in self._ledger or key in self._held:
            self.deduplicated_writes += 1
            if key not in turn.write_keys:
                turn.write_keys.append(key)
        elif intent.tool.confirm:
            turn._pending.setdefault(key, intent)
        else:
            self._start_write(turn, key, intent)
        return key

    def _start_write(self, turn: Turn, key: str, intent: _Intent) -> None:
        if key in self._ledger or key in self._held:  # already run or held
            self.deduplicated_writes += 1
        elif self._hold_left(self._committed_at) > 0:
            loop = asyncio.get_running_loop()
            h = _Held(
                turn=turn, intent=intent, committed_at=self._committed_at, go=loop.create_future()
            )
            self._held[key] = h
            h.task = loop.create_task(self._hold(key, h))
        else:
            self._run(turn, key, intent)
        turn._declined.pop(key, None)
        if key not in turn.write_keys:
            turn.write_keys.append(key)

    def _run(self, turn: Turn, key: str, intent: _Intent) -> WriteRecord:
        """Execute a write now: into the ledger, its task started."""
        rec = WriteRecord(
            key=key,
            name=intent.tool.name,
            args=intent.args,
            turn_id=turn.turn_id,
            started_at=self._clock.now(),
        )
        self._ledger[key] = rec
        self.executed_writes += 1
        rec.task = asyncio.get_running_loop().create_task(self._run_write(rec, intent.tool))
        return rec

    def _commit(self) -> None:
        """The caller's turn was committed now: writes asked for from here
        wait ``write_hold_s`` from now. A commit is the host's word that the
        caller stopped, so a speech start it never reported the end of
        (a host whose signals include no VAD stop) holds nothing past it."""
        self._committed_at = self._clock.now()
        if self._caller_speaking:
            self.on_caller_speech(False)

    def _hold_left(self, committed_at: float) -> float:
        """Seconds until the caller has been silent ``write_hold_s`` since a
        commit at ``committed_at`` (inf while they speak; <= 0: now)."""
        if self.write_hold_s <= 0:
            return 0.0
        if self._caller_speaking:
            return float("inf")
        since = max(committed_at, self._quiet_since)
        return since + self.write_hold_s - self._clock.now()

    async def _hold(self, key: str, held: _Held) -> ToolResult:
        """Wait out the caller's silence, then run the write, unless the
        caller went on first (:meth:`interrupt`): then it is withdrawn,
        never run."""
        while not held.go.done():
            left = self._hold_left(held.committed_at)
            if left <= 0:
                held.go.set_result(True)
                break
            waits = {asyncio.ensure_future(self._speech_changed.wait())}
            if left != float("inf"):
                waits.add(asyncio.ensure_future(self._clock.sleep(left)))
            waits.add(asyncio.ensure_future(asyncio.shield(held.go)))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        self._held.pop(key, None)
        if held.go.result():
            rec = self._run(held.turn, key, held.intent)
            assert rec.task is not None
            return await asyncio.shield(rec.task)
        intent = held.intent
        result = ToolResult(
            name=intent.tool.name,
            args=intent.args,
            ok=False,
            withdrawn=True,
            idempotency_key=key,
            error=withdrawn_text(intent.tool.name),
        )
        held.turn._declined[key] = result
        return result

    async def _run_write(self, rec: WriteRecord, t: Tool) -> ToolResult:
        kwargs = dict(rec.args)
        if t.accepts_key:
            kwargs["idempotency_key"] = rec.key
        ok, value, error, timed_out = await self._bounded(t, kwargs)
        if timed_out:
            error = (
                f"The {t.name} action took too long (over {t.timeout_s:g} s) and its outcome "
                "is unknown; it was not repeated. Tell the caller and offer to check."
            )
        rec.status = "ok" if ok else ("unknown" if timed_out else "error")
        rec.finished_at = self._clock.now()
        rec.result = ToolResult(
            name=t.name,
            args=rec.args,
            ok=ok,
            value=value,
            error=error,
            timed_out=timed_out,
            idempotency_key=rec.key,
        )
        log.info("write %s %s -> %s", t.name, rec.key, rec.status)
        return rec.result

    async def _read(self, ctx: Context, t: Tool, args: dict[str, Any], canon: str) -> ToolResult:
        cached = ctx._reads.get((t.name, canon))
        if cached is not None:
            self.reads_reused += 1
            return ToolResult(
                name=t.name, args=args, ok=cached.ok, value=cached.value, from_draft_cache=True
            )
        self.reads_run += 1
        if isinstance(ctx, DraftContext) and ctx.state == "open":
            self.draft_reads += 1
        task = asyncio.get_running_loop().create_task(self._bounded(t, args))
        inflight = ctx._inflight
        inflight.add(task)
        try:
            ok, value, error, timed_out = await task
        except asyncio.CancelledError:
            cur = asyncio.current_task()
            if cur is not None and cur.cancelling():
                raise  # our caller was cancelled
            return ToolResult(
                name=t.name,
                args=args,
                ok=False,
                error=f"The {t.name} lookup was cancelled: the reply was dropped.",
            )
        finally:
            ctx._inflight.discard(task)
            inflight.discard(task)
        if timed_out:
            error = (
                f"The {t.name} lookup took too long (over {t.timeout_s:g} s); "
                "say so and offer to try again."
            )
        result = ToolResult(
            name=t.name, args=args, ok=ok, value=value, error=error, timed_out=timed_out
        )
        # Cache only successes, and only while the cache belongs to a live reply:
        # a draft confirmed meanwhile shares its turn's cache; a discarded draft
        # or a closed turn has none.
        if isinstance(ctx, DraftContext):
            owner = ctx.turn if ctx.state == "confirmed" else None
            alive = ctx.state == "open" or (owner is not None and owner.state != "closed")
        else:
            alive = ctx.state != "closed"
        if ok and alive:
            ctx._reads.setdefault((t.name, canon), result)
        return result

    async def _bounded(self, t: Tool, kwargs: dict[str, Any]) -> tuple[bool, Any, str, bool]:
        """Run ``t.fn(**kwargs)`` racing ``clock.sleep(t.timeout_s)``.

        Returns (ok, value, error, timed_out). Racing the injected clock's
        sleep (rather than ``asyncio.wait_for``, which reads the loop's time)
        makes the deadline exact on a VirtualClock and ordinary on a RealClock.
        On timeout the work is cancelled. If this coroutine is cancelled, the
        work is cancelled with it (writes are shielded one level up).
        """
        work = asyncio.ensure_future(_invoke(t.fn, kwargs))
        timer = asyncio.ensure_future(self._clock.sleep(t.timeout_s))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            timer.cancel()
            work.add_done_callback(_swallow)
            raise
        if work.done():
            timer.cancel()
            if work.cancelled():
                return False, None, f"The {t.name} call was cancelled.", False
            exc = work.exception()
            if exc is not None:
                log.warning("tool %s failed: %r", t.name, exc)
                kind = "lookup" if t.effect == "read" else "action"
                return False, None, f"The {t.name} {kind} failed: {exc}", False
            return True, work.result(), "", False
        work.cancel()
        work.add_done_callback(_swallow)
        await asyncio.sleep(0)  # deliver the cancellation to the work now
        log.warning("tool %s timed out after %g s", t.name, t.timeout_s)
        return False, None, "", True


async def _invoke(fn: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
    return await fn(**kwargs)


def _swallow(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
