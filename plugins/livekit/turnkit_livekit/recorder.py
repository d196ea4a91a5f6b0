"""Record a LiveKit call as ``turnkit.recording/v1`` (to replay and A/B offline).

:func:`record_session` wraps the session's current audio input and output
(so call it after ``session.start``, once LiveKit has set up its I/O) and
feeds turnkit's framework-free :class:`~turnkit.replay.recorder.CallRecorder`
from what the session sees: every caller frame as it arrives, every agent
frame as it is handed to the speaker (``clear_buffer`` = interrupted), the
user's speaking state (LiveKit's VAD edges, at the times LiveKit stamps
them: the onset, and the end less the silence it waited for), final transcripts, the agent's
text (each reply as LiveKit stores it, placed where its audio began), and each committed user turn (with its ``ChatMessage.metrics``) as a
live turn event. The folder is written when the session closes.

A final transcript's word times are recorded when the agent's STT node
notes them (:class:`~turnkit_livekit.WordTimesAgent` or
:func:`~turnkit_livekit.stt_words`): LiveKit's times count seconds of the
session's audio input, which the recorder's caller audio is (it wraps that
input), so they are put on the recording's timeline by the same
:class:`~turnkit.text.word_clock.WordClock` the detector stream uses.
Without them a replay stamps each transcript with its arrival and the
detectors' word-time rules do not run.

Example::

    await session.start(agent, room=ctx.room)
    record_session(session, Path("calls") / ctx.room.name)
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import AgentSession, llm
from livekit.agents.voice.io import AudioInput, AudioOutput

from turnkit.clock import RealClock
from turnkit.frames import SystemFrame, TurnEndFrame
from turnkit.replay.recorder import CallRecorder
from turnkit.text.word_clock import WordClock, timed_words
from turnkit_livekit.detectors import TurnkitDetectorStream, TurnkitStreamingDetector
from turnkit_livekit.noted_words import NotedWords
from turnkit_livekit.word_times import add_listener, detector_of

__all__ = ["record_session"]

log = logging.getLogger(__name__)


def _mono(frame: rtc.AudioFrame) -> np.ndarray:
    pcm = np.frombuffer(frame.data, dtype=np.int16)
    return pcm.reshape(-1, frame.num_channels)[:, 0] if frame.num_channels > 1 else pcm


class _RecordingInput(AudioInput):
    def __init__(self, source: AudioInput, rec: CallRecorder) -> None:
        super().__init__(label="turnkit-recorder", source=source)
        self._rec = rec

    async def __anext__(self) -> rtc.AudioFrame:
        frame = await super().__anext__()
        if not self._rec.finished:
            self._rec.caller_audio(_mono(frame), frame.sample_rate)
        return frame


class _RecordingOutput(AudioOutput):
    def __init__(self, sink: AudioOutput, rec: CallRecorder) -> None:
        super().__init__(
            label="turnkit-recorder",
            capabilities=sink._capabilities,
            next_in_chain=sink,
            sample_rate=sink.sample_rate,
        )
        self._rec = rec

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._rec.finished:
            self._rec.agent_audio(_mono(frame), frame.sample_rate)
        assert self.next_in_chain is not None
        await self.next_in_chain.capture_frame(frame)

    def flush(self) -> None:
        super().flush()
        assert self.next_in_chain is not None
        self.next_in_chain.flush()

    def clear_buffer(self) -> None:
        if not self._rec.finished:
            self._rec.agent_interrupted()
        assert self.next_in_chain is not None
        self.next_in_chain.clear_buffer()


def record_session(
    session: AgentSession,
    folder: Path | str,
    *,
    call_id: str | None = None,
    detector: TurnkitStreamingDetector | None = None,
) -> CallRecorder:
    """Record ``session`` into ``folder`` (written on the session's close).
    ``detector``: the turnkit detector whose decisions to keep (default: the
    one :func:`~turnkit_livekit.attach` gave the session, if any)."""
    clock = RealClock()
    rec = CallRecorder(folder, clock=clock, call_id=call_id, source="livekit")
    if session.input.audio is not None:
        session.input.audio = _RecordingInput(session.input.audio, rec)
    if session.output.audio is not None:
        session.output.audio = _RecordingOutput(session.output.audio, rec)

    def on_clock(wall: float) -> float:
        """A LiveKit wall time (``time.time()``), on the recorder's clock."""
        return clock.now() - max(0.0, time.time() - float(wall))

    def on_user_state(ev: Any) -> None:
        if rec.finished:
            return
        # LiveKit stamps the change with the speech's own edge (its VAD's
        # onset; its end less the silence it waited for), not with when it
        # was sure: the event itself comes min_silence_duration late.
        if ev.new_state == "speaking":
            rec.caller_speech_started(on_clock(ev.created_at))
        elif ev.old_state == "speaking":
            rec.caller_speech_stopped(on_clock(ev.created_at))

    noted = NotedWords(finals_only=True)
    word_clock = WordClock()
    add_listener(session, "recorder", noted.note)

    def on_transcribed(ev: Any) -> None:
        if not ev.is_final or rec.finished:
            return
        timed = timed_words(noted.take(ev.transcript, True))
        words = None
        if timed and rec.origin is not None:
            # Seconds of caller audio recorded are the recording's timeline:
            # the STT's stream times go onto it, then onto the recorder's clock.
            placed = word_clock.place(timed, None, rec.duration)
            words = [(w.text, rec.origin + w.start, rec.origin + w.end) for w in placed]
        rec.transcript(ev.transcript, final=True, words=words)

    def on_item(ev: Any) -> None:
        item = ev.item
        if rec.finished or not isinstance(item, llm.ChatMessage):
            return
        if item.role == "assistant":
            # LiveKit adds the reply after its audio ended (cut to what was
            # heard when interrupted); it belongs where it started to play.
            started = item.metrics.get("started_speaking_at") or item.created_at
            rec.agent_text(item.text_content or "", at=on_clock(started))
        elif item.role == "user":
            metrics = {k: v for k, v in dict(item.metrics).items() if _jsonable(v)}
            rec.turn_event("user_turn_end", text=item.text_content or "", metrics=metrics)

    det = detector if detector is not None else detector_of(session)

    def on_decision(stream: TurnkitDetectorStream, signal: SystemFrame) -> None:
        # Each turn end the live detector decided, for `turnkit replay` to
        # hold its own against (turnkit.replay.live). The listener runs as
        # the decision is taken: its time on the stream's audio clock is
        # now, less the audio the stream has had since.
        if rec.finished or not isinstance(signal, TurnEndFrame):
            return
        at = clock.now() - max(0.0, stream.clock.now() - signal.at)
        rec.turn_event(
            "end",
            at=at,
            detector=signal.detector,
            reason=signal.reason,
            compute_ms=signal.compute_ms,
        )

    def on_reply(text: str) -> None:
        # The reply's whole text as the detector got it at its first audio:
        # the agent turn's text where LiveKit added no chat item (a reply
        # cut before its synchronized transcript held a word), so its replay
        # judges the caller's next words against the line the live detector had.
        if not rec.finished:
            rec.reply_text(text)

    if det is not None:
        det.listeners.append(on_decision)
        det.reply_listeners.append(on_reply)

    def on_close(ev: Any) -> None:
        if det is not None:
            # A detector may serve later sessions.
            if on_decision in det.listeners:
                det.listeners.remove(on_decision)
            if on_reply in det.reply_listeners:
                det.reply_listeners.remove(on_reply)
        if not rec.finished:
            path = rec.finish()
            log.info("recorded call -> %s", path)

    session.on("user_state_changed", on_user_state)
    session.on("user_input_transcribed", on_transcribed)
    session.on("conversation_item_added", on_item)
    session.on("close", on_close)
    return rec


def _jsonable(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)
