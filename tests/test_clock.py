"""VirtualClock and RealClock: deterministic replay time and wall time."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from turnkit.clock import Clock, RealClock, VirtualClock, settle


async def _sleeper(clock: VirtualClock, name: str, seconds: float, log: list[tuple[str, float]]):
    await clock.sleep(seconds)
    log.append((name, clock.now()))


async def _start(*coros) -> list[asyncio.Task]:
    tasks = [asyncio.create_task(c) for c in coros]
    await settle()  # every task has reached its clock.sleep
    return tasks


async def test_sleepers_wake_exactly_at_deadlines_in_deadline_order_ties_in_sleep_order():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []
    await _start(
        _sleeper(clock, "c", 0.3, log),
        _sleeper(clock, "a1", 0.1, log),
        _sleeper(clock, "b", 0.2, log),
        _sleeper(clock, "a2", 0.1, log),
        _sleeper(clock, "a3", 0.1, log),
    )
    await clock.advance_to(1.0)
    assert log == [("a1", 0.1), ("a2", 0.1), ("a3", 0.1), ("b", 0.2), ("c", 0.3)]
    assert clock.now() == 1.0


async def test_advance_to_wakes_only_sleepers_due_by_the_target():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []
    tasks = await _start(_sleeper(clock, "early", 0.1, log), _sleeper(clock, "late", 0.5, log))
    await clock.advance_to(0.25)
    assert log == [("early", 0.1)]
    assert clock.now() == 0.25
    assert not tasks[1].done()
    assert clock.next_deadline() == 0.5
    await clock.advance_to(0.5)  # a deadline equal to the target is due
    assert log == [("early", 0.1), ("late", 0.5)]


async def test_sleep_is_relative_to_the_current_virtual_time():
    clock = VirtualClock(start=10.0)
    log: list[tuple[str, float]] = []
    await _start(_sleeper(clock, "x", 2.0, log))
    assert clock.next_deadline() == 12.0
    await clock.advance(1.9)
    assert log == []
    await clock.advance_to(12.0)
    assert log == [("x", 12.0)]


async def test_advance_to_cannot_go_back():
    clock = VirtualClock()
    await clock.advance_to(2.0)
    with pytest.raises(ValueError, match="cannot go back"):
        await clock.advance_to(1.0)
    assert clock.now() == 2.0
    await clock.advance_to(2.0)  # staying put is allowed
    assert clock.now() == 2.0


async def test_sleeper_created_by_a_woken_task_wakes_within_the_same_advance():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []

    async def chain():
        await clock.sleep(0.1)
        log.append(("first", clock.now()))
        await clock.sleep(0.2)
        log.append(("second", clock.now()))
        await clock.sleep(5.0)  # due after the target: must not wake
        log.append(("third", clock.now()))

    task = (await _start(chain()))[0]
    await clock.advance_to(1.0)
    assert log == [("first", 0.1), ("second", 0.1 + 0.2)]
    assert clock.now() == 1.0
    assert not task.done()
    task.cancel()


async def test_chained_sleeper_interleaves_with_existing_sleepers_by_deadline():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []

    async def chain():
        await clock.sleep(0.1)
        log.append(("chain-1", clock.now()))
        await clock.sleep(0.1)  # due at 0.2, before "other" at 0.25
        log.append(("chain-2", clock.now()))

    await _start(chain(), _sleeper(clock, "other", 0.25, log))
    await clock.advance_to(1.0)
    assert log == [("chain-1", 0.1), ("chain-2", 0.2), ("other", 0.25)]


async def test_effects_of_a_wake_happen_at_the_wake_instant():
    clock = VirtualClock()
    seen: list[float] = []
    fired = asyncio.Event()

    async def waiter():
        await fired.wait()
        seen.append(clock.now())

    async def timer():
        await clock.sleep(0.3)
        fired.set()

    await _start(waiter(), timer())
    await clock.advance_to(5.0)
    assert seen == [0.3]


async def test_cancelled_sleepers_are_skipped():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []
    cancelled, kept = await _start(
        _sleeper(clock, "cancelled", 0.1, log), _sleeper(clock, "kept", 0.2, log)
    )
    cancelled.cancel()
    await settle()
    assert cancelled.cancelled()
    assert clock.next_deadline() == 0.2
    await clock.advance_to(1.0)
    assert log == [("kept", 0.2)]
    assert kept.done()
    assert clock.next_deadline() is None


async def test_now_does_not_move_by_itself():
    clock = VirtualClock(start=3.5)
    log: list[tuple[str, float]] = []
    await _start(_sleeper(clock, "pending", 0.1, log))
    for _ in range(50):
        await asyncio.sleep(0)
    await settle()
    assert clock.now() == 3.5
    assert log == []


async def test_zero_and_negative_sleep_return_without_moving_time():
    clock = VirtualClock(start=1.0)
    await asyncio.wait_for(clock.sleep(0), timeout=5)
    await asyncio.wait_for(clock.sleep(-1), timeout=5)
    assert clock.now() == 1.0
    assert clock.next_deadline() is None


def test_real_clock_now_is_monotonic():
    clock = RealClock()
    readings = [clock.now() for _ in range(10_000)]
    assert readings[0] >= 0.0
    assert all(b >= a for a, b in itertools.pairwise(readings))


async def test_real_clock_sleep_accepts_zero_and_negative():
    clock = RealClock()
    before = clock.now()
    await clock.sleep(0)
    await clock.sleep(-1.0)
    assert clock.now() >= before


@pytest.mark.parametrize("clock", [RealClock(), VirtualClock()], ids=["real", "virtual"])
def test_clocks_satisfy_the_clock_protocol(clock):
    assert isinstance(clock, Clock)


def test_object_without_sleep_is_not_a_clock():
    class NowOnly:
        def now(self) -> float:
            return 0.0

    assert not isinstance(NowOnly(), Clock)
