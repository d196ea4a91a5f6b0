"""The bot's reply text, to the turn engine as the reply starts to play.

Pipecat's assistant aggregator adds a reply to the context once it has
played (or been cut), and the turn strategy hands the detector the
context's last assistant message at the next user turn start: a caller's
turn said over the reply ("uh-huh", an answer to a question the bot is
still finishing) was judged against the bot's *previous* line, where
``turnkit replay`` hands the detector each reply's text as it starts.

:class:`ReplyTextTap` sits right after the LLM service: it gathers each
response's text (``LLMTextFrame`` between ``LLMFullResponseStartFrame`` and
``LLMFullResponseEndFrame``) and hands the whole of it to the engine once
the bot is speaking it — on the ``BotStartedSpeakingFrame`` that comes back
upstream, or at the response's end when the bot already speaks (a streamed
TTS starts on the first sentence). A response cut before its audio
(``InterruptionFrame``) is never handed; one that is, and then cut, stays
whole in the detector's context (the context's heard part of it changes
nothing there, as in the replay). With a tap in the pipeline the turn
strategy leaves the detector's context to it: the context's last assistant
message at a user turn start said over a reply is the reply before.

Example::

    engine = TurnkitTurnEngine("fused")
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, ReplyTextTap(engine),
                         tts, transport.output(), EchoReferenceTap(engine), assistant_agg])
"""

from __future__ import annotations

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from turnkit_pipecat.engine import TurnkitTurnEngine

__all__ = ["ReplyTextTap"]


class ReplyTextTap(FrameProcessor):
    """Hands the engine each LLM response's whole text once the bot speaks
    it (see the module docstring); passes every frame on unchanged."""

    def __init__(self, engine: TurnkitTurnEngine) -> None:
        super().__init__()
        self.engine = engine
        # The strategy no longer hands the context's last reply at each user
        # turn start: this tap hands every reply earlier, and the context
        # then holds the reply before the one playing.
        engine.reply_text_tapped = True
        self.handed: list[str] = []  # every reply text handed to the engine
        self._parts: list[str] = []
        self._pending: str | None = None  # a whole response not yet heard
        self._speaking = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            self._parts, self._pending = [], None
        elif direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, LLMFullResponseStartFrame):
                self._parts, self._pending = [], None
            elif isinstance(frame, LLMTextFrame):
                if not frame.skip_tts:
                    self._parts.append(frame.text)
            elif isinstance(frame, LLMFullResponseEndFrame):
                self._whole("".join(self._parts))
                self._parts = []
            elif isinstance(frame, TTSSpeakFrame) and frame.append_to_context:
                self._whole(frame.text)  # a line the app has the bot say
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._speaking = True
            pending, self._pending = self._pending, None
            if pending is not None:
                self._hand(pending)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._speaking = False
        await self.push_frame(frame, direction)

    def _whole(self, text: str) -> None:
        text = text.strip()
        if text and self._speaking:
            self._hand(text)
        elif text:
            self._pending = text

    def _hand(self, text: str) -> None:
        self.handed.append(text)
        self.engine.set_agent_text(text)
