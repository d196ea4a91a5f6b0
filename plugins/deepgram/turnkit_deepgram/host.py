"""turnkit's reply path behind turn frames (from Flux or any turnkit detector).

:class:`DraftingHost` is a :class:`~turnkit.drafting.responder.Responder`
host: it forwards turn frames to the Responder, which decides everything
about the reply — eager drafts (:class:`~turnkit.drafting.EagerDrafter`),
what a draft's tool calls may do (:class:`~turnkit.drafting.ToolGate`),
fillers for slow tools, the history (what the caller heard, with a
:class:`~turnkit.barge_in.cursor.PlaybackCursor`), and the "agent still
talking" rule (caller speech the agent talked through is not a turn). The
host decides nothing; it maps frames to the Responder's evidence:

* ``TranscriptFrame`` → ``on_transcript`` (and it keeps the words);
* ``TurnEagerFrame`` (Flux ``EagerEndOfTurn``) → ``on_eager``: a held draft;
* ``VADSpeechStartedFrame`` / ``TurnResumedFrame`` (Flux ``TurnResumed``)
  → ``on_speech``: the draft waits for the caller's words (an ``Update``
  that changes the transcript voids it; an ``EndOfTurn`` on the words it
  answers uses it);
* ``TurnEndFrame`` (Flux ``EndOfTurn``) → ``on_end``: the draft is released
  or a fresh request starts;
* ``AgentAudioStartedFrame`` / ``AgentAudioStoppedFrame`` → ``on_agent_audio``
  (from your output: while the agent talks, an end is not a turn); a reply
  that played to its end (``reason="completed"``) is followed by ``on_end``
  where the caller's turn ended over its last words (``owed_end(completed=True)``);
* ``InterruptionFrame`` → ``on_stop``: a barge-in (``on_interrupted``, then
  ``on_end`` if a turn that ended while the agent talked is owed an answer),
  or, with ``reason=REPLY_CANCELLED``, the caller went on before any of the
  reply played (``on_cancel_pending``: the turn continues); a stop naming a
  reply already superseded is ignored.

The reply's text goes to ``emit`` (:class:`~turnkit.frames.LLMTextFrame`,
for your TTS). The engine is any OpenAI-compatible
:class:`~turnkit.llm.client.ChatClient` (or anything with its ``stream``).

Example::

    host = DraftingHost(clock, ChatClient(url), emit=speak, gate=ToolGate(tools, clock))
    for frame in mapper.map(message):
        await host.handle(frame)
    host.turns[-1].reply_id          # the reply the Responder emits for it
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.clock import Clock
from turnkit.drafting import (
    Draft,
    EagerDrafter,
    Responder,
    ResponderFrames,
    ResponderParams,
    ToolGate,
)
from turnkit.drafting.responder import ChatEngine
from turnkit.fillers import FillerScheduler
from turnkit.frames import LLMTextFrame

__all__ = ["DraftingHost", "HostTurn"]

log = logging.getLogger(__name__)

Emit = Callable[[LLMTextFrame], Awaitable[None] | None]


@dataclass(slots=True)
class HostTurn:
    """One confirmed caller turn as the host handled it."""

    turn_id: int
    text: str
    decided_at: float
    drafted: bool  # the reply is a confirmed eager draft
    draft_started_at: float | None
    reply_id: int | None = None


class DraftingHost(ResponderFrames):
    """Forwards turn frames to a :class:`Responder` (see the module docstring;
    the mapping is :class:`~turnkit.drafting.ResponderFrames`, shared with
    turnkit's pipeline), and records the turns and drafts."""

    def __init__(
        self,
        clock: Clock,
        engine: ChatEngine | Any,
        *,
        emit: Emit | None = None,
        gate: ToolGate | None = None,
        drafter: EagerDrafter | None = None,
        fillers: FillerScheduler | None = None,
        cursor: PlaybackCursor | None = None,
        params: ResponderParams | None = None,
        system_prompt: str | None = None,
    ) -> None:
        self.clock = clock
        self.gate = gate
        self.drafter = drafter if drafter is not None else EagerDrafter(clock)
        self._user_emit = emit
        kw: dict[str, Any] = {} if system_prompt is None else {"system_prompt": system_prompt}
        responder = Responder(
            engine,
            clock,
            emit=self._emit,
            drafter=self.drafter,
            gate=gate,
            fillers=fillers,
            cursor=cursor,
            params=params,
            **kw,
        )
        super().__init__(responder)
        self.turns: list[HostTurn] = []
        self.drafts: list[Draft] = []
        # The text each reply emitted, by reply id, once complete.
        self.replies: dict[int, str] = {}
        self._parts: dict[int, list[str]] = {}

    async def _emit(self, frame: LLMTextFrame) -> None:
        if frame.text:
            self._parts.setdefault(frame.reply_id, []).append(frame.text)
        if frame.final:
            self.replies[frame.reply_id] = "".join(self._parts.pop(frame.reply_id, []))
        if self._user_emit is not None:
            out = self._user_emit(frame)
            if inspect.isawaitable(out):
                await out

    async def eager(self) -> int | None:
        reply_id = await super().eager()
        if reply_id is not None and self.drafter.current is not None:
            self.drafts.append(self.drafter.current)
        return reply_id

    async def end(self, at: float, speech_end: float | None = None) -> int | None:
        """A confirmed end at ``at`` of speech that ended at ``speech_end``:
        the Responder answers it (not while the agent talks, nor before any
        words came), and the turn is recorded."""
        r = self.responder
        draft = self.drafter.current
        used = r.stats.drafts_used
        reply_id = await super().end(at, speech_end)
        if reply_id is None:
            log.debug("turn end at %.3f not answered now: agent talking, or no words yet", at)
            return None
        drafted = r.stats.drafts_used > used
        self.turns.append(
            HostTurn(
                r.stats.turns,
                self.text,
                at,
                drafted,
                draft.started_at if drafted and draft is not None else None,
                reply_id,
            )
        )
        return reply_id

    async def idle(self) -> None:
        """Wait until every reply has finished streaming."""
        await self.responder.idle()

    async def aclose(self) -> None:
        """The call ended: cancel what is still running and let it unwind."""
        await self.responder.aclose()
