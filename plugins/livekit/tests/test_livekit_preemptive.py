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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livekit.agents import Agent, AgentSession, llm
from livekit.plugins import silero

from turnkit.clock import RealClock
from turnkit.drafting import ToolGate, tool
from turnkit.drafting.drafter import Draft
from turnkit.frames import TurnEndFrame
from turnkit_livekit import attach, gated_tools, turn_detector, turn_handling

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))  # engine.py: the local llama-server
from lk_harness import (  # noqa: E402
    CaptureAudioOutput,
    FakeLLM,
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


# -- LiveKit's drafts hold turnkit's commit until their first token ------------------


@dataclass
class _Held:
    at: float  # the commit (the detector's audio clock)
    speech_end: float
    draft: Draft | None  # LiveKit's draft out at the commit, mirrored (None: none)
    hold_ms: float


class _RetrievalAgent(Agent):
    """Edits the chat context in on_user_turn_completed (as retrieval does):
    LiveKit then drops every preemptive draft at the commit."""

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: Any) -> None:
        turn_ctx.add_message(role="assistant", content="(Opening hours: 9 to 5.)")


async def _draft_hold_session(
    llm_: llm.LLM, *, hold: bool, end_s: float = 16.0, agent: type[Agent] = Agent
) -> Any:
    """easy-short-08's first four caller turns through a real AgentSession
    with LiveKit's preemptive generation on (its default); each turnkit
    commit noted with the LiveKit draft that was out then."""
    audio, call = load_call("easy-short-08")
    src = WavAudioInput(audio, 0.0, end_s)
    detector = turn_detector("semantic-text")
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src),
        llm=llm_,
        tts=FakeTTS(),
        turn_handling=turn_handling(detector),
    )
    session.input.audio = src
    session.output.audio = CaptureAudioOutput()
    held: list[_Held] = []
    ttfts: list[float] = []

    def on_end(stream: Any, s: Any) -> None:
        if isinstance(s, TurnEndFrame):
            drafter = stream.drafter
            d = drafter.current if drafter is not None else None
            out = d if d is not None and d.state == "running" else None
            held.append(_Held(s.at, stream.speech_end, out, drafter.hold_ms if drafter else 0.0))

    detector.listeners.append(on_end)
    metrics = attach(session, detector, hold_for_drafts=hold)
    llm_.on("metrics_collected", lambda ev: ttfts.append(ev.ttft * 1000))
    await session.start(agent(instructions="You move appointments."), record=False)
    await asyncio.wait_for(src.done.wait(), end_s + 20)
    await asyncio.sleep(1.0)
    await session.aclose()
    return held, metrics, ttfts


FRAME = 0.032  # the detector's frame: a commit lands on the last one before the token


async def test_fake_llm_livekit_drafts_hold_the_commit_for_their_first_token() -> None:
    # A fake engine whose first token takes 0.6 s. LiveKit drafts a reply
    # at each final transcript (150 ms after the words); a turnkit commit
    # before the draft's first token brings the reply no sooner and cuts
    # off a caller who goes on. Mirrored into the stream's drafter, the
    # draft holds each commit until its first token, learnt from LiveKit's
    # own LLM metrics; without the mirror the same turns commit sooner.
    held, metrics, ttfts = await _draft_hold_session(FakeLLM("Sure.", first_token_s=0.6), hold=True)
    mirror = metrics.preemptive
    assert mirror is not None and mirror.started >= 3 and mirror.first_tokens >= 1, mirror.__dict__
    # The first turn's draft went out before any first token was measured.
    out = [h for h in held if h.draft is not None and h.hold_ms > 0]
    assert len(out) >= 2, held
    for h in out:
        assert h.draft is not None and h.draft.state == "used", h  # LiveKit's words, adopted
        assert 600 <= h.hold_ms <= max(ttfts), (h, ttfts)  # learnt from LiveKit's metrics
        assert h.at >= h.draft.started_at + h.hold_ms / 1000 - FRAME - 1e-6, h
    unheld, metrics_off, _ = await _draft_hold_session(
        FakeLLM("Sure.", first_token_s=0.6), hold=False
    )
    assert metrics_off.preemptive is None
    # The same turns (by where their speech ended) committed sooner without it.
    sooner = [
        h
        for h in out
        for u in unheld
        if abs(u.speech_end - h.speech_end) < 0.1 and u.at < h.at - FRAME
    ]
    assert sooner, (held, unheld)


async def test_fake_llm_drafts_livekit_drops_at_the_commit_hold_nothing() -> None:
    # An agent that edits the chat context when the turn completes: LiveKit
    # drops each draft there and sends a fresh request, so a commit held
    # for the draft's first token would only have delayed the reply. Once
    # LiveKit dropped one, the mirror holds no commit until it plays one.
    held, metrics, _ = await _draft_hold_session(
        FakeLLM("Sure.", first_token_s=0.6), hold=True, agent=_RetrievalAgent
    )
    mirror = metrics.preemptive
    assert mirror is not None and mirror.dropped >= 2 and mirror.adopted == 0, mirror.__dict__
    assert not [h for h in held if h.draft is not None and h.hold_ms > 0], held


async def test_livekit_drafts_hold_the_commit_for_a_real_engines_first_token() -> None:
    # The same with a real engine (llama-server + SmolLM2 through
    # livekit-plugins-openai): the hold is the lowest of the TTFTs LiveKit
    # measured of the engine's requests, drafts included.
    from engine import running_llama_server  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1
    from livekit.plugins import openai

    with running_llama_server() as base_url:
        real = openai.LLM(base_url=base_url, api_key="not-needed", model="smollm2")
        held, metrics, ttfts = await _draft_hold_session(real, hold=True)
    mirror = metrics.preemptive
    assert mirror is not None and mirror.started >= 1 and mirror.first_tokens >= 1, mirror.__dict__
    assert ttfts and all(t > 0 for t in ttfts), ttfts
    out = [h for h in held if h.draft is not None and h.hold_ms > 0]
    assert out, (held, ttfts)
    for h in out:
        assert min(ttfts) <= h.hold_ms <= max(ttfts), (h, ttfts)
        assert h.at >= h.draft.started_at + h.hold_ms / 1000 - FRAME - 1e-6, h
