"""Discard-only tool gating: drafts never write, writes run once, safely."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnkit.clock import RealClock, VirtualClock, settle
from turnkit.drafting import (
    WRITE_HOLD_S,
    DraftContext,
    Tool,
    ToolGate,
    Turn,
    canonical_args,
    tool,
)

# --- instrumented tools ------------------------------------------------------


class World:
    """Tools that take ``delay`` virtual seconds and count real executions."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.runs: collections.Counter[tuple[str, str]] = collections.Counter()
        self.keys: collections.Counter[str] = collections.Counter()
        self.finished: list[tuple[str, str]] = []
        self.cancelled: list[tuple[str, str, float]] = []

    def make(
        self, name: str, effect: str, *, confirm: bool = False, timeout_s: float = 2.0
    ) -> Tool:
        world = self

        async def fn(delay: float = 0.0, idempotency_key: str | None = None, **kw: Any) -> Any:
            args = {"delay": delay, **kw}
            canon = canonical_args(args)
            world.runs[(name, canon)] += 1
            if idempotency_key is not None:
                world.keys[idempotency_key] += 1
            try:
                await world.clock.sleep(delay)
            except asyncio.CancelledError:
                world.cancelled.append((name, canon, world.clock.now()))
                raise
            if kw.get("fail"):
                raise RuntimeError("no such slot")
            world.finished.append((name, canon))
            return {"tool": name, "args": args, "at": world.clock.now()}

        return Tool(name=name, fn=fn, effect=effect, confirm=confirm, timeout_s=timeout_s)  # type: ignore[arg-type]


def make_gate(write_hold_s: float = 0.0) -> tuple[ToolGate, World, VirtualClock]:
    """A gate on a virtual clock. Writes start when asked (no hold after the
    commit) unless ``write_hold_s`` says otherwise: the hold has its own
    tests below (``test_a_write_*``)."""
    clock = VirtualClock()
    world = World(clock)
    tools = [
        world.make("lookup", "read"),
        world.make("book", "write"),
        world.make("pay", "write", confirm=True),
    ]
    gate = ToolGate(tools, clock, session_id="call-1", write_hold_s=write_hold_s)
    return gate, world, clock


async def run(clock: VirtualClock, coro: Any, until: float = 10.0) -> Any:
    task = asyncio.ensure_future(coro)
    await settle()
    await clock.advance_to(clock.now() + until)
    return await task


# --- tools and the decorator -------------------------------------------------


def test_tool_validation_and_decorator():
    @tool(effect="read", timeout_s=2)
    async def weather(city: str) -> str:
        """Today's weather in a city.

        More text."""
        return "sunny"

    assert weather.name == "weather" and weather.effect == "read" and weather.timeout_s == 2.0
    assert weather.description == "Today's weather in a city."
    assert weather.spec()["function"]["name"] == "weather"
    assert not weather.accepts_key

    async def f(**kw: Any) -> None: ...

    with pytest.raises(ValueError, match="confirm"):
        Tool(name="x", fn=f, effect="read", confirm=True)
    with pytest.raises(ValueError, match="timeout"):
        Tool(name="x", fn=f, effect="read", timeout_s=0)
    with pytest.raises(ValueError, match="effect"):
        Tool(name="x", fn=f, effect="delete")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="duplicate"):
        ToolGate([weather, weather], RealClock())


def test_canonical_args_ignores_key_order_and_keys_differ_by_turn_and_args():
    assert canonical_args({"b": 1, "a": [1, 2]}) == canonical_args({"a": [1, 2], "b": 1})
    gate, _, _ = make_gate()
    k = gate.idempotency_key(1, "book", {"a": 1, "b": 2})
    assert k == gate.idempotency_key(1, "book", {"b": 2, "a": 1})
    assert k != gate.idempotency_key(2, "book", {"a": 1, "b": 2})
    assert k != gate.idempotency_key(1, "book", {"a": 1, "b": 3})
    assert k != ToolGate([], VirtualClock(), session_id="other").idempotency_key(
        1, "book", {"a": 1, "b": 2}
    )


# --- drafts ------------------------------------------------------------------


async def test_draft_runs_reads_and_defers_writes():
    gate, world, clock = make_gate()
    draft = gate.start_draft(1)
    r = await run(clock, gate.call(draft, "lookup", {"delay": 0.5}))
    assert r.ok and r.value["at"] == 0.5 and not r.from_draft_cache
    w = await gate.call(draft, "book", {"slot": 1})
    assert w.deferred and w.ok and "once the caller's turn is confirmed" in w.for_llm()
    assert w.idempotency_key == gate.idempotency_key(1, "book", {"slot": 1})
    assert draft.intended_writes == [("book", {"slot": 1})]
    assert world.runs[("lookup", canonical_args({"delay": 0.5}))] == 1
    assert not any(name == "book" for name, _ in world.runs)
    assert gate.reads_run == 1 and gate.deferred_writes == 1 and gate.executed_writes == 0


async def test_discarded_draft_never_executes_and_drops_its_cache():
    gate, world, clock = make_gate()
    draft = gate.start_draft(1)
    await run(clock, gate.call(draft, "lookup", {}))
    await gate.call(draft, "book", {"slot": 1})
    await gate.call(draft, "pay", {"amount": 5})
    gate.discard_draft(draft)
    gate.discard_draft(draft)  # idempotent
    late = await gate.call(draft, "book", {"slot": 2})
    assert not late.ok and "discarded" in late.error
    with pytest.raises(ValueError):
        gate.confirm_draft(draft)
    # The caller goes on; the real turn 1 asks the same lookup: it runs afresh.
    turn = gate.begin_turn(1)
    r = await run(clock, gate.call(turn, "lookup", {}))
    assert r.ok and not r.from_draft_cache
    await clock.advance(100)
    assert not any(name in ("book", "pay") for name, _ in world.runs)
    assert gate.discarded_writes == 3 and gate.executed_writes == 0 and gate.ledger == []


async def test_discard_cancels_a_draft_read_in_flight():
    gate, world, _ = make_gate()
    draft = gate.start_draft(1)
    task = asyncio.ensure_future(gate.call(draft, "lookup", {"delay": 1.0}))
    await settle()
    gate.discard_draft(draft)
    r = await task
    assert not r.ok and "cancelled" in r.error
    assert world.cancelled and world.finished == []


async def test_confirmed_draft_reuses_identical_reads_only_and_runs_deferred_writes_once():
    gate, world, clock = make_gate()
    draft = gate.start_draft(1)
    first = await run(clock, gate.call(draft, "lookup", {"delay": 0.5, "q": "mon"}))
    await gate.call(draft, "book", {"slot": 1})
    turn = gate.confirm_draft(draft)
    assert gate.confirm_draft(draft) is turn and turn.turn_id == 1
    again = await gate.call(turn, "lookup", {"q": "mon", "delay": 0.5})  # same args, other order
    assert again.from_draft_cache and again.value == first.value
    other = await run(clock, gate.call(turn, "lookup", {"delay": 0.5, "q": "tue"}))
    assert not other.from_draft_cache
    # The draft's LLM stream goes on after confirmation: its calls are the turn's.
    via_draft = await gate.call(draft, "lookup", {"delay": 0.5, "q": "mon"})
    assert via_draft.from_draft_cache
    [booked] = await run(clock, gate.wait_writes(turn))
    assert booked.ok and booked.value["args"] == {"delay": 0.0, "slot": 1}
    # The LLM asks again for the same booking in the same turn: the ledger answers.
    dup = await gate.call(turn, "book", {"slot": 1})
    assert dup.ok and dup.value == booked.value
    assert world.keys[booked.idempotency_key] == 1
    assert gate.reads_reused == 2 and gate.reads_run == 2
    assert gate.executed_writes == 1 and gate.deduplicated_writes == 1


async def test_cached_reads_do_not_cross_turns():
    gate, _, clock = make_gate()
    turn1 = gate.begin_turn(1)
    await run(clock, gate.call(turn1, "lookup", {"q": 1}))
    assert (await gate.call(turn1, "lookup", {"q": 1})).from_draft_cache
    turn2 = gate.begin_turn(2)
    assert turn1.state == "closed"
    r = await run(clock, gate.call(turn2, "lookup", {"q": 1}))
    assert not r.from_draft_cache
    refused = await gate.call(turn1, "lookup", {"q": 1})
    assert not refused.ok and "over" in refused.error


async def test_failed_reads_are_not_cached():
    gate, _, clock = make_gate()
    draft = gate.start_draft(1)
    r = await run(clock, gate.call(draft, "lookup", {"fail": True}))
    assert not r.ok and "no such slot" in r.error
    turn = gate.confirm_draft(draft)
    r2 = await run(clock, gate.call(turn, "lookup", {"fail": True}))
    assert not r2.from_draft_cache


# --- idempotency -------------------------------------------------------------


async def test_redrafted_and_retried_turn_gets_the_stored_write():
    gate, world, clock = make_gate()
    d1 = gate.start_draft(1)
    await gate.call(d1, "book", {"slot": 1})
    gate.discard_draft(d1)  # caller went on
    d2 = gate.start_draft(1)  # re-drafted
    await gate.call(d2, "book", {"slot": 1})
    turn = gate.confirm_draft(d2)
    [first] = await run(clock, gate.wait_writes(turn))
    # Engine error: the host retries the same turn from scratch.
    retry = gate.begin_turn(1)
    assert retry is turn
    again = await gate.call(retry, "book", {"slot": 1})
    d3 = gate.start_draft(1)
    await gate.call(d3, "book", {"slot": 1})
    gate.confirm_draft(d3)
    await clock.advance(10)
    assert again.value == first.value
    assert sum(world.runs[k] for k in world.runs if k[0] == "book") == 1
    assert gate.executed_writes == 1 and gate.discarded_writes == 1
    assert [r.status for r in gate.ledger] == ["ok"]
    # A later turn asking for the same booking is a new request.
    turn2 = gate.begin_turn(2)
    new = await run(clock, gate.call(turn2, "book", {"slot": 1}))
    assert new.ok and new.idempotency_key != first.idempotency_key
    assert gate.executed_writes == 2


async def test_concurrent_identical_writes_share_one_execution():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    a = asyncio.ensure_future(gate.call(turn, "book", {"delay": 1.0}))
    b = asyncio.ensure_future(gate.call(turn, "book", {"delay": 1.0}))
    await settle()
    await clock.advance(2)
    ra, rb = await a, await b
    assert ra.value == rb.value and sum(world.keys.values()) == 1


async def test_failed_write_is_recorded_and_not_rerun_under_the_same_key():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    r = await run(clock, gate.call(turn, "book", {"fail": True}))
    assert not r.ok and "no such slot" in r.error
    r2 = await gate.call(turn, "book", {"fail": True})
    assert r2.error == r.error and sum(world.keys.values()) == 1
    assert gate.ledger[0].status == "error"


# --- spoken confirmation -----------------------------------------------------


async def test_confirm_write_waits_for_yes():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    r = await gate.call(turn, "pay", {"amount": 20})
    assert r.deferred and r.awaiting_confirmation and "say yes" in r.for_llm()
    assert turn.awaiting_confirmation == [("pay", {"amount": 20})]
    await clock.advance(10)
    assert world.keys == {}
    keys = gate.confirm_spoken(turn, yes=True)
    [paid] = await run(clock, gate.wait_writes(turn))
    assert keys == [paid.idempotency_key] and paid.ok
    assert world.keys[paid.idempotency_key] == 1 and turn.awaiting_confirmation == []
    # After the yes, repeating the call answers from the ledger.
    assert (await gate.call(turn, "pay", {"amount": 20})).value == paid.value


async def test_no_or_a_new_turn_declines_confirm_writes_without_running():
    gate, world, clock = make_gate()
    d = gate.start_draft(1)
    await gate.call(d, "pay", {"amount": 20})
    turn = gate.confirm_draft(d)
    assert turn.awaiting_confirmation == [("pay", {"amount": 20})]
    gate.confirm_spoken(turn, yes=False)
    [declined] = await gate.wait_writes(turn)
    assert declined.declined and not declined.ok
    # Asked again and the caller moves on without answering.
    await gate.call(turn, "pay", {"amount": 20})
    turn2 = gate.begin_turn(2)
    gate.confirm_spoken(turn, yes=True)  # too late: the turn is over
    await clock.advance(10)
    assert world.keys == {} and gate.declined_writes == 2 and turn2.awaiting_confirmation == []


# --- barge-in and cancellation ------------------------------------------------


async def test_cancelled_caller_does_not_cut_a_running_write():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "book", {"delay": 1.0}))
    await settle()
    await clock.advance(0.5)
    gate.interrupt(turn)  # barge-in
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.ledger[0].status == "running"
    await clock.advance(1.0)
    rec = gate.ledger[0]
    assert rec.status == "ok" and rec.finished_at == 1.0
    assert world.cancelled == [] and len(world.finished) == 1
    # The interrupted turn takes no new calls; the ledger still answers.
    refused = await gate.call(turn, "book", {"delay": 1.0})
    assert not refused.ok and "interrupted" in refused.error
    assert (await gate.wait_writes(turn))[0].ok


async def test_interrupt_cancels_reads_in_flight():
    gate, world, _ = make_gate()
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "lookup", {"delay": 1.0}))
    await settle()
    gate.interrupt(turn)
    r = await task
    assert not r.ok and world.finished == [] and len(world.cancelled) == 1


async def test_cancelled_caller_cancels_its_read():
    gate, world, _ = make_gate()
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "lookup", {"delay": 1.0}))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    assert len(world.cancelled) == 1


# --- timeouts ----------------------------------------------------------------


async def test_read_timeout_on_virtual_clock_gives_speakable_text():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "lookup", {"delay": 3.0}))
    await settle()
    await clock.advance_to(1.999)
    assert not task.done()
    await clock.advance_to(2.0)
    r = await task
    assert r.timed_out and not r.ok
    assert "took too long (over 2 s)" in r.for_llm() and "try again" in r.for_llm()
    assert world.cancelled == [("lookup", canonical_args({"delay": 3.0}), 2.0)]


async def test_write_timeout_is_unknown_outcome_and_not_retried():
    gate, world, clock = make_gate()
    turn = gate.begin_turn(1)
    r = await run(clock, gate.call(turn, "book", {"delay": 3.0}))
    assert r.timed_out and "outcome is unknown" in r.error
    assert gate.ledger[0].status == "unknown" and gate.ledger[0].finished_at == 2.0
    r2 = await run(clock, gate.call(turn, "book", {"delay": 3.0}))
    assert r2.error == r.error and sum(world.keys.values()) == 1


async def test_timeouts_work_on_the_real_clock():
    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    async def quick() -> str:
        return "done"

    gate = ToolGate(
        [
            Tool(name="slow", fn=slow, effect="read", timeout_s=0.05),
            Tool(name="quick", fn=quick, effect="write", timeout_s=1.0),
        ],
        RealClock(),
    )
    turn = gate.begin_turn(1)
    r = await gate.call(turn, "slow", {})
    assert r.timed_out
    assert (await gate.call(turn, "quick", {})).value == "done"


async def test_unknown_tool_and_bad_args():
    gate, _, _ = make_gate()
    turn = gate.begin_turn(1)
    assert "no tool" in (await gate.call(turn, "nope", {})).error
    assert "Invalid arguments" in (await gate.call(turn, "lookup", {"x": object()})).error


def test_turns_only_move_forward():
    gate, _, _ = make_gate()
    gate.begin_turn(2)
    with pytest.raises(ValueError):
        gate.begin_turn(1)
    with pytest.raises(ValueError):
        gate.start_draft(1)


async def test_a_new_turn_discards_stale_drafts():
    gate, world, _ = make_gate()
    d = gate.start_draft(1)
    await gate.call(d, "book", {"slot": 1})
    gate.begin_turn(2)
    assert d.state == "discarded" and isinstance(d, DraftContext)
    assert gate.discarded_writes == 1 and world.keys == {}
    assert isinstance(gate.current_turn, Turn)


# --- property: random interleavings ------------------------------------------


_ARGS = [{"delay": 0.5}, {"delay": 1.5}, {"delay": 3.0}, {"delay": 0.0, "slot": 2}]
_TIMEOUT = 2.0

_event = st.one_of(
    st.just(("eager",)),
    st.just(("resume",)),
    st.just(("confirm",)),
    st.tuples(
        st.just("call"),
        st.sampled_from(["lookup", "book", "pay"]),
        st.integers(0, len(_ARGS) - 1),
        st.booleans(),
    ),
    st.tuples(st.just("repeat"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0.25, 1.0, 2.5])),
    st.just(("barge",)),
    st.just(("error",)),
    st.tuples(st.just("spoken"), st.booleans()),
)


class _Probe:
    """Instrumented tools for the property test: every real execution is
    logged with its arguments, idempotency key and how it ended."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.read_execs: dict[int, tuple[str, str]] = {}
        self.write_runs: collections.Counter[str] = collections.Counter()
        self.write_start: dict[str, float] = {}
        self.write_end: dict[str, tuple[str, float]] = {}

    def tools(self) -> list[Tool]:
        probe = self

        async def lookup(delay: float, slot: int = 1) -> dict[str, Any]:
            exec_id = len(probe.read_execs)
            probe.read_execs[exec_id] = ("lookup", canonical_args({"delay": delay, "slot": slot}))
            await probe.clock.sleep(delay)
            return {"exec": exec_id}

        def writer(name: str) -> Any:
            async def write(delay: float, idempotency_key: str, slot: int = 1) -> str:
                probe.write_runs[idempotency_key] += 1
                probe.write_start[idempotency_key] = probe.clock.now()
                try:
                    await probe.clock.sleep(delay)
                except asyncio.CancelledError:
                    probe.write_end[idempotency_key] = ("cancelled", probe.clock.now())
                    raise
                probe.write_end[idempotency_key] = ("completed", probe.clock.now())
                return f"{name} done"

            return write

        return [
            Tool(name="lookup", fn=lookup, effect="read", timeout_s=_TIMEOUT),
            Tool(name="book", fn=writer("book"), effect="write", timeout_s=_TIMEOUT),
            Tool(name="pay", fn=writer("pay"), effect="write", confirm=True, timeout_s=_TIMEOUT),
        ]


def _resolve(ctx: DraftContext | Turn) -> DraftContext | Turn:
    if isinstance(ctx, DraftContext) and ctx.state == "confirmed":
        assert ctx.turn is not None
        return ctx.turn
    return ctx


async def _scenario(events: list[tuple[Any, ...]]) -> dict[str, int]:
    clock = VirtualClock()
    probe = _Probe(clock)
    gate = ToolGate(probe.tools(), clock, session_id="prop")
    violations: list[str] = []
    calls: list[tuple[asyncio.Task[Any], DraftContext | Turn]] = []
    read_origin: dict[int, tuple[str, str, DraftContext | Turn]] = {}
    allowed: set[str] = set()  # write keys asked for in a confirmed context
    draft_writes: dict[int, list[tuple[str, dict[str, Any]]]] = collections.defaultdict(list)
    pending_pay: dict[int, set[str]] = collections.defaultdict(set)
    yes_keys: set[str] = set()
    draft: DraftContext | None = None
    confirmed_draft: DraftContext | None = None
    asked: list[tuple[str, dict[str, Any]]] = []

    def next_turn_id() -> int:
        cur = gate.current_turn
        return 1 if cur is None else cur.turn_id + 1

    def entering(turn_id: int) -> None:
        cur = gate.current_turn
        if cur is not None and cur.turn_id != turn_id:
            pending_pay.pop(cur.turn_id, None)  # a new turn declines them

    def requested_in_turn(turn: Turn, name: str, args: dict[str, Any]) -> None:
        key = gate.idempotency_key(turn.turn_id, name, args)
        allowed.add(key)
        if name == "pay" and turn is gate.current_turn:
            pending_pay[turn.turn_id].add(key)

    async def issue(ctx: DraftContext | Turn, name: str, args: dict[str, Any]) -> None:
        r = await gate.call(ctx, name, args)
        if name != "lookup" or not r.ok:
            return
        exec_id = r.value["exec"]
        canon = canonical_args({"slot": 1, **args})
        if r.from_draft_cache:
            o_name, o_canon, o_ctx = read_origin[exec_id]
            if (o_name, o_canon) != (name, canon) or probe.read_execs[exec_id] != (name, canon):
                violations.append(f"read reuse for a different call: {name} {canon}")
            if _resolve(o_ctx) is not _resolve(ctx):
                violations.append(f"read reused across turns/drafts: {o_ctx} -> {ctx}")
        else:
            read_origin[exec_id] = (name, canon, ctx)

    for ev in events:
        kind = ev[0]
        turn = gate.current_turn
        if kind == "eager":
            if draft is not None:
                gate.discard_draft(draft)
            draft = gate.start_draft(next_turn_id())
        elif kind == "resume":
            if draft is not None:
                gate.discard_draft(draft)
                draft = None
        elif kind in ("confirm", "error"):
            if kind == "confirm" and draft is not None:
                entering(draft.turn_id)
                new = gate.confirm_draft(draft)
                for name, args in draft_writes[id(draft)]:
                    requested_in_turn(new, name, args)
                confirmed_draft, draft = draft, None
            else:
                # engine error: drop the draft, fall back to a fresh request for
                # its turn (or retry the current turn); confirm without a draft.
                if kind == "error" and draft is not None:
                    tid = draft.turn_id
                    gate.discard_draft(draft)
                    draft = None
                elif kind == "error" and turn is not None:
                    tid = turn.turn_id
                else:
                    tid = next_turn_id()
                entering(tid)
                gate.begin_turn(tid)
        elif kind in ("call", "repeat"):
            if kind == "call":
                _, name, ai, in_draft = ev
                args = dict(_ARGS[ai])
                asked.append((name, args))
            elif asked:  # the LLM asks for an earlier call again, identically
                name, args = asked[-1 - ev[1] % len(asked)]
                args, in_draft = dict(args), ev[2]
            else:
                continue
            if in_draft and draft is not None:
                ctx: DraftContext | Turn = draft
            elif in_draft and confirmed_draft is not None:
                ctx = confirmed_draft  # the draft's stream goes on after confirmation
            elif turn is not None:
                ctx = turn
            elif draft is not None:
                ctx = draft
            else:
                continue
            target = _resolve(ctx)
            if name != "lookup":
                if isinstance(target, Turn):
                    requested_in_turn(target, name, args)
                else:
                    draft_writes[id(target)].append((name, args))
            calls.append((asyncio.ensure_future(issue(ctx, name, args)), ctx))
        elif kind == "advance":
            await clock.advance(ev[1])
        elif kind == "barge":
            if turn is not None:
                gate.interrupt(turn)
                for task, ctx in calls:
                    if _resolve(ctx) is turn and not task.done():
                        task.cancel()  # the caller of `call` is cancelled too
        elif kind == "spoken" and turn is not None:
            gate.confirm_spoken(turn, yes=ev[1])
            keys = pending_pay.pop(turn.turn_id, set())
            if ev[1] and turn.state != "closed":
                yes_keys |= keys
        await settle()

    await clock.advance(100.0)  # let everything finish or time out
    await settle()
    outcomes = await asyncio.gather(*(t for t, _ in calls), return_exceptions=True)
    for out in outcomes:
        if isinstance(out, BaseException) and not isinstance(out, asyncio.CancelledError):
            raise out
    assert not violations, violations

    ledger = {rec.key: rec for rec in gate.ledger}
    for key, n in probe.write_runs.items():
        assert n == 1, f"write {key} executed {n} times"
        assert key in allowed, f"write {key} ran but was only asked for in discarded drafts"
        if ":pay:" in key:
            assert key in yes_keys, f"confirm write {key} ran without a spoken yes"
        how, at = probe.write_end[key]
        rec = ledger[key]
        if how == "completed":
            assert rec.status == "ok" and rec.finished_at == at
        else:  # cut only by its own deadline, and recorded as unknown
            assert at == probe.write_start[key] + _TIMEOUT, (key, at)
            assert rec.status == "unknown" and rec.result is not None and rec.result.timed_out
    assert set(ledger) == set(probe.write_runs) == set(probe.write_end)
    assert gate.executed_writes == len(ledger)
    return {
        "writes": len(ledger),
        "reused": gate.reads_reused,
        "deduplicated": gate.deduplicated_writes,
        "discarded": gate.discarded_writes,
        "timed_out": sum(r.status == "unknown" for r in ledger.values()),
        "paid": sum(":pay:" in k for k in ledger),
    }


def test_property_random_interleavings_keep_the_gate_safe() -> None:
    """Drafts never write; each key executes once; reuse is same-turn and
    identical only; confirm writes need a yes; writes complete or time out.
    The same run then checks that the interleavings reached every
    interesting case (the tally is local, so no other test's order matters)."""
    seen: collections.Counter[str] = collections.Counter()

    @settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_event, min_size=8, max_size=40))
    def interleavings(events: list[tuple[Any, ...]]) -> None:
        seen.update(asyncio.run(_scenario(events)))

    interleavings()
    print(dict(seen))
    for k in ("writes", "deduplicated", "reused", "discarded", "timed_out", "paid"):
        assert seen[k] > 0, (k, seen)


# --- the hold after a commit ---------------------------------------------------


async def test_a_write_waits_the_hold_after_its_commit() -> None:
    """The default gate holds a write WRITE_HOLD_S after the commit; one asked
    for later than that runs at once."""
    gate, _world, clock = make_gate(write_hold_s=WRITE_HOLD_S)
    assert ToolGate([], clock).write_hold_s == WRITE_HOLD_S > 0
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "book", {"slot": 1}))
    await settle()
    await clock.advance(WRITE_HOLD_S / 2)
    assert gate.ledger == [] and not task.done()
    await clock.advance(WRITE_HOLD_S)
    assert [r.started_at for r in gate.ledger] == [WRITE_HOLD_S]
    assert (await task).ok
    later = await run(clock, gate.call(turn, "book", {"slot": 2}), until=0.0)
    assert later.ok and gate.ledger[-1].started_at == clock.now()


async def test_a_write_is_withdrawn_when_the_caller_goes_on() -> None:
    """A draft's write, released at the commit, is held; the caller goes on
    before the hold ends (the host interrupts the turn): it never runs, and
    the continued turn asking again runs it once, a hold after its commit."""
    gate, world, clock = make_gate(write_hold_s=0.5)
    draft = gate.start_draft(1)
    deferred = await gate.call(draft, "book", {"slot": 1})
    assert deferred.deferred
    turn = gate.confirm_draft(draft)  # commit at 0.0
    await clock.advance(0.3)
    gate.interrupt(turn)  # the caller spoke again at 0.3
    [withdrawn] = await gate.wait_writes(turn)
    assert withdrawn.withdrawn and not withdrawn.ok and "not carried out" in withdrawn.for_llm()
    assert gate.ledger == [] and gate.withdrawn_writes == 1 and gate.executed_writes == 0
    await clock.advance(2.0)
    assert world.finished == []
    gate.reopen(turn)
    assert gate.begin_turn(1) is turn  # the continued turn's commit, at 2.3
    again = asyncio.ensure_future(gate.call(turn, "book", {"slot": 1}))
    await settle()
    await clock.advance(1.0)
    assert (await again).ok and [r.started_at for r in gate.ledger] == [2.8]


async def test_a_write_waits_while_the_caller_speaks() -> None:
    """The host's VAD: while the caller speaks after the commit the write
    waits, and it runs the hold after they stop (a murmur over the reply
    that the host did not stop for)."""
    gate, _world, clock = make_gate(write_hold_s=0.5)
    turn = gate.begin_turn(1)
    task = asyncio.ensure_future(gate.call(turn, "book", {"slot": 1}))
    await settle()
    await clock.advance(0.2)
    gate.on_caller_speech(True)  # "uh-huh"
    await settle()
    await clock.advance(1.0)
    assert gate.ledger == []
    gate.on_caller_speech(False)  # at 1.2
    await settle()
    await clock.advance(0.4)
    assert gate.ledger == []
    await clock.advance(0.2)
    assert (await task).ok and [r.started_at for r in gate.ledger] == [1.7]


async def test_a_spoken_yes_holds_its_writes_from_the_answer() -> None:
    """A yes is the commit that releases a confirm=True write: it waits the
    hold from the answer, and the caller going on ("yes, | but ...")
    withdraws it."""
    gate, _world, clock = make_gate(write_hold_s=0.5)
    turn = gate.begin_turn(1)
    asked = await gate.call(turn, "pay", {"amount": 20})
    assert asked.awaiting_confirmation
    await clock.advance(3.0)
    gate.confirm_spoken(turn, yes=True)  # the caller's "yes" committed at 3.0
    turn2 = gate.begin_turn(2)
    await clock.advance(0.2)
    gate.interrupt(turn2)  # "... but on the other card"
    [withdrawn] = await gate.wait_writes(turn)
    assert withdrawn.withdrawn and gate.ledger == []
    assert gate.withdrawn_writes == 1 and turn2.awaiting_confirmation == []
