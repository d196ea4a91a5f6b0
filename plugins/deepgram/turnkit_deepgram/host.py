"""Eager drafting and tool gating driven by turn frames (from Flux or any
turnkit detector).

:class:`DraftingHost` is the glue between turn frames and the two policies
that decide about speculative replies: :class:`~turnkit.drafting.EagerDrafter`
(when a draft may start, must be dropped, or may be used) and
:class:`~turnkit.drafting.ToolGate` (what a draft's tool calls may do). It
owns nothing else: the reply itself is the caller's ``respond(text, ctx)``
coroutine (an LLM request whose tool calls go through ``gate.call(ctx, ...)``).

Wiring (as :mod:`turnkit.drafting.tools` prescribes):

* ``TurnEagerFrame`` → ``drafter.on_eager`` → a draft: ``gate.start_draft`` and
  ``respond(text, draft_ctx)`` starts as a task (held, not spoken);
* speech (``VADSpeechStartedFrame``, ``TurnResumedFrame``) or changed words
  → the draft is cancelled: its task is cancelled, ``gate.discard_draft``;
* ``TurnEndFrame`` → ``drafter.on_end``: ``use`` confirms the draft
  (``gate.confirm_draft``: its deferred writes run now) and its task is the
  reply; ``fresh`` begins the turn (``gate.begin_turn``) and starts
  ``respond(text, turn)``.

Example::

    host = DraftingHost(clock, respond=my_llm_reply, gate=ToolGate(tools, clock))
    for frame in mapper.map(message):
        await host.handle(frame)
    reply = host.turns[-1].reply          # the task whose result is spoken
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from turnkit.clock import Clock
from turnkit.drafting import Draft, DraftContext, EagerDrafter, ToolGate, Turn
from turnkit.frames import (
    Frame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    VADSpeechStartedFrame,
)

__all__ = ["DraftingHost", "HostTurn", "Respond"]

log = logging.getLogger(__name__)

# respond(text, ctx): ctx is the gate context (DraftContext or Turn), or None
# when the host runs without a gate.
Respond = Callable[[str, DraftContext | Turn | None], Awaitable[Any]]


@dataclass(slots=True)
class HostTurn:
    """One confirmed caller turn as the host handled it."""

    turn_id: int
    text: str
    decided_at: float
    drafted: bool  # the reply is a confirmed eager draft
    draft_started_at: float | None
    reply: asyncio.Task[Any] | None = field(default=None, repr=False)


class DraftingHost:
    """Feeds turn frames to an :class:`EagerDrafter` (and a :class:`ToolGate`)
    and runs the caller's ``respond`` for drafts and confirmed turns."""

    def __init__(
        self,
        clock: Clock,
        respond: Respond,
        *,
        gate: ToolGate | None = None,
        drafter: EagerDrafter | None = None,
    ) -> None:
        self.clock = clock
        self.respond = respond
        self.gate = gate
        self.drafter = drafter if drafter is not None else EagerDrafter(clock)
        self.text = ""
        self.turns: list[HostTurn] = []
        self.drafts: list[Draft] = []
        self._turn_id = 0
        self._draft: tuple[Draft, DraftContext | None, asyncio.Task[Any]] | None = None

    async def handle(self, frame: Frame) -> None:
        """Act on one frame (others pass unseen)."""
        if isinstance(frame, VADSpeechStartedFrame | TurnResumedFrame):
            self._dropped(self.drafter.on_speech())
        elif isinstance(frame, TranscriptFrame):
            self.text = frame.text
            self._dropped(self.drafter.on_transcript(frame.text))
        elif isinstance(frame, TurnEagerFrame):
            self._eager()
        elif isinstance(frame, TurnEndFrame):
            self._end(frame)

    async def aclose(self) -> None:
        """Cancel a running draft and wait for the replies of all turns."""
        self._dropped(self.drafter.on_speech())
        for t in self.turns:
            if t.reply is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t.reply

    # -- decisions ---------------------------------------------------------------
    def _eager(self) -> None:
        before = self._draft
        draft = self.drafter.on_eager(self.text)
        if before is not None and before[0].state == "cancelled":
            self._dropped(before[0])  # superseded by a draft for new words
        if draft is None:
            return
        self.drafts.append(draft)
        ctx = self.gate.start_draft(self._turn_id + 1, draft.id) if self.gate else None
        task = asyncio.ensure_future(self.respond(self.text, ctx))
        self._draft = (draft, ctx, task)

    def _end(self, frame: TurnEndFrame) -> None:
        self._turn_id += 1
        action, draft = self.drafter.on_end(self.text)
        running = self._draft
        if action == "use" and running is not None and running[0] is draft:
            _, ctx, task = running
            self._draft = None
            if self.gate is not None and ctx is not None:
                self.gate.confirm_draft(ctx)
            self.turns.append(
                HostTurn(self._turn_id, self.text, frame.at, True, draft.started_at, task)
            )
            return
        if running is not None:
            self._dropped(running[0])
        turn = self.gate.begin_turn(self._turn_id) if self.gate else None
        task = asyncio.ensure_future(self.respond(self.text, turn))
        self.turns.append(HostTurn(self._turn_id, self.text, frame.at, False, None, task))

    def _dropped(self, draft: Draft | None) -> None:
        """The drafter cancelled ``draft``: stop its work and discard its context."""
        running = self._draft
        if draft is None or running is None or running[0] is not draft:
            return
        d, ctx, task = running
        self._draft = None
        task.cancel()
        if self.gate is not None and ctx is not None:
            self.gate.discard_draft(ctx)
        log.debug("draft %d dropped: %s", d.id, d.cancel_reason)
