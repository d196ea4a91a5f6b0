"""A LiveKit AgentSession without a room, driven by corpus audio.

LiveKit's own test fakes live in its repository, not its wheel, so these are
ours. Real: ``AgentSession``, ``Agent``, Silero VAD (livekit-plugins-silero),
the audio I/O classes (subclasses of ``livekit.agents.voice.io``). Fakes,
named so: ``FakeOracleSTT`` (emits the corpus's labelled words when the audio
reaching it has passed them, as a streaming recogniser would), ``FakeLLM``
(a fixed reply) and ``FakeTTS`` (silence as long as the text takes to say).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, llm, stt, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr, TimedString
from livekit.agents.voice.io import AudioInput, AudioOutput, AudioOutputCapabilities

from turnkit.audio.wav import read_wav

ROOT = Path(__file__).resolve().parents[3]
RECORDINGS = ROOT / "recordings"
SR = 16000
FRAME_S = 0.02


def load_call(call_id: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """A corpus call by id, or a call folder (a variant built for a test)."""
    d = call_id if isinstance(call_id, Path) else RECORDINGS / call_id
    return read_wav(d / "caller.wav", SR), json.loads((d / "call.json").read_text())


class WavAudioInput(AudioInput):
    """Caller audio from a WAV, 20 ms frames at real-time pace (then silence).

    ``position`` is the audio time (s) of the samples handed to LiveKit so far.
    ``hold`` (an ``async () -> None``, default none) is awaited right before
    each frame is handed over; the real-time pace resumes where it stood.
    """

    def __init__(self, audio: np.ndarray, start_s: float = 0.0, end_s: float | None = None):
        super().__init__(label="wav")
        a = audio[int(start_s * SR) : None if end_s is None else int(end_s * SR)]
        self.pcm = (np.clip(a, -1, 1) * 32767).astype(np.int16)
        self.offset = start_s
        self.end = start_s + len(self.pcm) / SR
        self.n = 0
        self.t0: float | None = None
        self.done = asyncio.Event()
        self.hold: Callable[[], Awaitable[None]] | None = None

    @property
    def position(self) -> float:
        return self.offset + self.n / SR

    async def __anext__(self) -> rtc.AudioFrame:
        step = int(FRAME_S * SR)
        if self.t0 is None:
            self.t0 = time.monotonic()
        due = self.t0 + self.n / SR
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if self.hold is not None:
            t = time.monotonic()
            await self.hold()
            self.t0 += time.monotonic() - t
        chunk = self.pcm[self.n : self.n + step]
        if len(chunk) < step:
            self.done.set()
            chunk = np.concatenate([chunk, np.zeros(step - len(chunk), np.int16)])
        self.n += step
        return rtc.AudioFrame(chunk.tobytes(), SR, 1, step)


class CaptureAudioOutput(AudioOutput):
    """An agent speaker that plays in real time and keeps what it played."""

    def __init__(self) -> None:
        super().__init__(label="capture", capabilities=AudioOutputCapabilities(pause=False))
        self.segments: list[dict[str, Any]] = []
        self._seg: dict[str, Any] | None = None
        self._finish: asyncio.TimerHandle | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._seg is None:
            self._seg = {"started": time.time(), "duration": 0.0, "interrupted": False}
            self.segments.append(self._seg)
            self.on_playback_started(created_at=self._seg["started"])
        self._seg["duration"] += frame.duration

    def flush(self) -> None:
        super().flush()
        seg = self._seg
        if seg is None:
            return
        left = seg["started"] + seg["duration"] - time.time()
        self._finish = asyncio.get_running_loop().call_later(max(0.0, left), self._finished, False)

    def _finished(self, interrupted: bool) -> None:
        seg, self._seg = self._seg, None
        if seg is None:
            return
        played = min(seg["duration"], time.time() - seg["started"])
        seg["interrupted"] = interrupted
        seg["played"] = played
        self.on_playback_finished(playback_position=played, interrupted=interrupted)

    def clear_buffer(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
        self._finished(True)


def _times(e: dict[str, Any]) -> dict[str, float]:
    return {"start": e["start"], "end": e["end"]}


@dataclass
class _Span:
    words: list[dict[str, Any]]
    end: float


class FakeOracleSTT(stt.STT):
    """Fake streaming STT: the labelled words of ``call.json``, each as an
    interim once the audio passed its end (``interims``) plus ``late_s``,
    each span final ``final_after_s`` (150 ms) after it plus ``late_s``."""

    def __init__(
        self,
        call: dict[str, Any],
        source: WavAudioInput,
        *,
        backchannels: bool = False,
        interims: bool = True,
        final_after_s: float = 0.15,
        late_s: float = 0.0,
    ) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=interims))
        self.source = source
        self.late_s = late_s  # a recogniser slower than the audio (a real one)
        self.interims = interims  # False: only finals, as a StreamAdapter-wrapped STT
        self.final_after_s = final_after_s
        self.spans: list[_Span] = []
        for e in call["events"]:
            if e["type"] == "backchannel" and backchannels:
                # a backchannel's label is its words ("uh-huh"), said over its span
                self.spans.append(_Span([{"text": e["text"], **_times(e)}], e["end"]))
            if e["type"] != "caller_turn":
                continue
            for s0, s1 in e.get("spans", [[e["start"], e["end"]]]):
                ws = [w for w in e.get("words", []) if s0 - 0.05 <= w["start"] < s1 + 0.05]
                if ws:
                    self.spans.append(_Span(ws, s1))
        self.spans.sort(key=lambda sp: sp.end)

    async def _recognize_impl(self, buffer: Any, *, language: Any, conn_options: Any) -> Any:
        raise NotImplementedError

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> stt.RecognizeStream:
        return _OracleStream(stt=self, conn_options=conn_options)


class _OracleStream(stt.RecognizeStream):
    async def _run(self) -> None:
        oracle: FakeOracleSTT = self._stt  # type: ignore[assignment]
        # A stream (re)created mid-call (LiveKit restarts it on clear_user_turn)
        # hears only what is said from then on, and only what the WAV holds.
        created, end = oracle.source.position, oracle.source.end
        self._created = created
        spans = [
            sp for sp in oracle.spans if sp.words[0]["start"] >= created - 0.1 and sp.end <= end
        ]
        said = 0
        async for _ in self._input_ch:
            now = oracle.source.position
            while spans and spans[0].end < oracle.source.offset:
                spans.pop(0)
            if not spans:
                continue
            span = spans[0]
            heard = [w for w in span.words if w["end"] + oracle.late_s <= now]
            if len(heard) > said:
                said = len(heard)
                if oracle.interims:
                    self._send(stt.SpeechEventType.INTERIM_TRANSCRIPT, heard)
            if now >= span.end + oracle.final_after_s + oracle.late_s:
                self._send(stt.SpeechEventType.FINAL_TRANSCRIPT, span.words)
                spans.pop(0)
                said = 0

    def _send(self, kind: stt.SpeechEventType, words: list[dict[str, Any]]) -> None:
        text = " ".join(w["text"] for w in words)
        # Word times as LiveKit's STT plugins give them: seconds of the audio
        # this stream received, plus the stream's start_time_offset (which
        # Agent.default.stt_node sets: wall time since the session's audio
        # input began).
        base = self.start_time_offset - getattr(self, "_created", 0.0)
        data = stt.SpeechData(
            language="en",
            text=text,
            start_time=words[0]["start"],
            end_time=words[-1]["end"],
            confidence=0.95,
            words=[
                TimedString(w["text"], start_time=w["start"] + base, end_time=w["end"] + base)
                for w in words
            ],
        )
        self._event_ch.send_nowait(stt.SpeechEvent(type=kind, alternatives=[data]))


class FakeLLM(llm.LLM):
    """Fake LLM: answers every request with ``reply`` (counts requests),
    its first chunk ``first_token_s`` after the request."""

    def __init__(
        self, reply: str = "Sure, a table for four on Saturday.", first_token_s: float = 0.05
    ) -> None:
        super().__init__()
        self.reply = reply
        self.first_token_s = first_token_s
        self.requests: list[llm.ChatContext] = []

    def tool_calls_for(self, chat_ctx: llm.ChatContext) -> list[tuple[str, dict[str, Any]]]:
        return []

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        **kwargs: Any,
    ) -> llm.LLMStream:
        self.requests.append(chat_ctx.copy())
        return _FakeLLMStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _FakeLLMStream(llm.LLMStream):
    async def _run(self) -> None:
        fake: FakeLLM = self._llm  # type: ignore[assignment]
        await asyncio.sleep(fake.first_token_s)
        calls = fake.tool_calls_for(self._chat_ctx)
        if calls:
            self._event_ch.send_nowait(
                llm.ChatChunk(
                    id="fake",
                    delta=llm.ChoiceDelta(
                        role="assistant",
                        tool_calls=[
                            llm.FunctionToolCall(
                                name=name, arguments=json.dumps(args), call_id=f"call-{i}"
                            )
                            for i, (name, args) in enumerate(calls)
                        ],
                    ),
                )
            )
            return
        self._event_ch.send_nowait(
            llm.ChatChunk(id="fake", delta=llm.ChoiceDelta(role="assistant", content=fake.reply))
        )


class FakeToolLLM(FakeLLM):
    """Fake LLM that first calls ``calls`` (name, args) for each user turn,
    then answers with ``reply`` once the tool results are in the context."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], reply: str = "Done.") -> None:
        super().__init__(reply)
        self.calls = calls

    def tool_calls_for(self, chat_ctx: llm.ChatContext) -> list[tuple[str, dict[str, Any]]]:
        last = chat_ctx.items[-1] if chat_ctx.items else None
        return [] if last is not None and last.type == "function_call_output" else self.calls


class FakeTTS(tts.TTS):
    """Fake TTS: silence lasting the text at 15 characters a second."""

    def __init__(self) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=SR, num_channels=1
        )

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _FakeChunked(tts=self, input_text=text, conn_options=conn_options)


class _FakeChunked(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id="fake", sample_rate=SR, num_channels=1, mime_type="audio/pcm"
        )
        n = int(len(self._input_text) / 15 * SR)
        output_emitter.push(np.zeros(n, np.int16).tobytes())
        output_emitter.flush()


@dataclass
class SessionLog:
    user_messages: list[llm.ChatMessage] = field(default_factory=list)
    committed_at: list[float] = field(default_factory=list)  # audio position at commit
    eot_events: list[Any] = field(default_factory=list)
