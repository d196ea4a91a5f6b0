"""Pipecat function calls through turnkit's tool gate.

:class:`GatedFunctions` registers turnkit :class:`~turnkit.drafting.tools.Tool`
objects on any Pipecat LLM service (``register_function``) with handlers that
send every call through one :class:`~turnkit.drafting.tools.ToolGate`, kept in
step with the turn strategies' drafts:

* an eager draft (the stop strategy's speculation) opens a
  :class:`~turnkit.drafting.tools.DraftContext`; the caller going on discards
  it (none of its writes ever run, its in-flight reads are cancelled);
* the confirmed end confirms the draft when it answers the same words (its
  read results are reused for identical calls in that turn) or begins the
  turn afresh;
* in a confirmed turn writes run at most once per idempotency key (session,
  turn, tool, canonical args), shielded from Pipecat's cancellation on
  interruption, and bounded by the tool's ``timeout_s`` on the engine clock;
  a write waits until the caller has been silent the gate's ``write_hold_s``
  after the commit (the stop strategy passes the VAD's edges), and a new
  user turn meanwhile withdraws it.

Pipecat's LLM service withdraws a speculative inference that asks for a tool
(nothing downstream could undo its side effects). With the gate, what a draft
may do is known per tool, so before that withdrawal the gate starts the
draft's **read** calls as a prefetch; when the turn is confirmed with the same
words, the fresh inference's identical read is answered from the draft's
cache instead of waiting on the tool again. Writes are never prefetched.

Example::

    functions = GatedFunctions([find_slots, book], engine.clock, session_id="call-42")
    functions.register(llm)                     # llm: e.g. OpenAILLMService(base_url=...)
    context = LLMContext(messages, tools=functions.tools_schema())
    stop = TurnkitUserTurnStopStrategy(engine, drafter=EagerDrafter(engine.clock),
                                       functions=functions)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import FunctionCallFromLLM
from pipecat.services.llm_service import FunctionCallParams, LLMService
from turnkit.clock import Clock
from turnkit.drafting.tools import (
    WRITE_HOLD_S,
    DraftContext,
    Tool,
    ToolGate,
    ToolResult,
    Turn,
)

__all__ = ["GatedFunctions"]

log = logging.getLogger(__name__)


class GatedFunctions:
    """turnkit tools as Pipecat functions behind a :class:`ToolGate`.

    Decides nothing itself: the gate decides per call (run, defer, reuse,
    refuse) on the tool's declared effect and the call's context, which this
    object tracks from the stop strategy's draft and turn events.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        clock: Clock,
        *,
        session_id: str = "session",
        write_hold_s: float = WRITE_HOLD_S,
    ) -> None:
        self.gate = ToolGate(tools, clock, session_id=session_id, write_hold_s=write_hold_s)
        self.turn_id = 0
        self.draft: DraftContext | None = None
        self.turn: Turn | None = None
        self.results: list[ToolResult] = []  # every gated call's answer, in order
        self.prefetched = 0  # draft reads started before Pipecat withdrew a speculation
        self._prefetch: set[asyncio.Task[ToolResult]] = set()

    # -- Pipecat wiring ------------------------------------------------------------
    def tools_schema(self) -> ToolsSchema:
        """The tools as Pipecat's provider-neutral schema (for ``LLMContext``)."""
        out = []
        for t in self.gate.tools.values():
            params = t.parameters or {"type": "object", "properties": {}}
            out.append(
                FunctionSchema(
                    name=t.name,
                    description=t.description,
                    properties=params.get("properties", {}),
                    required=params.get("required", []),
                )
            )
        return ToolsSchema(standard_tools=out)

    def register(self, llm: LLMService) -> None:
        """Register every tool on ``llm`` and let its speculative inferences
        prefetch read calls through the gate (see the module docstring)."""
        for name in self.gate.tools:
            # cancel_on_interruption stays True (the LLM waits for results);
            # the gate shields a running write from that cancellation.
            llm.register_function(name, self._handler)
        original = llm.run_function_calls

        async def run_function_calls(calls: Sequence[FunctionCallFromLLM]) -> None:
            gate = getattr(llm, "_speculation_gate", None)
            if gate is not None and gate.is_speculating and self.draft is not None:
                self._prefetch_reads(self.draft, calls)
            await original(calls)

        llm.run_function_calls = run_function_calls  # type: ignore[method-assign]

    async def _handler(self, params: FunctionCallParams) -> None:
        # Pipecat runs handlers only for confirmed inferences (it withdraws a
        # speculative one that wants a tool), so the context is the turn.
        turn = self.turn if self.turn is not None else self.begin_turn()
        res = await self.gate.call(turn, params.function_name, dict(params.arguments))
        self.results.append(res)
        await params.result_callback(_for_llm(res))

    def _prefetch_reads(self, draft: DraftContext, calls: Sequence[FunctionCallFromLLM]) -> None:
        for c in calls:
            t = self.gate.tools.get(c.function_name)
            if t is None or t.effect != "read":
                continue
            self.prefetched += 1
            task = asyncio.ensure_future(self.gate.call(draft, c.function_name, dict(c.arguments)))
            self._prefetch.add(task)
            task.add_done_callback(self._prefetch.discard)

    # -- turn events (called by TurnkitUserTurnStopStrategy) ------------------------
    def start_draft(self, draft_id: int) -> DraftContext:
        """An eager draft began for the current caller turn."""
        if self.draft is not None and self.draft.state == "open":
            self.gate.discard_draft(self.draft)
        self.draft = self.gate.start_draft(self.turn_id + 1, draft_id)
        return self.draft

    def discard_draft(self) -> None:
        """The caller went on: the draft's reads are cancelled, no write runs."""
        if self.draft is not None and self.draft.state == "open":
            self.gate.discard_draft(self.draft)
        self.draft = None

    def confirm_draft(self) -> Turn:
        """The turn ended with the draft's words: the draft is its reply."""
        if self.draft is None or self.draft.state != "open":
            return self.begin_turn()
        self.turn_id = self.draft.turn_id
        self.turn = self.gate.confirm_draft(self.draft)
        return self.turn

    def begin_turn(self) -> Turn:
        """The turn ended without a usable draft: a fresh reply."""
        self.discard_draft()
        self.turn_id += 1
        self.turn = self.gate.begin_turn(self.turn_id)
        return self.turn

    def interrupt(self) -> None:
        """Barge-in, or a new caller turn: the live turn's reads are
        cancelled; running writes finish; writes still held after the
        commit are withdrawn (the caller went on)."""
        if self.turn is not None:
            self.gate.interrupt(self.turn)

    def caller_speech(self, speaking: bool) -> None:
        """The caller's VAD edge: a write held after the commit waits while
        they speak (:meth:`~turnkit.drafting.tools.ToolGate.on_caller_speech`)."""
        self.gate.on_caller_speech(speaking)


def _for_llm(res: ToolResult) -> Any:
    if res.ok and not res.deferred:
        return res.value
    status = (
        "awaiting_confirmation"
        if res.awaiting_confirmation
        else "deferred"
        if res.deferred
        else "timed_out"
        if res.timed_out
        else "error"
    )
    return {"status": status, "message": res.for_llm()}
