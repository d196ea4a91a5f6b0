"""When LiveKit commits the user turn, against when turnkit decided it.

A recorded call goes through a real ``AgentSession`` (LiveKit's Silero VAD,
turnkit's streaming detector, ``turnkit_livekit.turn_handling`` and
``attach``) with the harness's fakes for the STT, LLM and TTS
(:mod:`lk_harness`), in real time. Each turnkit turn end is stamped with the
caller audio LiveKit had been handed when the stream emitted it, and each
LiveKit commit with the audio handed when LiveKit called the agent's
``on_user_turn_completed`` (LiveKit's own hook for "the user's turn is
committed, the reply is next").

``hold=True`` makes the comparison independent of the machine's speed: from
a turnkit turn end until LiveKit commits, the caller audio stands still
(the next frame waits for the commit, bounded by ``HOLD_S``) unless the
committer is waiting for the recogniser's final words, which need audio.
LiveKit then commits with no more caller audio, or not at all: its own
path needs about a quarter second more of its VAD's silence, which never
comes while the audio is held. So "the audio LiveKit had when it
committed" minus "the audio when turnkit decided" is an event order, not a
wall-clock figure.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import Agent, AgentSession, llm
from livekit.plugins import silero
from lk_harness import (
    CaptureAudioOutput,
    FakeLLM,
    FakeOracleSTT,
    FakeTTS,
    WavAudioInput,
    load_call,
)

from turnkit.frames import SystemFrame, TurnEndFrame, TurnResumedFrame
from turnkit_livekit import TurnkitDetectorStream, attach, turn_detector, turn_handling

HOLD_S = 10.0  # a bound only: a held commit needs no audio, just the event loop
FRAME_S = 0.02  # WavAudioInput's frame


@dataclass
class Decision:
    at: float  # turnkit's audio clock
    handed: float  # caller audio handed to LiveKit when the stream emitted it


@dataclass
class CommitRun:
    """One call: turnkit's turn ends, LiveKit's commits, and what happened between."""

    call: str
    keep_livekit_waits: bool
    decisions: list[Decision] = field(default_factory=list)
    commits: list[tuple[float, str]] = field(default_factory=list)  # (audio handed, words)
    finals: list[float] = field(default_factory=list)  # audio handed at each final transcript
    held_out: list[float] = field(default_factory=list)  # holds LiveKit did not commit in
    how: list[str] = field(default_factory=list)  # DecisionCommitter's actions
    waited_final: list[bool] = field(default_factory=list)  # ... and which waited for words
    replies_interrupted: int = 0

    def lags_ms(self) -> list[float]:
        """For each commit: its audio minus the last turnkit decision's audio time
        (the detector's clock, as the parity table reports it)."""
        out = []
        for c, _ in self.commits:
            before = [d.at for d in self.decisions if d.at <= c + FRAME_S]
            if before:
                out.append(round((c - before[-1]) * 1000))
        return out

    def stt_bound_ms(self) -> list[float]:
        """For each commit: how far the recogniser's last final transcript
        before it came after the decision (0 when it came before): the part of
        the lag that is the STT's, not an endpointing wait."""
        out = []
        for c, _ in self.commits:
            before = [d.at for d in self.decisions if d.at <= c + FRAME_S]
            if before:
                finals = [f for f in self.finals if f <= c + 1e-9]
                last = finals[-1] if finals else 0.0
                out.append(round(max(0.0, last - before[-1]) * 1000))
        return out


def summary(runs: list[CommitRun]) -> dict[str, float]:
    lags = [x for r in runs for x in r.lags_ms()]
    return {
        "commits": len(lags),
        "median_ms": statistics.median(lags) if lags else float("nan"),
        "max_ms": max(lags) if lags else float("nan"),
    }


class _Agent(Agent):
    def __init__(self, on_commit: Any) -> None:
        super().__init__(instructions="You answer briefly.")
        self._on_commit = on_commit

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        self._on_commit(new_message.text_content or "")


async def run_commits(
    call: str,
    spec: str = "fused",
    *,
    keep_livekit_waits: bool = False,
    hold: bool = False,
    min_silence_duration: float = 0.3,
    detector_options: dict[str, Any] | None = None,
    **stt_options: Any,
) -> CommitRun:
    """Run ``call`` through a real session in real time (see the module doc);
    ``detector_options`` go to :func:`~turnkit_livekit.turn_detector`,
    ``stt_options`` to :class:`~lk_harness.FakeOracleSTT`."""
    audio, manifest = load_call(call)
    src = WavAudioInput(audio)
    detector = turn_detector(spec, **(detector_options or {}))
    run = CommitRun(call, keep_livekit_waits)
    committed = asyncio.Event()
    pending: list[Decision] = []

    def on_commit(text: str) -> None:
        run.commits.append((src.position, text))
        pending.clear()
        committed.set()

    def on_signal(_stream: TurnkitDetectorStream, s: SystemFrame) -> None:
        if isinstance(s, TurnEndFrame):
            d = Decision(s.at, src.position)
            run.decisions.append(d)
            pending[:] = [d]
            committed.clear()
        elif isinstance(s, TurnResumedFrame):
            pending.clear()

    detector.listeners.append(on_signal)  # before attach's: stamped first
    session = AgentSession(
        vad=silero.VAD.load(min_silence_duration=min_silence_duration),
        stt=FakeOracleSTT(manifest, src, **stt_options),
        llm=FakeLLM(),
        tts=FakeTTS(),
        turn_handling=turn_handling(detector, preemptive_generation={"enabled": False}),
    )
    session.input.audio = src
    out = CaptureAudioOutput()
    session.output.audio = out
    session.on(
        "user_input_transcribed",
        lambda ev: run.finals.append(src.position) if ev.is_final else None,
    )
    metrics = attach(session, detector, keep_livekit_waits=keep_livekit_waits)
    committer = metrics.committer

    async def held() -> None:
        waiting = committer is not None and committer.waiting_final
        if not pending or waiting:
            return
        try:
            async with asyncio.timeout(HOLD_S):
                await committed.wait()
        except TimeoutError:
            run.held_out.append(src.position)
            pending.clear()  # let the call go on: LiveKit needs audio to commit

    if hold:
        src.hold = held
    speeches: list[Any] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
    await session.start(_Agent(on_commit), record=False)
    try:
        async with asyncio.timeout(src.end + 120):
            await src.done.wait()
        await asyncio.sleep(1.0)  # the last turn's commit and reply start
    finally:
        await session.aclose()
    # the last reply may be cut by the session's close
    run.replies_interrupted = sum(1 for h in speeches[:-1] if h.interrupted)
    if committer is not None:
        run.how = [c.how for c in committer.commits]
        run.waited_final = [c.waited_final for c in committer.commits]
    return run
