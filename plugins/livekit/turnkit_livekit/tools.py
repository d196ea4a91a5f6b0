"""turnkit tools as LiveKit function tools, behind a :class:`ToolGate`.

LiveKit 1.8 runs function tools only once a reply is scheduled (its
preemptive generation drafts text, never tool calls), so every call here is
made in a *confirmed* turn, and the gate decides what that means: a write
runs at most once per (session, turn, tool, args) idempotency key, shielded
from barge-in cancellation; a ``confirm=True`` write waits for the caller's
spoken yes; a reply that was interrupted takes no new calls.

:class:`GatedTools` tracks the turns from the session's public events:

* a user ``ChatMessage`` added → a new caller turn (``gate.begin_turn``); its
  words answer the previous turn's pending confirmation first
  (``gate.confirm_spoken``) when they are a plain yes or no;
* a reply (``speech_created``) that ends interrupted → ``gate.interrupt``
  (a write still held after the commit is withdrawn: the caller went on);
* the user's state (``user_state_changed``: speaking or not) →
  ``gate.on_caller_speech``: a write held after the commit waits while the
  caller speaks, and ``write_hold_s`` after they stop.

Example::

    gate = ToolGate([find_slots, book], RealClock(), session_id=ctx.room.name)
    gated = gated_tools(gate, session)
    agent = Agent(instructions=..., tools=gated.tools)
"""

from __future__ import annotations

import logging
from typing import Any

from livekit.agents import AgentSession, function_tool, llm
from livekit.agents.voice.events import (
    ConversationItemAddedEvent,
    SpeechCreatedEvent,
    UserStateChangedEvent,
)

from turnkit.drafting import Tool, ToolGate, Turn
from turnkit.text.normalize import normalize_text

__all__ = ["GatedTools", "gated_tools", "spoken_yes_no"]

log = logging.getLogger(__name__)

_YES = {"yes", "yeah", "yep", "yup", "sure", "correct", "right", "ok", "okay", "please do"}
_NO = {"no", "nope", "don't", "do not", "cancel", "stop", "wait"}


def spoken_yes_no(text: str) -> bool | None:
    """True for a plain yes, False for a plain no, None otherwise (decided on
    the first words only: "yes please book it" is yes, "what time" is neither)."""
    words = normalize_text(text).split()
    for n in (2, 1):
        head = " ".join(words[:n])
        if head in _YES:
            return True
        if head in _NO:
            return False
    return None


class GatedTools:
    """LiveKit function tools for every tool of ``gate`` (see the module docstring)."""

    def __init__(self, gate: ToolGate, session: AgentSession | None = None) -> None:
        self.gate = gate
        self.turn_id = 0
        self.turn: Turn | None = None
        self.tools: list[llm.RawFunctionTool] = [self._wrap(t) for t in gate.tools.values()]
        if session is not None:
            self.bind(session)

    def bind(self, session: AgentSession) -> None:
        session.on("conversation_item_added", self._on_item)
        session.on("speech_created", self._on_speech)
        session.on("user_state_changed", self._on_user_state)

    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        self.gate.on_caller_speech(ev.new_state == "speaking")

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage) or item.role != "user":
            return
        prev = self.turn
        if prev is not None and prev.awaiting_confirmation:
            yes = spoken_yes_no(item.text_content or "")
            if yes is not None:
                self.gate.confirm_spoken(prev, yes)
        self.turn_id += 1
        self.turn = self.gate.begin_turn(self.turn_id)

    def _on_speech(self, ev: SpeechCreatedEvent) -> None:
        turn = self.turn

        def done(handle: Any) -> None:
            if turn is not None and handle.interrupted:
                self.gate.interrupt(turn)

        ev.speech_handle.add_done_callback(done)

    def _current(self) -> Turn:
        if self.turn is None:  # the agent speaks first (a greeting that calls a tool)
            self.turn = self.gate.begin_turn(self.turn_id)
        return self.turn

    def _wrap(self, t: Tool) -> llm.RawFunctionTool:
        async def call(raw_arguments: dict[str, Any]) -> str:
            result = await self.gate.call(self._current(), t.name, raw_arguments)
            log.debug("tool %s -> %s", t.name, result)
            return result.for_llm()

        return function_tool(
            call,
            raw_schema={
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        )


def gated_tools(gate: ToolGate, session: AgentSession | None = None) -> GatedTools:
    """LiveKit function tools for ``gate``'s tools, bound to ``session``'s turns."""
    return GatedTools(gate, session)
