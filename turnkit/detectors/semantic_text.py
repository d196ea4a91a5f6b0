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
from typing import Literal

from pydantic import Field, model_validator

from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.endpointing import (
    ANNOUNCE_FLOOR_MS,
    CEILING_MS,
    DIGIT_RUN_FLOOR_MS,
    DIGIT_RUN_MS,
    OPEN_FRAME_MS,
    Evidence,
    Score,
    WaitPolicy,
)
from turnkit.detectors.registry import register
from turnkit.text.semantic_model import SemanticTextModel

__all__ = ["SemanticTextDetector", "SemanticTextParams", "SemanticTextScorer"]


# The defaults the training script chose on its held-out split (printed by
# scripts/train_semantic_text.py and stored in the model file; a test checks
# they agree).
DEFAULT_THRESHOLD = 0.45
DEFAULT_EAGER_THRESHOLD = 0.43


class SemanticTextParams(DetectorParams):
    """Options of ``semantic-text``: the P(end) from the transcript at or
    above which a pause of ``min_wait_ms`` ends the turn (``threshold``),
    the eager signal's P, and the longest wait when the text reads
    unfinished (``max_wait_ms``)."""

    threshold: float = Field(
        DEFAULT_THRESHOLD,
        ge=0,
        le=1,
        description="P(end) at or above which a pause of min_wait_ms ends the turn",
        json_schema_extra={"sweep": [0.1, 0.2, 0.3, 0.36, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]},
    )
    eager_threshold: float = Field(
        DEFAULT_EAGER_THRESHOLD,
        ge=0,
        le=1,
        description="P(end) at or above which an eager signal goes out (once per pause)",
    )
    model: Literal["v1", "v2"] = Field(
        "v2", description="packaged model: v2 (GRU + hashed features) or v1 (logistic regression)"
    )
    min_wait_ms: float = Field(250.0, ge=0, le=60_000, description="silence when it reads finished")
    max_wait_ms: float = Field(
        CEILING_MS, ge=0, le=60_000, description="silence when it reads unfinished: the ceiling"
    )

    @model_validator(mode="after")
    def _order(self) -> SemanticTextParams:
        if self.max_wait_ms < self.min_wait_ms:
            raise ValueError(
                f"max_wait_ms ({self.max_wait_ms:g}) is below min_wait_ms ({self.min_wait_ms:g})"
            )
        return self


# Each packaged model's cost per decision on one core, p50
# (benchmarks/bench_semantic_text.py: v1 16.1 µs, v2 65.8 µs, with the
# agent's line read once per line): what `--compute fixed` charges per look.
FIXED_COST_MS = {"v1": 0.02, "v2": 0.07}


class SemanticTextScorer:
    """P(end of turn) from the transcript so far and the agent's last
    message (the packaged semantic-text model). Reads words only; cached per
    (words, context), so a pause costs one look unless the words change."""

    hears_audio = False
    reads_text = True
    no_evidence = "no transcript"

    def __init__(self, model: SemanticTextModel, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.model = model
        self.threshold = threshold  # for eot-score / eot-eval
        self.fixed_ms = FIXED_COST_MS[getattr(model, "version", "v1")]
        self._cache: tuple[str, str, float] | None = None

    def predict(self, text: str, agent_text: str = "") -> float:
        return self.model.predict(text, agent_text)

    async def score(self, ev: Evidence) -> Score:
        if not ev.text:
            return Score(None)
        c = self._cache
        if c is not None and c[0] == ev.text and c[1] == ev.agent_text:
            return Score(c[2], parts={"p_text": c[2]})
        t0 = time.perf_counter()
        p = float(self.model.predict(ev.text, ev.agent_text))
        ms = (time.perf_counter() - t0) * 1000
        self._cache = (ev.text, ev.agent_text, p)
        return Score(p, compute_ms=ms, fixed_ms=self.fixed_ms, parts={"p_text": p})


@register
class SemanticTextDetector(EndOfTurnDetector):
    """Decides the caller's turn is over from the transcript alone: the
    semantic-text model's P(end) for the words so far (the agent's last
    reply as context) sets how long the endpointing waits in a pause
    (``min_wait_ms`` when it reads finished, up to ``max_wait_ms`` when not);
    VAD silence is the only audio evidence."""

    name = "semantic-text"
    Params = SemanticTextParams
    params: SemanticTextParams

    @classmethod
    def text_scorer(cls, params: DetectorParams | None = None) -> SemanticTextScorer:
        """A text-only scorer (``predict(text, agent_text)``, ``threshold``)."""
        p = params if isinstance(params, SemanticTextParams) else SemanticTextParams()
        return SemanticTextScorer(SemanticTextModel.load(p.model), p.threshold)

    def make_scorer(self) -> SemanticTextScorer:
        return SemanticTextScorer(SemanticTextModel.load(self.params.model), self.params.threshold)

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        prm = self.params
        return WaitPolicy(
            threshold=prm.threshold,
            eager=prm.eager_threshold,
            min_wait_ms=prm.min_wait_ms,
            max_wait_ms=prm.max_wait_ms,
            digit_run_ms=DIGIT_RUN_MS,
            digit_run_floor_ms=DIGIT_RUN_FLOOR_MS,
            open_frame_ms=OPEN_FRAME_MS,
            announce_floor_ms=ANNOUNCE_FLOOR_MS,
        )
