"""Operating points: each detector across its main threshold/delay grid.

Scored the way published end-of-turn benchmarks score (every pause of 100 ms
or more is a hold or an end): for each grid point, the **false-cutoff rate**
is the share of labelled holds (≥ 100 ms) in which the detector committed,
and the **latency** is the mean end-of-turn decision delay over turn ends.
From the curve of grid points we read

* the false-cutoff rate at a 300 ms and a 600 ms mean-latency budget, and
* the mean latency at a 5 % and a 10 % false-cutoff budget,

interpolating linearly between neighbouring points of the lower envelope
(None where the grid never reaches the budget). A detector declares its grid
on its main parameter with ``json_schema_extra={"sweep": [...]}``.
"""

from __future__ import annotations

import itertools
from typing import Any

from turnkit.detectors.registry import available, parse_spec

__all__ = ["BASELINE", "budgets", "grid", "sweep_point"]

BASELINE = "silence"
MIN_HOLD_S = 0.1
LATENCY_BUDGETS_MS = (300, 600)
CUTOFF_BUDGETS = (0.05, 0.10)


def grid(spec: str) -> tuple[str, list[tuple[float, str]]]:
    """``(parameter, [(value, spec), ...])`` for a detector spec: its sweep
    parameter set to each grid value, other parameters kept."""
    name, params = parse_spec(spec)
    cls = available()[name]
    found = next(
        (
            (fname, f.json_schema_extra["sweep"])
            for fname, f in cls.Params.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and "sweep" in f.json_schema_extra
        ),
        None,
    )
    if found is None:
        raise ValueError(f"detector {name!r} declares no sweep grid")
    field_name, values = found
    kept = [f"{k}={v}" for k, v in params.items() if k != field_name]
    points = []
    for v in values:  # type: ignore[union-attr]
        args = ",".join([*kept, f"{field_name}={v}"])
        points.append((float(v), f"{name}:{args}"))
    return field_name, points


def sweep_point(
    value: float, result: dict[str, Any], holds: dict[str, list[int]]
) -> dict[str, Any]:
    """One grid point's figures from its replay result and hold counts
    (kind -> [holds ≥ 100 ms, holds cut])."""
    n_holds = sum(h for h, _ in holds.values())
    n_cut = sum(c for _, c in holds.values())
    return {
        "value": value,
        "spec": result["detector"],
        "holds": n_holds,
        "hold_cutoff_rate": None if n_holds == 0 else round(n_cut / n_holds, 4),
        "eot_mean_ms": result["eot_delay_ms"]["mean"],
        "eot_p50_ms": result["eot_delay_ms"]["p50"],
        "ends_decided": sum(1 for t in result["per_turn"] if t.get("eot_delay_ms") is not None),
        "turns": result["turns"],
        "interruption_rate": result["interruption_rate"],
        "response_p50_ms": result["response_ms"]["p50"],
    }


def _envelope(points: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(latency, cutoff) points, sorted by latency, with cutoff made
    non-increasing (a slower point that cuts more is never the better pick)."""
    pts = sorted(
        (p["eot_mean_ms"], p["hold_cutoff_rate"])
        for p in points
        if p["eot_mean_ms"] is not None and p["hold_cutoff_rate"] is not None
    )
    env: list[tuple[float, float]] = []
    best = float("inf")
    for lat, cut in pts:
        best = min(best, cut)
        env.append((lat, best))
    return env


def _interp(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def budgets(points: list[dict[str, Any]]) -> dict[str, float | None]:
    env = _envelope(points)
    out: dict[str, float | None] = {}
    for budget in LATENCY_BUDGETS_MS:
        val = None
        if env and env[0][0] <= budget:
            val = env[-1][1]
            for (l0, c0), (l1, c1) in itertools.pairwise(env):
                if l0 <= budget <= l1:
                    val = _interp(budget, l0, c0, l1, c1)
                    break
        out[f"cutoff_at_{budget}ms"] = None if val is None else round(val, 4)
    for budget in CUTOFF_BUDGETS:
        val = None
        for i, (lat, cut) in enumerate(env):
            if cut <= budget:
                if i > 0 and env[i - 1][1] > budget:
                    l0, c0 = env[i - 1]
                    val = _interp(budget, c0, l0, cut, lat)
                else:
                    val = lat
                break
        out[f"latency_at_{int(budget * 100)}pct_ms"] = None if val is None else round(val, 1)
    return out
