"""Pipeline of FrameProcessors: ordering, priority, interruption, errors."""

from __future__ import annotations

import asyncio
import logging

import pytest

from turnkit.clock import settle
from turnkit.frames import (
    Frame,
    InterruptionFrame,
    PlaybackMarkFrame,
    TranscriptFrame,
    TurnEndFrame,
    VADSpeechStartedFrame,
)
from turnkit.pipeline import CollectSink, FrameDirection, FrameProcessor, Pipeline


def data(name: str) -> TranscriptFrame:
    return TranscriptFrame(text=name)


def system(name: str) -> TurnEndFrame:
    return TurnEndFrame(reason=name)


def label(frame: Frame) -> str:
    if isinstance(frame, TranscriptFrame):
        return frame.text
    if isinstance(frame, TurnEndFrame):
        return frame.reason
    if isinstance(frame, InterruptionFrame):
        return f"interrupt:{frame.reason}"
    return type(frame).__name__


class Gate(FrameProcessor):
    """Passes frames on; blocks on frames whose label is in ``block`` until
    ``release`` is set, so that frames pile up in its queue."""

    def __init__(self, block: set[str]) -> None:
        super().__init__("Gate")
        self.block = block
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.active = 0
        self.max_active = 0
        self.cancelled = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if label(frame) in self.block:
                self.entered.set()
                await self.release.wait()
            await self.push_frame(frame, direction)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.active -= 1


async def _blocked_pipeline(first: str = "d0") -> tuple[Pipeline, Gate, CollectSink]:
    gate, sink = Gate({first}), CollectSink()
    pipe = Pipeline([gate, sink])
    await pipe.start()
    pipe.queue_frame_nowait(data(first))
    await asyncio.wait_for(gate.entered.wait(), timeout=5)
    return pipe, gate, sink


async def test_data_frames_reach_the_sink_in_order():
    sink = CollectSink()
    pipe = Pipeline([FrameProcessor("a"), FrameProcessor("b"), sink])
    await pipe.start()
    names = [f"d{i}" for i in range(50)]
    for n in names[:25]:
        await pipe.queue_frame(data(n))
    for n in names[25:]:
        pipe.queue_frame_nowait(data(n))
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == names


async def test_data_frames_queued_behind_a_busy_processor_keep_their_order():
    pipe, gate, sink = await _blocked_pipeline()
    for n in ["d1", "d2", "d3"]:
        pipe.queue_frame_nowait(data(n))
    gate.release.set()
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["d0", "d1", "d2", "d3"]


async def test_system_frames_overtake_queued_data_frames():
    pipe, gate, sink = await _blocked_pipeline()
    pipe.queue_frame_nowait(data("d1"))
    pipe.queue_frame_nowait(data("d2"))
    pipe.queue_frame_nowait(system("s1"))
    pipe.queue_frame_nowait(data("d3"))
    pipe.queue_frame_nowait(system("s2"))
    assert [label(f) for f in sink.frames] == []
    gate.release.set()
    await pipe.wait_idle()
    await pipe.stop()
    # d0 was already in flight; the system frames go first, in their own order.
    assert [label(f) for f in sink.frames] == ["d0", "s1", "s2", "d1", "d2", "d3"]


async def test_interruption_flushes_queued_data_but_keeps_system_frames():
    pipe, gate, sink = await _blocked_pipeline()
    pipe.queue_frame_nowait(data("d1"))
    pipe.queue_frame_nowait(system("s1"))
    pipe.queue_frame_nowait(data("d2"))
    pipe.queue_frame_nowait(InterruptionFrame(reason="barge-in"))
    pipe.queue_frame_nowait(data("d3"))  # arrives after the interruption: fresh
    gate.release.set()
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["d0", "s1", "interrupt:barge-in", "d3"]
    assert gate.flushed_frames == 2
    assert sink.flushed_frames == 0


async def test_interruption_keeps_queued_data_flowing_the_other_way():
    upstream_seen: list[str] = []

    class Head(FrameProcessor):
        async def process_frame(self, frame, direction):
            if direction is FrameDirection.UPSTREAM:
                upstream_seen.append(label(frame))
            else:
                await self.push_frame(frame, direction)

    gate, sink = Gate({"d0"}), CollectSink()
    pipe = Pipeline([Head(), gate, sink])
    await pipe.start()
    gate.queue_frame_nowait(data("d0"))
    await asyncio.wait_for(gate.entered.wait(), timeout=5)
    gate.queue_frame_nowait(data("down"))
    gate.queue_frame_nowait(data("up"), FrameDirection.UPSTREAM)
    gate.queue_frame_nowait(InterruptionFrame(reason="x"))
    gate.release.set()
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["d0", "interrupt:x"]
    assert upstream_seen == ["up"]
    assert gate.flushed_frames == 1


async def test_interruption_delivered_to_an_idle_pipeline_passes_through():
    sink = CollectSink()
    pipe = Pipeline([FrameProcessor(), sink])
    await pipe.start()
    await pipe.queue_frame(InterruptionFrame(reason="now"))
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["interrupt:now"]


async def test_upstream_pushes_reach_the_previous_processor():
    upstream_seen: list[tuple[str, Frame]] = []

    class Head(FrameProcessor):
        async def process_frame(self, frame, direction):
            if direction is FrameDirection.UPSTREAM:
                upstream_seen.append((self.name, frame))
            else:
                await self.push_frame(frame, direction)

    class Player(FrameProcessor):
        """Acknowledges each transcript upstream and passes it on."""

        async def process_frame(self, frame, direction):
            await self.push_frame(frame, direction)
            if isinstance(frame, TranscriptFrame):
                await self.push_frame(
                    PlaybackMarkFrame(text_offset=len(frame.text)), FrameDirection.UPSTREAM
                )

    sink = CollectSink()
    pipe = Pipeline([Head("head"), FrameProcessor("middle"), Player("player"), sink])
    await pipe.start()
    await pipe.queue_frame(data("hello"))
    await pipe.queue_frame(data("hi"))
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["hello", "hi"]
    assert [(name, type(f), f.text_offset) for name, f in upstream_seen] == [
        ("head", PlaybackMarkFrame, 5),
        ("head", PlaybackMarkFrame, 2),
    ]


async def test_upstream_push_from_the_first_processor_is_dropped_quietly():
    class Bouncer(FrameProcessor):
        async def process_frame(self, frame, direction):
            await self.push_frame(frame, FrameDirection.UPSTREAM)

    sink = CollectSink()
    pipe = Pipeline([Bouncer(), sink])
    await pipe.start()
    await pipe.queue_frame(data("d"))
    await pipe.wait_idle()
    await pipe.stop()
    assert sink.frames == []


async def test_exception_in_a_processor_is_logged_and_later_frames_still_flow(caplog):
    class Boom(FrameProcessor):
        async def process_frame(self, frame, direction):
            if label(frame) == "bad":
                raise RuntimeError("kaboom")
            await self.push_frame(frame, direction)

    sink = CollectSink()
    pipe = Pipeline([Boom("boom"), sink])
    await pipe.start()
    with caplog.at_level(logging.ERROR, logger="turnkit.pipeline"):
        await pipe.queue_frame(data("good1"))
        await pipe.queue_frame(data("bad"))  # handled inline: must not raise here
        pipe.queue_frame_nowait(data("bad"))  # handled by the processor's task
        pipe.queue_frame_nowait(data("good2"))
        await pipe.wait_idle()
    assert [label(f) for f in sink.frames] == ["good1", "good2"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    for r in errors:
        assert "boom" in r.getMessage()
        assert "TranscriptFrame" in r.getMessage()
        assert r.exc_info is not None and isinstance(r.exc_info[1], RuntimeError)
    # The processor's task survived the error and still serves its queue.
    pipe.queue_frame_nowait(data("good3"))
    await pipe.wait_idle()
    assert [label(f) for f in sink.frames] == ["good1", "good2", "good3"]
    await pipe.stop()


async def test_wait_idle_returns_only_after_all_frames_drained():
    class Slow(FrameProcessor):
        async def process_frame(self, frame, direction):
            for _ in range(20):
                await asyncio.sleep(0)
            await self.push_frame(frame, direction)

    sink = CollectSink()
    pipe = Pipeline([Slow("s1"), Slow("s2"), sink])
    await pipe.start()
    names = [f"d{i}" for i in range(30)]
    for n in names:
        pipe.queue_frame_nowait(data(n))
    await pipe.wait_idle()
    assert [label(f) for f in sink.frames] == names
    assert all(p.idle for p in pipe.processors)
    await pipe.stop()


async def test_wait_idle_waits_for_a_blocked_processor():
    pipe, gate, sink = await _blocked_pipeline()
    pipe.queue_frame_nowait(data("d1"))
    waiter = asyncio.create_task(pipe.wait_idle())
    for _ in range(50):
        await asyncio.sleep(0)
    assert not waiter.done()
    assert sink.frames == []
    gate.release.set()
    await asyncio.wait_for(waiter, timeout=5)
    assert [label(f) for f in sink.frames] == ["d0", "d1"]
    await pipe.stop()


async def test_wait_idle_waits_for_a_processor_blocked_outside_the_loop():
    # A processor awaiting something that is not a ready callback (a thread,
    # a socket) keeps the pipeline busy: wait_idle waits for it, no spinning.
    pipe, gate, sink = await _blocked_pipeline()
    waiter = asyncio.create_task(pipe.wait_idle())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    gate.release.set()
    await asyncio.wait_for(waiter, timeout=5)
    assert [label(f) for f in sink.frames] == ["d0"]
    await pipe.stop()


async def test_stop_cancels_processor_tasks_cleanly():
    pipe, gate, sink = await _blocked_pipeline()
    pipe.queue_frame_nowait(data("d1"))
    tasks = [p._task for p in pipe.processors]
    assert all(t is not None and not t.done() for t in tasks)
    await pipe.stop()  # must not raise CancelledError or hang
    assert gate.cancelled
    assert all(t.done() for t in tasks)
    assert all(p._task is None for p in pipe.processors)
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("turnkit:")]
    await pipe.stop()  # stopping twice is harmless
    assert sink.frames == []


async def test_pipeline_can_be_restarted_after_stop():
    sink = CollectSink()
    pipe = Pipeline([FrameProcessor(), sink])
    await pipe.start()
    await pipe.stop()
    await pipe.start()
    pipe.queue_frame_nowait(VADSpeechStartedFrame(confirmed_at=0.0))
    await pipe.wait_idle()
    await pipe.stop()
    assert [type(f) for f in sink.frames] == [VADSpeechStartedFrame]


def test_empty_pipeline_is_refused():
    with pytest.raises(ValueError):
        Pipeline([])


async def test_a_processor_handles_one_frame_at_a_time_with_two_producers():
    """Two producers (e.g. mic audio and STT transcripts) feed one pipeline.

    The first frame blocks the gate while being handled inline in producer
    A's task; the second, from producer B, must wait behind it, not run
    through the same processor concurrently and overtake it."""
    gate, sink = Gate({"d1"}), CollectSink()
    pipe = Pipeline([gate, sink])
    await pipe.start()
    producer_a = asyncio.create_task(pipe.queue_frame(data("d1")))
    await asyncio.wait_for(gate.entered.wait(), timeout=5)
    await pipe.queue_frame(data("d2"))  # producer B
    await settle()
    gate.release.set()
    await asyncio.wait_for(producer_a, timeout=5)
    await pipe.wait_idle()
    await pipe.stop()
    assert [label(f) for f in sink.frames] == ["d1", "d2"]
    assert gate.max_active == 1, "process_frame ran concurrently on two tasks"
