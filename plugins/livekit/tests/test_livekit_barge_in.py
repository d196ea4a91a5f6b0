"""turnkit's barge-in filters and history truncation inside real LiveKit sessions.

Each session is a real ``AgentSession`` (Silero VAD from livekit-plugins-silero)
fed a stretch of a corpus call in real time. The agent's reply is spoken with
``session.say`` at the moment the recorded agent turn began, so the echo baked
into ``caller.wav`` is the echo of what the session plays:

* booking-think-03, agent turn 2 (6.31-10.97 s): echo at -20 dB / 35 ms and an
  "uh-huh" at 7.51 s — neither may stop the agent (the reply is agent.wav itself);
* bargein-friday-05, agent turn 2 (4.67 s on): echo at -18 dB / 45 ms and the
  caller's "Sorry, actually make that Friday." at 8.27 s — that must stop it
  (the reply is the whole planned text rendered by espeak-ng, the corpus's
  agent voice, so it runs past the barge-in as the original did before its cut);
* headset-bargein-11 (no echo): a barge-in against a TTS that gives word
  timestamps; the stored reply must end exactly at the last word whose audio
  had played.

Each scenario runs once with LiveKit deciding (``interruption.mode="vad"``) and
once with turnkit deciding, and the test asserts the difference.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import Agent, AgentSession, llm, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.io import TimedString
from livekit.plugins import silero

from turnkit.audio.wav import read_wav
from turnkit.barge_in.controller import Action
from turnkit.tts.espeak import EspeakTTS, _trim
from turnkit_livekit.barge_in import BargeInFilter, filter_barge_in, interruption_options

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from lk_harness import (  # noqa: E402
    RECORDINGS,
    SR,
    CaptureAudioOutput,
    FakeLLM,
    FakeOracleSTT,
    FakeTTS,
    WavAudioInput,
    load_call,
)

LEAD_S = 0.12  # say() this early: playback starts a few ms after, before the echo


def _agent_turn(call: dict[str, Any], n: int) -> dict[str, Any]:
    return [e for e in call["events"] if e["type"] == "agent_turn"][n]


async def _frames(audio: np.ndarray) -> AsyncIterator[rtc.AudioFrame]:
    step = int(0.02 * SR)
    pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
    for i in range(0, len(pcm), step):
        chunk = pcm[i : i + step]
        yield rtc.AudioFrame(chunk.tobytes(), SR, 1, len(chunk))


def _espeak_or_skip() -> None:
    if not EspeakTTS.available():
        if os.environ.get("TURNKIT_REQUIRE_TTS") == "1":
            raise RuntimeError("espeak-ng missing: apt-get install -y espeak-ng")
        pytest.skip("espeak-ng not installed")


async def run_reply(
    call_id: str,
    start_s: float,
    end_s: float,
    *,
    turnkit: bool,
    say_at: float,
    text: str,
    audio: np.ndarray | None = None,
    tts_: tts.TTS | None = None,
    aligned: bool = False,
) -> dict[str, Any]:
    """One session over ``call_id``'s audio from ``start_s`` to ``end_s``, the
    agent saying ``text`` (with ``audio``, else through the TTS) at ``say_at``."""
    wav, call = load_call(call_id)
    src = WavAudioInput(wav, start_s, end_s)
    out = CaptureAudioOutput()
    interruption = interruption_options() if turnkit else {"mode": "vad"}
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src, backchannels=True),
        llm=FakeLLM("Okay."),
        tts=tts_ or FakeTTS(),
        turn_handling={
            "turn_detection": "vad",
            "endpointing": {"min_delay": 0.5, "max_delay": 3.0},
            "preemptive_generation": {"enabled": False},
            "interruption": interruption,  # type: ignore[typeddict-item]
        },
        use_tts_aligned_transcript=aligned,
    )
    session.input.audio = src
    session.output.audio = out
    users: list[str] = []
    stopped_at: list[float] = []

    def on_item(ev: Any) -> None:
        if isinstance(ev.item, llm.ChatMessage) and ev.item.role == "user":
            users.append(ev.item.text_content or "")

    def on_state(ev: Any) -> None:
        if ev.old_state == "speaking":
            stopped_at.append(src.position)

    session.on("conversation_item_added", on_item)
    session.on("agent_state_changed", on_state)
    await session.start(Agent(instructions="You take bookings."), record=False)
    bf: BargeInFilter | None = filter_barge_in(session) if turnkit else None
    while src.position < say_at:
        await asyncio.sleep(0.005)
    said_at = src.position
    handle = session.say(text, audio=_frames(audio)) if audio is not None else session.say(text)
    await asyncio.wait_for(src.done.wait(), end_s - start_s + 10)
    await asyncio.sleep(0.5)
    history = [
        m for m in session.history.items if isinstance(m, llm.ChatMessage) and m.role != "system"
    ]
    await session.aclose()
    return {
        "handle": handle,
        "said_at": said_at,
        "stopped_at": stopped_at,
        "out": out,
        "users": users,
        "history": history,
        "filter": bf,
    }


# -- echo and backchannel ----------------------------------------------------------


async def test_echo_and_backchannel_do_not_stop_the_agent() -> None:
    """booking-think-03: LiveKit alone stops its reply on its own echo or the
    caller's "uh-huh"; with turnkit the reply plays to its end, the "uh-huh"
    is let through as an acknowledgement (and dropped, not kept as a turn),
    and the echo filter found the echo path."""
    call_id = "booking-think-03"
    _, call = load_call(call_id)
    turn = _agent_turn(call, 0)  # 6.309-10.965 s
    agent = read_wav(RECORDINGS / call_id / "agent.wav", SR)
    reply = agent[int(turn["start"] * SR) : int(turn["end"] * SR)]
    kw: dict[str, Any] = dict(say_at=turn["start"] - LEAD_S, text=turn["text"], audio=reply)

    base = await run_reply(call_id, 5.5, 11.6, turnkit=False, **kw)
    assert base["handle"].interrupted, "LiveKit alone did not stop: the test shows nothing"
    assert base["out"].segments[0]["interrupted"]

    run = await run_reply(call_id, 5.5, 11.6, turnkit=True, **kw)
    bf = run["filter"]
    assert not run["handle"].interrupted, bf.reasons
    seg = run["out"].segments[0]
    assert not seg["interrupted"]
    assert seg["played"] == pytest.approx(len(reply) / SR, abs=0.05)
    assert bf.stops == 0 and bf.pending_stops == 0
    assert len(bf.acknowledgements) == 1 and "uh-huh" in bf.acknowledgements[0]
    # The host only executed the controller's actions: no stop among them,
    # and every hold it asked for was released.
    kinds = [a for _, a in bf.actions]
    assert not {Action.STOP, Action.CONFIRM, Action.CANCEL_PENDING} & set(kinds), bf.actions
    assert kinds.count(Action.PAUSE) == kinds.count(Action.RESUME)
    assert run["users"] == []  # the acknowledgement is not a user turn
    assert bf.echo is not None and bf.echo.delay_ms is not None
    assert 0 < bf.echo.delay_ms < 300  # said LEAD_S early; echo 35 ms after playback
    assert bf.input is not None and bf.input.echo_frames > 20
    [msg] = [m for m in run["history"] if m.role == "assistant"]
    assert msg.text_content == turn["text"] and not msg.interrupted


# -- a real barge-in, and the history cut to what was heard --------------------------


async def test_barge_in_stops_the_agent_and_history_holds_the_heard_words() -> None:
    """bargein-friday-05: the caller's "Sorry, actually make that Friday."
    over the agent (and its echo) stops it within half a second; LiveKit
    stores the reply cut to the words heard, flagged interrupted. Without
    turnkit, LiveKit (no transcript synchronizer here) stores the whole text."""
    _espeak_or_skip()
    call_id = "bargein-friday-05"
    _, call = load_call(call_id)
    turn = _agent_turn(call, 0)
    barge = next(e for e in call["events"] if e["type"] == "caller_turn" and e["start"] > 8)
    # the corpus's agent voice for this call, the whole planned reply
    speech = await EspeakTTS("en-us+f3", speed=165).synthesize(turn["text"])
    speech = _trim(speech)
    from turnkit.audio.wav import resample

    reply = resample(speech, 22050, SR)
    reply = 0.5 * reply / np.max(np.abs(reply))
    kw: dict[str, Any] = dict(say_at=turn["start"] - LEAD_S, text=turn["text"], audio=reply)

    base = await run_reply(call_id, 4.0, 11.2, turnkit=False, **kw)
    assert base["handle"].interrupted
    bmsg = next(m for m in base["history"] if m.role == "assistant")
    assert bmsg.interrupted and bmsg.text_content == turn["text"]  # all of it, heard or not

    run = await run_reply(call_id, 4.0, 11.2, turnkit=True, **kw)
    bf = run["filter"]
    assert run["handle"].interrupted
    assert bf.stops == 1, bf.reasons
    stop = run["stopped_at"][0]
    assert barge["start"] < stop < barge["start"] + 0.6, (stop, bf.reasons)
    # ... the interruption is the controller's stop (or confirm), executed
    # then (the controller's clock is the mic audio's, from the run's start).
    ends = [4.0 + t for t, a in bf.actions if a in (Action.STOP, Action.CONFIRM)]
    assert len(ends) == 1 and abs(ends[0] - stop) < 0.1, (ends, stop)
    assert run["users"] == ["Sorry actually make that Friday"]  # the fake STT's words
    msg, reply_to_barge_in = [m for m in run["history"] if m.role == "assistant"]
    assert msg.interrupted and reply_to_barge_in.text_content == "Okay."
    heard = msg.text_content or ""
    assert turn["text"].startswith(heard) and len(heard) < len(turn["text"])
    # ~3.7 s of the reply played: past "Thursday" (~2 s in), well before "reminder"
    assert "Thursday" in heard and "reminder" not in heard, heard
    [cut] = bf.truncations
    assert cut.heard == heard and cut.method == "estimate"
    assert cut.played_s == pytest.approx(stop - run["said_at"] - 0.0, abs=0.25)


# -- word timestamps from the TTS ------------------------------------------------------


class EspeakWordsTTS(tts.TTS):
    """A streaming LiveKit TTS over espeak-ng (a real engine, a subprocess)
    that renders word by word and reports each word's exact times, as TTSs
    with aligned transcripts do (Cartesia, ElevenLabs)."""

    def __init__(self) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=SR,
            num_channels=1,
        )
        self.engine = EspeakTTS("en-us", speed=170)
        self.renders: list[list[Any]] = []  # word times of each reply rendered

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        raise NotImplementedError

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        return _WordsStream(tts=self, conn_options=conn_options)


class _WordsStream(tts.SynthesizeStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner: EspeakWordsTTS = self._tts  # type: ignore[assignment]
        text = ""
        async for data in self._input_ch:
            if isinstance(data, str):
                text += data
        output_emitter.initialize(
            request_id="espeak", sample_rate=SR, num_channels=1, mime_type="audio/pcm", stream=True
        )
        output_emitter.start_segment(segment_id="espeak")
        timed = await owner.engine.synthesize_words(text)
        from turnkit.audio.wav import resample

        audio = resample(timed.audio, timed.sample_rate, SR)
        owner.renders.append(timed.words)
        output_emitter.push_timed_transcript(
            [
                TimedString(f"{w.text} ", start_time=w.start, end_time=w.end)
                for w in timed.words
            ]
        )
        pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        output_emitter.push(pcm.tobytes())
        output_emitter.end_segment()


async def test_truncation_uses_tts_word_timestamps() -> None:
    """headset-bargein-11: the reply comes from a TTS that gives word times;
    after the caller's barge-in the stored reply is exactly the words whose
    audio had ended when playback stopped."""
    _espeak_or_skip()
    call_id = "headset-bargein-11"
    _, call = load_call(call_id)
    turn = _agent_turn(call, 0)  # 6.744 s; barge-in 9.344 s
    words_tts = EspeakWordsTTS()
    run = await run_reply(
        call_id,
        6.0,
        12.6,
        turnkit=True,
        say_at=turn["start"],
        text=turn["text"],
        tts_=words_tts,
        aligned=True,
    )
    bf = run["filter"]
    assert run["handle"].interrupted and bf.stops == 1, bf.reasons
    cut = bf.truncations[0]  # (the reply to the barge-in is cut by the session's close)
    assert cut.method == "timestamps"
    played = cut.played_s
    words = words_tts.renders[0]
    expected = [w.text for w in words if w.end <= played + 1e-6]
    assert 0 < len(expected) < len(words)
    msg = next(m for m in run["history"] if m.role == "assistant")
    assert msg.interrupted
    assert (msg.text_content or "").split() == expected

