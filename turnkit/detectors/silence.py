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

from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.endpointing import WaitPolicy
from turnkit.detectors.registry import register

__all__ = ["SilenceDetector"]


class SilenceParams(DetectorParams):
    """Options of ``silence``: ``stop_ms`` of VAD silence ends a turn (the
    one knob, swept by ``--sweep``)."""

    stop_ms: float = Field(
        800.0,
        ge=0,
        le=60_000,
        description="VAD silence that ends a turn",
        json_schema_extra={"sweep": [100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000]},
    )


@register
class SilenceDetector(EndOfTurnDetector):
    """No scorer: every pause waits ``stop_ms`` (the endpointing's
    no-evidence wait, which is also its ceiling)."""

    name = "silence"
    Params = SilenceParams
    params: SilenceParams

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        ms = self.params.stop_ms
        return WaitPolicy(min_wait_ms=0.0, max_wait_ms=ms, no_evidence_ms=ms)
