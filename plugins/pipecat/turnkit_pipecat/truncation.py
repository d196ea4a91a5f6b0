"""Pipecat's context holds what the caller heard of an interrupted reply.

Pipecat's assistant aggregator writes the reply text that reached it when the
caller interrupts. With a TTS that gives word timestamps the output transport
releases words as they play, and that text is what was heard; with one that
does not, a whole sentence is released when its audio *starts*, and the
context claims words that never played. :class:`HeardTruncation` sits right
after ``transport.output()`` and keeps turnkit's
:class:`~turnkit.barge_in.cursor.PlaybackCursor` for each reply: the text that
reached the output and the seconds of bot audio it actually played (each
``OutputAudioRawFrame`` the transport wrote). When the assistant aggregator
reports an interrupted turn, the last assistant message of the context is
cut with :func:`~turnkit.barge_in.truncation.truncate_history` to the words
whose audio played: turnkit's word-timing estimate, anchored where each
text chunk's audio began (a sentence released at its audio start marks the
end of the one before), at the nominal speaking rate before any anchor.

Example::

    truncation = HeardTruncation()
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts, transport.output(),
                         truncation, assistant_agg])
    truncation.attach(assistant_agg, context)
"""

from __future__ import annotations

import logging
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.barge_in.truncation import Heard, truncate_history
from turnkit.clock import Clock, RealClock

__all__ = ["HeardTruncation"]

log = logging.getLogger(__name__)


class HeardTruncation(FrameProcessor):
    """Tracks what of each bot reply played and cuts Pipecat's context to it
    on interruption (see the module docstring). ``heard`` keeps the last
    interrupted reply's :class:`~turnkit.barge_in.truncation.Heard`."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.cursor = PlaybackCursor(clock or RealClock())
        self.reply = 0
        self.played_s = 0.0
        self.heard: Heard | None = None
        self.truncations = 0
        self._interrupted = False

    def attach(self, assistant: Any, context: LLMContext) -> None:
        """Cut ``context`` when ``assistant`` (Pipecat's assistant aggregator)
        stops an interrupted turn."""

        @assistant.event_handler("on_assistant_turn_stopped")
        async def _stopped(_agg: Any, message: Any) -> None:
            if message.interrupted:
                self.truncate(context)

    def truncate(self, context: LLMContext) -> bool:
        """Cut the context's last reply to what was heard; True if it changed."""
        heard = self.heard
        if heard is None or heard.complete:
            return False
        self.heard = None
        messages = context.get_messages()
        cut = truncate_history(messages, heard)  # type: ignore[arg-type]
        if cut == messages:
            return False
        context.set_messages(cut)  # type: ignore[arg-type]
        self.truncations += 1
        log.info("turnkit: interrupted reply kept as heard: %r", heard.text)
        return True

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            c = self.cursor
            if isinstance(frame, LLMFullResponseStartFrame):
                self.reply += 1
                self.played_s = 0.0
                self._interrupted = False
                c.on_text(self.reply, "", append=False)
            elif isinstance(frame, BotStartedSpeakingFrame):
                c.on_started(self.reply)
            elif isinstance(frame, TTSTextFrame) and frame.text.strip():
                text = c.reply(self.reply).text
                if text and self.played_s > 0:
                    # Released as its audio starts: the text before it has
                    # played by now (an anchor for the word-timing estimate).
                    c.on_mark(self.reply, self.played_s, text_offset=len(text))
                c.on_text(self.reply, frame.text.strip())
            elif isinstance(frame, OutputAudioRawFrame):
                # Written by the output transport just now: played.
                self.played_s += frame.num_frames / frame.sample_rate
                c.on_mark(self.reply, self.played_s)
            elif isinstance(frame, InterruptionFrame) and self.reply in c:
                self._interrupted = True
                c.on_stopped(self.reply, "interrupted")
                self.heard = c.heard(self.reply)
            elif isinstance(frame, BotStoppedSpeakingFrame) and not self._interrupted:
                c.on_stopped(self.reply, "completed")
        await self.push_frame(frame, direction)
