"""When to play a filler line during a tool call, and measuring it.

A tool call (database lookup, payment) that runs past its threshold leaves
the caller in silence, which on a phone sounds like a dropped line. The
:class:`FillerScheduler` starts a pre-rendered line from a
:class:`~turnkit.fillers.bank.FillerBank` the moment the threshold passes,
and keeps two latencies apart: *acknowledgement* (tool start → first filler
audio: how long the caller heard nothing) and *answer* (tool start → tool
result).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

import numpy as np

from turnkit.clock import Clock
from turnkit.fillers.bank import FillerBank, FillerLine
from turnkit.frames import AudioOutFrame

__all__ = ["FillerGuard", "FillerRecord", "FillerScheduler", "OnResult", "Sink", "ToolFillerStats"]

log = logging.getLogger(__name__)

OnResult = Literal["finish", "stop"]
Sink = Callable[[AudioOutFrame], Awaitable[None] | None]


@dataclass(slots=True)
class ToolFillerStats:
    """Counts for one tool name.

    ``cancelled``: calls whose result came before the threshold (a filler was
    scheduled and never played). ``stopped``: lines cut part-way (result with
    ``on_result="stop"``, :meth:`FillerScheduler.interrupt`, or a failing
    sink). ``skipped_busy``: a threshold passed while another call's filler
    was playing (one filler at a time).
    """

    calls: int = 0
    started: int = 0
    cancelled: int = 0
    finished: int = 0
    stopped: int = 0
    skipped_busy: int = 0


@dataclass(slots=True)
class FillerRecord:
    """What happened during one guarded tool call (times on the clock)."""

    tool: str
    started_at: float
    threshold_s: float
    frame_s: float
    result_at: float | None = None
    first_audio_at: float | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def threshold_at(self) -> float:
        return self.started_at + self.threshold_s

    @property
    def ack_latency_s(self) -> float | None:
        """Tool start → first filler audio (None: no filler played)."""
        if self.first_audio_at is None:
            return None
        return self.first_audio_at - self.started_at

    @property
    def answer_latency_s(self) -> float | None:
        """Tool start → tool result (None: still running)."""
        if self.result_at is None:
            return None
        return self.result_at - self.started_at

    @property
    def filler_delay_s(self) -> float | None:
        """Threshold → first filler audio: the scheduler's own lateness."""
        if self.first_audio_at is None:
            return None
        return self.first_audio_at - self.threshold_at

    @property
    def filler_delay_frames(self) -> float | None:
        d = self.filler_delay_s
        return None if d is None else d / self.frame_s


class FillerGuard:
    """One guarded tool call: ``async with scheduler.guard(name) as g`` or
    ``g = scheduler.start(name) ... g.stop()``.

    Leaving the ``async with`` block (normally or with an error) is the
    result; leaving it because the task was cancelled (the caller barged in,
    the call ended) cuts any filler at once. Leaving does not wait for a
    line that is finishing: ``await g.finished()`` before sending answer
    audio to the same output, so the two never overlap.
    """

    def __init__(self, scheduler: FillerScheduler, tool: str, threshold_s: float) -> None:
        self._s = scheduler
        self.tool = tool
        self.threshold_s = threshold_s
        self.record: FillerRecord | None = None
        self._task: asyncio.Task[None] | None = None
        self._result = False
        self._cut = False
        self._played = False
        self.playing = False

    # --- lifecycle -------------------------------------------------------

    def start(self, started_at: float | None = None) -> FillerGuard:
        """The tool starts now (or started at ``started_at``, before its
        reply was the caller's to hear: a draft's read, guarded once the
        draft is released): schedule a filler at that + threshold (at once
        if that has passed)."""
        if self.record is not None:
            raise RuntimeError(f"filler guard for {self.tool!r} already started")
        s = self._s
        at = s.clock.now() if started_at is None else min(started_at, s.clock.now())
        self.record = FillerRecord(self.tool, at, self.threshold_s, s.frame_s)
        s.records.append(self.record)
        s._stats(self.tool).calls += 1
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"filler:{self.tool}")
        s._tasks.add(self._task)
        self._task.add_done_callback(s._tasks.discard)
        return self

    def stop(self, *, cut: bool | None = None) -> None:
        """The tool's result arrived now. Before the threshold: no filler.
        While a line plays: finish it, or cut it (``cut``, default from the
        scheduler's ``on_result``). Idempotent."""
        rec = self._require_started()
        if not self._result:
            self._result = True
            rec.result_at = self._s.clock.now()
            if not self.playing and self._task is not None and not self._task.done():
                self._task.cancel()  # pending (threshold or repeat wait): none plays
                if not self._played:
                    self._s._stats(self.tool).cancelled += 1
        if cut is None:
            cut = self._s.on_result == "stop"
        if cut:
            self._cut = True

    def interrupt(self) -> None:
        """Cut the line now (within one frame, with a one-frame fade) and
        schedule no more; does not mark the result."""
        self._require_started()
        self._cut = True
        if not self.playing and self._task is not None and not self._task.done():
            self._task.cancel()

    async def finished(self) -> None:
        """Wait until this guard's filler has stopped sounding (at once if
        none is playing or pending after the result)."""
        if self._task is not None:
            await asyncio.wait({self._task})

    async def __aenter__(self) -> FillerGuard:
        if self.record is None:
            self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            self.interrupt()
            self.stop(cut=True)
        else:
            self.stop()

    def _require_started(self) -> FillerRecord:
        if self.record is None:
            raise RuntimeError(f"filler guard for {self.tool!r} not started")
        return self.record

    # --- the filler task ---------------------------------------------------

    async def _run(self) -> None:
        s = self._s
        rec = self._require_started()
        deadline = rec.threshold_at
        while True:
            wait = deadline - s.clock.now()
            if wait > 0:
                await s.clock.sleep(wait)
            if self._result or self._cut:
                return
            if s._playing is not None:
                s._stats(self.tool).skipped_busy += 1
            else:
                await self._play(s.bank.next_line())
                if self._result or self._cut:
                    return
            if s.repeat_after_s is None:
                return
            deadline = s.clock.now() + s.repeat_after_s

    async def _until(self, t: float) -> None:
        wait = t - self._s.clock.now()
        if wait > 0:
            await self._s.clock.sleep(wait)

    async def _play(self, line: FillerLine) -> None:
        s = self._s
        rec = self._require_started()
        stats = s._stats(self.tool)
        n = s.frame_samples
        audio = line.audio
        t0 = s.clock.now()
        s._playing = self
        self.playing = True
        self._played = True
        stats.started += 1
        rec.lines.append(line.text)
        try:
            for i, start in enumerate(range(0, len(audio), n)):
                if i:
                    await self._until(t0 + i * s.frame_s)
                chunk = audio[start : start + n]
                if len(chunk) < n:
                    chunk = np.pad(chunk, (0, n - len(chunk)))
                if self._cut:  # one faded frame, so the cut does not click
                    await s._emit(chunk * np.linspace(1.0, 0.0, n, dtype=np.float32))
                    await self._until(t0 + (i + 1) * s.frame_s)
                    stats.stopped += 1
                    return
                at = await s._emit(chunk)
                if i == 0:
                    rec.first_audio_at = at
            # the last frame has been handed over; it sounds for one more frame
            await self._until(t0 + math.ceil(len(audio) / n) * s.frame_s)
            stats.finished += 1
        except asyncio.CancelledError:
            stats.stopped += 1
            raise
        except Exception:
            log.exception("filler sink failed during %r for tool %r", line.text, self.tool)
            stats.stopped += 1
        finally:
            self.playing = False
            if s._playing is self:
                s._playing = None


class FillerScheduler:
    """Decides *whether and when* a filler line plays during a tool call.

    Evidence: the injected clock, each guarded call's start and result, and
    its threshold (``per_tool_threshold[name]``, else ``threshold_s``).

    * Result before the threshold → no filler (counted ``cancelled``).
    * Still running at the threshold → the next line from the bank (never the
      one just played) starts at once: its first :class:`AudioOutFrame` goes
      to ``sink`` at the threshold instant — within one frame of it on a real
      clock, exactly on it on a :class:`~turnkit.clock.VirtualClock`. Frames
      of ``frame_s`` follow at playback pace on the clock.
    * Result while a line plays → ``on_result="finish"`` (default) lets the
      line end; ``"stop"`` cuts it at the next frame with a one-frame fade.
      Finishing is the default because a word cut mid-way ("let me ch—")
      sounds like a glitch, lines are short (trimmed, ~0.6-1.6 s), and the
      answer needs an LLM pass after the result anyway, which overlaps the
      rest of the line; choose ``"stop"`` when the answer audio is ready the
      instant the result is.
    * One filler at a time: a threshold that passes while another call's
      line plays is skipped (``skipped_busy``). With ``repeat_after_s`` set,
      a call still running that long after its line ended gets another line.

    Records: ``records`` (one :class:`FillerRecord` per call: ack latency =
    start → first filler audio, answer latency = start → result, filler
    delay past the threshold) and ``stats[tool]`` (:class:`ToolFillerStats`).

    Example::

        fillers = FillerScheduler(bank, clock, sink=output_queue.put,
                                  threshold_s=1.0, per_tool_threshold={"pay": 2.5})
        async with fillers.guard("lookup_order") as g:
            order = await db.lookup(order_id)      # 1.8 s: a filler at 1.0 s
        await g.finished()                          # the line has ended
        g.record.ack_latency_s, g.record.answer_latency_s   # 1.0, 1.8
    """

    def __init__(
        self,
        bank: FillerBank,
        clock: Clock,
        sink: Sink,
        threshold_s: float = 1.0,
        per_tool_threshold: dict[str, float] | None = None,
        frame_s: float = 0.02,
        *,
        on_result: OnResult = "finish",
        repeat_after_s: float | None = None,
        history: int = 1000,
    ) -> None:
        per_tool = dict(per_tool_threshold or {})
        for name, t in [("threshold_s", threshold_s), *per_tool.items()]:
            if not math.isfinite(t) or t < 0:
                raise ValueError(f"filler threshold for {name!r} must be >= 0 s, got {t}")
        if not 0.005 <= frame_s <= 0.1:
            raise ValueError(f"frame_s must be 5-100 ms, got {frame_s}")
        if on_result not in ("finish", "stop"):
            raise ValueError(f"on_result must be 'finish' or 'stop', got {on_result!r}")
        if repeat_after_s is not None and repeat_after_s <= 0:
            raise ValueError(f"repeat_after_s must be > 0 s or None, got {repeat_after_s}")
        self.bank = bank
        self.clock = clock
        self.sink = sink
        self.threshold_s = float(threshold_s)
        self.per_tool_threshold = per_tool
        self.frame_s = float(frame_s)
        self.frame_samples = max(1, round(frame_s * bank.sample_rate))
        self.on_result: OnResult = on_result
        self.repeat_after_s = repeat_after_s
        self.records: deque[FillerRecord] = deque(maxlen=history)
        self.stats: dict[str, ToolFillerStats] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._playing: FillerGuard | None = None

    def threshold_for(self, tool: str) -> float:
        return self.per_tool_threshold.get(tool, self.threshold_s)

    def guard(self, tool: str) -> FillerGuard:
        """A guard to use as ``async with``; starts on entry."""
        if not self.bank.ready:
            raise RuntimeError("FillerScheduler needs a prerendered bank: await bank.prerender()")
        return FillerGuard(self, tool, self.threshold_for(tool))

    def start(self, tool: str, started_at: float | None = None) -> FillerGuard:
        """Start guarding ``tool`` now (begun at ``started_at``: see
        :meth:`FillerGuard.start`); call ``.stop()`` on its result."""
        return self.guard(tool).start(started_at)

    @property
    def playing(self) -> bool:
        return self._playing is not None

    def interrupt(self) -> None:
        """Cut the playing line, if any (caller barge-in)."""
        if self._playing is not None:
            self._playing.interrupt()

    async def idle(self) -> None:
        """Wait until no filler is playing or pending."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def _stats(self, tool: str) -> ToolFillerStats:
        st = self.stats.get(tool)
        if st is None:
            st = self.stats[tool] = ToolFillerStats()
        return st

    async def _emit(self, chunk: np.ndarray) -> float:
        at = self.clock.now()
        frame = AudioOutFrame(
            at=at, audio=np.asarray(chunk, dtype=np.float32), sample_rate=self.bank.sample_rate
        )
        out = self.sink(frame)
        if inspect.isawaitable(out):
            await out
        return at
