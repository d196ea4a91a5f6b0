"""Paired A/B comparison of two detectors replayed over the same turns.

Both detectors heard the same caller turns, so the comparison is paired:
each bootstrap sample draws *calls* with replacement (turns within a call
share a caller, a channel and an agent, so they are not independent) and
recomputes, on the same draw for both detectors,

* the difference of median response latency (B − A) over the turns both
  answered, and
* the difference of interruption rate (B − A) over all turns (also missed).

The 95 % interval is the 2.5th–97.5th percentile of those differences. With
few calls the interval is honest about it: it is wide.

Example::

    cmp = paired_compare(results[0], results[1], n_boot=2000, seed=0)
    cmp["median_response_diff_ms"]  # {"estimate": -310.0, "ci95": [-402.0, -215.5]}
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["paired_compare"]


def _stat(values: np.ndarray, weights: np.ndarray, fn: str) -> float:
    if fn == "median":
        expanded = np.repeat(values, weights)
        return float(np.median(expanded)) if expanded.size else float("nan")
    total = weights.sum()
    return float((values * weights).sum() / total) if total else float("nan")


def paired_compare(
    a: dict[str, Any], b: dict[str, Any], n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Compare result ``b`` against baseline ``a`` (``aggregate`` dicts)."""
    rows_a = {(r["call"], r["turn"]): r for r in a["per_turn"]}
    rows_b = {(r["call"], r["turn"]): r for r in b["per_turn"]}
    keys = sorted(rows_a.keys() & rows_b.keys())
    calls = sorted({k[0] for k in keys})
    call_index = {c: i for i, c in enumerate(calls)}
    turn_call = np.array([call_index[k[0]] for k in keys], dtype=int)

    def col(rows: dict, field: str) -> np.ndarray:
        return np.array([rows[k][field] for k in keys], dtype=float)

    inter = col(rows_b, "interrupted") - col(rows_a, "interrupted")
    missed = col(rows_b, "missed") - col(rows_a, "missed")
    both = np.array(
        [
            rows_a[k]["response_ms"] is not None and rows_b[k]["response_ms"] is not None
            for k in keys
        ]
    )
    resp_a = np.array([rows_a[k]["response_ms"] or 0.0 for k in keys], dtype=float)
    resp_b = np.array([rows_b[k]["response_ms"] or 0.0 for k in keys], dtype=float)

    def estimate(call_weights: np.ndarray) -> tuple[float, float, float]:
        w = call_weights[turn_call]
        wb = w * both
        med = _stat(resp_b, wb, "median") - _stat(resp_a, wb, "median")
        return med, _stat(inter, w, "mean"), _stat(missed, w, "mean")

    point = estimate(np.ones(len(calls), dtype=int))
    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, 3))
    for i in range(n_boot):
        picks = rng.integers(0, len(calls), size=len(calls))
        draws[i] = estimate(np.bincount(picks, minlength=len(calls)))

    def summary(j: int, scale: float = 1.0, digits: int = 1) -> dict[str, Any]:
        col_ = draws[:, j][~np.isnan(draws[:, j])]
        if np.isnan(point[j]) or col_.size == 0:
            return {"estimate": None, "ci95": [None, None]}
        lo, hi = np.percentile(col_, [2.5, 97.5])
        return {
            "estimate": round(point[j] * scale, digits),
            "ci95": [round(float(lo) * scale, digits), round(float(hi) * scale, digits)],
        }

    return {
        "baseline": a["detector"],
        "detector": b["detector"],
        "calls": len(calls),
        "turns": len(keys),
        "turns_answered_by_both": int(both.sum()),
        "median_response_diff_ms": summary(0),
        "interruption_rate_diff": summary(1, digits=4),
        "missed_rate_diff": summary(2, digits=4),
        "bootstrap": {"samples": n_boot, "unit": "call", "seed": seed},
    }
