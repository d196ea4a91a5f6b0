"""The bot's played audio and words, back to the turn engine.

:class:`EchoReferenceTap` sits right after ``transport.output()``: each
``OutputAudioRawFrame`` it sees has just been written to the speaker, so it
is the echo filter's reference (what can come back into the microphone), at
that instant on the engine's audio clock; each ``TTSTextFrame`` is a word the
bot has spoken, the acknowledgement filter's context ("okay" answers a
question the bot asked; it does not take the floor from a statement).

Example::

    engine = TurnkitTurnEngine("fused", echo=EchoFilter())
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts,
                         transport.output(), EchoReferenceTap(engine), assistant_agg])
"""

from __future__ import annotations

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    Frame,
    OutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from turnkit_pipecat.engine import SAMPLE_RATE, TurnkitTurnEngine, pcm_of

__all__ = ["EchoReferenceTap"]


class EchoReferenceTap(FrameProcessor):
    """Feeds the engine the bot audio that was played (echo reference) and
    the words that were spoken (barge-in context); passes every frame on."""

    def __init__(self, engine: TurnkitTurnEngine) -> None:
        super().__init__()
        self.engine = engine
        self.reference_s = 0.0  # bot audio handed to the echo filter

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, OutputAudioRawFrame):
                # The engine's timeline converts it (its own 16 kHz stream)
                # and hands it to the echo filter at the audio clock's now.
                pcm, rate, channels = pcm_of(frame)
                audio = self.engine.timeline.push_reference(pcm, rate, channels=channels)
                self.reference_s += len(audio) / SAMPLE_RATE
            elif isinstance(frame, BotStartedSpeakingFrame):
                self.engine.bot_words = ""
            elif isinstance(frame, TTSTextFrame) and frame.text.strip():
                self.engine.bot_words = f"{self.engine.bot_words} {frame.text.strip()}".strip()
                self.engine.on_bot_words(self.engine.bot_words)
        await self.push_frame(frame, direction)
