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
message at a user turn start said over a reply is the reply before. It also
tells the engine while a response streams (``reply_streaming``): the bot
falling silent then (a slow LLM mid-reply) is not the reply's end, and a
turn owed an answer waits for it (``TurnkitUserTurnStartStrategy``).

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
from turnkit.detectors.reply_text import ReplyTextGate

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
        # When a whole response becomes the detector's context: turnkit's one
        # rule for every host.
        self._gate = ReplyTextGate()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            self._parts = []
            self._gate.cancel()
            self.engine.reply_streaming = False
        elif direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, LLMFullResponseStartFrame):
                self._parts = []
                self._gate.cancel()
                self.engine.reply_streaming = True
            elif isinstance(frame, LLMTextFrame):
                if not frame.skip_tts:
                    self._parts.append(frame.text)
            elif isinstance(frame, LLMFullResponseEndFrame):
                self.engine.reply_streaming = False
                self._hand(self._gate.text("".join(self._parts)))
                self._parts = []
            elif isinstance(frame, TTSSpeakFrame) and frame.append_to_context:
                self._hand(self._gate.text(frame.text))  # a line the app has the bot say
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._hand(self._gate.started())
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._gate.stopped()
        await self.push_frame(frame, direction)

    def _hand(self, text: str | None) -> None:
        if text is not None:
            self.handed.append(text)
            self.engine.set_agent_text(text)
