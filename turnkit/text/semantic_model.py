"""The packaged semantic end-of-turn models: P(the caller's turn is finished).

:meth:`SemanticTextModel.load` returns the best packaged model, v2
(:mod:`turnkit.text.neural_model`) unless ``"v1"`` is asked for. v1 is
a logistic regression over hashed features of the transcript so far and the
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
from typing import Protocol, runtime_checkable

import numpy as np

from turnkit.text.features import FEATURE_VERSION, feature_indices

__all__ = [
    "DEFAULT_VERSION",
    "MODEL_FILE",
    "VERSIONS",
    "SemanticTextModel",
    "TextModel",
    "logistic",
]

MODEL_FILE = "semantic_text.npz"  # v1
VERSIONS = {"v1": MODEL_FILE, "v2": "semantic_text_v2.npz"}
DEFAULT_VERSION = "v2"


def logistic(z: float) -> float:
    """P from a logit, without overflow for any finite ``z``."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@runtime_checkable
class TextModel(Protocol):
    """What the detectors use of a semantic-text model (v1 or v2)."""

    threshold: float
    eager_threshold: float

    def predict(self, text: str, agent_text: str = "") -> float: ...


class SemanticTextModel:
    """v1: weights, bias and the default thresholds chosen on held-out data.

    :meth:`load` is also the entry point for every packaged version."""

    version = "v1"

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
    def load(cls, version: str = DEFAULT_VERSION) -> TextModel:
        """The packaged model ``version`` (loaded once per process).

        ``"v2"`` (the default): :class:`~turnkit.text.neural_model.NeuralTextModel`,
        a GRU + hashed features; ``"v1"``: this logistic regression. Both
        have ``predict(text, agent_text)``, ``threshold`` and ``eager_threshold``."""
        if version not in VERSIONS:
            raise ValueError(f"semantic-text model {version!r}: one of {', '.join(VERSIONS)}")
        return _packaged(version)

    def logit(self, text: str, agent_text: str = "") -> float:
        w = self._w
        # sorted: the same float in every process (feature order follows the
        # per-process hash seed of a set)
        idx = sorted(feature_indices(text, agent_text, self.bits))
        return self.bias + sum(w[i] for i in idx)

    def predict(self, text: str, agent_text: str = "") -> float:
        """P(end of turn) for the transcript ``text`` after ``agent_text``."""
        return logistic(self.logit(text, agent_text))


@cache
def _packaged(version: str) -> TextModel:
    ref = resources.files("turnkit.models").joinpath(VERSIONS[version])
    with resources.as_file(ref) as path:
        if version == "v1":
            return SemanticTextModel.from_file(path)
        from turnkit.text.neural_model import NeuralTextModel

        return NeuralTextModel.from_file(path)
