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
* :class:`~turnkit_livekit.timeline.TimelineInput` — wraps
  ``session.input.audio`` with the session's one
  :class:`~turnkit.audio.timeline.AudioTimeline`: each 32 ms of mic audio
  (16 kHz) goes through turnkit's :class:`~turnkit.barge_in.EchoFilter`
  (reference: what :class:`PlaybackTap` played) before LiveKit's VAD and STT
  hear it, and through the session's one Silero VAD, whose verdicts (with
  the frame) feed turnkit's :class:`~turnkit.barge_in.BargeInController`.
  When the session's turn detector is turnkit's
  (:class:`~turnkit_livekit.detectors.TurnkitStreamingDetector`), the
  timeline is its stream's (:meth:`~turnkit_livekit.detectors.TurnkitDetectorStream.share_timeline`)
  and the stream reads the verdicts the frames carry: one VAD, one echo
  filter, one 16 kHz converter and one audio time axis per session, the
  controller and the detector seeing the same frames and speech edges in
  the same order (the detector's clock is the end of the last frame it
  was given: it runs behind the mic path by LiveKit's queue);
* the controller decides; :class:`BargeInFilter` only executes its actions
  through the session's public API: ``stop``/``confirm`` →
  ``session.interrupt()``; ``pause`` → ``session.output.audio.pause()`` (when
  the sink can pause; else the agent talks on until the confirm);
  ``resume`` → ``.resume()``; ``cancel_pending`` (caller speech while a reply
  is pending but not yet audible) → ``session.interrupt()``; words the
  controller judged an acknowledgement → ``session.clear_user_turn()`` (its
  "uh-huh" is not kept to prefix the next turn), and kept in turnkit's
  :class:`~turnkit.drafting.owed.OwedTurn`: when the reply then plays to its
  end, the agent listens again (not a reply waiting on a function call) and
  the rule says the caller is owed an answer ("Okay" said over the agent's
  closing words, then silence), ``session.generate_reply(user_input=...)``
  answers it, as turnkit replay's Responder does — otherwise the
  caller, who has finished, would wait in silence;
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
  With each caller frame and transcript the controller is told how far into
  that text playback is (its TTS word times, else the estimate, against the
  seconds played, pauses left out), as the Pipecat host's playback marks
  tell it: an acknowledgement comes at the agent's phrase boundaries, and
  "okay" after its question was heard answers it.

Everything runs on one timeline, the mic audio's own (the timeline's
:class:`~turnkit.audio.timeline.AudioClock`: seconds of caller audio
framed), as ``turnkit replay`` does.

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
from livekit.agents.utils import is_given
from livekit.agents.voice.io import (
    AudioOutput,
    TextOutput,
    TimedString,
)
from livekit.agents.voice.turn import InterruptionOptions

from turnkit.audio.timeline import FRAME_SAMPLES, SAMPLE_RATE, AudioTimeline
from turnkit.audio.vad import VADAnalyzer, VADParams
from turnkit.barge_in import (
    Action,
    BargeInController,
    BargeInParams,
    EchoFilter,
    EchoParams,
    PlaybackCursor,
    ReplyProgress,
    TruncationConfig,
)
from turnkit.drafting.owed import OwedTurn
from turnkit.frames import AudioInFrame, Word
from turnkit_livekit.detectors import TurnkitDetectorStream, TurnkitStreamingDetector
from turnkit_livekit.timeline import TimelineInput

__all__ = [
    "HANDED_OVER",
    "BargeInFilter",
    "PlaybackTap",
    "ReplyTextTap",
    "filter_barge_in",
    "interruption_options",
]

log = logging.getLogger(__name__)

SR = SAMPLE_RATE  # the timeline's rate: the echo reference's, the mic clock's
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


@dataclass(frozen=True, slots=True)
class _Ref:
    """Agent audio for the echo reference, as the sink got it (int16 at the
    TTS's rate) or read back from the reference (float32, 16 kHz)."""

    audio: np.ndarray
    rate: int
    channels: int = 1

    @property
    def duration(self) -> float:
        return len(self.audio) / self.channels / self.rate


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

    @property
    def timestamps(self) -> list[Word] | None:
        """The TTS word times of the text so far, if every piece came with them."""
        return self.words if self.timed and self.words else None

    def take(self) -> tuple[str, list[Word], bool, list[tuple[float, int]]]:
        out = (self.text, self.words, self.timestamps is not None, self.anchors)
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
        self._play_end = 0.0  # where the last scheduled audio ends (mic timeline)
        self._pushed_end = 0.0  # how far the echo filter's reference reaches
        self._scheduled: deque[tuple[float, _Ref]] = deque()
        self._held: list[_Ref] = []  # unplayed reference while paused
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
            ref = _Ref(
                np.frombuffer(frame.data, dtype=np.int16), frame.sample_rate, frame.num_channels
            )
            if self._paused:
                self._held.append(ref)
            else:
                at = max(self._play_end, now)
                self._scheduled.append((at, ref))
                self._play_end = at + ref.duration
        assert self.next_in_chain is not None
        await self.next_in_chain.capture_frame(frame)

    def feed_reference(self, now: float) -> None:
        """Hand the echo filter the reference that plays up to ``now``
        (and :attr:`AHEAD_S` beyond), through the timeline's converter."""
        timeline = self.owner.timeline
        while (
            timeline.echo is not None
            and self._scheduled
            and self._scheduled[0][0] <= now + self.AHEAD_S
        ):
            at, ref = self._scheduled.popleft()
            timeline.push_reference(ref.audio, ref.rate, at=at, channels=ref.channels)
            self._pushed_end = at + ref.duration

    def flush(self) -> None:
        super().flush()
        if self._reply is not None:
            self._reply.flushed = True
            self.owner.cursor.on_duration(self._reply.reply_id, self._reply.captured_s)
        assert self.next_in_chain is not None
        self.next_in_chain.flush()

    def _cut_reference(self) -> list[_Ref]:
        """Stop the reference now; returns what was still to play."""
        o = self.owner
        left: list[_Ref] = []
        if o.echo is not None:
            now = o.clock.now()
            ahead = max(0.0, self._pushed_end - now)
            if ahead > 0:
                left.append(_Ref(o.echo.reference.read(round(now * SR), round(ahead * SR)), SR))
            o.echo.reference.write(np.zeros(0, np.float32), round(now * SR))
            left.extend(r for _, r in self._scheduled)
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

    @property
    def reply(self) -> _Reply | None:
        """The reply whose audio is playing (or last played)."""
        return self._reply

    def pause(self) -> None:
        if not self._paused:
            self._paused = True
            self._held = self._cut_reference() + self._held
            if self._reply is not None:
                self.owner.cursor.on_stopped(self._reply.reply_id, "paused")
        super().pause()

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._reply is not None:
                self.owner.cursor.on_started(self._reply.reply_id)
            now = self.owner.clock.now()
            self._play_end = max(self._play_end, now)
            for ref in self._held:
                self._scheduled.append((self._play_end, ref))
                self._play_end += ref.duration
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
    session (see the module docstring); decides nothing itself. The
    controller hears the session's one :attr:`timeline` (its echo filter,
    VAD and clock): the turnkit turn detector's stream's when the session
    has one (``stream``), else its own. Counters:
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
        if session.input.audio is None or session.output.audio is None:
            raise ValueError(
                "filter_barge_in: the session has no audio input/output yet "
                "(call it after session.start)"
            )
        # The session's one timeline: the turnkit detector stream's, if the
        # session runs one (its detector then reads the frames judged here).
        self.stream = session_stream(session)
        self.timeline = self.stream.share_timeline() if self.stream is not None else AudioTimeline()
        if isinstance(echo, EchoFilter):
            self.timeline.echo = echo
        else:
            self.timeline.echo = (
                EchoFilter(echo_params, rate=SR, frame_samples=FRAME_SAMPLES) if echo else None
            )
        if vad_params is not None:
            self.timeline.vad.params = vad_params  # the session's one VAD: the detector's too
        self.clock = self.timeline.clock
        self.controller = BargeInController(self.clock, language, params)
        # LiveKit marks an interrupted message itself (interrupted=True); by
        # default the stored text is exactly the heard words, no note.
        self.truncation = truncation or TruncationConfig(note=None)
        self.cursor = PlaybackCursor(self.clock, config=self.truncation)
        self._progress = ReplyProgress(self.truncation)  # asked on every caller frame
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
        # Acknowledgements the agent talked through, answered if owed when
        # its reply ends (turnkit's one rule; see the module docstring).
        self.owed = OwedTurn(self.clock)
        self.owed_answered = 0
        self._reply_start = 0.0  # where the reply now playing began (mic timeline)
        self._reply_done = False  # a reply played to its end; the agent's turn may be over
        self.truncations: list[Truncation] = []
        self._finals: list[str] = []
        self._interim = ""
        self.output: PlaybackTap | None = None
        self.text = ReplyTextTap(session.output.transcription)
        self.text.listeners.append(self._on_reply_text)
        self.input = TimelineInput(
            session.input.audio,
            self.timeline,
            on_frame=self._on_frame,
            before=self._before_frame,
        )
        self.output = PlaybackTap(session.output.audio, self)
        session.input.audio = self.input
        session.output.audio = self.output
        session.output.transcription = self.text
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item)
        session.on("agent_state_changed", self._on_agent_state)

    @property
    def echo(self) -> EchoFilter | None:
        """The session's echo filter (the timeline's)."""
        return self.timeline.echo

    @property
    def vad(self) -> VADAnalyzer:
        """The session's one VAD (the timeline's)."""
        return self.timeline.vad

    # -- caller side ------------------------------------------------------------
    def _before_frame(self, until: float) -> None:
        if self.output is not None:
            self.output.feed_reference(until)

    def _reply_pending(self) -> bool:
        """A reply is on its way (LiveKit's current speech) but not audible yet."""
        speech = self.session.current_speech
        return (
            speech is not None
            and not speech.interrupted
            and speech.allow_interruptions
            and not self._audible
        )

    def _on_frame(self, frame: AudioInFrame) -> None:
        assert frame.vad is not None
        if frame.vad.started:
            self.owed.caller_spoke()
        self.controller.on_reply_pending(self._reply_pending())
        self._report_progress()
        self._execute(self.controller.on_frame(frame.vad, frame.audio))

    def _report_progress(self) -> None:
        """Tell the controller how far into the reply's text playback is
        (an acknowledgement comes at the agent's phrase boundaries; "okay"
        once its question was heard answers it), as the Pipecat host's
        playback marks do: the text LiveKit has forwarded so far, with its
        TTS word times where it gives them (else turnkit's estimate), against
        the seconds played (the cursor's clock, pauses left out)."""
        reply = self.output.reply if self.output is not None else None
        t = self.text
        if not self._audible or reply is None or not t.text.strip():
            return
        heard = self._progress.heard(
            t.text,
            self.cursor.played_s(reply.reply_id),
            timestamps=t.timestamps,
            anchors=t.anchors,
        )
        self.controller.on_agent_progress(heard.cut)

    def _on_transcribed(self, ev: Any) -> None:
        log.debug("transcript at %.2f s: %r final=%s", self.clock.now(), ev.transcript, ev.is_final)
        if ev.is_final:
            if ev.transcript:
                self._finals.append(ev.transcript)
            self._interim = ""
        else:
            self._interim = ev.transcript
        self._report_progress()
        self._execute(self.controller.on_transcript(" ".join([*self._finals, self._interim])))
        ctl = self.controller
        if ctl.ack_count > self._acks_seen:
            self._acks_seen = ctl.ack_count
            self._acknowledged(ctl.acknowledgements[-1][1])

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if isinstance(item, llm.ChatMessage) and item.role == "user":
            self._finals, self._interim = [], ""
            # LiveKit committed the caller's turn: the controller's commit
            # (a held bid confirmed; the turn's level, against which a sound
            # over the reply now on its way is judged).
            self._execute(self.controller.on_turn_end())

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
        # Where the acknowledgement ended: the VAD's end of the speech it
        # heard over this reply; a soft one it did not hear under the
        # agent's audio ended by the time its words came.
        speech_end = self.vad.speech_end
        self.owed.ignored(text, speech_end if speech_end >= self._reply_start else self._t())
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

    def _on_agent_state(self, ev: Any) -> None:
        if ev.new_state == "speaking":
            self._reply_done = False
        elif ev.new_state == "listening" and self._reply_done:
            self._reply_done = False
            self._answer_owed()

    def _answer_owed(self) -> None:
        """The agent's reply played to its end and it now listens: an
        acknowledgement said over the reply's closing words, with no caller
        speech since, is the caller's turn (:meth:`OwedTurn.take`); LiveKit
        cleared it, so it is answered here."""
        owed = self.owed.take(completed=True)
        if owed is None:
            return
        self.owed_answered += 1
        log.info("turnkit: %r said over the reply's close, answered", owed)
        with contextlib.suppress(RuntimeError):  # the session closed meanwhile
            self.session.generate_reply(user_input=owed)

    def _clear_user_turn(self) -> None:
        with contextlib.suppress(RuntimeError):  # the session closed meanwhile
            self.session.clear_user_turn()

    # -- agent side (from the taps) ---------------------------------------------
    def _agent_started(self, reply: _Reply, at: float) -> None:
        self._audible = True
        self._reply_start = at
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
        self.controller.on_agent_stopped(self.clock.now(), completed=not interrupted)
        text, words, timed, anchors = self.text.take()
        rid = reply.reply_id
        self.cursor.on_text(rid, text, append=False)
        if timed:
            self.cursor.on_words(rid, words)
        self.cursor.reply(rid).anchors.extend(a for a in anchors if a[1] > 0)
        self.cursor.on_mark(rid, played_s)
        self.cursor.on_stopped(rid, "interrupted" if interrupted else "completed")
        if not interrupted:
            # Whether the caller is owed an answer is asked once the agent
            # listens (_on_agent_state): a reply that waits on a function
            # call goes on after this audio. A stop is LiveKit's own: the
            # bid's turn goes on and is committed.
            self._reply_done = True
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


def session_stream(session: AgentSession) -> TurnkitDetectorStream | None:
    """The running turnkit detector stream of ``session``: its agent's turn
    detector (else the session's) when that is a
    :class:`~turnkit_livekit.detectors.TurnkitStreamingDetector`, its newest
    open stream no input drives yet (one detector object per session, as
    :func:`turnkit_livekit.attach` assumes). None without one."""
    detector: Any = session.turn_detection
    with contextlib.suppress(RuntimeError):  # no agent running
        agent_td = session.current_agent.turn_detection
        if is_given(agent_td):
            detector = agent_td
    if not isinstance(detector, TurnkitStreamingDetector):
        return None
    live = [s for s in detector.streams if not s.closed and not s.shared]
    return live[-1] if live else None


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
