"""Pipeline processors that host the barge-in controller in turnkit's own
pipeline (the plugins host the same controller).

* :class:`EchoGateProcessor` sits before the VAD: it runs the
  :class:`~turnkit.barge_in.echo.EchoFilter` on each caller frame and
  replaces the frame's audio with the echo-suppressed audio, so the VAD,
  the end-of-turn detector and the drafter all hear the caller, not the
  agent's own voice coming back.
* :class:`BargeInProcessor` sits between the agent's audio source (TTS) and
  the output: it paces agent audio out on the clock (feeding the echo
  filter the played audio as its reference), hands each caller frame and
  transcript to the :class:`~turnkit.barge_in.controller.BargeInController`
  and executes its action. It decides nothing itself: ``pause`` holds every
  queued agent frame in one step (an out-of-band
  :class:`~turnkit.frames.InterruptionFrame` downstream drops what the output
  buffered; the unplayed audio is held aside); ``resume`` plays the held
  audio from where it stopped; ``confirm`` (and ``stop``) drops it and sends
  the interruption upstream so generation stops too; ``cancel_pending``
  drops a reply whose audio has not started.

Example::

    timeline = AudioTimeline(clock, echo=EchoFilter())
    pipe = Pipeline([TimelineProcessor(timeline), stt, detector, llm, tts,
                     BargeInProcessor(clock, BargeInController(clock), timeline.echo), output])
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.echo import EchoFilter, EchoStep
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
    TurnResumedFrame,
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
    """Plays agent audio on the clock and stops, pauses, resumes or drops it
    as the barge-in controller's actions say.

    State: ``playing`` (audio going out), ``paused`` (held by a barge-in
    pause, unplayed audio kept for a possible resume). ``played_s`` counts
    audio actually played per reply, for the playback cursor. Counters:
    ``stops`` (pauses and stops), ``resumes``, ``confirms``, ``cancelled``."""

    def __init__(
        self,
        clock: Clock,
        controller: BargeInController,
        echo: EchoFilter | None = None,
        frame_s: float = 0.02,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.controller = controller
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
        self.confirms = 0
        self.cancelled = 0
        self.actions: list[Action] = []  # every action executed, in order

    @property
    def policy(self) -> BargeInController:  # the former name
        return self.controller

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.controller.reset()
        elif isinstance(frame, AgentTextFrame):
            # The reply text for this audio: context for "okay" after a question.
            self.reply_id = frame.reply_id
            self.reply_text = frame.text
            if self.playing or self.paused:
                self.controller.on_agent_text(frame.text)
            else:
                self.controller.on_reply_pending(True)
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
            await self.execute(self.controller.on_frame(frame.vad, frame.audio))
        elif isinstance(frame, TranscriptFrame):
            await self.execute(self.controller.on_transcript(frame.text))
        elif isinstance(frame, TurnResumedFrame):
            await self.execute(self.controller.on_turn_resumed())

    async def execute(self, action: Action) -> None:
        """Carry out one controller action."""
        if action is Action.KEEP:
            return
        self.actions.append(action)
        if action is Action.PAUSE and self.playing:
            await self.interrupt()
        elif action is Action.STOP and self.playing:
            await self.interrupt()
            await self.confirm()
        elif action is Action.RESUME and self.paused:
            await self.resume()
        elif action is Action.CONFIRM and self.paused:
            await self.confirm()
        elif action is Action.CANCEL_PENDING and not self.playing and not self.paused:
            await self.cancel_pending()

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
                self.controller.on_agent_started(self.reply_text, now)
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
        if reason != "paused":
            self.controller.on_agent_stopped(now)
        await self.push_frame(
            AgentAudioStoppedFrame(at=now, reply_id=self.reply_id, reason=reason)
        )

    async def interrupt(self) -> None:
        """Pause now: every queued agent frame is set aside in one step and
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
        await self._finish("paused")

    async def resume(self) -> None:
        """False interruption: play the held audio from where it stopped."""
        self.resumes += 1
        self.paused = False
        self._queue.extendleft(reversed(self._held))
        self._held.clear()
        now = self.clock.now()
        if self._queue:
            self.playing = True
            await self.push_frame(AgentAudioStartedFrame(at=now, reply_id=self.reply_id))
            self._ensure_player()
        else:
            self.controller.on_agent_stopped(now)

    async def confirm(self) -> None:
        """The caller has the floor: drop the held audio and stop generation."""
        self.confirms += 1
        self.paused = False
        self.flushed_frames += len(self._held)
        self._held.clear()
        now = self.clock.now()
        self.controller.on_agent_stopped(now)
        await self.push_frame(
            AgentAudioStoppedFrame(at=now, reply_id=self.reply_id, reason="interrupted")
        )
        await self.push_frame(
            InterruptionFrame(at=now, reason="barge-in confirmed"), FrameDirection.UPSTREAM
        )

    async def cancel_pending(self) -> None:
        """The caller spoke before the reply's first audio: drop it."""
        self.cancelled += 1
        self.controller.on_reply_pending(False)
        self.flushed_frames += len(self._queue)
        self._queue.clear()
        await self.push_frame(
            InterruptionFrame(at=self.clock.now(), reason="reply cancelled"),
            FrameDirection.UPSTREAM,
        )

    async def stop(self) -> None:
        if self._player is not None:
            self._player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._player
        await super().stop()
