"""Operating-point budgets read off a detector's grid."""

from __future__ import annotations

import pytest

from turnkit.replay.sweep import budgets, grid


def pt(lat: float, cut: float) -> dict:
    return {"eot_mean_ms": lat, "hold_cutoff_rate": cut}


def test_budgets_interpolate_along_the_curve() -> None:
    points = [pt(200, 0.5), pt(400, 0.3), pt(800, 0.1), pt(1200, 0.0)]
    b = budgets(points)
    assert b["cutoff_at_300ms"] == pytest.approx(0.4)
    assert b["cutoff_at_600ms"] == pytest.approx(0.2)
    assert b["latency_at_10pct_ms"] == pytest.approx(800.0)
    assert b["latency_at_5pct_ms"] == pytest.approx(1000.0)


def test_budget_out_of_reach_is_none() -> None:
    b = budgets([pt(500, 0.4), pt(900, 0.2)])
    assert b["cutoff_at_300ms"] is None
    assert b["latency_at_5pct_ms"] is None and b["latency_at_10pct_ms"] is None
    assert b["cutoff_at_600ms"] == pytest.approx(0.35)


def test_a_slower_point_that_cuts_more_is_never_the_pick() -> None:
    # The 700 ms point is dominated by the 500 ms one.
    b = budgets([pt(500, 0.1), pt(700, 0.3), pt(900, 0.04)])
    assert b["latency_at_10pct_ms"] == pytest.approx(500.0)
    assert b["cutoff_at_600ms"] == pytest.approx(0.1)


def test_grid_varies_the_main_parameter_and_keeps_the_others() -> None:
    param, pts = grid("silence:stop_ms=500")
    assert param == "stop_ms"
    assert [s for _, s in pts][:2] == ["silence:stop_ms=100", "silence:stop_ms=200"]
    assert len(pts) >= 8
