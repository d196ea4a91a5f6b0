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
whose audio played.

The evidence, best first:

* **Word timestamps.** A TTS service with word timestamps (Pipecat's
  ``TTSService.add_word_timestamps``: Cartesia, ElevenLabs, ..., or
  :class:`~turnkit_pipecat.tts.EspeakTTSService`) stamps each word's
  ``TTSTextFrame`` (``text_type="word"``) with a ``pts``, and the output
  transport releases it when that presentation time comes: as the word
  starts playing. The first word's release fixes where the reply's words sit
  in its played audio; each later word starts ``pts`` minus the first
  word's ``pts`` after it (the TTS's own timings, not the release jitter), and
  ends where the next one starts. These become the cursor's word timestamps
  (a word is heard when its end has played); the word still playing at an
  interruption counts once its estimated length has played. The sentence
  frames Pipecat sends besides the words (each finished sentence again, as
  one ``TTSTextFrame`` without a pts) add nothing.
* **Sentence anchors.** A TTS without them releases a whole sentence when
  its audio *starts*: that marks the end of the one before, and turnkit's
  word-timing estimate places the words inside each sentence, at the
  nominal speaking rate before any anchor.

With ``barge_in`` (the plugin's
:class:`~turnkit.barge_in.controller.BargeInController`, e.g.
``TurnkitUserTurnStartStrategy.barge_in``) the controller is told after
each played frame how far into the reply's text the caller has heard
(``on_agent_progress``): it judges "okay" after a question and
acknowledgements at phrase boundaries on the words played, not on elapsed
time.

Example::

    truncation = HeardTruncation(barge_in=start_strategy.barge_in)
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
from turnkit.barge_in.controller import BargeInController
from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.barge_in.truncation import Heard, estimate_word_timings, truncate_history
from turnkit.clock import Clock, RealClock
from turnkit.frames import Word

__all__ = ["HeardTruncation"]

log = logging.getLogger(__name__)


class HeardTruncation(FrameProcessor):
    """Tracks what of each bot reply played and cuts Pipecat's context to it
    on interruption (see the module docstring). ``heard`` keeps the last
    interrupted reply's :class:`~turnkit.barge_in.truncation.Heard`;
    ``timed_words`` counts the word-timestamped words seen."""

    def __init__(
        self, clock: Clock | None = None, *, barge_in: BargeInController | None = None
    ) -> None:
        super().__init__()
        self.cursor = PlaybackCursor(clock or RealClock())
        self.barge_in = barge_in
        self.reply = 0
        self.played_s = 0.0
        self.heard: Heard | None = None
        self.truncations = 0
        self.timed_words = 0
        self._interrupted = False
        self._pts0: int | None = None  # the reply's first timed word: its pts
        self._start0 = 0.0  # ... and the audio played when it came out
        self._word: Word | None = None  # the timed word playing now (end unknown)

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
                self._pts0, self._word = None, None
                c.on_text(self.reply, "", append=False)
            elif isinstance(frame, BotStartedSpeakingFrame):
                c.on_started(self.reply)
            elif isinstance(frame, TTSTextFrame) and frame.text.strip() and _timed(frame):
                self._on_word(frame)
            elif isinstance(frame, TTSTextFrame) and self._pts0 is not None:
                # A word-timed reply: Pipecat also passes each finished
                # sentence as one frame (no pts), the words again.
                pass
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
                self._progress()
            elif isinstance(frame, InterruptionFrame) and self.reply in c:
                self._interrupted = True
                c.on_stopped(self.reply, "interrupted")
                self._close_word(None)
                self.heard = c.heard(self.reply)
            elif isinstance(frame, BotStoppedSpeakingFrame) and not self._interrupted:
                c.on_stopped(self.reply, "completed")
        await self.push_frame(frame, direction)

    def _on_word(self, frame: TTSTextFrame) -> None:
        """A word-timestamped word, released by the output as it starts."""
        assert frame.pts is not None
        if self._pts0 is None:
            # Where the audio is now: the chunks written, plus the time the one
            # being written has played (the cursor extrapolates on the clock).
            self._pts0, self._start0 = frame.pts, self.cursor.played_s(self.reply)
        start = self._start0 + (frame.pts - self._pts0) / 1e9
        self._close_word(start)
        text = frame.text.strip()
        self.cursor.on_text(self.reply, text)
        self._word = Word(text=text, start=start, end=start)
        self.timed_words += 1
        self._progress()

    def _close_word(self, next_start: float | None) -> None:
        """The word playing ends where the next starts; at an interruption
        (``None``), after its estimated length (turnkit's syllable estimate
        at the nominal rate)."""
        w, self._word = self._word, None
        if w is None:
            return
        if next_start is None:
            est = estimate_word_timings(w.text, nominal_unit_s=self.cursor.config.nominal_unit_s)
            end = w.start + (est[0].end - est[0].start if est else 0.0)
        else:
            end = max(w.start, next_start)
        self.cursor.on_words(self.reply, [Word(text=w.text, start=w.start, end=end)])

    def _progress(self) -> None:
        if self.barge_in is None or self.reply not in self.cursor:
            return
        if self._pts0 is not None and self.cursor.reply(self.reply).words is None:
            return  # word-timed, no word ended yet: nothing to tell but a guess
        self.barge_in.on_agent_progress(self.cursor.progress(self.reply))


def _timed(frame: TTSTextFrame) -> bool:
    """A word the output released at its presentation time (word timestamps)."""
    return bool(frame.pts) and str(frame.text_type) == "word"
