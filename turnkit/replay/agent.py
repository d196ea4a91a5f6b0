"""The replay's stand-in for the agent's LLM and TTS.

It does not decide anything about turn-taking: the detector decides when to
reply and the barge-in policy decides when to stop; this processor turns
those decisions into agent speech on the virtual clock. A reply's first audio
comes ``compute + LLM TTFT + TTS TTFB`` after the decision; it plays for the
time the recording gives it (see :class:`ReplyPlanner`); caller speech
before its first audio cancels it (the caller went on), and during it asks
the barge-in policy whether to stop.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Protocol

from turnkit.barge_in.policy import BargeInPolicy
from turnkit.barge_in.truncation import heard_prefix, truncate_history
from turnkit.clock import Clock
from turnkit.drafting.drafter import EagerDrafter
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    AudioInFrame,
    Frame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor
from turnkit.replay.latency import LatencyModel
from turnkit.replay.llm_source import SYSTEM_PROMPT, TTFTSource

__all__ = ["Reply", "ReplyPlanner", "SimulatedAgent"]


@dataclass(slots=True)
class Reply:
    id: int
    decision_at: float
    compute_ms: float
    latency_ms: float  # sampled LLM TTFT + TTS TTFB
    audio_due: float  # when its first audio would play
    turn: int | None  # caller turn it answers (by the labels), if any
    first_audio_at: float | None = None
    planned_end: float | None = None
    stopped_at: float | None = None
    stop_reason: str | None = None  # completed | interrupted | cancelled | superseded
    reason: str = ""  # the detector's own words for its decision
    drafted: bool = False  # its LLM request was an eager draft, confirmed
    saved_ms: float = 0.0  # how much earlier the draft's first token came than a fresh request's
    text: str = ""  # what it says (the recorded agent turn's text)
    heard_words: int | None = None  # words the caller heard before a stop
    words: int = 0

    @property
    def audible(self) -> bool:
        return self.first_audio_at is not None


class ReplyPlanner(Protocol):
    def turn_for(self, decision_at: float) -> int | None: ...

    def play_until(self, turn: int | None, first_audio_at: float) -> float: ...

    def reply_text(self, turn: int | None) -> str: ...


class SimulatedAgent(FrameProcessor):
    def __init__(
        self,
        clock: Clock,
        planner: ReplyPlanner,
        barge_in: BargeInPolicy,
        llm: TTFTSource,
        tts_ttfb: LatencyModel,
        rng: random.Random,
        count_compute: bool = True,
        drafter: EagerDrafter | None = None,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.planner = planner
        self.barge_in = barge_in
        self.llm = llm
        self.tts_ttfb = tts_ttfb
        self.rng = rng
        self.count_compute = count_compute
        self.drafter = drafter
        self.transcript = ""
        # What the LLM would be asked: caller transcripts and the replies
        # played, in order (a live engine gets these as chat messages).
        self.history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.llm_requests = 0
        # draft id -> (when its request started, when its first token is ready)
        self._draft_ready: dict[int, tuple[float, float]] = {}
        self.replies: list[Reply] = []
        self.decisions: list[TurnEndFrame] = []
        self.ignored_ends = 0  # turn ends while the agent kept talking
        self._pending: Reply | None = None
        self._speaking: Reply | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}

    @property
    def speaking(self) -> bool:
        return self._speaking is not None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TurnEndFrame):
            self.decisions.append(frame)
            if self._speaking is not None:
                # The caller's speech did not stop the agent (the barge-in
                # policy judged it an acknowledgement or echo): its end is
                # not a turn to answer, as a live agent still talking knows.
                self.ignored_ends += 1
                if self.drafter is not None:
                    self.drafter.on_ignored()
            else:
                await self._start_reply(frame)
        elif isinstance(frame, TurnEagerFrame):
            await self._start_draft(frame)
        elif isinstance(frame, TranscriptFrame):
            self.transcript = frame.text
            if self.drafter is not None:
                self.drafter.on_transcript(frame.text)
            # Words can decide a barge-in ("wait" is a bid, "uh-huh" is not).
            if self.barge_in.on_transcript(frame) and self._speaking is not None:
                await self._stop(self._speaking, "interrupted")
        elif isinstance(frame, TurnResumedFrame):
            self._cancel_pending()
            if self.drafter is not None:
                self.drafter.on_speech()  # the caller went on: the draft is void
        elif isinstance(frame, AudioInFrame) and frame.vad is not None:
            if frame.vad.started:
                self._cancel_pending()
                if self.drafter is not None:
                    self.drafter.on_speech()
            # The policy sees every frame (it tracks speech segments), but
            # only a speaking agent can be stopped.
            stop = self.barge_in.should_stop(frame, frame.vad)
            if stop and self._speaking is not None:
                await self._stop(self._speaking, "interrupted")
        await self.push_frame(frame, direction)

    async def _start_reply(self, decision: TurnEndFrame) -> None:
        self._cancel_pending("superseded")
        if self._speaking is not None:
            await self._stop(self._speaking, "superseded")
        compute = decision.compute_ms if self.count_compute else 0.0
        now = self.clock.now()
        decided = now + compute / 1000
        draft = None
        saved = 0.0
        if self.drafter is not None:
            _, draft = self.drafter.on_end(self.transcript)
        if draft is not None:
            # The draft's first token may already be there, or still coming;
            # a fresh request with the same TTFT would be ready at decided + TTFT.
            started, ready = self._draft_ready.pop(draft.id)
            llm_ready = max(decided, ready)
            saved = (decided + (ready - started) - llm_ready) * 1000
        else:
            self.llm_requests += 1
            llm_ready = decided + await self.llm.ttft_ms(self._messages()) / 1000
        audio_due = llm_ready + self.tts_ttfb.sample(self.rng) / 1000
        reply = Reply(
            id=len(self.replies),
            decision_at=decision.at,
            compute_ms=decision.compute_ms,
            latency_ms=(audio_due - decided) * 1000,
            audio_due=audio_due,
            turn=self.planner.turn_for(decision.at),
            reason=decision.reason,
            drafted=draft is not None,
            saved_ms=saved,
        )
        self.replies.append(reply)
        self._pending = reply
        self._tasks[reply.id] = asyncio.create_task(self._play(reply))

    def _messages(self) -> list[dict[str, str]]:
        return [*self.history, {"role": "user", "content": self.transcript}]

    async def _start_draft(self, eager: TurnEagerFrame) -> None:
        """An eager signal: a draft request starts now (its tokens are held,
        nothing is spoken until the turn is confirmed)."""
        if self.drafter is None or self._speaking is not None:
            # While the agent talks, caller speech that has not stopped it
            # is not a turn to draft for (a barge-in stops it first).
            return
        draft = self.drafter.on_eager(self.transcript)
        if draft is None:
            return
        self.llm_requests += 1
        compute = eager.compute_ms if self.count_compute else 0.0
        start = self.clock.now() + compute / 1000
        ttft = await self.llm.ttft_ms(self._messages())
        self._draft_ready[draft.id] = (start, start + ttft / 1000)

    async def _play(self, reply: Reply) -> None:
        await self.clock.sleep(reply.audio_due - self.clock.now())
        if self._pending is not reply:
            return
        self._pending = None
        reply.first_audio_at = self.clock.now()
        reply.planned_end = self.planner.play_until(reply.turn, reply.first_audio_at)
        self._speaking = reply
        self.barge_in.on_agent_started(self.planner.reply_text(reply.turn), reply.first_audio_at)
        text = reply.text = self.planner.reply_text(reply.turn)
        self.history += [
            {"role": "user", "content": self.transcript},
            {"role": "assistant", "content": text},
        ]
        await self.push_frame(AgentAudioStartedFrame(at=reply.first_audio_at, reply_id=reply.id))
        await self.push_frame(
            AgentTextFrame(at=reply.first_audio_at, reply_id=reply.id, text=text),
            FrameDirection.UPSTREAM,
        )
        await self.clock.sleep(reply.planned_end - self.clock.now())
        if self._speaking is reply:
            self._tasks.pop(reply.id, None)  # finishing normally: don't cancel ourselves
            await self._stop(reply, "completed")

    def _cancel_pending(self, reason: str = "cancelled") -> None:
        reply = self._pending
        if reply is None:
            return
        self._pending = None
        self._end(reply, reason)

    async def _stop(self, reply: Reply, reason: str) -> None:
        self._speaking = None
        self.barge_in.on_agent_stopped(self.clock.now())
        self._end(reply, reason)
        if reason != "completed" and reply.text and reply.first_audio_at is not None:
            self._truncate(reply)
        await self.push_frame(
            AgentAudioStoppedFrame(at=self.clock.now(), reply_id=reply.id, reason=reason)
        )

    def _truncate(self, reply: Reply) -> None:
        """The history keeps only what the caller heard of a stopped reply
        (the same truncation a live agent runs; estimated word timings over
        the reply's planned length, as the replay has no TTS timestamps)."""
        assert reply.first_audio_at is not None and reply.planned_end is not None
        heard = heard_prefix(
            reply.text,
            self.clock.now() - reply.first_audio_at,
            duration_s=reply.planned_end - reply.first_audio_at,
        )
        reply.heard_words, reply.words = heard.words_kept, heard.words_total
        self.history = truncate_history(self.history, heard)

    def _end(self, reply: Reply, reason: str) -> None:
        reply.stopped_at = self.clock.now()
        reply.stop_reason = reason
        task = self._tasks.pop(reply.id, None)
        if task is not None:
            task.cancel()
