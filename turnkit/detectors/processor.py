"""An end-of-turn detector as a pipeline processor (the host of the policy in
turnkit's own pipeline: it feeds frames in and pushes the detector's turn
signals out, deciding nothing itself)."""

from __future__ import annotations

from turnkit.detectors.base import EndOfTurnDetector
from turnkit.frames import AgentTextFrame, AudioInFrame, Frame, StartFrame, TranscriptFrame
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["TurnDetectorProcessor"]


class TurnDetectorProcessor(FrameProcessor):
    """Feeds caller audio (with VAD) and transcripts to an end-of-turn
    detector and pushes its turn signals downstream."""

    def __init__(self, detector: EndOfTurnDetector) -> None:
        super().__init__(f"TurnDetector[{detector.spec}]")
        self.detector = detector

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, StartFrame):
            self.detector.reset()
        elif isinstance(frame, AgentTextFrame):
            # What the agent is saying is context for text detectors ("what
            # is your card number?" makes "four one" likely unfinished).
            self.detector.set_agent_text(frame.text)
        await self.push_frame(frame, direction)
        if direction is not FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, AudioInFrame) and frame.vad is not None:
            signals = await self.detector.on_audio(frame, frame.vad)
        elif isinstance(frame, TranscriptFrame):
            signals = await self.detector.on_transcript(frame)
        else:
            return
        for s in signals:
            await self.push_frame(s)
