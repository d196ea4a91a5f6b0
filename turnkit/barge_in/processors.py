"""Pipeline processors that host the barge-in policies in turnkit's own
pipeline (the plugins host the same policy objects).

* :class:`EchoGateProcessor` sits before the VAD: it runs the
  :class:`~turnkit.barge_in.echo.EchoFilter` on each caller frame and
  replaces the frame's audio with the echo-suppressed audio, so the VAD,
  the end-of-turn detector and the drafter all hear the caller, not the
  agent's own voice coming back.
* :class:`BargeInProcessor` sits between the agent's audio source (TTS) and
  the output: it paces agent audio out on the clock (feeding the echo
  filter the played audio as its reference), asks the barge-in policy about
  each caller frame and transcript, and on a bid stops playback and flushes
  every queued agent frame in one step (an out-of-band
  :class:`~turnkit.frames.InterruptionFrame` downstream; the unplayed audio
  is held aside). A false interruption (no words within the timeout)
  resumes from where it stopped; a confirmed one drops the held audio and
  sends the interruption upstream so generation stops too.

Example::

    echo = EchoFilter()
    pipe = Pipeline([EchoGateProcessor(echo), VADProcessor(), stt, detector, llm, tts,
                     BargeInProcessor(clock, FilteredBargeIn(clock), echo), output])
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from turnkit.barge_in.echo import EchoFilter, EchoStep
from turnkit.barge_in.policy import BargeInPolicy
from turnkit.clock import Clock
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    AudioInFrame,
    AudioOutFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TranscriptFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["BargeInProcessor", "EchoGateProcessor"]


class EchoGateProcessor(FrameProcessor):
    """Echo-suppresses caller audio before the VAD; keeps the last verdict
    (``last``) and counts frames judged echo-only."""

    def __init__(self, echo: EchoFilter) -> None:
        super().__init__()
        self.echo = echo
        self.last: EchoStep | None = None
        self.echo_frames = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.echo.reset()
        elif isinstance(frame, AudioInFrame) and direction is FrameDirection.DOWNSTREAM:
            step = self.echo.process(frame.audio, frame.at)
            self.last = step
            self.echo_frames += step.echo_only
            frame.audio = step.audio
        await self.push_frame(frame, direction)


class BargeInProcessor(FrameProcessor):
    """Plays agent audio on the clock and stops, flushes or resumes it as the
    barge-in policy decides.

    State: ``playing`` (audio going out), ``paused`` (stopped by a barge-in,
    unplayed audio held for a possible resume). ``played_s`` counts audio
    actually played per reply, for the playback cursor."""

    def __init__(
        self,
        clock: Clock,
        policy: BargeInPolicy,
        echo: EchoFilter | None = None,
        frame_s: float = 0.02,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.policy = policy
        self.echo = echo
        self.frame_s = frame_s
        self._queue: deque[AudioOutFrame] = deque()
        self._held: deque[AudioOutFrame] = deque()
        self._player: asyncio.Task[None] | None = None
        self.reply_id = 0
        self.reply_text = ""
        self.playing = False
        self.paused = False
        self.played_s = 0.0
        self.stops = 0
        self.resumes = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.policy.reset()
        elif isinstance(frame, AgentTextFrame):
            # The reply text for this audio: context for "okay" after a question.
            self.reply_id = frame.reply_id
            self.reply_text = frame.text
        elif isinstance(frame, AudioOutFrame) and direction is FrameDirection.DOWNSTREAM:
            if self.paused:
                self._held.append(frame)
            else:
                self._queue.append(frame)
                self._ensure_player()
            return
        await self.push_frame(frame, direction)
        if direction is not FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, AudioInFrame) and frame.vad is not None:
            stop = self.policy.should_stop(frame, frame.vad)
            if stop and self.playing:
                await self.interrupt()
            elif self.paused and self.policy.should_resume():
                await self.resume()
        elif isinstance(frame, TranscriptFrame):
            if self.policy.on_transcript(frame) and self.playing:
                await self.interrupt()
            elif self.paused and frame.text.strip():
                await self.confirm()

    # -- playback -------------------------------------------------------------
    def _ensure_player(self) -> None:
        if self._player is None or self._player.done():
            self._player = asyncio.create_task(self._play(), name="turnkit:barge-in-player")

    async def _play(self) -> None:
        while self._queue and not self.paused:
            frame = self._queue.popleft()
            if not self.playing:
                self.playing = True
                self.played_s = 0.0
                now = self.clock.now()
                self.policy.on_agent_started(self.reply_text, now)
                await self.push_frame(AgentAudioStartedFrame(at=now, reply_id=self.reply_id))
            now = self.clock.now()
            if self.echo is not None:
                # What the loudspeaker plays is the echo filter's reference.
                self.echo.push_reference(frame.audio, now)
            frame.at = now
            await self.push_frame(frame)
            dur = len(frame.audio) / frame.sample_rate
            await self.clock.sleep(dur)
            self.played_s += dur
        if self.playing and not self.paused and not self._queue:
            await self._finish("completed")

    async def _finish(self, reason: str) -> None:
        self.playing = False
        now = self.clock.now()
        self.policy.on_agent_stopped(now)
        await self.push_frame(
            AgentAudioStoppedFrame(at=now, reply_id=self.reply_id, reason=reason)
        )

    async def interrupt(self) -> None:
        """Stop now: every queued agent frame is set aside in one step and
        the output is told to drop what it buffered (out of band)."""
        self.stops += 1
        self.paused = True
        self._held.extend(self._queue)
        self._queue.clear()
        if self._player is not None and self._player is not asyncio.current_task():
            self._player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._player
        self._player = None
        await self.push_frame(InterruptionFrame(at=self.clock.now(), reason="barge-in"))
        await self._finish("interrupted")

    async def resume(self) -> None:
        """False interruption: play the held audio from where it stopped."""
        self.resumes += 1
        self.paused = False
        self._queue.extendleft(reversed(self._held))
        self._held.clear()
        self._ensure_player()

    async def confirm(self) -> None:
        """The caller has the floor: drop the held audio and stop generation."""
        self.paused = False
        self.flushed_frames += len(self._held)
        self._held.clear()
        await self.push_frame(
            InterruptionFrame(at=self.clock.now(), reason="barge-in confirmed"),
            FrameDirection.UPSTREAM,
        )

    async def stop(self) -> None:
        if self._player is not None:
            self._player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._player
        await super().stop()
