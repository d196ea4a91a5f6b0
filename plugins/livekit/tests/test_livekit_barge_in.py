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

The first two scenarios run again with turnkit's turn detector in the session
as well (the example's setup): the detector's stream and the barge-in filter
then share the session's one ``AudioTimeline``. A spy on turnkit's real
``VADAnalyzer`` counts the VADs made and the ones that judged audio (one), and
spies on the controller and the detector record the VAD verdicts each got:
the very same objects, in the same order. The barge-in outcome is the one
asserted for the filter alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import Agent, AgentSession, llm, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.io import AudioInput, TimedString
from livekit.plugins import silero

from turnkit.audio.timeline import AudioTimeline
from turnkit.audio.vad import VADAnalyzer, VADStep
from turnkit.audio.wav import read_wav
from turnkit.barge_in.controller import Action, BargeInController, BargeInParams
from turnkit.frames import TurnEndFrame
from turnkit.tts.espeak import EspeakTTS, _trim
from turnkit_livekit import TurnkitStreamingDetector, attach, turn_detector
from turnkit_livekit.barge_in import BargeInFilter, filter_barge_in, interruption_options
from turnkit_livekit.timeline import TimelineInput

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from conftest import load_script  # noqa: E402  (the committed scripts, as the core tests load them)
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
DETECTOR = "silence:stop_ms=600"  # turnkit's turn detector, where a test adds one


class VADCensus:
    """A spy on turnkit's real ``VADAnalyzer`` class: the instances made and,
    per instance, how many frames it judged."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[VADAnalyzer] = []
        self.judged: dict[int, int] = {}
        init, analyze = VADAnalyzer.__init__, VADAnalyzer.analyze
        census = self

        def counting_init(vad: VADAnalyzer, *args: Any, **kwargs: Any) -> None:
            init(vad, *args, **kwargs)
            census.made.append(vad)

        def counting_analyze(vad: VADAnalyzer, frame: np.ndarray, at: float) -> VADStep:
            census.judged[id(vad)] = census.judged.get(id(vad), 0) + 1
            return analyze(vad, frame, at)

        monkeypatch.setattr(VADAnalyzer, "__init__", counting_init)
        monkeypatch.setattr(VADAnalyzer, "analyze", counting_analyze)

    def assert_one(self, vad: VADAnalyzer) -> None:
        """``vad`` is the only turnkit VAD made, and the only one that ran."""
        assert self.made == [vad], f"{len(self.made)} turnkit VADs made"
        assert list(self.judged) == [id(vad)], f"{len(self.judged)} turnkit VADs ran"
        assert self.judged[id(vad)] > 100  # it heard the call (32 ms frames)


@pytest.fixture
def census(monkeypatch: pytest.MonkeyPatch) -> VADCensus:
    return VADCensus(monkeypatch)


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
    call_id: str | Path,
    start_s: float,
    end_s: float,
    *,
    turnkit: bool,
    say_at: float,
    text: str,
    audio: np.ndarray | None = None,
    tts_: tts.TTS | None = None,
    aligned: bool = False,
    detector: TurnkitStreamingDetector | None = None,
    stt_late_s: float = 0.0,
    params: BargeInParams | None = None,
) -> dict[str, Any]:
    """One session over ``call_id``'s audio from ``start_s`` to ``end_s``, the
    agent saying ``text`` (with ``audio``, else through the TTS) at ``say_at``.
    ``detector``: turnkit's turn detector in the session (else LiveKit's VAD
    endpointing); the VAD verdicts the barge-in controller and the detector
    got are returned (``controller_vad``, ``detector_vad``). ``stt_late_s``:
    the STT writes each word that much after it is said; ``params``: the
    barge-in controller's (None: as ``filter_barge_in`` builds it)."""
    wav, call = load_call(call_id)
    src = WavAudioInput(wav, start_s, end_s)
    out = CaptureAudioOutput()
    interruption = interruption_options() if turnkit else {"mode": "vad"}
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(call, src, backchannels=True, late_s=stt_late_s),
        llm=FakeLLM("Okay."),
        tts=tts_ or FakeTTS(),
        turn_handling={
            "turn_detection": detector if detector is not None else "vad",
            "endpointing": {"min_delay": 0.2 if detector else 0.5, "max_delay": 3.0},
            "preemptive_generation": {"enabled": False},
            "interruption": interruption,  # type: ignore[typeddict-item]
        },
        use_tts_aligned_transcript=aligned,
    )
    session.input.audio = src
    session.output.audio = out
    users: list[str] = []
    user_msgs: list[llm.ChatMessage] = []
    stopped_at: list[float] = []

    def on_item(ev: Any) -> None:
        if isinstance(ev.item, llm.ChatMessage) and ev.item.role == "user":
            users.append(ev.item.text_content or "")
            user_msgs.append(ev.item)

    def on_state(ev: Any) -> None:
        if ev.old_state == "speaking":
            stopped_at.append(src.position)

    session.on("conversation_item_added", on_item)
    session.on("agent_state_changed", on_state)
    if detector is not None:
        attach(session, detector)  # the caller's words to the detector, its metrics
    await session.start(Agent(instructions="You take bookings."), record=False)
    bf: BargeInFilter | None = filter_barge_in(session, params=params) if turnkit else None
    controller_vad: list[VADStep] = []
    detector_vad: list[VADStep] = []
    if bf is not None and detector is not None:
        # Spies on the real objects: the verdicts each policy was given.
        on_frame = bf.controller.on_frame
        stream = detector.streams[-1]
        on_audio = stream.detector.on_audio

        def ctl_frame(v: VADStep, audio: Any = None) -> Action:
            controller_vad.append(v)
            return on_frame(v, audio)

        async def det_audio(frame: Any, v: VADStep) -> Any:
            detector_vad.append(v)
            return await on_audio(frame, v)

        bf.controller.on_frame = ctl_frame  # type: ignore[method-assign]
        stream.detector.on_audio = det_audio  # type: ignore[method-assign]
    while src.position < say_at:
        await asyncio.sleep(0.005)
    said_at = src.position
    handle = session.say(text, audio=_frames(audio)) if audio is not None else session.say(text)
    await asyncio.wait_for(src.done.wait(), end_s - start_s + 10)
    await asyncio.sleep(0.5)
    if controller_vad:
        # The detector's task takes frames from LiveKit's queue after the
        # controller judged them: wait until it has the last one judged now.
        # (Not there in 10 s: the assertions on the two sequences say why.)
        last = controller_vad[-1]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                while not any(v is last for v in detector_vad[-20:]):
                    await asyncio.sleep(0.01)
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
        "user_msgs": user_msgs,
        "history": history,
        "filter": bf,
        "controller_vad": controller_vad,
        "detector_vad": detector_vad,
    }


def _assert_one_timeline(run: dict[str, Any], census: VADCensus, detector: Any) -> None:
    """The detector's stream and the barge-in filter ran on one timeline:
    one turnkit VAD made and run, and the controller and the detector got
    the same verdicts (the same objects), in the same order."""
    bf: BargeInFilter = run["filter"]
    census.assert_one(bf.vad)
    [stream] = detector.streams
    assert bf.stream is stream and stream.shared
    assert stream.timeline is bf.timeline and stream.vad is bf.vad
    ctl, det = run["controller_vad"], run["detector_vad"]
    assert len(ctl) > 100
    # The detector may have had a few frames before the filter was installed
    # (judged by the same timeline); from the filter's first frame on, the
    # two sequences are one.
    i = next(k for k, v in enumerate(det) if v is ctl[0])
    shared = det[i : i + len(ctl)]
    assert len(shared) == len(ctl) and all(a is b for a, b in zip(shared, ctl, strict=True))
    edges = [
        (v.started, v.stopped, v.speech_start, v.speech_end) for v in ctl if v.started or v.stopped
    ]
    assert len(edges) >= 2, edges  # the caller spoke: the edges are not vacuous
    assert stream.frames >= len(ctl)


# -- echo and backchannel ----------------------------------------------------------


def _echo_scenario() -> tuple[dict[str, Any], np.ndarray, dict[str, Any]]:
    """booking-think-03's first agent turn (6.309-10.965 s), said with its own audio."""
    call_id = "booking-think-03"
    _, call = load_call(call_id)
    turn = _agent_turn(call, 0)
    agent = read_wav(RECORDINGS / call_id / "agent.wav", SR)
    reply = agent[int(turn["start"] * SR) : int(turn["end"] * SR)]
    kw: dict[str, Any] = dict(say_at=turn["start"] - LEAD_S, text=turn["text"], audio=reply)
    return turn, reply, kw


def _assert_agent_kept_talking(
    run: dict[str, Any], turn: dict[str, Any], reply: np.ndarray
) -> None:
    """The reply played to its end, the "uh-huh" let through as an
    acknowledgement (and dropped, not kept as a turn), the echo path found."""
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


async def test_echo_and_backchannel_do_not_stop_the_agent(census: VADCensus) -> None:
    """booking-think-03: LiveKit alone stops its reply on its own echo or the
    caller's "uh-huh"; with turnkit the reply plays to its end, the "uh-huh"
    is let through as an acknowledgement (and dropped, not kept as a turn),
    and the echo filter found the echo path. turnkit runs one VAD (LiveKit's
    VAD endpointing decides turns here: the filter holds the timeline)."""
    turn, reply, kw = _echo_scenario()
    call_id = "booking-think-03"

    base = await run_reply(call_id, 5.5, 11.6, turnkit=False, **kw)
    assert base["handle"].interrupted, "LiveKit alone did not stop: the test shows nothing"
    assert base["out"].segments[0]["interrupted"]

    run = await run_reply(call_id, 5.5, 11.6, turnkit=True, **kw)
    _assert_agent_kept_talking(run, turn, reply)
    assert run["filter"].stream is None  # no turnkit detector: its own timeline
    census.assert_one(run["filter"].vad)


async def test_turn_detector_and_barge_in_share_one_vad_echo_and_backchannel(
    census: VADCensus,
) -> None:
    """booking-think-03 with turnkit's turn detector in the session too: the
    detector's stream and the barge-in filter share one timeline (one VAD,
    one echo filter, one clock; the same verdicts in the same order), and
    the agent still talks on through its echo and the "uh-huh"."""
    turn, reply, kw = _echo_scenario()
    det = turn_detector(DETECTOR, prediction_timeout_s=3.0)
    assert isinstance(det, TurnkitStreamingDetector)
    run = await run_reply("booking-think-03", 5.5, 11.6, turnkit=True, detector=det, **kw)
    _assert_agent_kept_talking(run, turn, reply)
    _assert_one_timeline(run, census, det)


async def test_a_late_stt_is_learnt_and_the_backchannel_is_not_held() -> None:
    """booking-think-03 from before the caller's first turn, the STT writing
    every word 300 ms after it is said (a live recogniser is never on time),
    the filter built as a LiveKit agent builds it (no delay told): its
    controller learns from the caller's first turn how long after the VAD
    heard speech end the words come, and takes no early hold on the
    "uh-huh" under the reply, which a late word could turn into a gap the
    caller hears. Told the words are on time, it holds the agent 0.22 s
    into the "uh-huh" (and resumes it as the sound breaks off)."""
    _, _, kw = _echo_scenario()
    start = 0.5  # the session's audio (and the filter's clock) begins here
    uh_huh = (7.509 - start, 7.831 + 0.6 - start)
    late = dict(turnkit=True, stt_late_s=0.3, **kw)

    def holds(run: dict[str, Any]) -> list[Action]:
        return [a for t, a in run["filter"].actions if uh_huh[0] < t < uh_huh[1]]

    told = await run_reply("booking-think-03", start, 11.6, params=BargeInParams(word_delay_s=0.0), **late)
    assert holds(told) == [Action.PAUSE, Action.RESUME], told["filter"].actions
    learnt = await run_reply("booking-think-03", start, 11.6, **late)
    assert holds(learnt) == [], learnt["filter"].actions
    assert learnt["filter"].controller.words_late
    assert not learnt["handle"].interrupted
    [ack] = learnt["filter"].acknowledgements
    assert "uh-huh" in ack and not any("uh-huh" in u for u in learnt["users"])


# -- a real barge-in, and the history cut to what was heard --------------------------


async def _bid_scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """bargein-friday-05's first agent turn, the whole planned reply in the
    corpus's agent voice (espeak-ng), so it runs past the caller's bid."""
    _espeak_or_skip()
    _, call = load_call("bargein-friday-05")
    turn = _agent_turn(call, 0)
    barge = next(e for e in call["events"] if e["type"] == "caller_turn" and e["start"] > 8)
    speech = await EspeakTTS("en-us+f3", speed=165).synthesize(turn["text"])
    speech = _trim(speech)
    from turnkit.audio.wav import resample

    reply = resample(speech, 22050, SR)
    reply = 0.5 * reply / np.max(np.abs(reply))
    kw: dict[str, Any] = dict(say_at=turn["start"] - LEAD_S, text=turn["text"], audio=reply)
    return turn, barge, kw


def _assert_bid_stopped_the_agent(
    run: dict[str, Any], turn: dict[str, Any], barge: dict[str, Any]
) -> None:
    """One stop, within 0.6 s of the bid's onset, executed when the
    controller said; the reply stored cut to the words heard."""
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


async def test_barge_in_stops_the_agent_and_history_holds_the_heard_words(
    census: VADCensus,
) -> None:
    """bargein-friday-05: the caller's "Sorry, actually make that Friday."
    over the agent (and its echo) stops it within half a second; LiveKit
    stores the reply cut to the words heard, flagged interrupted. Without
    turnkit, LiveKit (no transcript synchronizer here) stores the whole text."""
    turn, barge, kw = await _bid_scenario()
    call_id = "bargein-friday-05"

    base = await run_reply(call_id, 4.0, 11.2, turnkit=False, **kw)
    assert base["handle"].interrupted
    bmsg = next(m for m in base["history"] if m.role == "assistant")
    assert bmsg.interrupted and bmsg.text_content == turn["text"]  # all of it, heard or not

    run = await run_reply(call_id, 4.0, 11.2, turnkit=True, **kw)
    _assert_bid_stopped_the_agent(run, turn, barge)
    census.assert_one(run["filter"].vad)


async def test_turn_detector_and_barge_in_share_one_vad_real_bid(census: VADCensus) -> None:
    """bargein-friday-05 with turnkit's turn detector in the session too:
    one VAD for both, the same verdicts in the same order; the bid still
    stops the agent as with the filter alone, and the caller's turn is
    then ended by turnkit's detector on that VAD's speech end."""
    turn, barge, kw = await _bid_scenario()
    det = turn_detector(DETECTOR, prediction_timeout_s=3.0)
    assert isinstance(det, TurnkitStreamingDetector)
    run = await run_reply("bargein-friday-05", 4.0, 11.2, turnkit=True, detector=det, **kw)
    _assert_bid_stopped_the_agent(run, turn, barge)
    _assert_one_timeline(run, census, det)
    # The bid's turn was ended by turnkit's detector (600 ms after the
    # speech end the shared VAD saw), and LiveKit committed on it.
    [msg] = run["user_msgs"]
    # LiveKit's commit reached the barge-in controller too (its held bid's
    # confirmation; the turn's level a sound over the next reply is held to).
    assert run["filter"].controller.commits == 1
    m = msg.metrics
    assert m["turnkit_detector"] == DETECTOR
    assert m["turnkit_silence_ms"] == pytest.approx(600, abs=40)
    [stream] = det.streams
    ends = [s for s in stream.signals if isinstance(s, TurnEndFrame)]
    assert ends and any(abs(e.at - (barge["end"] - 4.0 + 0.6)) < 0.5 for e in ends), [
        e.at for e in ends
    ]


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
            [TimedString(f"{w.text} ", start_time=w.start, end_time=w.end) for w in timed.words]
        )
        pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        output_emitter.push(pcm.tobytes())
        output_emitter.end_segment()


async def _barged_in_reply_with_word_times() -> tuple[dict[str, Any], EspeakWordsTTS]:
    """headset-bargein-11's first reply (6.744 s) from a TTS that gives word
    times, LiveKit forwarding them (aligned transcript), stopped once by the
    caller's barge-in (9.344 s)."""
    _espeak_or_skip()
    call_id = "headset-bargein-11"
    _, call = load_call(call_id)
    turn = _agent_turn(call, 0)
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
    return run, words_tts


async def test_truncation_uses_tts_word_timestamps() -> None:
    """headset-bargein-11: the reply comes from a TTS that gives word times;
    after the caller's barge-in the stored reply is exactly the words whose
    audio had ended when playback stopped."""
    run, words_tts = await _barged_in_reply_with_word_times()
    bf = run["filter"]
    cut = bf.truncations[0]  # (the reply to the barge-in is cut by the session's close)
    assert cut.method == "timestamps"
    played = cut.played_s
    words = words_tts.renders[0]
    expected = [w.text for w in words if w.end <= played + 1e-6]
    assert 0 < len(expected) < len(words)
    msg = next(m for m in run["history"] if m.role == "assistant")
    assert msg.interrupted
    assert (msg.text_content or "").split() == expected


async def test_the_controller_is_told_where_playback_is_in_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the Pipecat host's playback marks do, the LiveKit host tells the
    barge-in controller how far into the reply's text playback is (where
    acknowledgements come: the agent's phrase boundaries; whether its
    question was heard): from the TTS's word times here, each offset the
    end of a word whose audio had played, up to the words the caller heard
    when the barge-in stopped it."""
    _espeak_or_skip()
    told: list[tuple[str, int]] = []
    tell = BargeInController.on_agent_progress

    def record(self: BargeInController, text_offset: int) -> None:
        told.append((self.agent_text, text_offset))
        tell(self, text_offset)

    monkeypatch.setattr(BargeInController, "on_agent_progress", record)
    run, _ = await _barged_in_reply_with_word_times()
    cut = run["filter"].truncations[0]
    fed = [n for text, n in told if text == cut.text]  # this reply's (not the answer's)
    heard = len(cut.heard.rstrip())
    assert fed and 0 < max(fed) <= heard
    assert fed == sorted(fed)  # playback only moves on
    ends = {m.end() for m in re.finditer(r"\S+", cut.text)}
    assert {f for f in fed if f} <= ends  # a word's end each time
    # the last word heard was reported within a frame or two of its end
    assert len(cut.text[: max(fed)].split()) >= cut.words_kept - 1


# -- the detector stream on a timeline in front of it (no session) ---------------------


class _CallAudio(AudioInput):
    """Caller audio of a corpus call as 20 ms LiveKit frames, as fast as read."""

    def __init__(self, audio: np.ndarray) -> None:
        super().__init__(label="call")
        self.pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        self.n = 0

    async def __anext__(self) -> rtc.AudioFrame:
        step = int(0.02 * SR)
        if self.n >= len(self.pcm):
            raise StopAsyncIteration
        chunk = self.pcm[self.n : self.n + step]
        self.n += step
        return rtc.AudioFrame(chunk.tobytes(), SR, 1, len(chunk))


async def _feed(inp: TimelineInput, stream: Any, also: rtc.AudioFrame | None = None) -> int:
    """Every frame ``inp`` makes to ``stream`` (as LiveKit would; ``also``
    pushed after the 100th); returns once the stream's task has given the
    detector all of them."""
    n = 0
    async for frame in inp:
        stream.push_audio(frame)
        n += 1
        if n == 100 and also is not None:
            stream.push_audio(also)
    async with asyncio.timeout(30):
        while stream.frames < n:
            await asyncio.sleep(0.01)
    return n


async def test_stream_reads_the_verdicts_of_judged_frames(
    census: VADCensus, caplog: pytest.LogCaptureFixture
) -> None:
    """booking-think-03's first caller turn (1.165-4.711 s) through a
    TimelineInput into a detector stream, without a session. A new stream
    (an agent handoff's) takes the input's timeline and its verdicts: one
    VAD, run once per frame; a frame no timeline judged (LiveKit's own flush
    silence) is ignored; the turn ends 600 ms after that VAD's speech end.
    A stream that judged frames itself hands its timeline to the input
    (``share_timeline``, what ``filter_barge_in`` does): the same VAD goes
    on. A stream that judged frames itself and was not asked keeps its own
    timeline when judged frames appear (times from two clocks must not mix)
    and says so."""
    audio, _ = load_call("booking-think-03")
    silence = rtc.AudioFrame(bytes(2 * SR), SR, 1, SR)  # 1 s

    timeline = AudioTimeline()
    inp = TimelineInput(_CallAudio(audio[: int(5.6 * SR)]), timeline)
    stream = TurnkitStreamingDetector(DETECTOR).stream()
    try:
        # LiveKit's own flush silence among the frames: not caller audio
        n = await _feed(inp, stream, also=silence)
        assert stream.timeline is timeline and stream.shared
        assert n == inp.frames == stream.frames == int(5.6 * SR) // 512
        census.assert_one(timeline.vad)
        assert census.judged[id(timeline.vad)] == n  # each frame judged once
        # (600 ms of silence also ends the turn in the caller's 0.91 s hold)
        end = [s for s in stream.signals if isinstance(s, TurnEndFrame)][-1]
        assert 4.5 < timeline.vad.speech_end < 4.9
        assert end.at == pytest.approx(timeline.vad.speech_end + 0.6, abs=0.035)
        assert stream.clock.now() == pytest.approx(n * 512 / SR)
    finally:
        await stream.aclose()

    def frames(a: np.ndarray) -> list[rtc.AudioFrame]:
        pcm = (np.clip(a, -1, 1) * 32767).astype(np.int16)
        return [
            rtc.AudioFrame(pcm[i : i + 320].tobytes(), SR, 1, 320) for i in range(0, len(pcm), 320)
        ]

    census.made.clear()
    census.judged.clear()
    first = TurnkitStreamingDetector(DETECTOR).stream()
    try:
        for f in frames(audio[: int(0.64 * SR)]):  # before the filter: the stream judges
            first.push_audio(f)
        async with asyncio.timeout(30):
            while first.frames < 20:
                await asyncio.sleep(0.01)
        handed = TimelineInput(
            _CallAudio(audio[int(0.64 * SR) : int(5.6 * SR)]), first.share_timeline()
        )
        n = await _feed(handed, first)
        assert first.frames == 20 + n and handed.timeline is first.timeline
        census.assert_one(first.vad)
        end = [s for s in first.signals if isinstance(s, TurnEndFrame)][-1]
        assert end.at == pytest.approx(first.vad.speech_end + 0.6, abs=0.035)
        assert first.clock.now() == pytest.approx(first.frames * 512 / SR)
    finally:
        await first.aclose()

    own = TurnkitStreamingDetector(DETECTOR).stream()
    try:
        for f in frames(audio[: int(0.2 * SR)]):
            own.push_audio(f)
        late = TimelineInput(_CallAudio(audio[: int(1.0 * SR)]), AudioTimeline())
        with caplog.at_level("WARNING"):
            await _feed(late, own)
        assert own.timeline is not late.timeline and not own.shared
        assert "two VADs" in caplog.text
    finally:
        await own.aclose()


# -- an acknowledgement over the reply's close is the caller's turn ----------------


def _early_okay(out: Path) -> Path:
    """order-natural-15 with its last caller turn an "Okay" said 1.3 s before
    the agent's last reply ends, then silence (scripts/realcall_variants.py)."""
    rv = load_script("realcall_variants")
    [(n, source, edit, opts)] = [v for v in rv.VARIANTS if v[0] == "early-okay1.3"]
    return rv.build(n, source, edit, opts, out)


async def test_okay_over_the_replys_close_is_answered_when_it_ends(tmp_path: Path) -> None:
    """The caller says "Okay" 1.3 s before the agent's reply ends (its own
    audio, agent.wav), then nothing. turnkit lets the agent talk through it
    (an acknowledgement) and LiveKit's turn is cleared, so nobody answered
    it: the caller waited in silence. Said over the reply's closing words,
    it is the caller's turn (turnkit's OwedTurn, as in turnkit replay): once
    the reply has played to its end the session answers it, once."""
    folder = _early_okay(tmp_path)
    _, call = load_call(folder)
    turn = [e for e in call["events"] if e["type"] == "agent_turn"][-1]
    okay = [e for e in call["events"] if e["type"] == "caller_turn"][-1]
    assert turn["start"] < okay["start"] < okay["end"] < turn["end"]
    agent = read_wav(folder / "agent.wav", SR)
    reply = agent[int(turn["start"] * SR) : int(turn["end"] * SR)]
    run = await run_reply(
        folder,
        turn["start"] - 1.5,
        turn["end"] + 3.0,
        turnkit=True,
        say_at=turn["start"] - LEAD_S,
        text=turn["text"],
        audio=reply,
    )
    bf: BargeInFilter = run["filter"]
    assert not run["handle"].interrupted, bf.reasons
    assert bf.stops == 0 and len(bf.acknowledgements) == 1, bf.acknowledgements
    assert "okay" in bf.acknowledgements[0].lower()
    assert [u.lower().strip(".") for u in run["users"]] == ["okay"], run["users"]
    replies = [m.text_content for m in run["history"] if m.role == "assistant"]
    assert replies == [turn["text"], "Okay."], replies
    assert bf.owed_answered == 1


# -- a turn begun under the reply, ended after it ------------------------------


async def test_a_turn_begun_under_the_reply_is_answered_once() -> None:
    """easy-short-08's "Is Friday open?" begun under the last of a reply
    that plays on to 0.25 s before the caller's words end (the reply's own
    audio, then the line's quiet): the case that left a Pipecat caller
    unanswered (a turn Pipecat never saw begin; its speculation was never
    run; the bot's "pause" not executable there, it talked on). In a
    LiveKit session with turnkit's barge-in filter and ``fused`` the filter
    stops the reply on the bid's audio (within 0.3 s of its onset), and
    the caller's words are one user turn, answered once."""
    _, call = load_call("easy-short-08")
    turns = [e for e in call["events"] if e["type"] == "caller_turn"]
    ask = turns[3]
    reply = [e for e in call["events"] if e["type"] == "agent_turn" and e["start"] < ask["start"]][-1]
    agent = read_wav(RECORDINGS / "easy-short-08" / "agent.wav", SR)
    audio = agent[int(reply["start"] * SR) : int((ask["end"] - 0.25) * SR)]
    det = TurnkitStreamingDetector("fused")
    run = await run_reply(
        "easy-short-08",
        reply["start"] - 1.0,
        ask["end"] + 3.0,
        turnkit=True,
        say_at=reply["start"] - LEAD_S,
        text=reply["text"],
        audio=audio,
        detector=det,
    )
    assert run["handle"].interrupted and run["filter"].stops == 1
    assert ask["start"] < run["stopped_at"][0] < ask["start"] + 0.3
    said = [re.sub(r"[^a-z ]", "", u.lower()).strip() for u in run["users"]]
    assert said == ["is friday open"], run["users"]
    replies = [m.text_content for m in run["history"] if m.role == "assistant"]
    assert replies[-1] == "Okay." and replies.count("Okay.") == 1, replies
