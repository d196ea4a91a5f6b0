"""Semantic text end-of-turn: does the transcript so far read as a finished turn?

Evidence: the latest caller transcript (``on_transcript``), the agent's last
message (``set_agent_text``) and the VAD. At each pause the packaged
semantic-text model (:class:`~turnkit.text.semantic_model.SemanticTextModel`,
numpy only) scores P(end of turn) for the text available then — the
transcript may lag the audio by the recogniser's delay, and a transcript that
arrives during the pause is scored when it arrives. The turn ends after
``min_wait_ms`` of silence when P ≥ ``threshold`` ("i'd like a table for
two"), otherwise after ``max_wait_ms`` ("i'd like a table for", "my number
is four one five"). ``TurnEagerFrame`` goes out once per pause when P ≥
``eager_threshold`` before the commit, so a draft can start early.

Example::

    det = create_detector("semantic-text:min_wait_ms=250,max_wait_ms=1800", clock)
"""

from __future__ import annotations

import time

from pydantic import Field, model_validator

from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.registry import register
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
)
from turnkit.text.semantic_model import SemanticTextModel

__all__ = ["SemanticTextDetector", "SemanticTextParams"]


# The defaults the training script chose on its held-out split (printed by
# scripts/train_semantic_text.py and stored in the model file; a test checks
# they agree).
DEFAULT_THRESHOLD = 0.38
DEFAULT_EAGER_THRESHOLD = 0.28


class SemanticTextParams(DetectorParams):
    threshold: float = Field(
        DEFAULT_THRESHOLD,
        ge=0,
        le=1,
        description="P(end) at or above which a pause of min_wait_ms ends the turn",
        json_schema_extra={"sweep": [0.1, 0.2, 0.3, 0.38, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]},
    )
    eager_threshold: float = Field(
        DEFAULT_EAGER_THRESHOLD,
        ge=0,
        le=1,
        description="P(end) at or above which an eager signal goes out (once per pause)",
    )
    min_wait_ms: float = Field(250.0, ge=0, le=60_000, description="silence when it reads finished")
    max_wait_ms: float = Field(
        1800.0, ge=0, le=60_000, description="silence when it reads unfinished (fallback)"
    )

    @model_validator(mode="after")
    def _order(self) -> SemanticTextParams:
        if self.max_wait_ms < self.min_wait_ms:
            raise ValueError(
                f"max_wait_ms ({self.max_wait_ms:g}) is below min_wait_ms ({self.min_wait_ms:g})"
            )
        return self


class _Scorer:
    """What ``eot-score`` / ``eot-eval`` use: the model and its default threshold."""

    def __init__(self, model: SemanticTextModel, threshold: float) -> None:
        self.model = model
        self.threshold = threshold

    def predict(self, text: str, agent_text: str = "") -> float:
        return self.model.predict(text, agent_text)


@register
class SemanticTextDetector(EndOfTurnDetector):
    name = "semantic-text"
    Params = SemanticTextParams
    params: SemanticTextParams

    def __init__(self, clock: Clock, params: DetectorParams | None = None, spec: str = "") -> None:
        self.model = SemanticTextModel.load()
        self.text = ""
        self._cache: tuple[str, str, float, float] | None = None  # text, agent, p, ms
        self._eager_pause: float | None = None  # speech_end of the pause an eager went out for
        super().__init__(clock, params, spec)

    @classmethod
    def text_scorer(cls, params: DetectorParams | None = None) -> _Scorer:
        """A text-only scorer (``predict(text, agent_text)``, ``threshold``)."""
        p = params if isinstance(params, SemanticTextParams) else SemanticTextParams()
        return _Scorer(SemanticTextModel.load(), p.threshold)

    def reset(self) -> None:
        super().reset()
        self.text = ""
        self._eager_pause = None

    async def on_transcript(self, frame: TranscriptFrame) -> list[SystemFrame]:
        self.text = frame.text
        return []

    def score(self) -> tuple[float, float]:
        """P(end) for the current text and agent context, and what it cost
        (ms; 0 when cached: it is computed once per text/context change)."""
        c = self._cache
        if c is not None and c[0] == self.text and c[1] == self.agent_text:
            return c[2], 0.0
        t0 = time.perf_counter()
        p = self.model.predict(self.text, self.agent_text) if self.text.strip() else 0.0
        ms = (time.perf_counter() - t0) * 1000
        self._cache = (self.text, self.agent_text, p, ms)
        return p, ms

    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        out = await super().on_audio(frame, vad)
        if not self.turn_open or vad.speaking:
            return out
        silent_ms = (self.clock.now() - vad.speech_end) * 1000
        prm = self.params
        p, ms = self.score()
        if silent_ms >= prm.min_wait_ms - 1e-6 and p >= prm.threshold:
            out.append(
                self._end(
                    probability=p,
                    compute_ms=ms,
                    reason=f"p={p:.2f} ≥ {prm.threshold:.2f} after {silent_ms:.0f} ms",
                )
            )
        elif silent_ms >= prm.max_wait_ms - 1e-6:
            out.append(
                self._end(
                    probability=p,
                    compute_ms=ms,
                    reason=f"p={p:.2f} < {prm.threshold:.2f}; {silent_ms:.0f} ms silence",
                )
            )
        elif p >= prm.eager_threshold and self._eager_pause != vad.speech_end:
            self._eager_pause = vad.speech_end
            self.signalled = True  # speech after it resumes the turn
            out.append(
                TurnEagerFrame(
                    at=self.clock.now(), detector=self.spec, probability=p, compute_ms=ms
                )
            )
        if out and isinstance(out[-1], TurnEndFrame):
            # the transcript belongs to the turn just ended
            self.text = ""
            self._eager_pause = None
        return out
