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

  It is also where the playback marks come from: after each agent frame has
  played (its duration has passed on the clock) it reports the reply's
  played audio seconds to its :class:`~turnkit.barge_in.cursor.PlaybackCursor`
  (with the TTS's :class:`~turnkit.barge_in.cursor.WordTimestampsFrame` s, see
  :class:`~turnkit.tts.processor.TTSProcessor`), pushes a
  :class:`~turnkit.frames.PlaybackMarkFrame` both ways (downstream to a
  :class:`~turnkit.barge_in.history_processor.HistoryTruncator` after the
  output, upstream to one before it), and tells the controller how far into
  the reply's text the caller has heard (``on_agent_progress``). The cursor
  can be shared with the :class:`~turnkit.drafting.responder.Responder`
  (``Responder(cursor=proc.cursor)``): its history is then cut to the words
  heard.

Example::

    timeline = AudioTimeline(clock, echo=EchoFilter())
    pipe = Pipeline([TimelineProcessor(timeline), stt, detector, responder,
                     TTSProcessor(EspeakTTS(), clock),
                     BargeInProcessor(clock, BargeInController(clock), timeline.echo),
                     HistoryTruncator(clock), output])
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.cursor import PlaybackCursor, WordTimestampsFrame
from turnkit.barge_in.echo import EchoFilter, EchoStep
from turnkit.clock import Clock
from turnkit.frames import (
    REPLY_CANCELLED,
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    AudioInFrame,
    AudioOutFrame,
    Frame,
    InterruptionFrame,
    PlaybackMarkFrame,
    StartFrame,
    TranscriptFrame,
    TurnEndFrame,
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
    audio actually played of the reply now playing; ``cursor`` holds every
    reply's playback evidence (marks, TTS word timings, text). Counters:
    ``stops`` (pauses and stops), ``resumes``, ``confirms``, ``cancelled``,
    ``marks`` (playback marks sent)."""

    def __init__(
        self,
        clock: Clock,
        controller: BargeInController,
        echo: EchoFilter | None = None,
        frame_s: float = 0.02,
        cursor: PlaybackCursor | None = None,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.controller = controller
        self.cursor = cursor if cursor is not None else PlaybackCursor(clock)
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
        self.marks = 0
        self._texts: dict[int, str] = {}  # each reply's text, as its chunks came
        self._playing_id = 0  # the reply whose audio is going out
        self._dropped: set[int] = set()  # replies stopped or cancelled: late audio is dropped
        self.actions: list[Action] = []  # every action executed, in order

    @property
    def playing_reply(self) -> int:
        """The id of the reply whose audio went out last (0: none yet)."""
        return self._playing_id

    @property
    def policy(self) -> BargeInController:  # the former name
        return self.controller

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.controller.reset()
        elif (
            isinstance(frame, AgentTextFrame | WordTimestampsFrame)
            and direction is FrameDirection.DOWNSTREAM
            and frame.reply_id in self._dropped
        ):
            return  # a stopped or cancelled reply's late text: nothing plays
        elif isinstance(frame, AgentTextFrame) and direction is FrameDirection.DOWNSTREAM:
            # The reply text for this audio: context for "okay" after a question.
            text = self._add_text(frame.reply_id, frame.text)
            self.reply_id = frame.reply_id
            self.reply_text = text
            if (self.playing or self.paused) and frame.reply_id == self._playing_id:
                self.controller.on_agent_text(text)
                await self.push_frame(
                    AgentTextFrame(at=frame.at, reply_id=frame.reply_id, text=frame.text),
                    FrameDirection.UPSTREAM,
                )
            elif not (self.playing or self.paused):
                self.controller.on_reply_pending(True)
        elif isinstance(frame, WordTimestampsFrame) and direction is FrameDirection.DOWNSTREAM:
            self.cursor.on_timestamps(frame)
            # Upstream too: a history kept before the output sees them.
            await self.push_frame(
                WordTimestampsFrame(
                    at=frame.at,
                    reply_id=frame.reply_id,
                    words=list(frame.words),
                    audio_s=frame.audio_s,
                    anchor_s=frame.anchor_s,
                    anchor_offset=frame.anchor_offset,
                ),
                FrameDirection.UPSTREAM,
            )
        elif isinstance(frame, AudioOutFrame) and direction is FrameDirection.DOWNSTREAM:
            if frame.reply_id and frame.reply_id in self._dropped:
                # Rendered before the TTS heard of the stop: never played.
                self.flushed_frames += 1
                return
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
        elif isinstance(frame, TurnEndFrame):
            await self.execute(self.controller.on_turn_end(frame.through_sound))

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

    def _add_text(self, reply_id: int, text: str) -> str:
        """The reply's text with ``text`` added: a chunk extends it (one
        space between), the whole text again replaces it."""
        old = self._texts.get(reply_id, "")
        if not old or text.startswith(old):
            new = text
        elif old.startswith(text):
            new = old
        else:
            new = f"{old} {text}"
        self._texts[reply_id] = new
        while len(self._texts) > 64:
            self._texts.pop(next(iter(self._texts)))
        r = self.cursor.reply(reply_id)
        # A shared cursor may already hold more of it (the Responder's text,
        # of which the TTS spoke whole sentences, spacing aside).
        words = new.split()
        if r.text.split()[: len(words)] != words:
            self.cursor.on_text(reply_id, new, append=False)
        return new

    async def _play(self) -> None:
        while self._queue and not self.paused:
            frame = self._queue.popleft()
            rid = frame.reply_id or self.reply_id
            if self.playing and rid != self._playing_id:
                # The next reply's audio follows the last one's without a gap.
                await self._finish("completed")
            if not self.playing:
                self.playing = True
                self.played_s = 0.0
                self._playing_id = rid
                now = self.clock.now()
                text = self._texts.get(rid, self.reply_text)
                self.controller.on_agent_started(text, now)
                self.cursor.on_started(rid)
                await self.push_frame(AgentAudioStartedFrame(at=now, reply_id=rid))
                if text:
                    await self.push_frame(
                        AgentTextFrame(at=now, reply_id=rid, text=text), FrameDirection.UPSTREAM
                    )
            now = self.clock.now()
            if self.echo is not None:
                # What the loudspeaker plays is the echo filter's reference.
                self.echo.push_reference(frame.audio, now)
            frame.at = now
            await self.push_frame(frame)
            dur = len(frame.audio) / frame.sample_rate
            await self.clock.sleep(dur)
            self.played_s += dur
            await self._mark(rid)
        if self.playing and not self.paused and not self._queue:
            await self._finish("completed")

    async def _mark(self, rid: int) -> None:
        """The frame's samples have played: report it (cursor, marks both
        ways, the controller's progress through the reply's text)."""
        now = self.clock.now()
        self.cursor.on_mark(rid, self.played_s)
        offset = self.cursor.progress(rid)
        self.controller.on_agent_progress(offset)
        self.marks += 1
        for direction in (FrameDirection.DOWNSTREAM, FrameDirection.UPSTREAM):
            await self.push_frame(
                PlaybackMarkFrame(at=now, reply_id=rid, played_s=self.played_s, text_offset=offset),
                direction,
            )

    async def _finish(self, reason: str) -> None:
        self.playing = False
        now = self.clock.now()
        rid = self._playing_id
        if reason != "paused":
            self.controller.on_agent_stopped(now, completed=reason == "completed")
        self.cursor.on_stopped(rid, "interrupted" if reason == "paused" else reason)
        await self.push_frame(AgentAudioStoppedFrame(at=now, reply_id=rid, reason=reason))

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
            self.cursor.on_started(self._playing_id)
            await self.push_frame(AgentAudioStartedFrame(at=now, reply_id=self._playing_id))
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
        self.cursor.on_stopped(self._playing_id, "interrupted")
        self._drop(self._playing_id)
        await self.push_frame(
            AgentAudioStoppedFrame(at=now, reply_id=self._playing_id, reason="interrupted")
        )
        await self.push_frame(
            InterruptionFrame(at=now, reason="barge-in confirmed"), FrameDirection.UPSTREAM
        )

    async def cancel_pending(self) -> None:
        """The caller spoke before the reply's first audio: drop it."""
        self.cancelled += 1
        self.controller.on_reply_pending(False)
        self._drop(self.reply_id)
        self.flushed_frames += len(self._queue)
        self._queue.clear()
        await self.push_frame(
            InterruptionFrame(at=self.clock.now(), reason=REPLY_CANCELLED, reply_id=self.reply_id),
            FrameDirection.UPSTREAM,
        )

    def _drop(self, reply_id: int) -> None:
        if reply_id:
            self._dropped.add(reply_id)
            if len(self._dropped) > 256:
                self._dropped.discard(min(self._dropped))

    async def stop(self) -> None:
        if self._player is not None:
            self._player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._player
        await super().stop()
