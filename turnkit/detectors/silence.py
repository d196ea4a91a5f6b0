"""The silence baseline: the caller is done after ``stop_ms`` of VAD silence.

Evidence: only the VAD. Silence is counted from the end of the last frame the
VAD judged speech, so the VAD's own stop window is not added on top. This is
what most voice stacks ship by default; every other detector is measured
against it.

Example::

    det = create_detector("silence:stop_ms=500", clock)
"""

from __future__ import annotations

from pydantic import Field

from turnkit.audio.vad import VADStep
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.registry import register
from turnkit.frames import AudioInFrame, SystemFrame

__all__ = ["SilenceDetector"]


class SilenceParams(DetectorParams):
    stop_ms: float = Field(
        800.0,
        ge=0,
        le=60_000,
        description="VAD silence that ends a turn",
        json_schema_extra={"sweep": [100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000]},
    )


@register
class SilenceDetector(EndOfTurnDetector):
    name = "silence"
    Params = SilenceParams
    params: SilenceParams

    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        out = await super().on_audio(frame, vad)
        if self.turn_open and not vad.speaking:
            silent_s = self.clock.now() - vad.speech_end
            if silent_s * 1000 >= self.params.stop_ms - 1e-6:
                out.append(self._end(reason=f"{silent_s * 1000:.0f} ms silence"))
        return out
