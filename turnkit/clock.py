"""Time for policies: a :class:`Clock` protocol and two implementations.

Policies never read the wall clock: they take a ``Clock`` by injection, so the
same object runs live (:class:`RealClock`) and in replay on a deterministic
:class:`VirtualClock`, which only moves when the host advances it.

Example::

    clock = VirtualClock()
    async def later():
        await clock.sleep(0.5)
        return clock.now()
    task = asyncio.create_task(later())
    await clock.advance_to(1.0)      # wakes the sleeper at exactly 0.5
    assert await task == 0.5
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "VirtualClock", "settle"]


@runtime_checkable
class Clock(Protocol):
    """Seconds on a monotonic timeline, and a way to wait on it."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall-clock time (``time.monotonic``) for live calls."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


async def settle(max_rounds: int = 1000) -> None:
    """Let every ready asyncio callback run until the loop has nothing ready.

    Replay needs "all effects of this instant have happened" before time
    moves on; this yields to the loop until its ready queue is empty.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    for _ in range(max_rounds):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return


class VirtualClock:
    """Deterministic replay time: ``now()`` moves only via :meth:`advance_to`.

    Sleepers wake in deadline order (ties in the order they slept), each at
    exactly its deadline, and the loop is settled after each wake so that
    whatever they trigger happens at that instant.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    async def _held(self) -> None:
        """Awaited before each wake and before time reaches its target: a
        subclass may hold the clock there (the replay's ``HeldClock`` waits
        for a live engine's next token)."""

    def next_deadline(self) -> float | None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # cancelled sleepers
        return self._sleepers[0][0] if self._sleepers else None

    async def advance_to(self, t: float) -> None:
        """Move time forward to ``t``, waking every sleeper due on the way."""
        if t < self._now:
            raise ValueError(f"VirtualClock cannot go back: {t} < {self._now}")
        while True:
            await self._held()
            deadline = self.next_deadline()
            if deadline is None or deadline > t:
                break
            self._now = max(self._now, deadline)
            _, _, fut = heapq.heappop(self._sleepers)
            fut.set_result(None)
            await settle()
        self._now = t

    async def advance(self, dt: float) -> None:
        await self.advance_to(self._now + dt)
