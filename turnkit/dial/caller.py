"""The simulated caller: one recorded call played into a live agent.

It decides nothing about the agent. It sends ``caller.wav`` in 20 ms frames
on the wall clock (frame *k* leaves once its last sample would have been
captured, ``t0 + (k+1)·20 ms``), never waiting for the agent: a slow agent
gets talked over exactly as in the recorded call. What the agent sends is
played out as a phone would: each chunk starts when it arrives or when the
audio before it ends, whichever is later (agents send faster than real
time), and an interruption message flushes what was not yet played. The
received audio therefore lands on the caller's timeline (time 0 = the first
sample of ``caller.wav``), which is where the replay measures latency.

After ``caller.wav`` the caller keeps its line open (silence) until the
agent has answered the last turn and been quiet ``tail_s``, or
``answer_timeout_s`` after the last turn's end; ``call_timeout_s`` bounds the
whole call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from turnkit.audio.wav import resample, to_pcm16
from turnkit.dial.transport import (
    SEND_RATE,
    AgentAudio,
    AgentInterrupted,
    AgentMessage,
    DialError,
    Transport,
)
from turnkit.replay.recording import Recording

__all__ = ["DialConfig", "LiveCall", "dial_call"]

FRAME_S = 0.02
AUDIBLE_RMS = 10 ** (-45 / 20)  # the same -45 dBFS as the agent-turn measure


@dataclass(frozen=True)
class DialConfig:
    """How long ``turnkit dial`` waits: to connect, for the whole call, for
    the agent's first audio after a caller turn (beyond it the turn counts
    as missed, as in the replay), and the tail kept after the last event."""

    connect_timeout_s: float = 10.0
    call_timeout_s: float = 120.0
    answer_timeout_s: float = 5.0  # the replay's missed-turn timeout
    tail_s: float = 1.0


@dataclass
class LiveCall:
    """What happened on the line. ``agent`` is what the caller heard, 16 kHz,
    on the caller's timeline; ``caller`` is what was sent (int16)."""

    rec: Recording
    url: str
    transport: str
    caller: np.ndarray
    agent: np.ndarray
    messages: list[dict[str, Any]] = field(default_factory=list)
    interruptions: list[float] = field(default_factory=list)
    failure: str | None = None
    cut_short: bool = False  # the call ended before the caller was done
    t0_monotonic: float | None = None  # caller time 0 on this host's monotonic clock
    wall_s: float = 0.0
    chunks: int = 0


class _Playout:
    """The caller's loudspeaker: a growing 16 kHz buffer on the caller timeline."""

    def __init__(self) -> None:
        self.buf = np.zeros(SEND_RATE * 30, np.float32)
        self.end = 0  # sample where the last placed audio ends

    def place(self, pcm: np.ndarray, at_s: float) -> None:
        start = max(round(at_s * SEND_RATE), self.end)
        stop = start + len(pcm)
        if stop > len(self.buf):
            grown = np.zeros(max(stop, 2 * len(self.buf)), np.float32)
            grown[: len(self.buf)] = self.buf
            self.buf = grown
        self.buf[start:stop] = pcm
        self.end = stop

    def flush(self, at_s: float) -> None:
        cut = round(at_s * SEND_RATE)
        if self.end > cut:
            self.buf[cut : self.end] = 0.0
            self.end = cut


async def dial_call(rec: Recording, transport: Transport, url: str, config: DialConfig) -> LiveCall:
    """Dial ``url`` and play ``rec`` into it; never raises for the agent's
    faults: they come back as ``LiveCall.failure`` (one line)."""
    caller = to_pcm16(rec.caller_audio(SEND_RATE))
    n_frame = round(FRAME_S * SEND_RATE)
    play = _Playout()
    call = LiveCall(rec, url, transport.name, caller, np.zeros(0, np.float32))
    last_end = max((t.end for t in rec.caller_turns), default=0.0)
    loop = asyncio.get_running_loop()
    wall0 = time.perf_counter()
    try:
        conn = await transport.connect(url, config.connect_timeout_s)
    except DialError as exc:
        call.failure = str(exc)
        call.caller = caller[:0]
        return call
    t0 = loop.time()
    call.t0_monotonic = time.monotonic() - (loop.time() - t0)
    closed_at: list[float] = []
    error: list[str] = []
    heard_last = [-1.0]  # caller-time where the latest audible chunk ends

    async def receive() -> None:
        try:
            async for ev in conn.events():
                now = loop.time() - t0
                if isinstance(ev, AgentAudio):
                    pcm = (
                        ev.pcm
                        if ev.sample_rate == SEND_RATE
                        else resample(ev.pcm, ev.sample_rate, SEND_RATE)
                    )
                    play.place(pcm.astype(np.float32), now)
                    call.chunks += 1
                    # Transports that stream silence between replies (WebRTC)
                    # must not keep the call open: only sound counts.
                    if len(pcm) and float(np.sqrt(np.mean(np.square(pcm)))) > AUDIBLE_RMS:
                        heard_last[0] = play.end / SEND_RATE
                elif isinstance(ev, AgentInterrupted):
                    play.flush(now)
                    call.interruptions.append(round(now, 4))
                elif isinstance(ev, AgentMessage):
                    call.messages.append({"at": round(now, 4), **ev.data})
        except DialError as exc:
            error.append(str(exc))
        except Exception as exc:  # a transport bug or a garbled stream
            error.append(f"transport error: {type(exc).__name__}: {exc}")
        closed_at.append(loop.time() - t0)

    receiver = asyncio.create_task(receive())
    silence = np.zeros(n_frame, "<i2")
    k = 0
    try:
        while True:
            due = t0 + (k + 1) * FRAME_S
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            now = loop.time() - t0
            if error:
                call.failure = error[0]
                break
            if closed_at:
                call.failure = (
                    f"the agent closed the connection at {closed_at[0]:.2f} s of "
                    f"{rec.duration:.2f} s"
                )
                break
            if now > config.call_timeout_s:
                call.failure = f"call timed out after {config.call_timeout_s:g} s"
                break
            start = k * n_frame
            if start < len(caller):
                chunk = caller[start : start + n_frame]
                if len(chunk) < n_frame:
                    chunk = np.concatenate([chunk, silence[: n_frame - len(chunk)]])
            else:
                # Past caller.wav: the line stays open (silence) until the
                # agent has answered the last turn or the timeout passes.
                playing = heard_last[0] > now
                answered = heard_last[0] > last_end
                quiet = answered and not playing and now - heard_last[0] >= config.tail_s
                if quiet or (not playing and now >= last_end + config.answer_timeout_s):
                    break
                chunk = silence
            await conn.send_audio(chunk.tobytes())
            k += 1
    finally:
        call.cut_short = call.failure is not None
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receiver
        await conn.close()
    sent = k * n_frame
    call.caller = (
        caller[:sent]
        if sent <= len(caller)
        else np.concatenate([caller, np.zeros(sent - len(caller), "<i2")])
    )
    call.agent = np.zeros(sent, np.float32)
    n = min(sent, play.end)
    call.agent[:n] = play.buf[:n]
    call.wall_s = time.perf_counter() - wall0
    if call.failure is None and heard_last[0] < 0:
        call.failure = f"the agent never spoke ({sent / SEND_RATE:.2f} s of call)"
    return call
