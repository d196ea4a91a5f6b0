"""Filler lines while a slow Pipecat function call runs.

:class:`FillerProcessor` goes after the TTS, before ``transport.output()``.
Pipecat's LLM service broadcasts ``FunctionCallInProgressFrame`` when a
function starts and ``FunctionCallResultFrame`` (or
``FunctionCallCancelFrame``) when it settles; the processor hands each call
to turnkit's :class:`~turnkit.fillers.scheduler.FillerScheduler`, which
decides whether and when a pre-rendered line from the
:class:`~turnkit.fillers.bank.FillerBank` plays (only past the tool's
threshold, one line at a time, never the same line twice in a row). The
line goes out as ``TTSAudioRawFrame`` chunks at playback pace, so the output
transport plays it like any bot speech; an ``InterruptionFrame`` (the caller
took the floor) cuts it.

Example::

    bank = FillerBank(["One moment, let me check.", "Just a second."], EspeakTTS("en-us"),
                      sample_rate=24000)
    await bank.prerender()
    fillers = FillerProcessor(FillerScheduler(bank, RealClock(), sink=None, threshold_s=0.8))
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts, fillers,
                         transport.output(), assistant_agg])
"""

from __future__ import annotations

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    FunctionCallCancelFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InterruptionFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from turnkit.audio.wav import to_pcm16
from turnkit.fillers.scheduler import FillerGuard, FillerScheduler
from turnkit.frames import AudioOutFrame

__all__ = ["FillerProcessor"]


class FillerProcessor(FrameProcessor):
    """Plays filler lines during slow function calls (see the module
    docstring). The scheduler's ``sink`` is replaced by this processor's
    output; its ``records``/``stats`` say what played and when."""

    def __init__(self, scheduler: FillerScheduler) -> None:
        super().__init__()
        self.scheduler = scheduler
        scheduler.sink = self._out
        self._guards: dict[str, FillerGuard] = {}
        self.frames_out = 0

    async def _out(self, frame: AudioOutFrame) -> None:
        pcm = to_pcm16(frame.audio)
        self.frames_out += 1
        await self.push_frame(
            TTSAudioRawFrame(
                audio=pcm.tobytes(), sample_rate=frame.sample_rate, num_channels=1, context_id=None
            )
        )

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        # The service broadcasts call frames both ways: act on one copy.
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, FunctionCallInProgressFrame):
                if frame.tool_call_id not in self._guards:
                    self._guards[frame.tool_call_id] = self.scheduler.start(frame.function_name)
            elif isinstance(frame, FunctionCallResultFrame | FunctionCallCancelFrame):
                guard = self._guards.pop(frame.tool_call_id, None)
                if guard is not None:
                    guard.stop()
            elif isinstance(frame, InterruptionFrame):
                self.scheduler.interrupt()
            elif isinstance(frame, EndFrame | CancelFrame):
                for guard in self._guards.values():
                    guard.stop(cut=True)
                self._guards.clear()
        await self.push_frame(frame, direction)
