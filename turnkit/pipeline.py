"""A small Pipecat-style pipeline: processors linked in a chain.

Each :class:`FrameProcessor` owns an input queue served by its own task.
Data frames are handled in order; system frames jump the queue; an
:class:`~turnkit.frames.InterruptionFrame` throws away the data frames still
waiting in the queue (the caller has taken the floor: stale agent text and
audio must not come out) while system frames queued beside it survive.

This is the host the replay harness runs policies in, and it is usable on its
own for a live agent. Policies themselves are plain objects with an injected
clock; processors are thin adapters that feed them frames.

Example::

    class Upper(FrameProcessor):
        async def process_frame(self, frame, direction):
            if isinstance(frame, TranscriptFrame):
                frame = TranscriptFrame(at=frame.at, text=frame.text.upper())
            await self.push_frame(frame, direction)

    sink = CollectSink()
    pipe = Pipeline([Upper(), sink])
    await pipe.start()
    await pipe.queue_frame(TranscriptFrame(text="hi"))
    await pipe.wait_idle()
    await pipe.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Iterator, Sequence
from enum import Enum

from turnkit.clock import settle
from turnkit.frames import Frame, InterruptionFrame, SystemFrame

__all__ = ["CollectSink", "FrameDirection", "FrameProcessor", "Pipeline", "collect_errors"]

log = logging.getLogger(__name__)

# Where processors report the exceptions they survive (see collect_errors).
_ERRORS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "turnkit_pipeline_errors", default=None
)


@contextlib.contextmanager
def collect_errors() -> Iterator[list[str]]:
    """Collect, as one-line strings, every exception a processor survives
    while pipelines run inside this block (``asyncio.run`` inside it
    included). A live agent goes on after a bad frame; a replay must not
    score a call whose pipeline failed, so it checks this list."""
    errors: list[str] = []
    token = _ERRORS.set(errors)
    try:
        yield errors
    finally:
        _ERRORS.reset(token)


class FrameDirection(Enum):
    """Which way a frame travels through the pipeline: downstream (from the
    microphone towards the speaker) or upstream (back towards the source)."""

    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"


class FrameProcessor:
    """One stage. Override :meth:`process_frame`; call :meth:`push_frame` to
    pass frames on (the default passes everything through)."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self._downstream: FrameProcessor | None = None
        self._upstream: FrameProcessor | None = None
        self._system: deque[tuple[Frame, FrameDirection]] = deque()
        self._data: deque[tuple[Frame, FrameDirection]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy = False
        self._idle_event = asyncio.Event()
        self._idle_event.set()
        self.flushed_frames = 0

    # -- wiring -----------------------------------------------------------
    def link(self, nxt: FrameProcessor) -> FrameProcessor:
        self._downstream = nxt
        nxt._upstream = self
        return nxt

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"turnkit:{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def idle(self) -> bool:
        return not (self._busy or self._system or self._data)

    async def wait_idle(self) -> None:
        while not self.idle:
            self._idle_event.clear()
            await self._idle_event.wait()

    # -- queueing ---------------------------------------------------------
    def queue_frame_nowait(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        if isinstance(frame, SystemFrame):
            if isinstance(frame, InterruptionFrame):
                # Only data flowing the same way is stale; the other
                # direction carries unrelated news (e.g. upstream errors).
                kept = deque(item for item in self._data if item[1] is not direction)
                self.flushed_frames += len(self._data) - len(kept)
                self._data = kept
            self._system.append((frame, direction))
        else:
            self._data.append((frame, direction))
        self._wakeup.set()

    async def queue_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        self.queue_frame_nowait(frame, direction)

    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        target = self._downstream if direction is FrameDirection.DOWNSTREAM else self._upstream
        if target is not None:
            await target.deliver(frame, direction)

    async def deliver(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        """Hand a frame to this processor: handled at once when it has
        nothing queued and is not busy (order and priority are then trivially
        kept, and a 32 ms audio frame costs a call, not a task switch),
        otherwise queued behind what is waiting."""
        if self.idle and self._task is not None:
            await self._handle(frame, direction)
        else:
            self.queue_frame_nowait(frame, direction)

    async def _handle(self, frame: Frame, direction: FrameDirection) -> None:
        self._busy = True
        try:
            await self.process_frame(frame, direction)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # One bad frame must not kill the call: the pipeline goes on.
            # The error is logged with the processor's name, or, when a
            # caller collects errors (collect_errors: a replay), reported
            # there as one line.
            sink = _ERRORS.get()
            if sink is None:
                log.exception("%s failed on %s", self.name, type(frame).__name__)
            else:
                log.debug("%s failed on %s", self.name, type(frame).__name__, exc_info=True)
                first = (str(exc).strip().splitlines() or [""])[0]
                sink.append(
                    f"{self.name} failed on {type(frame).__name__}: {type(exc).__name__}: {first}"
                )
        finally:
            self._busy = False
            # Frames that arrived meanwhile were queued; our task takes them.
            if self._system or self._data:
                self._wakeup.set()
            else:
                self._idle_event.set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await self.push_frame(frame, direction)

    async def _run(self) -> None:
        while True:
            # One frame at a time: while a frame is being handled (here or
            # inline in a sender's task) the queue waits.
            if self._busy or (not self._system and not self._data):
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            item = self._system.popleft() if self._system else self._data.popleft()
            await self._handle(*item)


class CollectSink(FrameProcessor):
    """Last stage that keeps every frame it receives (tests, replay)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.frames: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        self.frames.append(frame)


class Pipeline:
    """A chain of processors. Frames enter at the first one."""

    def __init__(self, processors: Sequence[FrameProcessor]) -> None:
        if not processors:
            raise ValueError("a pipeline needs at least one processor")
        self.processors = list(processors)
        for a, b in zip(self.processors, self.processors[1:], strict=False):
            a.link(b)

    async def start(self) -> None:
        for p in self.processors:
            await p.start()

    async def queue_frame(self, frame: Frame) -> None:
        """Deliver a frame to the first processor (handled at once if idle)."""
        await self.processors[0].deliver(frame)

    def queue_frame_nowait(self, frame: Frame) -> None:
        self.processors[0].queue_frame_nowait(frame)

    async def wait_idle(self) -> None:
        """Return once no processor has queued or in-flight frames (a
        processor may be waiting on a thread or a socket: we wait with it)."""
        while True:
            await settle()
            busy = next((p for p in self.processors if not p.idle), None)
            if busy is None:
                return
            await busy.wait_idle()

    async def stop(self) -> None:
        for p in self.processors:
            await p.stop()
