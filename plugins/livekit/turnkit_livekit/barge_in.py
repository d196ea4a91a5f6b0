"""turnkit's barge-in filters and history truncation on LiveKit's interruption path.

LiveKit 1.8 decides an interruption inside its ``AgentActivity``: VAD speech
longer than ``interruption.min_duration`` (or a transcript) stops the agent,
and a user turn committed while the agent talks interrupts it too. It cannot
tell "uh-huh", the agent's own echo or a cough from a bid for the floor.
:func:`filter_barge_in` moves that decision to turnkit, through LiveKit's
supported pieces only:

* :func:`interruption_options` — ``turn_handling["interruption"]`` with
  ``min_words`` set out of reach (:data:`HANDED_OVER`): LiveKit's own gate,
  which both its audio-activity interruption and its commit-while-speaking
  path check, then never opens by itself (``mode="vad"``: no cloud model;
  ``resume_false_interruption`` off: turnkit's decision is final);
* :class:`EchoGateInput` — wraps ``session.input.audio``: each 32 ms of mic
  audio (16 kHz) goes through turnkit's :class:`~turnkit.barge_in.EchoFilter`
  (reference: what :class:`PlaybackTap` played) before LiveKit's VAD and STT
  hear it, and through turnkit's Silero VAD, whose verdicts (with the block)
  feed turnkit's :class:`~turnkit.barge_in.BargeInController`;
* the controller decides; :class:`BargeInFilter` only executes its actions
  through the session's public API: ``stop``/``confirm`` →
  ``session.interrupt()``; ``pause`` → ``session.output.audio.pause()`` (when
  the sink can pause; else the agent talks on until the confirm);
  ``resume`` → ``.resume()``; ``cancel_pending`` (caller speech while a reply
  is pending but not yet audible) → ``session.interrupt()``; words the
  controller judged an acknowledgement → ``session.clear_user_turn()`` (its
  "uh-huh" is not kept to prefix the next turn);
* :class:`PlaybackTap` — wraps ``session.output.audio``: the echo reference,
  the agent's playback for the controller, and a
  :class:`~turnkit.barge_in.PlaybackCursor` per reply. When a reply ends
  interrupted it fills ``PlaybackFinishedEvent.synchronized_transcript`` with
  the words the caller heard (:func:`~turnkit.barge_in.heard_prefix`: TTS word
  timestamps when LiveKit forwards them, ``use_tts_aligned_transcript=True``;
  else turnkit's estimate over the played seconds the sink reports), which is
  the text LiveKit itself then stores in the ``ChatContext``, flagged
  ``interrupted=True``. Without a synchronizer (no room, or
  ``sync_transcription=False``) LiveKit would store the whole generated text.
  :class:`ReplyTextTap` (``session.output.transcription``) collects the text.

Everything runs on one timeline, the mic audio's own (:class:`MicClock`),
as ``turnkit replay`` does.

Example::

    session = AgentSession(vad=..., stt=..., llm=..., tts=...,
                           turn_handling={"interruption": interruption_options()})
    await session.start(agent, room=ctx.room)
    barge_in = filter_barge_in(session, language="en")
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import AgentSession, llm
from livekit.agents.voice.io import (
    AudioInput,
    AudioOutput,
    TextOutput,
    TimedString,
)
from livekit.agents.voice.turn import InterruptionOptions

from turnkit.audio.vad import VADAnalyzer, VADParams, VADStep
from turnkit.barge_in import (
    Action,
    BargeInController,
    BargeInParams,
    EchoFilter,
    EchoParams,
    PlaybackCursor,
    TruncationConfig,
)
from turnkit.frames import Word

__all__ = [
    "HANDED_OVER",
    "BargeInFilter",
    "EchoGateInput",
    "MicClock",
    "PlaybackTap",
    "ReplyTextTap",
    "filter_barge_in",
    "interruption_options",
]

log = logging.getLogger(__name__)

SR = 16000
FRAME = 512  # turnkit's VAD and echo filter work on 32 ms at 16 kHz
HANDED_OVER = 1_000_000  # interruption.min_words no utterance reaches: turnkit decides


def interruption_options(**overrides: Any) -> InterruptionOptions:
    """``turn_handling["interruption"]`` for a session whose barge-ins turnkit
    decides (see the module docstring); ``overrides`` win."""
    opts: dict[str, Any] = {
        "enabled": True,
        "mode": "vad",
        "min_words": HANDED_OVER,
        "resume_false_interruption": False,
        **overrides,
    }
    return InterruptionOptions(**opts)  # type: ignore[typeddict-item]


class MicClock:
    """Seconds of caller audio heard so far: the timeline every turnkit
    policy in a LiveKit session runs on (echo reference, VAD edges, the
    controller's waits, playback marks)."""

    def __init__(self) -> None:
        self.samples = 0

    def now(self) -> float:
        return self.samples / SR

    async def sleep(self, seconds: float) -> None:  # Clock protocol; unused by the filters
        await asyncio.sleep(max(0.0, seconds))


def _mono_i16(frame: rtc.AudioFrame) -> np.ndarray:
    pcm = np.frombuffer(frame.data, dtype=np.int16)
    return pcm.reshape(-1, frame.num_channels)[:, 0] if frame.num_channels > 1 else pcm


class _To16k:
    """Mono 16 kHz float32 from LiveKit frames of any rate (streaming resampler)."""

    def __init__(self) -> None:
        self._rate: int | None = None
        self._res: rtc.AudioResampler | None = None

    def __call__(self, frame: rtc.AudioFrame) -> np.ndarray:
        mono = _mono_i16(frame)
        if frame.sample_rate == SR:
            return mono.astype(np.float32) / 32768.0
        if self._rate != frame.sample_rate:
            self._rate = frame.sample_rate
            self._res = rtc.AudioResampler(frame.sample_rate, SR, num_channels=1)
        assert self._res is not None
        out = self._res.push(rtc.AudioFrame(mono.tobytes(), frame.sample_rate, 1, len(mono)))
        if not out:
            return np.zeros(0, np.float32)
        return np.concatenate([np.frombuffer(f.data, np.int16) for f in out]).astype(
            np.float32
        ) / 32768.0


class EchoGateInput(AudioInput):
    """Mic audio through turnkit's echo filter and VAD before LiveKit hears it.

    Re-frames the source to 32 ms at 16 kHz mono (what the filter and the
    VAD were tuned on); each block is echo-suppressed (when an
    :class:`~turnkit.barge_in.EchoFilter` is given), its VAD verdict goes to
    ``on_step``, and the cleaned block is what LiveKit's VAD and STT get.
    """

    def __init__(
        self,
        source: AudioInput,
        clock: MicClock,
        *,
        echo: EchoFilter | None,
        vad: VADAnalyzer,
        on_step: Any,
        before_block: Any = None,
    ) -> None:
        super().__init__(label="turnkit-echo-gate", source=source)
        self.clock = clock
        self.echo = echo
        self.vad = vad
        self.on_step = on_step
        self.before_block = before_block
        self.echo_frames = 0  # blocks judged the agent's echo alone
        self._to16k = _To16k()
        self._buf = np.zeros(0, np.float32)
        self._out: deque[rtc.AudioFrame] = deque()

    async def __anext__(self) -> rtc.AudioFrame:
        while not self._out:
            frame = await super().__anext__()
            self._buf = np.concatenate([self._buf, self._to16k(frame)])
            while len(self._buf) >= FRAME:
                block, self._buf = self._buf[:FRAME], self._buf[FRAME:]
                self._out.append(self._process(block))
        return self._out.popleft()

    def _process(self, block: np.ndarray) -> rtc.AudioFrame:
        at = self.clock.now()
        if self.before_block is not None:
            self.before_block(at)
        if self.echo is not None:
            step = self.echo.process(block, at)
            self.echo_frames += step.echo_only
            block = step.audio
        v = self.vad.analyze(block, at)
        self.clock.samples += FRAME
        self.on_step(v, block)
        pcm = (np.clip(block, -1.0, 1.0) * 32767).astype(np.int16)
        return rtc.AudioFrame(pcm.tobytes(), SR, 1, FRAME)


@dataclass
class _Reply:
    """One audio segment the agent played (LiveKit: flush/clear to flush/clear)."""

    reply_id: int
    text: str = ""
    words: list[Word] = field(default_factory=list)
    timed: bool = True  # every text piece came with TTS word times
    captured_s: float = 0.0
    flushed: bool = False


class ReplyTextTap(TextOutput):
    """The agent's reply text as LiveKit forwards it (to the room's
    transcription, or nowhere): the text of the reply now being played, with
    TTS word timestamps when the pieces are ``TimedString``s that carry them."""

    def __init__(self, next_in_chain: TextOutput | None) -> None:
        super().__init__(label="turnkit-reply-text", next_in_chain=next_in_chain)
        self.text = ""
        self.words: list[Word] = []
        self.anchors: list[tuple[float, int]] = []
        self.timed = True
        self.flushed = False
        self.texts: list[str] = []  # each finished text segment (for recorders)
        self.listeners: list[Any] = []

    def take(self) -> tuple[str, list[Word], bool, list[tuple[float, int]]]:
        out = (self.text, self.words, self.timed and bool(self.words), self.anchors)
        self.text, self.words, self.timed, self.flushed = "", [], True, False
        self.anchors = []
        return out

    async def capture_text(self, text: str) -> None:
        if self.flushed:
            self.take()  # a new segment's text: the last one had no audio
        if isinstance(text, TimedString) and _given(text.start_time):
            if _given(text.end_time):
                if text.strip():
                    self.words.append(
                        Word(
                            text=text.strip(),
                            start=float(text.start_time),
                            end=float(text.end_time),
                        )
                    )
            else:
                # A sentence's start time (LiveKit's TTS stream adapter): the
                # audio before it covers the text before it.
                self.timed = False
                self.anchors.append((float(text.start_time), len(self.text)))
        elif text.strip():
            self.timed = False
        self.text += text
        if self.next_in_chain is not None:
            await self.next_in_chain.capture_text(text)

    def flush(self) -> None:
        self.flushed = True
        self.texts.append(self.text)
        for fn in self.listeners:
            fn(self.text)
        if self.next_in_chain is not None:
            self.next_in_chain.flush()


def _given(v: Any) -> bool:
    return isinstance(v, int | float)


class PlaybackTap(AudioOutput):
    """The agent's audio on its way to the speaker: echo reference, playback
    marks, and the heard words of an interrupted reply (see the module
    docstring). Frames are placed on the mic timeline where they will play:
    after the previous frame, never before now. LiveKit hands frames over
    faster than real time, so they wait here and reach the echo filter's
    reference just before they play (:meth:`feed_reference`, called for each
    mic block): the filter keeps only the last seconds it was given."""

    AHEAD_S = 0.1  # reference handed to the echo filter this far ahead of the mic

    def __init__(self, sink: AudioOutput, owner: BargeInFilter) -> None:
        super().__init__(
            label="turnkit-playback",
            capabilities=sink._capabilities,
            next_in_chain=sink,
            sample_rate=sink.sample_rate,
        )
        self.owner = owner
        self._to16k = _To16k()
        self._play_end = 0.0  # where the last scheduled audio ends (mic timeline)
        self._pushed_end = 0.0  # how far the echo filter's reference reaches
        self._scheduled: deque[tuple[float, np.ndarray]] = deque()
        self._held: list[np.ndarray] = []  # unplayed reference while paused
        self._paused = False
        self._reply: _Reply | None = None
        self.reply_count = 0

    # -- audio ---------------------------------------------------------------
    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        o = self.owner
        now = o.clock.now()
        if self._reply is None or self._reply.flushed:
            self.reply_count += 1
            self._reply = _Reply(self.reply_count)
            o._agent_started(self._reply, max(self._play_end, now))
        self._reply.captured_s += frame.duration
        if o.echo is not None:
            audio = self._to16k(frame)
            if self._paused:
                self._held.append(audio)
            else:
                at = max(self._play_end, now)
                self._scheduled.append((at, audio))
                self._play_end = at + len(audio) / SR
        assert self.next_in_chain is not None
        await self.next_in_chain.capture_frame(frame)

    def feed_reference(self, now: float) -> None:
        echo = self.owner.echo
        while echo is not None and self._scheduled and self._scheduled[0][0] <= now + self.AHEAD_S:
            at, audio = self._scheduled.popleft()
            echo.push_reference(audio, at)
            self._pushed_end = at + len(audio) / SR

    def flush(self) -> None:
        super().flush()
        if self._reply is not None:
            self._reply.flushed = True
            self.owner.cursor.on_duration(self._reply.reply_id, self._reply.captured_s)
        assert self.next_in_chain is not None
        self.next_in_chain.flush()

    def _cut_reference(self) -> list[np.ndarray]:
        """Stop the reference now; returns what was still to play."""
        o = self.owner
        left: list[np.ndarray] = []
        if o.echo is not None:
            now = o.clock.now()
            ahead = max(0.0, self._pushed_end - now)
            if ahead > 0:
                left.append(o.echo.reference.read(round(now * SR), round(ahead * SR)))
            o.echo.reference.write(np.zeros(0, np.float32), round(now * SR))
            left.extend(a for _, a in self._scheduled)
            self._scheduled.clear()
            self._play_end = self._pushed_end = now
        return left

    def clear_buffer(self) -> None:
        self._cut_reference()
        self._held = []
        self._paused = False
        if self._reply is None or self._reply.captured_s == 0:
            self.owner.text.take()  # a reply stopped before any audio: drop its text
        assert self.next_in_chain is not None
        self.next_in_chain.clear_buffer()

    def pause(self) -> None:
        if not self._paused:
            self._paused = True
            self._held = self._cut_reference() + self._held
        super().pause()

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            now = self.owner.clock.now()
            self._play_end = max(self._play_end, now)
            for audio in self._held:
                self._scheduled.append((self._play_end, audio))
                self._play_end += len(audio) / SR
            self._held = []
        super().resume()

    # -- playback events -------------------------------------------------------
    def on_playback_finished(
        self,
        *,
        playback_position: float,
        interrupted: bool,
        synchronized_transcript: str | None = None,
    ) -> None:
        reply, self._reply = self._reply, None
        if reply is not None:
            synchronized_transcript = self.owner._reply_finished(
                reply, playback_position, interrupted, synchronized_transcript
            )
        super().on_playback_finished(
            playback_position=playback_position,
            interrupted=interrupted,
            synchronized_transcript=synchronized_transcript,
        )


@dataclass
class Truncation:
    """What the caller heard of one interrupted reply (``BargeInFilter.truncations``)."""

    reply_id: int
    text: str  # the whole reply
    heard: str  # what LiveKit stores
    words_kept: int
    words_total: int
    played_s: float
    method: str  # timestamps / anchors / estimate
    livekit_transcript: str | None  # what LiveKit's synchronizer said, if any


class BargeInFilter:
    """Executes turnkit's barge-in controller's actions in a running LiveKit
    session (see the module docstring); decides nothing itself. Counters:
    ``stops`` (interruptions made, with ``reasons``), ``acknowledgements``
    (backchannels let pass), ``pending_stops`` (pending replies cancelled by
    caller speech), ``provisional_stops`` (pauses), ``resumes``,
    ``truncations``."""

    def __init__(
        self,
        session: AgentSession,
        *,
        language: str = "en",
        echo: bool | EchoFilter = True,
        params: BargeInParams | None = None,
        echo_params: EchoParams | None = None,
        vad_params: VADParams | None = None,
        truncation: TruncationConfig | None = None,
    ) -> None:
        self.session = session
        self.clock = MicClock()
        self.controller = BargeInController(self.clock, language, params)
        if isinstance(echo, EchoFilter):
            self.echo: EchoFilter | None = echo
        else:
            self.echo = EchoFilter(echo_params, rate=SR, frame_samples=FRAME) if echo else None
        self.vad = VADAnalyzer(params=vad_params)
        # LiveKit marks an interrupted message itself (interrupted=True); by
        # default the stored text is exactly the heard words, no note.
        self.truncation = truncation or TruncationConfig(note=None)
        self.cursor = PlaybackCursor(self.clock, config=self.truncation)
        self.stops = 0
        self.reasons: list[str] = []
        self.acknowledgements: list[str] = []
        self.pending_stops = 0
        self.provisional_stops = 0  # pauses (held where the sink can pause)
        self.resumes = 0  # of which the agent went on
        self.actions: list[tuple[float, Action]] = []  # every non-keep action
        self._paused = False
        self._audible = False  # the agent's audio is playing (a tap saw it start)
        self._acks_seen = 0
        self.truncations: list[Truncation] = []
        self._finals: list[str] = []
        self._interim = ""
        self.input: EchoGateInput | None = None
        self.output: PlaybackTap | None = None
        self.text = ReplyTextTap(session.output.transcription)
        self.text.listeners.append(self._on_reply_text)
        if session.input.audio is None or session.output.audio is None:
            raise ValueError(
                "filter_barge_in: the session has no audio input/output yet "
                "(call it after session.start)"
            )
        self.input = EchoGateInput(
            session.input.audio,
            self.clock,
            echo=self.echo,
            vad=self.vad,
            on_step=self._on_vad,
            before_block=self._before_block,
        )
        self.output = PlaybackTap(session.output.audio, self)
        session.input.audio = self.input
        session.output.audio = self.output
        session.output.transcription = self.text
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item)

    # -- caller side ------------------------------------------------------------
    def _before_block(self, at: float) -> None:
        if self.output is not None:
            self.output.feed_reference(at)

    def _reply_pending(self) -> bool:
        """A reply is on its way (LiveKit's current speech) but not audible yet."""
        speech = self.session.current_speech
        return (
            speech is not None
            and not speech.interrupted
            and speech.allow_interruptions
            and not self._audible
        )

    def _on_vad(self, v: VADStep, block: np.ndarray | None = None) -> None:
        self.controller.on_reply_pending(self._reply_pending())
        self._execute(self.controller.on_frame(v, block))

    def _on_transcribed(self, ev: Any) -> None:
        log.debug("transcript at %.2f s: %r final=%s", self.clock.now(), ev.transcript, ev.is_final)
        if ev.is_final:
            if ev.transcript:
                self._finals.append(ev.transcript)
            self._interim = ""
        else:
            self._interim = ev.transcript
        self._execute(self.controller.on_transcript(" ".join([*self._finals, self._interim])))
        ctl = self.controller
        if ctl.ack_count > self._acks_seen:
            self._acks_seen = ctl.ack_count
            self._acknowledged(ctl.acknowledgements[-1][1])

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if isinstance(item, llm.ChatMessage) and item.role == "user":
            self._finals, self._interim = [], ""

    def _execute(self, act: Action) -> None:
        """Carry out one controller action through the session's API."""
        if act is Action.KEEP:
            return
        self.actions.append((self._t(), act))
        reason = self.controller.reason
        out = self.session.output.audio
        if act in (Action.STOP, Action.CONFIRM):
            self._interrupt(reason)
        elif act is Action.PAUSE:
            self.provisional_stops += 1
            if out is not None and out.can_pause and self._interruptible():
                self._paused = True
                out.pause()
            log.info("turnkit barge-in at %.2f s: %s, held", self._t(), reason)
        elif act is Action.RESUME:
            self.resumes += 1
            if self._paused:
                self._paused = False
                if out is not None:
                    out.resume()
            log.info("turnkit barge-in at %.2f s: %s", self._t(), reason)
        elif act is Action.CANCEL_PENDING:
            speech = self.session.current_speech
            if speech is not None and not speech.interrupted and speech.allow_interruptions:
                self.pending_stops += 1
                log.info("turnkit: caller still speaking, pending reply cancelled")
                self.session.interrupt()
            self.controller.on_reply_pending(False)

    def _acknowledged(self, text: str) -> None:
        reason = f"acknowledgement: {text!r}"
        self.acknowledgements.append(reason)
        log.info("turnkit barge-in at %.2f s: %s, agent keeps talking", self._t(), reason)
        self._finals, self._interim = [], ""
        # LiveKit emits the transcript event before it adds the words to the
        # turn: clear once it has (same loop turn, before its end of turn
        # timer can fire).
        asyncio.get_running_loop().call_soon(self._clear_user_turn)

    def _t(self) -> float:
        return self.clock.now()

    def _interruptible(self) -> bool:
        speech = self.session.current_speech
        return speech is not None and speech.allow_interruptions and not speech.interrupted

    def _interrupt(self, reason: str) -> None:
        self._paused = False
        if self._interruptible():
            self.stops += 1
            self.reasons.append(reason)
            log.info("turnkit barge-in at %.2f s: %s", self._t(), reason)
            self.session.interrupt()
        else:
            # Nothing of LiveKit's to stop (the reply had ended): the caller has the floor.
            self.controller.on_agent_stopped(self._t())

    def _clear_user_turn(self) -> None:
        with contextlib.suppress(RuntimeError):  # the session closed meanwhile
            self.session.clear_user_turn()

    # -- agent side (from the taps) ---------------------------------------------
    def _agent_started(self, reply: _Reply, at: float) -> None:
        self._audible = True
        self.controller.on_agent_started(self.text.text, at=at)
        self.cursor.on_started(reply.reply_id)

    def _on_reply_text(self, text: str) -> None:
        # The whole reply's text, once LiveKit has forwarded it: context for
        # "okay" after a question, and the words an echo transcript would repeat.
        if self._audible and text.strip():
            self.controller.on_agent_text(text)

    def _reply_finished(
        self, reply: _Reply, played_s: float, interrupted: bool, livekit: str | None
    ) -> str | None:
        self._audible = False
        self._paused = False
        self.controller.on_agent_stopped(self.clock.now())
        text, words, timed, anchors = self.text.take()
        rid = reply.reply_id
        self.cursor.on_text(rid, text, append=False)
        if timed:
            self.cursor.on_words(rid, words)
        self.cursor.reply(rid).anchors.extend(a for a in anchors if a[1] > 0)
        self.cursor.on_mark(rid, played_s)
        self.cursor.on_stopped(rid, "interrupted" if interrupted else "completed")
        if not interrupted or not text.strip():
            return livekit
        heard = self.cursor.heard(rid)
        self.truncations.append(
            Truncation(
                rid,
                text,
                heard.text,
                heard.words_kept,
                heard.words_total,
                played_s,
                heard.method,
                livekit,
            )
        )
        log.info(
            "turnkit: reply %d interrupted after %.2f s, %d/%d words heard (%s)",
            rid,
            played_s,
            heard.words_kept,
            heard.words_total,
            heard.method,
        )
        out = heard.text
        if out and self.truncation.note:
            out += self.truncation.note
        return out


def filter_barge_in(
    session: AgentSession,
    *,
    language: str = "en",
    echo: bool | EchoFilter = True,
    params: BargeInParams | None = None,
    truncation: TruncationConfig | None = None,
) -> BargeInFilter:
    """Hand ``session``'s barge-in decision to turnkit (after ``session.start``;
    build the session with ``turn_handling={"interruption": interruption_options()}``)."""
    opts = session.options.interruption
    if opts.get("min_words", 0) < HANDED_OVER:
        log.warning(
            "filter_barge_in: interruption.min_words=%s, so LiveKit still interrupts on its "
            "own; build the session with turn_handling={'interruption': interruption_options()}",
            opts.get("min_words"),
        )
    return BargeInFilter(
        session, language=language, echo=echo, params=params, truncation=truncation
    )
