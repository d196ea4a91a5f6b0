"""The engine's measured time to a first token, for the drafter's hold.

A drafter that knows its engine's time to a first token holds each end of
turn until the speculation's first token could be there (an end sooner
brings the reply no sooner and cuts off a caller who goes on; see
:class:`~turnkit.drafting.drafter.EagerDrafter`). In Pipecat the stop
strategy never sees the LLM's output; the LLM service measures it itself:
with ``PipelineParams(enable_metrics=True)`` it pushes a
``MetricsFrame`` with ``TTFBMetricsData`` at each completion's first chunk,
speculative or not (a system frame: the speculation gate does not hold it).
:class:`FirstTokenObserver` hands each to the drafter
(:meth:`~turnkit.drafting.drafter.EagerDrafter.on_first_token`); a drafter
built with ``DraftParams(learn_first_token=True)`` holds for the lowest of
the last ones.

Example::

    drafter = EagerDrafter(engine.clock, DraftParams(learn_first_token=True))
    stop = TurnkitUserTurnStopStrategy(engine, drafter=drafter)
    task = PipelineTask(
        pipeline,
        params=PipelineParams(enable_metrics=True),
        observers=[FirstTokenObserver(drafter)],
    )
"""

from __future__ import annotations

from pipecat.frames.frames import MetricsFrame
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.services.llm_service import LLMService
from turnkit.drafting.drafter import EagerDrafter

__all__ = ["FirstTokenObserver", "llm_first_tokens_ms"]


def llm_first_tokens_ms(data: FramePushed) -> list[float]:
    """The LLM service's TTFB measurements (ms) a pushed frame carries: a
    ``MetricsFrame`` on its first push by an ``LLMService`` (a TTS
    service's TTFB is not the engine's; later hops are the same frame)."""
    frame = data.frame
    if not isinstance(frame, MetricsFrame) or not data.first_push:
        return []
    if not isinstance(data.source, LLMService):
        return []
    return [d.value * 1000.0 for d in frame.data if isinstance(d, TTFBMetricsData) and d.value > 0]


class FirstTokenObserver(BaseObserver):
    """Reports each LLM completion's time to first token (the LLM service's
    TTFB metric; a TTS service's TTFB is not the engine's) to ``drafter``."""

    def __init__(self, drafter: EagerDrafter) -> None:
        super().__init__()
        self.drafter = drafter
        self.measured = 0

    async def on_push_frame(self, data: FramePushed) -> None:
        for ms in llm_first_tokens_ms(data):
            self.drafter.on_first_token(ms)
            self.measured += 1
