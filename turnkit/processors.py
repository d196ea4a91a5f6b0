"""Pipeline processors that host turnkit policies.

They are thin: each feeds frames to a framework-free policy object and pushes
the frames it emits. The replay harness and a standalone live agent use these
same processors.
"""

from __future__ import annotations

from turnkit.audio.vad import VADAnalyzer
from turnkit.detectors.base import EndOfTurnDetector
from turnkit.frames import (
    AgentTextFrame,
    AudioInFrame,
    Frame,
    StartFrame,
    TranscriptFrame,
    VADSpeechStartedFrame,
    VADSpeechStoppedFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["TurnDetectorProcessor", "VADProcessor"]


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
