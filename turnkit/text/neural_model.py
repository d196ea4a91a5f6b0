"""semantic-text v2: a small recurrent network plus the v1 hashed features.

What it decides: P(the caller's turn is finished) from the transcript so far
(lower case, no punctuation, as a streaming recogniser emits it) and the
agent's last message. Evidence, two parts whose logits add up:

* **deep** — a one-layer GRU reads the last ``max_words`` words left to right
  (word embeddings; words outside the vocabulary fall into hashed buckets,
  numbers into buckets by digit count). Its final state sees the whole
  clause, so it can tell "can you help me find" (a verb still wants its
  object) from "can you help me" — what the v1 tail n-grams cannot. Its
  initial state comes from the agent context (question kind and topic).
* **wide** — the v1 hashed features (:mod:`turnkit.text.features`: tail
  n-grams, digits and letters in progress crossed with what the agent asked
  for), one weight per slot, as in v1 but in fewer slots.

Trained by ``scripts/train_semantic_text.py --model v2`` and shipped as
``turnkit/models/semantic_text_v2.npz``; scoring is numpy only (no torch, no
onnxruntime): one table lookup per word and one 3H×H mat-vec per word,
well under a millisecond for the 16-word tail it reads.

Example::

    model = NeuralTextModel.from_file("turnkit/models/semantic_text_v2.npz")
    model.predict("can you help me find", "How can I help?")       # low
    model.predict("can you help me find my order", "How can I help?")  # high
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from turnkit.text.features import FEATURE_VERSION, agent_context, feature_indices
from turnkit.text.normalize import normalize_text
from turnkit.text.numerals import spoken_numbers
from turnkit.text.semantic_model import logistic

__all__ = [
    "NEURAL_VERSION",
    "N_HASH",
    "SPECIALS",
    "NeuralTextModel",
    "context_ids",
    "text_ids",
    "words_of",
]

NEURAL_VERSION = 1
SPECIALS = ("<pad>", "<s>", "<cut>")  # ids 0, 1, 2: padding, start of turn, truncated head
N_HASH = 256  # buckets for words outside the vocabulary
N_NUM = 8  # buckets for numbers written as digits, by length


def words_of(text: str) -> list[str]:
    """The words the model reads: normalised, numerals said in words
    (:mod:`~turnkit.text.numerals`), apostrophes dropped (``i'm`` = ``im``)."""
    said = spoken_numbers(normalize_text(text).split())
    return [w for w in (t.replace("'", "") for t in said) if w]


def text_ids(words: list[str], vocab: dict[str, int], max_words: int) -> list[int]:
    """Token ids of the last ``max_words`` words, led by ``<s>`` or ``<cut>``.

    Ids: specials, then ``N_NUM`` number buckets, ``N_HASH`` hash buckets,
    then the vocabulary (``vocab`` maps a word to its final id)."""
    base = len(SPECIALS)
    ids = [1 if len(words) <= max_words else 2]
    for w in words[-max_words:]:
        i = vocab.get(w)
        if i is None:
            if w.isdigit():
                i = base + min(len(w), N_NUM) - 1
            else:
                i = base + N_NUM + zlib.crc32(w.encode()) % N_HASH
        ids.append(i)
    return ids


def context_ids(agent_text: str, ctx_vocab: dict[str, int]) -> list[int]:
    """Indices of the agent-context features (:func:`agent_context`) the model knows."""
    return sorted({ctx_vocab[f] for f in agent_context(agent_text) if f in ctx_vocab})


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class NeuralTextModel:
    """The v2 model: GRU over word embeddings + hashed wide features."""

    version = "v2"

    def __init__(self, arrays: dict[str, np.ndarray], meta: dict) -> None:
        f32 = np.float32
        self.meta = meta
        self.threshold = float(arrays["threshold"])
        self.eager_threshold = float(arrays["eager_threshold"])
        self.max_words = int(meta["max_words"])
        self.vocab: dict[str, int] = {
            w: i + len(SPECIALS) + N_NUM + N_HASH for i, w in enumerate(meta["vocab"])
        }
        self.ctx_vocab: dict[str, int] = {f: i for i, f in enumerate(meta["context"])}
        emb = arrays["embedding"].astype(f32)
        w_ih = arrays["gru_w_ih"].astype(f32)
        # input projection of every token, computed once: a lookup per word
        self._proj = emb @ w_ih.T + arrays["gru_b_ih"].astype(f32)
        self._w_hh = arrays["gru_w_hh"].astype(f32)
        self._b_hh = arrays["gru_b_hh"].astype(f32)
        self._ctx_w = arrays["ctx_w"].astype(f32)  # [n_context, H]
        self._ctx_b = arrays["ctx_b"].astype(f32)
        self._out_w = arrays["out_w"].astype(f32)
        self._bias = float(arrays["bias"])
        self.wide = arrays["wide"].astype(f32)
        n = self.wide.shape[0]
        if n & (n - 1):
            raise ValueError(f"wide: length {n} is not a power of two")
        self.bits = n.bit_length() - 1
        self._wide = self.wide.tolist()
        self.hidden = self._w_hh.shape[1]

    @classmethod
    def from_file(cls, path: str | Path) -> NeuralTextModel:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("kind") != "gru+wide" or meta.get("neural_version") != NEURAL_VERSION:
            raise ValueError(f"{path}: not a semantic-text v2 model this turnkit reads")
        if meta.get("feature_version") != FEATURE_VERSION:
            raise ValueError(
                f"{path}: feature version {meta.get('feature_version')}, "
                f"this turnkit reads {FEATURE_VERSION}; retrain the model"
            )
        return cls(arrays, meta)

    def logit(self, text: str, agent_text: str = "") -> float:
        words = words_of(text)
        ids = text_ids(words, self.vocab, self.max_words)
        ctx = context_ids(agent_text, self.ctx_vocab)
        h = np.tanh(self._ctx_w[ctx].sum(axis=0) + self._ctx_b)
        gi = self._proj[ids]  # [T, 3H]
        w_hh, b_hh, hd = self._w_hh, self._b_hh, self.hidden
        for t in range(len(ids)):
            gh = w_hh @ h + b_hh
            g = gi[t]
            rz = _sigmoid(g[: 2 * hd] + gh[: 2 * hd])
            n = np.tanh(g[2 * hd :] + rz[:hd] * gh[2 * hd :])
            z = rz[hd:]
            h = (1.0 - z) * n + z * h
        deep = float(self._out_w @ h)
        w = self._wide
        # sorted: feature order follows set order (per-process hash seed); a
        # fixed summation order gives the same float in every process
        wide = sum(w[i] for i in sorted(feature_indices(text, agent_text, self.bits)))
        return self._bias + deep + wide

    def predict(self, text: str, agent_text: str = "") -> float:
        """P(end of turn) for the transcript ``text`` after ``agent_text``."""
        return logistic(self.logit(text, agent_text))
