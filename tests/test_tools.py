"""Discard-only tool gating: drafts never write, writes run once, safely."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from turnkit.clock import RealClock, VirtualClock, settle
from turnkit.drafting import DraftContext, Tool, ToolGate, Turn, canonical_args, tool

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


def make_gate() -> tuple[ToolGate, World, VirtualClock]:
    clock = VirtualClock()
    world = World(clock)
    tools = [
        world.make("lookup", "read"),
        world.make("book", "write"),
        world.make("pay", "write", confirm=True),
    ]
    return ToolGate(tools, clock, session_id="call-1"), world, clock


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
