"""A recorded call through a real LiveKit ``AgentSession`` with turnkit's
turn detector, fed in lock step (faster than real time, deterministic).

Real: ``AgentSession``, ``Agent``, LiveKit's Silero VAD
(livekit-plugins-silero), turnkit-livekit's :func:`~turnkit_livekit.turn_detector`
(``TurnkitStreamingDetector``: its stream's ``AudioTimeline`` — 16 kHz,
32 ms frames, turnkit's VAD, the audio clock — and the detector with its
``Endpointing``). LiveKit owns the pipeline: it pulls the caller audio from
our ``AudioInput`` and pushes every frame to the turnkit stream
(``livekit/agents/voice/audio_recognition.py`` ``_push_audio``:
``self._turn_detector_stream.push_audio(frame)``), asks it ``predict()``
when its own VAD hears a pause, and commits the user turn.

Lock step: the caller audio is the very sequence of 16-bit chunks and
transcripts the Pipecat host gets (:func:`turnkit_pipecat.replay.replay_frames`:
a streaming recogniser's words as said, or a segmented one's runs written
whole once the VAD closed them, with the replay configuration's delays);
each chunk is handed to LiveKit only once the turnkit stream has judged the
previous one, and each transcript (the caller's words, as
``turnkit_livekit.attach`` hands LiveKit's ``user_input_transcribed``
events to the stream, with their times as a ``WordTimesAgent``'s STT node
notes them) goes to the stream once the audio before it has been judged. Decisions are on the stream's audio clock, so the feeding speed
does not move them.

What is not LiveKit's here, and why: the agent's words. LiveKit owns the LLM
call and adds the assistant message at the end of its playout, on the wall
clock; the harness gives the stream the agent's text (``set_agent_text``,
what ``attach`` does on that message) at the audio instants turnkit replay's
agent started each reply, so that the detectors judge with the same
context. The session therefore has no LLM and no TTS (LiveKit commits user
turns and answers nothing); barge-in, drafts, tools and replies are not
run in this host (see the parity test's listed reasons).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import Agent, AgentSession
from livekit.agents.voice.io import AudioInput
from livekit.plugins import silero
from pipecat.frames.frames import InputAudioRawFrame, InterimTranscriptionFrame, TranscriptionFrame
from turnkit_livekit import TurnkitStreamingDetector, turn_detector
from turnkit_pipecat.replay import replay_frames

from turnkit.audio import FRAME_SAMPLES, SAMPLE_RATE
from turnkit.audio.wav import read_wav
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.replay.recording import Recording
from turnkit.replay.simulator import LabelPlanner, ReplayConfig, segmented_p99_ms

__all__ = ["LiveKitRun", "replay_in_livekit"]

WAIT_S = 60.0  # a bound only: each step waits for an event, not a window


@dataclass
class LiveKitRun:
    """What the LiveKit host did besides the detector's decisions: the
    chunks LiveKit pulled, its ``predict()`` calls on the stream and the
    streams it opened. (Without an STT it commits no user message: its
    own commit, on the wall clock, is measured in real time by the parity
    test's LiveKit commit test.)"""

    predictions: int = 0
    frames: int = 0
    streams: int = 0


class _Feed:
    """The call's chunks and transcripts, in order; see the module doc. The
    line stays open after caller.wav ends, in silence, as far as turnkit
    replay feeds it (:func:`~turnkit.replay.simulator.open_line_until`)."""

    def __init__(
        self, rec: Recording, agent_text: list[tuple[float, str]], config: ReplayConfig
    ) -> None:
        # The Pipecat host's very frames: the recogniser's delay, jitter and
        # kind (a segmented one writes each run once the VAD closed it), and
        # the open line after the file.
        self.items = replay_frames(rec, config)
        self.agent_text = sorted(agent_text)
        self.position = 0.0


class LockstepAudioInput(AudioInput):
    """Caller audio for LiveKit, one 32 ms chunk per pull, each only after
    the turnkit stream judged the previous one (see the module doc)."""

    def __init__(self, feed: _Feed, detector: TurnkitStreamingDetector, run: LiveKitRun) -> None:
        super().__init__(label="lockstep")
        self.feed = feed
        self.detector = detector
        self.run = run
        self._i = 0
        self._judged = 0  # 32 ms frames the stream's detector has judged
        self._texts_sent = 0  # transcripts pushed to the stream ...
        self._texts_done = 0  # ... and handled by it
        self._hooked: Any = None
        self.done = asyncio.Event()
        self._echo: EchoFilter | None = None

    def use_echo(self, echo: EchoFilter | None) -> None:
        self._echo = echo

    async def _stream(self) -> Any:
        """The session's turnkit stream (LiveKit opens it when the session
        starts), with the echo filter turnkit replay runs and counters on
        its detector's frames and its transcripts (the lock step's events)."""
        async with asyncio.timeout(WAIT_S):
            while not self.detector.streams:
                await asyncio.sleep(0.005)
        s = self.detector.streams[-1]
        if s is not self._hooked:
            self._hooked = s
            s.timeline.echo = self._echo
            det = s.detector
            orig_audio = det.on_audio

            async def on_audio(*a: Any, **k: Any) -> Any:
                try:
                    return await orig_audio(*a, **k)
                finally:
                    self._judged += 1

            det.on_audio = on_audio  # type: ignore[method-assign]
            orig_t = s._transcript

            async def transcript(*item: Any) -> None:
                try:
                    await orig_t(*item)
                finally:
                    self._texts_done += 1

            s._transcript = transcript  # type: ignore[method-assign]
        return s

    async def _until(self, cond: Any) -> None:
        async with asyncio.timeout(WAIT_S):
            while not cond():
                await asyncio.sleep(0.001)

    async def __anext__(self) -> rtc.AudioFrame:
        s = await self._stream()
        await self._until(lambda: self._judged >= self.run.frames)
        items = self.feed.items
        while self._i < len(items):
            f = items[self._i]
            self._i += 1
            if isinstance(f, TranscriptionFrame | InterimTranscriptionFrame):
                self._texts_sent += 1
                # with the word times a WordTimesAgent's STT node gives it
                said = f.result.get("words") if isinstance(f.result, dict) else None
                s.push_transcript(f.text, isinstance(f, TranscriptionFrame), words=said)
                await self._until(lambda: self._texts_done >= self._texts_sent)
                continue
            assert isinstance(f, InputAudioRawFrame)
            end = (self.run.frames + 1) * FRAME_SAMPLES / SAMPLE_RATE
            while self.feed.agent_text and self.feed.agent_text[0][0] <= end + 1e-9:
                s.set_agent_text(self.feed.agent_text.pop(0)[1])
            self.run.frames += 1
            self.feed.position = end
            return rtc.AudioFrame(f.audio, f.sample_rate, f.num_channels, len(f.audio) // 2)
        self.done.set()
        # The call is over: silence, paced, until the session is closed.
        await asyncio.sleep(0.02)
        n = FRAME_SAMPLES
        return rtc.AudioFrame(np.zeros(n, np.int16).tobytes(), SAMPLE_RATE, 1, n)


def echo_of(rec: Recording, config: ReplayConfig) -> EchoFilter | None:
    """The echo filter turnkit replay puts in front of its VAD: the
    recorded agent.wav is what the loudspeaker played."""
    if not config.filters or rec.agent_path is None:
        return None
    n = len(rec.caller_audio(SAMPLE_RATE))
    ref = align_reference(
        read_wav(rec.agent_path, SAMPLE_RATE), SAMPLE_RATE, n, name=str(rec.agent_path)
    )
    echo = EchoFilter(rate=SAMPLE_RATE, frame_samples=FRAME_SAMPLES)
    echo.set_reference(ref)
    return echo


async def replay_in_livekit(
    rec: Recording,
    spec: str,
    config: ReplayConfig,
    agent_started: list[tuple[float, int | None]],
) -> LiveKitRun:
    """Run ``rec`` through a real ``AgentSession`` with ``turn_detector(spec)``;
    ``agent_started``: (audio time, caller turn) of each reply turnkit
    replay's agent started, whose recorded text becomes the stream's agent
    context then. Returns LiveKit's own figures; the detector's decisions
    are read by the caller (a :class:`parity_trace.Watch`)."""
    planner = LabelPlanner(rec, config.default_reply_s)
    texts = [(at, planner.reply_text(turn)) for at, turn in agent_started]
    # A telephone recording reaches LiveKit resampled to 16 kHz (a SIP
    # participant): the deployment says the line's rate, as turnkit replay
    # reads it from the file, so the audio evidence is weighed alike.
    segmented = config.stt == "segmented"
    detector = turn_detector(
        spec,
        line_rate=rec.line_rate,
        # A segmented STT (Whisper behind LiveKit's StreamAdapter) is
        # declared with its p99 time to a final, as turnkit replay tells its
        # detector.
        recogniser=config.stt,
        final_p99_s=segmented_p99_ms(config) / 1000 if segmented else None,
    )
    assert isinstance(detector, TurnkitStreamingDetector)
    run = LiveKitRun()
    src = LockstepAudioInput(_Feed(rec, texts, config), detector, run)
    src.use_echo(echo_of(rec, config))
    session: AgentSession = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        turn_handling={
            "turn_detection": detector,
            "endpointing": {"min_delay": 0.0, "max_delay": 3.0},
            "preemptive_generation": {"enabled": False},
        },
    )
    session.input.audio = src
    await session.start(Agent(instructions="You listen."), record=False)
    try:
        async with asyncio.timeout(WAIT_S * 5):
            await src.done.wait()
        # the last frame judged
        await src._until(lambda: src._judged >= run.frames)
    finally:
        run.streams = len(detector.streams)
        run.predictions = sum(s.predictions for s in detector.streams)
        await session.aclose()
    return run
