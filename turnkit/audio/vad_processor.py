"""The VAD as a pipeline processor: each caller frame gets the VAD's verdict,
and speech start/stop edges go out as system frames."""

from __future__ import annotations

from turnkit.audio.vad import VADAnalyzer
from turnkit.frames import (
    AudioInFrame,
    Frame,
    StartFrame,
    VADSpeechStartedFrame,
    VADSpeechStoppedFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["VADProcessor"]


class VADProcessor(FrameProcessor):
    """Attaches the VAD verdict to each caller audio frame and announces
    speech start/stop edges as system frames."""

    def __init__(self, analyzer: VADAnalyzer | None = None) -> None:
        super().__init__()
        self.analyzer = analyzer if analyzer is not None else VADAnalyzer()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.analyzer.reset()
        elif isinstance(frame, AudioInFrame) and direction is FrameDirection.DOWNSTREAM:
            step = self.analyzer.analyze(frame.audio, frame.at)
            frame.vad = step
            await self.push_frame(frame, direction)
            if step.started:
                await self.push_frame(
                    VADSpeechStartedFrame(at=step.speech_start, confirmed_at=frame.end)
                )
            if step.stopped:
                await self.push_frame(
                    VADSpeechStoppedFrame(at=step.speech_end, confirmed_at=frame.end)
                )
            return
        await self.push_frame(frame, direction)
