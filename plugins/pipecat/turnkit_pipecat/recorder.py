"""Recording Pipecat calls as ``turnkit.recording/v1``.

:class:`TurnkitRecorder` is a Pipecat processor placed right after
``transport.output()``: there it sees the caller's ``InputAudioRawFrame``
chunks (passed down the whole pipeline) and each ``OutputAudioRawFrame`` the
output transport has just written (so, played), plus interruptions and the
bot's ``TTSTextFrame`` words, and each user turn the user aggregator ended
(``UserStoppedSpeakingFrame``: a ``user_turn_end`` turn event, the host's
commit, which makes caller speech the bot talked through a turn).
Transcripts are consumed by the user aggregator before they get there, so
pass the turn engine to record them (and the detector's decisions).
Everything goes to turnkit's framework-free
:class:`~turnkit.replay.recorder.CallRecorder`, which writes the folder when
the pipeline ends.

Example::

    recorder = TurnkitRecorder("calls/0001", engine=engine)
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts,
                         transport.output(), recorder, assistant_agg])
"""

from __future__ import annotations

from pathlib import Path

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from turnkit.clock import Clock, RealClock, VirtualClock
from turnkit.frames import AudioInFrame, SystemFrame, TranscriptFrame, TurnEagerFrame, TurnEndFrame
from turnkit.replay.recorder import CallRecorder

from turnkit_pipecat.engine import TurnkitTurnEngine

__all__ = ["TurnkitRecorder"]


class TurnkitRecorder(FrameProcessor):
    """Writes the call it sees to ``folder`` (see the module docstring).

    Times: with an ``engine``, its audio clock (seconds of caller audio);
    otherwise wall time (:class:`~turnkit.clock.RealClock`).
    """

    def __init__(
        self,
        folder: Path | str,
        *,
        engine: TurnkitTurnEngine | None = None,
        clock: Clock | None = None,
        call_id: str | None = None,
        tags: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.clock: Clock = clock or (engine.clock if engine is not None else RealClock())
        self.recorder = CallRecorder(folder, clock=self.clock, call_id=call_id, tags=tags)
        self._caller_s = 0.0
        self.written: Path | None = None
        self._last_text = ""
        self._words_seen = 0
        if engine is not None:
            engine.on_signal(self._on_engine)
            engine.on_agent_text(self._on_reply_text)

    def _on_reply_text(self, text: str) -> None:
        # A ReplyTextTap hands each reply as it starts playing; without one
        # the strategy hands the context's last reply at a user turn's start,
        # which is no reply's start.
        if self.engine is not None and self.engine.reply_text_tapped and not self.recorder.finished:
            self.recorder.reply_text(text)

    def _on_engine(self, item: SystemFrame | AudioInFrame) -> None:
        if self.recorder.finished:
            return
        if isinstance(item, TranscriptFrame) and item.is_final:
            # The engine's text is the whole turn so far: keep only the new part.
            text = item.text
            if self._last_text and text.startswith(self._last_text):
                text = text[len(self._last_text) :]
            else:
                self._words_seen = 0
            words = [(w.text, w.start, w.end) for w in item.words[self._words_seen :]]
            self._last_text, self._words_seen = item.text, len(item.words)
            if text.strip():
                self.recorder.transcript(text, words=words or None)
        elif isinstance(item, TurnEndFrame):
            self.recorder.turn_event(
                "end", detector=item.detector, reason=item.reason, compute_ms=item.compute_ms
            )
        elif isinstance(item, TurnEagerFrame):
            self.recorder.turn_event("eager", detector=item.detector)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        rec = self.recorder
        if not rec.finished:
            if isinstance(frame, InputAudioRawFrame):
                at = None
                if isinstance(self.clock, VirtualClock):
                    # On the audio clock a chunk's time is the audio before it.
                    at = self._caller_s
                    self._caller_s += frame.num_frames / frame.sample_rate
                rec.caller_audio(frame.audio, frame.sample_rate, at=at)
            elif isinstance(frame, OutputAudioRawFrame) and direction is FrameDirection.DOWNSTREAM:
                rec.agent_audio(frame.audio, frame.sample_rate)
            elif isinstance(frame, InterruptionFrame):
                rec.agent_interrupted()
            elif isinstance(frame, TTSTextFrame):
                rec.agent_text(frame.text)
            elif (
                isinstance(frame, UserStoppedSpeakingFrame)
                and direction is FrameDirection.DOWNSTREAM
            ):
                # The user aggregator ended the user turn (its text goes to the
                # LLM): the host's commit, as LiveKit's recorder notes it. A
                # caller's words the bot talked through are a turn then.
                rec.turn_event("user_turn_end")
            elif isinstance(frame, EndFrame | CancelFrame):
                self.written = rec.finish()
        await self.push_frame(frame, direction)
