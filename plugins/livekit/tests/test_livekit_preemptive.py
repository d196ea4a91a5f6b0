"""LiveKit's preemptive generation and turnkit's ToolGate, in a real session.

LiveKit 1.8 drafts a reply from each final transcript before the turn is
confirmed (``preemptive_generation``) but starts tool executions only once the
reply is scheduled ("only after play()" in ``AgentActivity``). So a draft that
the caller overtakes never runs a tool, and a write runs once, in the
confirmed turn, through turnkit's gate. This test pins that down: if a later
LiveKit ran tools inside drafts, it would fail.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from livekit.agents import Agent, AgentSession, llm
from livekit.plugins import silero

from turnkit.clock import RealClock
from turnkit.drafting import ToolGate, tool
from turnkit_livekit import attach, gated_tools, turn_detector

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from lk_harness import (  # noqa: E402
    CaptureAudioOutput,
    FakeOracleSTT,
    FakeToolLLM,
    FakeTTS,
    WavAudioInput,
    load_call,
)


async def test_preemptive_drafts_run_no_tools_and_writes_wait_for_the_confirmed_turn() -> None:
    # booking-think-03: "I'd like to book a table for ... (0.91 s hold) ... four
    # people on Saturday." The STT's final for the first half starts a draft.
    audio, call = load_call("booking-think-03")
    src = WavAudioInput(audio, 0.0, 7.0)
    events: list[tuple[str, float]] = []

    @tool(effect="write", timeout_s=2)
    async def book(day: str, people: int) -> str:
        events.append(("book", src.position))
        return "booking #7"

    gate = ToolGate([book], RealClock(), session_id="lk-preemptive")
    gated = gated_tools(gate)
    fake_llm = FakeToolLLM([("book", {"day": "saturday", "people": 4})], reply="Booked.")
    detector = turn_detector("semantic-text")  # streaming: turnkit's endpointing decides
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src),
        llm=fake_llm,
        tts=FakeTTS(),
        turn_handling={
            "turn_detection": detector,
            "endpointing": {"min_delay": 0.5, "max_delay": 3.0},
            "preemptive_generation": {"enabled": True},
        },
    )
    session.input.audio = src
    session.output.audio = CaptureAudioOutput()
    gated.bind(session)
    attach(session, detector)  # the session's words to the detector

    def on_item(ev: Any) -> None:
        if isinstance(ev.item, llm.ChatMessage) and ev.item.role == "user":
            events.append(("user_turn", src.position))

    session.on("conversation_item_added", on_item)
    await session.start(Agent(instructions="You take bookings.", tools=gated.tools), record=False)
    await asyncio.wait_for(src.done.wait(), 17)
    await asyncio.sleep(1.0)
    await session.aclose()

    # LLM requests: at least one draft at the hold ("... a table for") besides
    # the confirmed turn's request and its follow-up after the tool result.
    users_in = [
        " ".join(
            m.text_content or ""
            for m in ctx.items
            if isinstance(m, llm.ChatMessage) and m.role == "user"
        )
        for ctx in fake_llm.requests
    ]
    assert any(u.endswith("table for") for u in users_in), users_in  # the discarded draft
    assert [k for k, _ in events] == ["user_turn", "book"], events
    assert gate.executed_writes == 1 and [r.turn_id for r in gate.ledger] == [1]
