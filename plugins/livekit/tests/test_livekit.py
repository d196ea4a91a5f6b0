"""turnkit-livekit with real livekit-agents objects, offline.

Sessions are real ``AgentSession``s without a room, fed corpus audio in real
time through our own ``AudioInput``/``AudioOutput`` subclasses, with Silero VAD
(livekit-plugins-silero) and fakes named as such for STT/LLM/TTS
(tests/lk_harness.py). Each session test takes about the audio's length.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.turn import _StreamingTurnDetector, _StreamingTurnDetectorStream
from livekit.plugins import silero

from turnkit.clock import RealClock
from turnkit.detectors.semantic_text import DEFAULT_THRESHOLD
from turnkit.drafting import ToolGate, tool
from turnkit.frames import TurnEagerFrame, TurnEndFrame
from turnkit_livekit import (
    TurnkitStreamingDetector,
    TurnkitTextDetector,
    attach,
    gated_tools,
    turn_detector,
)
from turnkit_livekit.tools import spoken_yes_no

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from lk_harness import (  # noqa: E402
    CaptureAudioOutput,
    FakeLLM,
    FakeOracleSTT,
    FakeToolLLM,
    FakeTTS,
    WavAudioInput,
    load_call,
)

# booking-think-03, first caller turn: "I'd like to book a table for ...
# (0.91 s mid-sentence hold) ... four people on Saturday." (1.165-4.711 s)
CALL = "booking-think-03"
HOLD = (2.462, 3.376)
TURN_END = 4.711


async def run_session(
    detector: Any,
    *,
    end_s: float = 7.0,
    llm_: llm.LLM | None = None,
    tools: list[Any] | None = None,
    min_delay: float = 0.5,
    setup: Any = None,
    until: Any = None,
) -> dict[str, Any]:
    """``until(out)``: after the audio, also wait (240 s at most) for this
    event, e.g. a real engine's reply starting to play, however slow the
    machine."""
    audio, call = load_call(CALL)
    src = WavAudioInput(audio, 0.0, end_s)
    out = CaptureAudioOutput()
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src),
        llm=llm_ or FakeLLM(),
        tts=FakeTTS(),
        turn_handling={
            "turn_detection": detector,
            "endpointing": {"min_delay": min_delay, "max_delay": 3.0},
            "preemptive_generation": {"enabled": False},
        },
    )
    session.input.audio = src
    session.output.audio = out
    users: list[tuple[float, llm.ChatMessage]] = []

    def on_item(ev: Any) -> None:
        if isinstance(ev.item, llm.ChatMessage) and ev.item.role == "user":
            users.append((src.position, ev.item))

    session.on("conversation_item_added", on_item)
    metrics = attach(session, detector) if not isinstance(detector, str) else None
    extra = setup(session) if setup is not None else None
    await session.start(Agent(instructions="You take bookings.", tools=tools or []), record=False)
    await asyncio.wait_for(src.done.wait(), end_s + 10)
    if until is not None:
        async with asyncio.timeout(240):
            while not until(out):
                await asyncio.sleep(0.02)
    await asyncio.sleep(1.0)
    await session.aclose()
    return {"users": users, "metrics": metrics, "out": out, "extra": extra}


# -- protocol shape ------------------------------------------------------------------


def test_text_detector_is_livekit_text_protocol_only_on_request() -> None:
    # By default every spec streams, so turnkit's endpointing decides.
    for spec in ("semantic-text", "llm-eou"):
        assert isinstance(turn_detector(spec), TurnkitStreamingDetector)
    det = turn_detector("semantic-text", livekit_waits=True)
    assert isinstance(det, TurnkitTextDetector)
    assert not hasattr(det, "stream")  # LiveKit picks the protocol by this attribute
    assert not isinstance(det, _StreamingTurnDetector)
    assert det.model == "semantic-text" and det.provider == "turnkit"


def test_audio_detectors_are_livekit_streaming_protocol() -> None:
    for spec in ("silence:stop_ms=600", "smart-turn", "fused"):
        det = turn_detector(spec)
        assert isinstance(det, TurnkitStreamingDetector)
        assert isinstance(det, _StreamingTurnDetector)


async def test_stream_is_livekit_stream_protocol() -> None:
    stream = TurnkitStreamingDetector("silence").stream()
    try:
        assert isinstance(stream, _StreamingTurnDetectorStream)
        assert await stream.supports_language(None)
        assert await stream.unlikely_threshold("en") == 0.5
    finally:
        await stream.aclose()


async def test_a_sip_line_rate_holds_over_the_frames_rate() -> None:
    """A SIP call reaches the agent as 16 kHz frames of an 8 kHz line: with
    ``line_rate=8000`` the stream's detector weighs the audio as telephone
    band once frames arrive."""
    import numpy as np
    from livekit import rtc

    stream = TurnkitStreamingDetector("fused", line_rate=8000).stream()
    try:
        pcm = np.zeros(320, np.int16).tobytes()
        for _ in range(10):
            stream.push_audio(rtc.AudioFrame(pcm, 16000, 1, 320))
        for _ in range(6000):  # the stream's task takes them: wait for it (60 s cap)
            if stream.frames:
                break
            await asyncio.sleep(0.01)
        assert stream.frames
        assert stream.timeline.source_rate == 8000
        assert stream.detector.scorer.audio_factor < 1.0
    finally:
        await stream.aclose()


async def test_a_segmented_stt_said_so_reaches_the_streams_detector() -> None:
    """An agent whose STT writes each segment once the VAD closed it (a
    non-streaming STT behind LiveKit's StreamAdapter) says so:
    ``recogniser="segmented"`` reaches every stream's detector, which then
    judges pauses on what that STT has written (``judged_text``)."""
    for kind, segmented in (("segmented", True), ("streaming", False)):
        stream = TurnkitStreamingDetector("fused", recogniser=kind).stream()  # type: ignore[arg-type]
        try:
            assert stream.detector.endpointing._streaming.segmented is segmented
        finally:
            await stream.aclose()


def test_bad_specs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="not a text detector"):
        TurnkitTextDetector("smart-turn")
    with pytest.raises(ValueError, match="unknown parameter"):
        turn_detector("silence:stop=3")
    with pytest.raises(ValueError, match="not a text detector"):
        turn_detector("fused", livekit_waits=True)


async def test_text_detector_scores_from_chat_ctx() -> None:
    det = TurnkitTextDetector("semantic-text")
    ctx = llm.ChatContext()
    ctx.add_message(role="assistant", content="What can I do for you?")
    ctx.add_message(role="user", content="I'd like to book a table for")
    low = await det.predict_end_of_turn(ctx)
    ctx.add_message(role="user", content="four people on Saturday.")
    high = await det.predict_end_of_turn(ctx)
    threshold = await det.unlikely_threshold("en")
    assert low < threshold <= high
    assert det.last["text"] == "i'd like to book a table for four people on saturday"
    assert await det.supports_language("en") and not await det.supports_language("fr")


async def test_text_detector_enforces_a_timeout() -> None:
    """LiveKit calls predict_end_of_turn without a timeout: a silent engine
    must not hold the turn. A real socket that accepts and never answers."""

    async def black_hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(30)

    server = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        det = TurnkitTextDetector(
            f"llm-eou:base_url=http://127.0.0.1:{port}/v1,timeout_ms=60000",
            timeout_s=0.3,
            on_timeout=1.0,
        )
        ctx = llm.ChatContext()
        ctx.add_message(role="user", content="book a table")
        t0 = asyncio.get_running_loop().time()
        p = await det.predict_end_of_turn(ctx)
        elapsed = asyncio.get_running_loop().time() - t0
        assert p == 1.0 and det.timeouts == 1
        assert elapsed < 5  # bounded by timeout_s, not the engine's 60 s
        assert det.last["reason"].startswith("timeout")
    finally:
        server.close()


async def test_text_detector_on_real_llama_server() -> None:
    from engine import running_llama_server  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1

    with running_llama_server() as base_url:
        det = TurnkitTextDetector(f"llm-eou:base_url={base_url},timeout_ms=20000", timeout_s=20)
        ctx = llm.ChatContext()
        ctx.add_message(role="assistant", content="What can I do for you?")
        ctx.add_message(role="user", content="I'd like to book a table for four on Saturday.")
        p = await det.predict_end_of_turn(ctx)
        assert 0.0 <= p <= 1.0 and det.timeouts == 0 and det.errors == 0
        assert det.last["reason"] == "model" and det.last["compute_ms"] > 0


# -- real sessions -------------------------------------------------------------------


async def test_session_text_detector_waits_through_a_mid_sentence_hold() -> None:
    """LiveKit's VAD endpointing cuts the caller off at the 0.91 s hold;
    with turnkit's semantic-text scorer on LiveKit's text protocol (opt-in:
    LiveKit owns the waits) the session waits ("...a table for" reads
    unfinished) and commits one turn with all the words."""
    base = await run_session("vad")
    texts = [m.text_content for _, m in base["users"]]
    assert len(texts) == 2 and texts[0].endswith("table for"), texts
    assert HOLD[0] < base["users"][0][0] < HOLD[1]  # committed inside the hold

    det = turn_detector("semantic-text", livekit_waits=True)
    run = await run_session(det)
    assert [m.text_content for _, m in run["users"]] == [
        "I'd like to book a table for four people on Saturday"
    ]
    assert run["users"][0][0] > TURN_END
    assert det.calls >= 2  # asked at the hold and at the end
    m = run["users"][0][1].metrics
    assert m["turnkit_detector"] == "semantic-text"
    assert m["turnkit_end_of_turn_probability"] >= det.threshold
    assert "end_of_turn_delay" in m  # LiveKit's own keys stay
    assert run["metrics"].turns == [{k: v for k, v in m.items() if k.startswith("turnkit_")}]


async def test_session_semantic_text_streams_through_turnkit_endpointing() -> None:
    """The default for a text spec: the streaming protocol with the
    session's transcripts pushed in (attach), so turnkit's endpointing
    decides — the hold reads unfinished (max wait), the end finished
    (min wait 250 ms) — and LiveKit commits when turnkit does."""
    signals: list[Any] = []
    det = turn_detector("semantic-text", prediction_timeout_s=5.0, on_signal=signals.append)
    assert isinstance(det, TurnkitStreamingDetector)
    run = await run_session(det, end_s=8.0, min_delay=0.2)
    users = run["users"]
    assert [m.text_content for _, m in users] == [
        "I'd like to book a table for four people on Saturday"
    ]
    stream = det.streams[0]
    assert stream.transcripts > 0  # the words came in through attach()
    ends = [s for s in stream.signals if isinstance(s, TurnEndFrame)]
    end = ends[0]  # the booking turn (the next caller turn starts before 8 s)
    assert all(e.at > 5.5 for e in ends[1:])
    # turnkit's endpointing decided, after the turn's end and not in the hold
    assert end.at > TURN_END
    assert end.probability is not None and end.probability >= DEFAULT_THRESHOLD
    assert stream.end_silence_ms[id(end)] == pytest.approx(250, abs=40)  # min_wait_ms
    # LiveKit committed on turnkit's decision (audio time of the commit
    # within LiveKit's min_delay and a frame of slack of it)
    assert end.at - 0.05 <= users[0][0] < end.at + 0.2 + 0.3
    # the endpointing's eager signal ran too (semantic-text eager 0.34)
    assert any(isinstance(s, TurnEagerFrame) for s in signals)
    m = users[0][1].metrics
    assert m["turnkit_detector"] == "semantic-text"
    assert m["turnkit_end_of_turn_probability"] == end.probability
    assert m["turnkit_silence_ms"] == pytest.approx(250, abs=40)


async def test_session_streaming_detector_decides_when_livekit_commits() -> None:
    """A streaming turnkit detector (silence, 1.5 s) holds LiveKit's commit
    through the 0.91 s hold and until its own decision after the turn."""
    det = turn_detector("silence:stop_ms=1500", prediction_timeout_s=5.0)
    run = await run_session(det, end_s=8.0, min_delay=0.2)
    users = run["users"]
    assert [m.text_content for _, m in users] == [
        "I'd like to book a table for four people on Saturday"
    ]
    committed = users[0][0]
    assert TURN_END + 1.5 <= committed < TURN_END + 1.5 + 0.6
    stream = det.streams[0]
    assert stream.predictions >= 2  # LiveKit asked at the hold and at the end
    m = users[0][1].metrics
    assert m["turnkit_detector"] == "silence:stop_ms=1500"
    assert m["turnkit_silence_ms"] == pytest.approx(1500, abs=40)
    assert m["turnkit_reason"].endswith("ms silence")


async def test_session_smart_turn_records_its_evidence() -> None:
    det = turn_detector("smart-turn")
    run = await run_session(det)
    assert run["users"], "no turn committed"
    for _, msg in run["users"]:
        m = msg.metrics
        assert m["turnkit_detector"] == "smart-turn"
        assert 0.0 <= m["turnkit_end_of_turn_probability"] <= 1.0
        # compute_ms is the part of the model's cost still running at the
        # decision (0 when it finished during the silence); the model's own
        # cost is in the reason.
        model_ms = re.search(r"\(model (\d+) ms\)", m["turnkit_reason"])
        assert model_ms is not None and int(model_ms.group(1)) > 0
        # what delays the decision is at most the model's cost
        assert m["turnkit_compute_ms"] <= int(model_ms.group(1)) + 1
        assert m["turnkit_silence_ms"] < 600  # it decided, LiveKit did not time out
    stream = det.streams[0]
    assert stream.vad.speech_end > 4.0  # it heard the whole turn


async def test_gated_tools_in_a_session() -> None:
    """A write tool called by the LLM runs once, through the gate, in the
    confirmed turn (after the gate's hold: the caller silent WRITE_HOLD_S
    after the commit, as the session's user state says); a confirm=True
    write waits for a spoken yes."""
    clock = RealClock()
    booked: list[dict[str, Any]] = []
    looked: list[str] = []

    @tool(effect="read", timeout_s=2)
    async def find_slots(day: str) -> list[str]:
        looked.append(day)
        return ["19:30"]

    @tool(effect="write", timeout_s=2)
    async def book(day: str, people: int) -> str:
        booked.append({"day": day, "people": people})
        return "booking #7"

    @tool(effect="write", timeout_s=2, confirm=True)
    async def charge_deposit(amount: int) -> str:
        return "charged"

    gate = ToolGate([find_slots, book, charge_deposit], clock, session_id="lk-test")
    calls = [
        ("find_slots", {"day": "saturday"}),
        ("book", {"day": "saturday", "people": 4}),
        ("charge_deposit", {"amount": 20}),
    ]
    # The caller's speech as the session's user state tells the gate (a
    # write held after the commit waits while they speak).
    edges: list[bool] = []
    tell = gate.on_caller_speech

    def spy(speaking: bool) -> None:
        edges.append(speaking)
        tell(speaking)

    gate.on_caller_speech = spy  # type: ignore[method-assign]
    # The Agent takes the tools; the same object follows the session's turns.
    gated = gated_tools(gate)

    def bind(session: AgentSession) -> None:
        gated.bind(session)

    run = await run_session(
        turn_detector("semantic-text"),
        llm_=FakeToolLLM(calls, reply="Booked."),
        tools=gated.tools,
        setup=bind,
    )
    assert len(run["users"]) == 1
    assert looked == ["saturday"]
    assert booked == [{"day": "saturday", "people": 4}]
    assert gate.executed_writes == 1
    [rec] = gate.ledger
    assert rec.name == "book" and rec.status == "ok" and rec.turn_id == 1
    assert gate.current_turn is not None
    assert gate.current_turn.awaiting_confirmation == [("charge_deposit", {"amount": 20})]
    assert edges[:2] == [True, False]  # LiveKit's user_state_changed: speaking, then not


def test_spoken_yes_no() -> None:
    assert spoken_yes_no("Yes, please.") is True
    assert spoken_yes_no("okay") is True
    assert spoken_yes_no("No, don't.") is False
    assert spoken_yes_no("What time is it?") is None


async def test_session_with_real_llm_on_llama_server() -> None:
    """The example's setup end to end with a real OpenAI-compatible engine
    (llama-server + SmolLM2 via livekit-plugins-openai with base_url): the
    turnkit-decided turn gets a real streamed reply that starts playing."""
    from engine import running_llama_server  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1
    from livekit.plugins import openai

    with running_llama_server() as base_url:
        real = openai.LLM(base_url=base_url, api_key="not-needed", model="smollm2")
        run = await run_session(
            turn_detector("semantic-text"),
            llm_=real,
            # The caller's audio up to just before the recorded agent's
            # echo (6.35 s) and the "uh-huh" (7.5 s): on a loaded machine
            # the engine's first token came after them, LiveKit took them
            # for the caller speaking again and dropped the reply unplayed.
            end_s=6.2,
            # The reply's first audio, not its end: how long SmolLM2 goes on
            # (and how fast a loaded machine generates it) is not the point.
            until=lambda out: any(s["duration"] > 0 for s in out.segments),
        )
    assert len(run["users"]) == 1
    played = [s for s in run["out"].segments if s["duration"] > 0]
    assert played, "the engine's reply was not spoken"


async def test_recorder_round_trip(tmp_path: Path) -> None:
    """A recorded LiveKit session loads as turnkit.recording/v1 and replays."""
    from turnkit.replay.recording import load_recording
    from turnkit_livekit.recorder import record_session

    folder = tmp_path / "lk-call"
    det = turn_detector("semantic-text")
    await run_session(det, setup=lambda s: record_session(s, folder))
    rec = load_recording(folder, check_audio=True)
    turns = rec.caller_turns
    assert len(turns) == 1
    assert "saturday" in turns[0].text.lower()
    # The caller's speech (1.165-4.711 s), by LiveKit's VAD at the edges it
    # stamps (Silero's own end lags the label ~0.1-0.2 s: 4.88 s here); before,
    # its end was when the VAD was sure, min_silence_duration (0.3 s) later:
    # 5.20 s. Bounds left wide for a loaded machine's scheduling.
    assert 1.0 < turns[0].start < 1.6 and 4.5 < turns[0].end < 5.1, turns[0]
    assert len(rec.agent_turns) == 1
    assert rec.agent_turns[0].text == "Sure, a table for four on Saturday."  # FakeLLM's reply
    import subprocess

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnkit.cli",
            "replay",
            str(folder),
            "--detector",
            "silence",
            "--detector",
            "semantic-text",
            "--compute",
            "fixed",
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # The live detector's decisions were recorded: the replay of the same
    # detector is held against them, another detector's is not.
    assert det.listeners == [] or all(
        getattr(f, "__name__", "") != "on_decision" for f in det.listeners
    )  # the session closed: its recorder no longer listens
    silence, semantic = json.loads((tmp_path / "r.json").read_text())["results"]
    assert silence["live_agreement"] is None
    live = semantic["live_agreement"]
    assert live is not None and live["live_decisions"] >= 1, live
    print("live agreement:", live)
