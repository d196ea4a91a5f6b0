"""The packaged semantic end-of-turn model: P(the caller's turn is finished).

A logistic regression over hashed features of the transcript so far and the
agent's last message (:mod:`turnkit.text.features`), trained by
``scripts/train_semantic_text.py`` and shipped as
``turnkit/models/semantic_text.npz``. Scoring is numpy only: a sum of about
a hundred weights and a sigmoid, tens of microseconds.

Example::

    model = SemanticTextModel.load()
    model.predict("yes", agent_text="Is that the right address?")      # high
    model.predict("four one five", agent_text="What's your card number?")  # low
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from turnkit.text.features import FEATURE_VERSION, feature_indices

__all__ = ["MODEL_FILE", "SemanticTextModel"]

MODEL_FILE = "semantic_text.npz"


class SemanticTextModel:
    """Weights, bias and the default thresholds chosen on held-out data."""

    def __init__(
        self,
        weights: np.ndarray,
        bias: float,
        threshold: float = 0.5,
        eager_threshold: float = 0.4,
        meta: dict | None = None,
    ) -> None:
        self.weights = np.asarray(weights, dtype=np.float32)
        n = self.weights.shape[0]
        if n & (n - 1):
            raise ValueError(f"weights: length {n} is not a power of two")
        self.bits = n.bit_length() - 1
        self.bias = float(bias)
        self.threshold = float(threshold)
        self.eager_threshold = float(eager_threshold)
        self.meta = meta or {}
        # python floats: summing a short list beats numpy fancy indexing
        self._w = self.weights.tolist()

    @classmethod
    def from_file(cls, path: str | Path) -> SemanticTextModel:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("feature_version") != FEATURE_VERSION:
                raise ValueError(
                    f"{path}: feature version {meta.get('feature_version')}, "
                    f"this turnkit reads {FEATURE_VERSION}; retrain the model"
                )
            return cls(
                z["weights"],
                float(z["bias"]),
                float(z["threshold"]),
                float(z["eager_threshold"]),
                meta,
            )

    @classmethod
    def load(cls) -> SemanticTextModel:
        """The model packaged in ``turnkit.models`` (loaded once per process)."""
        return _packaged()

    def logit(self, text: str, agent_text: str = "") -> float:
        w = self._w
        return self.bias + sum(w[i] for i in feature_indices(text, agent_text, self.bits))

    def predict(self, text: str, agent_text: str = "") -> float:
        """P(end of turn) for the transcript ``text`` after ``agent_text``."""
        z = self.logit(text, agent_text)
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


@cache
def _packaged() -> SemanticTextModel:
    ref = resources.files("turnkit.models").joinpath(MODEL_FILE)
    with resources.as_file(ref) as path:
        return SemanticTextModel.from_file(path)
