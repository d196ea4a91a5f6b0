"""The STT's word times reach turnkit's detector in a real LiveKit
``AgentSession`` (real Silero VAD; the fake oracle STT of lk_harness gives
word times as LiveKit's STT plugins do: seconds of the audio its stream
received plus the stream's ``start_time_offset``). Each session runs for
the audio's length in real time."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.events import AgentStateChangedEvent
from livekit.plugins import silero

from turnkit.frames import TranscriptFrame
from turnkit.replay.recording import load_recording
from turnkit_livekit import WordTimesAgent, attach, turn_detector, turn_handling
from turnkit_livekit.noted_words import NotedWords
from turnkit_livekit.recorder import record_session
from turnkit_livekit.word_times import reply_text

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from lk_harness import (  # noqa: E402
    CaptureAudioOutput,
    FakeLLM,
    FakeOracleSTT,
    FakeTTS,
    WavAudioInput,
    load_call,
)

CALL = "booking-think-03"  # first caller turn 1.165-4.711 s
END_S = 6.0


async def _session(
    agent: Agent,
    record_to: Path | None = None,
    *,
    wire: Any = None,
    reply: bool = False,
) -> tuple[list[TranscriptFrame], list[Any], dict[str, Any]]:
    """``wire(session, detector, speaker)`` once the session runs; ``reply``: also
    wait for the agent's reply to the first turn to be added to the chat."""
    audio, call = load_call(CALL)
    src = WavAudioInput(audio, 0.0, END_S)
    det = turn_detector("semantic-text", prediction_timeout_s=5.0)
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src),
        llm=FakeLLM(),
        tts=FakeTTS(),
        turn_handling=turn_handling(det, preemptive_generation={"enabled": False}),
    )
    session.input.audio = src
    speaker = CaptureAudioOutput()
    session.output.audio = speaker
    items: dict[str, list[llm.ChatMessage]] = {"user": [], "assistant": []}
    session.on(
        "conversation_item_added",
        lambda ev: (
            items[ev.item.role].append(ev.item)
            if isinstance(ev.item, llm.ChatMessage) and ev.item.role in items
            else None
        ),
    )
    users, replies = items["user"], items["assistant"]
    attach(session, det)
    await session.start(agent, record=False)
    if record_to is not None:
        record_session(session, record_to)
    seen: list[TranscriptFrame] = []
    stream = det.streams[-1]
    inner = stream.detector.on_transcript

    async def tap(frame: TranscriptFrame) -> Any:
        seen.append(frame)
        return await inner(frame)

    stream.detector.on_transcript = tap  # type: ignore[method-assign]
    if wire is not None:
        wire(session, det, speaker)
    await asyncio.wait_for(src.done.wait(), END_S + 10)
    # The first turn's commit (and the reply's item): events, however busy
    # the machine.
    async with asyncio.timeout(60):
        while not users or (reply and not replies):
            await asyncio.sleep(0.02)
    await session.aclose()
    return seen, users, call


async def test_word_times_agent_gives_the_detector_each_words_time() -> None:
    seen, users, call = await _session(WordTimesAgent(instructions="You take bookings."))
    said = {(w["text"], w["start"], w["end"]) for e in call["events"] for w in e.get("words", [])}
    assert seen and all(f.words for f in seen)
    first = next(e for e in call["events"] if e["type"] == "caller_turn")
    for f in seen:
        # the oracle's own times, through LiveKit's wall-clock offset and the
        # stream's audio clock: one offset for the result (its wall-clock base
        # runs ahead of the audio by however long a loaded machine stalled:
        # 0.2 s seen on CI), each word's own times exact
        x0 = next(x for x in said if x[0] == f.words[0].text and abs(x[1] - f.words[0].start) < 0.6)
        off = f.words[0].start - x0[1]
        for w in f.words:
            near = [x for x in said if x[0] == w.text and abs(x[2] + off - w.end) < 0.03]
            assert near, (w, f.text, off)
        assert f.spoken_until == f.words[-1].end
    # the turn was committed with all its words
    assert [m.text_content for m in users][:1] == [first["text"].rstrip(".")]


async def test_a_plain_agent_gives_the_detector_no_word_times() -> None:
    """LiveKit's transcript events carry text only: without the tap the
    stream stamps each transcript with the VAD's last speech end."""
    seen, users, _ = await _session(Agent(instructions="You take bookings."))
    assert seen and not any(f.words for f in seen)
    assert users


@pytest.mark.parametrize("final", [False, True])
def test_noted_words_are_taken_by_the_matching_transcript_only(final: bool) -> None:
    async def main() -> None:
        det = turn_detector("semantic-text")
        stream = det.stream()
        stream.note_words("hello", final, ["w1"])
        stream.note_words("hello there", final, ["w1", "w2"])
        assert stream._noted.take("hello there", not final) is None
        assert stream._noted.take("hello there", final) == ["w1", "w2"]
        assert stream._noted.take("hello", final) is None  # older ones went with it
        await stream.aclose()

    asyncio.run(main())


async def test_the_agent_speaking_tells_the_detector_a_reply_began() -> None:
    """LiveKit adds the reply to the chat context once it has played; the
    detector learns that the agent spoke when LiveKit's agent state turns
    "speaking" (a caller sound over the reply is then a new turn, as in the
    replay)."""
    det = turn_detector("fused")
    session = AgentSession(llm=FakeLLM(), tts=FakeTTS())
    attach(session, det)
    stream = det.stream()
    ep = stream.detector.endpointing
    ep._agent_since_commit = False  # as after a committed turn
    session.emit(
        "agent_state_changed", AgentStateChangedEvent(old_state="thinking", new_state="speaking")
    )
    assert ep._agent_since_commit
    await stream.aclose()


def _agent_says(session: AgentSession) -> tuple[Any, Any]:
    """``state(old, new)``: LiveKit's agent state changes; ``reply(text)``: a
    reply's text through the transcription tap, word by word."""

    def state(old: str, new: str) -> None:
        session.emit(
            "agent_state_changed",
            AgentStateChangedEvent(old_state=old, new_state=new),  # type: ignore[arg-type]
        )

    async def reply(text: str) -> None:
        async def deltas() -> Any:
            for d in text.split(" "):
                yield d + " "

        async for _ in reply_text(session, deltas()):
            pass

    return state, reply


async def test_a_reply_text_reaches_the_detector_once_the_reply_plays() -> None:
    """A WordTimesAgent's transcription node gives the reply's whole text
    before LiveKit's chat item: the detector gets it at the reply's first
    audio (held while the agent is "thinking", or "listening" before a
    ``session.say()``), at once when the agent is already speaking, and never
    for a reply cut before its first audio."""
    det = turn_detector("fused")
    session = AgentSession(llm=FakeLLM(), tts=FakeTTS())
    attach(session, det)
    stream = det.stream()
    ep = stream.detector.endpointing
    state, reply = _agent_says(session)
    state("listening", "thinking")
    await reply("Can I have the order number?")
    assert ep.agent_text == ""  # authorised, not yet heard
    state("thinking", "speaking")
    assert ep.agent_text == "Can I have the order number?"
    await reply("And the postcode?")  # text done while the agent speaks
    assert ep.agent_text == "And the postcode?"
    state("speaking", "thinking")
    await reply("Let me check.")
    state("thinking", "listening")  # cut before its first audio
    state("listening", "speaking")
    assert ep.agent_text == "And the postcode?"
    state("speaking", "listening")
    await reply("Welcome back.")  # session.say(): no "thinking" before it
    assert ep.agent_text == "And the postcode?"
    state("listening", "speaking")
    assert ep.agent_text == "Welcome back."
    await stream.aclose()


async def test_a_recorded_reply_cut_before_a_word_was_heard_keeps_its_text(
    tmp_path: Path,
) -> None:
    """LiveKit adds no chat item for a reply cut before its synchronized
    transcript held a word (agent_activity.py: ``if forwarded_text and
    add_to_chat_ctx``), so the recording had an agent turn with no text
    where the live detector had the whole reply. record_session keeps the
    text the session handed the detector at the reply's first audio; a
    reply cut before its first audio is not handed, so not kept."""
    det = turn_detector("fused")
    session = AgentSession(llm=FakeLLM(), tts=FakeTTS())
    attach(session, det)
    det.stream()
    rec = record_session(session, tmp_path / "call", detector=det)
    state, reply = _agent_says(session)
    # Audio placed by explicit times (the recorder's clock is the wall's).
    t0 = rec.clock.now()
    rec.caller_audio(np.zeros(16000, dtype=np.float32), 16000, at=t0)
    state("listening", "thinking")
    await reply("Let me check.")
    state("thinking", "listening")  # cut before its first audio: never heard
    state("listening", "thinking")
    await reply("Where will you be flying from?")
    state("thinking", "speaking")
    rec.agent_audio(np.full(4000, 0.1, dtype=np.float32), 16000, at=t0 + 0.5)  # 0.25 s
    rec.agent_interrupted(at=t0 + 0.75)
    state("speaking", "listening")
    rec.caller_audio(np.zeros(16000, dtype=np.float32), 16000, at=t0 + 1.0)
    assert det.reply_listeners
    session.emit("close", None)  # type: ignore[arg-type]
    assert not det.reply_listeners  # the detector may serve another session
    call = json.loads((tmp_path / "call" / "call.json").read_text())
    said = [e["text"] for e in call["events"] if e["type"] == "agent_turn"]
    assert said == ["Where will you be flying from?"]


async def test_a_word_times_agent_gives_the_reply_text_before_livekit_adds_it() -> None:
    """A real session: the detector has the reply's text while the reply
    plays, not once it has played (LiveKit's chat item for it, which then
    adds nothing new). Ordered by events (the speaker's playout end), not by
    how fast the machine is."""
    handed: list[tuple[str, bool]] = []  # (text, had the reply finished playing)

    def wire(session: AgentSession, det: Any, speaker: CaptureAudioOutput) -> None:
        inner = det.streams[-1].detector.set_agent_text

        def tap(text: str) -> None:
            played = bool(speaker.segments) and "played" in speaker.segments[0]
            handed.append((text, played))
            inner(text)

        det.streams[-1].detector.set_agent_text = tap

    await _session(WordTimesAgent(instructions="You take bookings."), wire=wire, reply=True)
    reply = FakeLLM().reply
    assert handed and handed[0] == (reply, False), handed
    assert all(text == reply for text, _ in handed)


def test_a_recorder_notes_final_words_only() -> None:
    noted = NotedWords(finals_only=True)
    noted.note("hello", False, ["w1"])
    noted.note("hello", True, ["w1"])
    assert noted.take("hello", False) is None
    assert noted.take("hello", True) == ["w1"]


async def test_a_recorded_session_keeps_the_stts_word_times(tmp_path: Path) -> None:
    """record_session writes each final transcript's words with the STT's
    times, on the recording's timeline (the caller audio it recorded)."""
    folder = tmp_path / "call"
    await _session(WordTimesAgent(instructions="You take bookings."), record_to=folder)
    _, call = load_call(CALL)
    said = [w for e in call["events"] for w in e.get("words", []) if w["end"] <= END_S]
    rec = load_recording(folder, check_audio=True)
    got = [w for t in rec.caller_turns for w in t.words or []]
    assert [w.text for w in got] == [w["text"] for w in said][: len(got)]
    assert len(got) >= 5
    # LiveKit's word times count wall time since its audio input began (the
    # stream's start_time_offset): on a loaded machine that base runs ahead
    # of the audio by however long the loop stalled (0.2 s seen on CI), the
    # same for every word of the stream. The recorder keeps the STT's times:
    # one offset for all words, each word's own times exact.
    # (per turn: a stall past 0.5 s re-anchors the base between results).
    i = 0
    for turn in rec.caller_turns:
        words = turn.words or []
        if not words:
            continue
        off = words[0].start - said[i]["start"]
        assert abs(off) < 0.6, (words[0], said[i])
        for w, x in zip(words, said[i : i + len(words)], strict=True):
            assert abs(w.start - off - x["start"]) < 0.03, (w, x, off)
            assert abs(w.end - off - x["end"]) < 0.03, (w, x, off)
        i += len(words)


async def test_a_recorded_session_without_the_tap_has_no_word_times(tmp_path: Path) -> None:
    folder = tmp_path / "call"
    await _session(Agent(instructions="You take bookings."), record_to=folder)
    rec = load_recording(folder, check_audio=True)
    assert rec.caller_turns and not any(t.words for t in rec.caller_turns)
