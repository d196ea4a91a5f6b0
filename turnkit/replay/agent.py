"""The replay's agent audio: when a reply plays, how long, and when it stops.

The replay is a host like the others: it decides nothing about the reply.
What to say, which request, drafts, tool calls and fillers, and the history
(what the caller heard) are :class:`~turnkit.drafting.responder.Responder`'s
decisions, on the replay's engine (:mod:`turnkit.replay.engine`); when the
caller is done is the detector's; whether to stop is the barge-in policy's
(:meth:`SimulatedAgent._barge_in`, the one place it is consulted). This
processor forwards the evidence to them and plays the result on the virtual
clock:

* a confirmed turn (``TurnEndFrame``) goes to :meth:`Responder.on_end` (the
  request leaves after the detector's compute); the reply's first audio
  comes ``TTS TTFB`` after its first token (or its first filler frame, for a
  slow tool, if that is earlier), never before the decision plus compute;
* it plays for the time the recording gives it (:class:`ReplyPlanner`),
  each word where the recorded agent said it (the TTS's word timestamps,
  :meth:`ReplyPlanner.reply_words`), reported to the
  :class:`~turnkit.barge_in.cursor.PlaybackCursor`: the Responder's history
  holds the words heard, and the barge-in policy reads from the cursor where
  the agent is in its text, as a live host's playback marks tell it;
* the barge-in decisions stop it (caller speech that the policy takes for a
  bid), or cancel it before its first audio (the caller went on).
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.barge_in.truncation import ReplyProgress
from turnkit.clock import Clock
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    AudioInFrame,
    AudioOutFrame,
    Frame,
    LLMTextFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    Word,
)
from turnkit.pipeline import FrameDirection, FrameProcessor
from turnkit.replay.latency import LatencyModel

if TYPE_CHECKING:
    from turnkit.drafting.responder import Responder
    from turnkit.replay.engine import EngineRequest, SimulatedEngine

__all__ = ["Reply", "ReplyPlanner", "SimulatedAgent"]


@dataclass(slots=True)
class Reply:
    id: int
    decision_at: float
    compute_ms: float
    latency_ms: float  # decision + compute -> first audio
    audio_due: float  # when its first audio would play (inf: no token yet)
    turn: int | None  # caller turn it answers (by the labels), if any
    first_audio_at: float | None = None
    planned_end: float | None = None
    stopped_at: float | None = None
    stop_reason: str | None = None  # completed | interrupted | cancelled | superseded
    reason: str = ""  # the detector's own words for its decision
    drafted: bool = False  # its LLM request was an eager draft, confirmed
    saved_ms: float = 0.0  # how much earlier the draft's first token came than a fresh request's
    text: str = ""  # what it says (the recorded agent turn's text)
    # Its words' times in its audio: where the recorded agent said them.
    timeline: list[Word] = field(default_factory=list)
    heard_words: int | None = None  # words the caller heard before a stop
    words: int = 0
    decided_at: float | None = None  # decision + the detector's compute
    asked_at: float | None = None  # when its LLM request opened (a draft's: before the decision)
    # Barge-in pauses: [paused at, resumed at (None: still paused or confirmed)].
    pauses: list[list[float | None]] = field(default_factory=list)
    filler: bool = False  # its first audio was a filler line (a slow tool)

    @property
    def audible(self) -> bool:
        return self.first_audio_at is not None


class ReplyPlanner(Protocol):
    def turn_for(self, decision_at: float) -> int | None: ...

    def play_until(
        self, turn: int | None, first_audio_at: float, at: float | None = None
    ) -> float: ...

    def reply_text(self, turn: int | None, at: float | None = None) -> str: ...

    def reply_words(
        self, turn: int | None, first_audio_at: float, until: float, at: float | None = None
    ) -> list[Word]: ...


class SimulatedAgent(FrameProcessor):
    """Plays the :class:`Responder`'s replies on the virtual clock (see the
    module docstring). ``responder`` is attached after construction (its
    ``emit`` is :meth:`on_llm_text`, its fillers' sink :meth:`on_filler_audio`)."""

    def __init__(
        self,
        clock: Clock,
        planner: ReplyPlanner,
        barge_in: BargeInController,
        engine: SimulatedEngine,
        tts_ttfb: LatencyModel,
        rng: random.Random,
        count_compute: bool = True,
        cursor: PlaybackCursor | None = None,
        preemptive_tts: bool = False,
    ) -> None:
        super().__init__()
        self.clock = clock
        # A held draft's first sentence is rendered before the commit
        # (turnkit's TTSProcessor, LiveKit's preemptive_tts): a used draft's
        # audio is ready its TTS time after its first token, commit or not.
        self.preemptive_tts = preemptive_tts
        self.planner = planner
        self.barge_in = barge_in
        self.engine = engine
        self.tts_ttfb = tts_ttfb
        self.rng = rng
        self.count_compute = count_compute
        self.cursor = cursor if cursor is not None else PlaybackCursor(clock)
        self.responder: Responder | None = None
        self.transcript = ""
        self.replies: list[Reply] = []
        self.decisions: list[TurnEndFrame] = []
        self._wordless: TurnEndFrame | None = None  # an end the Responder holds for its words
        self._progress = ReplyProgress(self.cursor.config)  # _place: asked on every frame
        self._pending: Reply | None = None
        self._speaking: Reply | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._drafts: dict[int, EngineRequest] = {}  # draft reply id -> its request
        # The VAD's end of the caller's last speech, as of the latest frame:
        # what a detector's commit follows (see _decide).
        self._speech_end: float | None = None

    @property
    def speaking(self) -> bool:
        return self._speaking is not None

    @property
    def ignored_ends(self) -> int:
        """Turn ends while the agent kept talking (the Responder's count)."""
        return 0 if self.responder is None else self.responder.stats.ignored_ends

    @property
    def llm_requests(self) -> int:
        return 0 if self.responder is None else self.responder.stats.requests

    def _r(self) -> Responder:
        if self.responder is None:
            raise RuntimeError("SimulatedAgent needs a Responder (agent.responder = ...)")
        return self.responder

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        r = self._r()
        if isinstance(frame, TurnEndFrame):
            self.decisions.append(frame)
            await self._barge_in(frame)  # a paused reply: the commit confirms the stop
            # A commit judges the pause after the caller's last speech: it
            # answers the turn that speech belongs to, even when it lands
            # in the first frames of the caller's next turn (not yet heard).
            # The detector's own speech end where it gives one (words the
            # VAD did not hear may have opened the turn).
            speech_end = frame.speech_end if frame.speech_end is not None else self._speech_end
            await self._decide(frame, frame.at if speech_end is None else min(frame.at, speech_end))
        elif isinstance(frame, TurnEagerFrame):
            await self._eager(frame)
        elif isinstance(frame, TranscriptFrame):
            self.transcript = frame.text
            speech_end = r.on_transcript(frame.text)
            await self._barge_in(frame)
            if speech_end is not None and self._wordless is not None:
                # The words of a turn that ended before any came: answered now.
                await self._decide(self._wordless, speech_end, words_at=frame.at)
        elif isinstance(frame, TurnResumedFrame):
            await self._barge_in(frame)
            r.on_speech()  # the caller went on (a draft waits for their words)
        elif isinstance(frame, AudioInFrame) and frame.vad is not None:
            if frame.vad.speech_end > 0:
                self._speech_end = frame.vad.speech_end
            await self._barge_in(frame)
            if frame.vad.started:
                r.on_speech()
            elif frame.vad.stopped:
                r.on_speech_stopped()
        await self.engine.idle()
        await self.push_frame(frame, direction)

    # -- barge-in: the one place its policy is asked ----------------------------

    async def _barge_in(self, frame: Frame) -> None:
        """Hand caller evidence to the barge-in controller and execute its
        action (:class:`~turnkit.barge_in.controller.Action`): stop, pause
        (the reply's audio holds: its end moves by the pause), resume,
        confirm a paused stop (the audio stopped when it paused), or cancel
        a reply not yet audible."""
        ctl = self.barge_in
        ctl.on_reply_pending(self._pending is not None)
        if self._speaking is not None:
            # Where the agent is in its text, as a live host's playback
            # marks tell it (the controller's own estimate is time at a
            # nominal rate from the reply's first audio).
            ctl.on_agent_progress(self._place(self._speaking))
        if isinstance(frame, TranscriptFrame):
            act = ctl.on_transcript(frame.text)
        elif isinstance(frame, TurnResumedFrame):
            act = ctl.on_turn_resumed()
        elif isinstance(frame, TurnEndFrame):
            act = ctl.on_turn_end(frame.through_sound)
        elif isinstance(frame, AudioInFrame) and frame.vad is not None:
            act = ctl.on_frame(frame.vad, frame.audio)
        else:
            return
        reply = self._speaking
        now = self.clock.now()
        if act is Action.CANCEL_PENDING:
            self._cancel_pending()
        elif reply is None:
            return
        elif act is Action.STOP:
            # Resumed at this very instant and stopped now: no audio played
            # since the pause, so the caller heard it stop there (a hold
            # released as "No," broke off, and the word "no" arriving with
            # the same frame).
            last = reply.pauses[-1] if reply.pauses else None
            silent_since = last[0] if last is not None and last[1] == now else None
            await self._stop(reply, "interrupted")
            if silent_since is not None:
                reply.pauses.pop()
                reply.stopped_at = silent_since
            await self._answer_owed()
        elif act is Action.PAUSE and reply.planned_end is not None:
            reply.pauses.append([now, None])
            self.cursor.on_stopped(reply.id, "paused")
            task = self._tasks.pop(reply.id, None)
            if task is not None:
                task.cancel()
        elif act is Action.RESUME and reply.pauses and reply.pauses[-1][1] is None:
            paused_at = reply.pauses[-1][0]
            reply.pauses[-1][1] = now
            assert reply.planned_end is not None
            reply.planned_end += now - paused_at
            self.cursor.on_started(reply.id)
            self._tasks[reply.id] = asyncio.create_task(self._finish_play(reply))
        elif act is Action.CONFIRM:
            open_pause = reply.pauses and reply.pauses[-1][1] is None
            paused_at = reply.pauses.pop()[0] if open_pause else now
            await self._stop(reply, "interrupted")
            reply.stopped_at = paused_at  # its audio stopped when it paused
            await self._answer_owed()

    async def _answer_owed(self, completed: bool = False) -> None:
        """The agent stopped for a bid whose turn had already ended (its
        end was ignored while the agent talked), or finished a reply the
        caller spoke over at its close: answer that turn now (the
        Responder's :meth:`~turnkit.drafting.responder.Responder.owed_end`
        decides whether it is owed)."""
        text = self._r().owed_end(completed=completed)
        if text is None:
            return
        now = self.clock.now()
        await self._decide(
            TurnEndFrame(
                at=now,
                detector=self.decisions[-1].detector if self.decisions else "",
                probability=None,
                reason="the turn that ended while the agent talked, answered once it stopped",
            )
        )

    async def _finish_play(self, reply: Reply) -> None:
        """Play a resumed reply to its (moved) end."""
        assert reply.planned_end is not None
        await self.clock.sleep(max(0.0, reply.planned_end - self.clock.now()))
        if self._speaking is reply:
            self._tasks.pop(reply.id, None)
            await self._stop(reply, "completed")

    # -- the Responder's evidence and output -----------------------------------

    def _compute_s(self, frame: TurnEndFrame | TurnEagerFrame) -> float:
        return frame.compute_ms / 1000 if self.count_compute else 0.0

    async def _eager(self, eager: TurnEagerFrame) -> None:
        """An eager signal: the Responder may start a held draft."""
        n = len(self.engine.requests)
        compute = self._compute_s(eager)
        self.engine.send_after(compute)
        # Live, the eager signal comes once the model has run, and the draft
        # (and its hold on the commit) starts then.
        reply_id = await self._r().on_eager(self.transcript, self.clock.now() + compute)
        await self.engine.idle()
        if reply_id is not None and len(self.engine.requests) > n:
            self._drafts[reply_id] = self.engine.requests[n]

    async def _decide(
        self,
        decision: TurnEndFrame,
        evidence_at: float | None = None,
        words_at: float | None = None,
    ) -> None:
        """A confirmed end of turn: the Responder answers it (or ignores it
        while the agent talks, or waits for words it had none of); the
        reply becomes the pending one. The caller turn it answers is the
        labels' turn begun by ``evidence_at`` (the end of the speech the
        decision follows; default its time). ``words_at``: the words of an
        end that had none came then, and the engine is asked now (the
        decision's compute was spent at the decision)."""
        compute = self._compute_s(decision) if words_at is None else 0.0
        self.engine.send_after(compute)
        reply_id = await self._r().on_end(self.transcript, evidence_at)
        self._wordless = decision if self._r().awaits_words else None
        if reply_id is not None:
            # The Responder superseded its own reply; so does the playback.
            self._end_pending("superseded")
            if self._speaking is not None:
                await self._stop(self._speaking, "superseded")
            draft = self._drafts.get(reply_id)
            reply = Reply(
                id=reply_id,
                decision_at=decision.at,
                compute_ms=decision.compute_ms,
                latency_ms=0.0,
                audio_due=math.inf,
                turn=self.planner.turn_for(decision.at if evidence_at is None else evidence_at),
                reason=decision.reason,
                drafted=draft is not None,
                # what the engine was asked for when: a draft's text is the
                # recording's answer at the draft's time (LabelPlanner)
                asked_at=(decision.at if words_at is None else words_at)
                if draft is None
                else draft.opened_at,
                decided_at=self.clock.now() + compute,
            )
            self.replies.append(reply)
            self._pending = reply
        self._drafts = {k: v for k, v in self._drafts.items() if k == reply_id}
        await self.engine.idle()

    async def on_llm_text(self, frame: LLMTextFrame) -> None:
        """The Responder's output: the pending reply's first token (or its
        end, for an empty answer) sets when its audio plays."""
        reply = self._pending
        if reply is None or reply.id != frame.reply_id or reply.audio_due < math.inf:
            return
        if not frame.text and not frame.final:
            return
        assert reply.decided_at is not None
        # Held tokens of a draft came earlier (frame.at is when the engine
        # produced them); nothing plays before the decision is known.
        llm_ready = max(reply.decided_at, frame.at)
        tts = self.tts_ttfb.sample(self.rng) / 1000
        due = llm_ready + tts
        draft = self._drafts.pop(reply.id, None)
        if reply.drafted and draft is not None:
            if self.preemptive_tts:
                due = max(reply.decided_at, frame.at + tts)
            # A fresh request would have taken as long as the draft's did.
            fresh = reply.decided_at + (frame.at - draft.sent_at) + tts
            reply.saved_ms = (fresh - due) * 1000
        self._schedule(reply, due)

    async def on_filler_audio(self, frame: AudioOutFrame) -> None:
        """A filler line's frame (a slow tool in the released reply): the
        pending reply is audible from its first frame."""
        reply = self._pending
        if reply is None or frame.at >= reply.audio_due:
            return
        reply.filler = True
        self._schedule(reply, frame.at)

    def _schedule(self, reply: Reply, due: float) -> None:
        reply.audio_due = due
        assert reply.decided_at is not None
        reply.latency_ms = (due - reply.decided_at) * 1000
        old = self._tasks.pop(reply.id, None)
        if old is not None:
            old.cancel()
        self._tasks[reply.id] = asyncio.create_task(self._play(reply))

    # -- playback ---------------------------------------------------------------

    async def _play(self, reply: Reply) -> None:
        await self.clock.sleep(max(0.0, reply.audio_due - self.clock.now()))
        if self._pending is not reply:
            return
        self._pending = None
        now = self.clock.now()
        reply.first_audio_at = now
        reply.planned_end = self.planner.play_until(reply.turn, now, reply.asked_at)
        self._speaking = reply
        text = reply.text = self.planner.reply_text(reply.turn, reply.asked_at)
        self.barge_in.on_agent_started(text, now)
        self.cursor.on_started(reply.id)
        self.cursor.on_duration(reply.id, reply.planned_end - now)
        reply.timeline = self.planner.reply_words(
            reply.turn, now, reply.planned_end, reply.asked_at
        )
        if self.engine.live is None:
            # The recording's reply, said where the recorded agent said it:
            # the TTS's word timestamps, for the history and the barge-in
            # policy alike. A live engine's own text has no such timeline
            # (its length is spread over the reply's audio).
            self.cursor.on_words(reply.id, reply.timeline)
        self._r().on_agent_audio(True)
        await self.push_frame(AgentAudioStartedFrame(at=now, reply_id=reply.id))
        await self.push_frame(
            AgentTextFrame(at=now, reply_id=reply.id, text=text), FrameDirection.UPSTREAM
        )
        await self.clock.sleep(reply.planned_end - self.clock.now())
        if self._speaking is reply:
            self._tasks.pop(reply.id, None)  # finishing normally: don't cancel ourselves
            await self._stop(reply, "completed")

    def _place(self, reply: Reply) -> int:
        """How much of the recorded reply text (what the barge-in policy
        was given) the caller has heard: its words on the recorded
        timeline against the audio played. With the recording's text the
        cursor holds exactly that; a live engine's text is another, so the
        same cut is made on the recorded text here (the policy's figures
        do not depend on the engine)."""
        if self.engine.live is None:
            return self.cursor.progress(reply.id)
        return self._progress.heard(
            reply.text, self.cursor.played_s(reply.id), timestamps=reply.timeline
        ).cut

    def _cancel_pending(self) -> None:
        """The caller spoke before the pending reply's first audio: it is
        dropped (the Responder stops its stream, and its next end continues
        the same turn; the caller heard nothing)."""
        if self._end_pending("cancelled"):
            self._r().on_cancel_pending()

    def _end_pending(self, reason: str) -> bool:
        reply = self._pending
        if reply is None:
            return False
        self._pending = None
        self._end(reply, reason)
        return True

    async def _stop(self, reply: Reply, reason: str) -> None:
        self._speaking = None
        self.barge_in.on_agent_stopped(self.clock.now(), completed=reason == "completed")
        self._end(reply, reason)
        self.cursor.on_stopped(reply.id, reason)
        r = self._r()
        r.on_agent_audio(False)
        if reason != "completed":
            if reply.text:
                heard = self.cursor.heard(reply.id)
                reply.heard_words, reply.words = heard.words_kept, heard.words_total
            if reason == "interrupted":
                r.on_interrupted()  # the history keeps what the cursor says was heard
        await self.push_frame(
            AgentAudioStoppedFrame(at=self.clock.now(), reply_id=reply.id, reason=reason)
        )
        if reason == "completed":
            await self._answer_owed(completed=True)

    def _end(self, reply: Reply, reason: str) -> None:
        reply.stopped_at = self.clock.now()
        reply.stop_reason = reason
        task = self._tasks.pop(reply.id, None)
        if task is not None:
            task.cancel()
