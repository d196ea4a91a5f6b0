"""What every end-of-turn detector is: a framework-free policy object.

A detector hears the caller side of a call — each audio frame with the VAD's
verdict, and transcripts as they arrive — and decides when the caller's turn
is over. It emits :class:`~turnkit.frames.TurnEndFrame` (commit: reply now),
optionally :class:`~turnkit.frames.TurnEagerFrame` (probably done: a draft
may start), and :class:`~turnkit.frames.TurnResumedFrame` when the caller
speaks again after either. Time comes only from the injected clock.

Hosts (the replay harness, the Pipecat and LiveKit plugins) call the same
async methods; none of them knows which detector it runs. They are async so
that a detector may wait on an engine (``llm-eou``); a model that runs
locally reports its wall-clock cost in ``compute_ms``, which the replay adds
to the decision time.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
)

__all__ = ["DetectorParams", "EndOfTurnDetector", "TurnSignal"]

TurnSignal = TurnEndFrame | TurnEagerFrame | TurnResumedFrame


class DetectorParams(BaseModel):
    """Base for a detector's parameters (parsed from its spec string)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EndOfTurnDetector:
    """Base class. Subclasses set ``name`` and ``Params`` and override
    :meth:`on_audio` and/or :meth:`on_transcript`.

    The base tracks the turn state every detector needs: whether a turn is
    open (caller spoke since the last decision) and whether a decision was
    already signalled, so that speech after it yields ``TurnResumedFrame``.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[DetectorParams]] = DetectorParams

    def __init__(self, clock: Clock, params: DetectorParams | None = None, spec: str = "") -> None:
        self.clock = clock
        self.params = params if params is not None else self.Params()
        self.spec = spec or self.name
        self.agent_text = ""
        self.reset()

    # -- state ---------------------------------------------------------------
    def reset(self) -> None:
        self.turn_open = False  # caller has spoken since the last end decision
        self.signalled = False  # an eager/end went out for the open stretch

    def set_agent_text(self, text: str) -> None:
        """The agent's last message: context for text-based detectors."""
        self.agent_text = text

    # -- evidence ------------------------------------------------------------
    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        """One caller audio frame with the VAD's verdict; ``clock.now()`` is
        the end of the frame. The base opens turns and signals resumption."""
        out: list[SystemFrame] = []
        if vad.speaking:
            if self.signalled:
                out.append(TurnResumedFrame(at=self.clock.now(), detector=self.spec))
                self.signalled = False
            self.turn_open = True
        return out

    async def on_transcript(self, frame: TranscriptFrame) -> list[SystemFrame]:
        return []

    # -- helpers for subclasses ----------------------------------------------
    def _still_running_ms(self, cost_ms: float, started_at: float) -> float:
        """The part of a model's cost still running now. A model that began
        at ``started_at`` (clock time) and took ``cost_ms`` of wall time only
        delays a decision by what is left of it: all of it right after it
        started, none when a timer fires long after."""
        return max(0.0, cost_ms - (self.clock.now() - started_at) * 1000)

    def _end(
        self, probability: float | None = None, compute_ms: float = 0.0, reason: str = ""
    ) -> TurnEndFrame:
        self.turn_open = False
        self.signalled = True
        return TurnEndFrame(
            at=self.clock.now(),
            detector=self.spec,
            probability=probability,
            compute_ms=compute_ms,
            reason=reason,
        )
