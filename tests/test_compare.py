"""Paired A/B statistics on hand-built per-turn rows with known answers."""

from __future__ import annotations

from turnkit.replay.compare import paired_compare


def result(name: str, rows: list[tuple[str, int, float | None, bool]]) -> dict:
    return {
        "detector": name,
        "per_turn": [
            {"call": c, "turn": t, "response_ms": r, "interrupted": i, "missed": r is None}
            for c, t, r, i in rows
        ],
    }


def test_faster_detector_shows_a_negative_latency_difference_excluding_zero() -> None:
    calls = [f"c{i}" for i in range(12)]
    a = result("silence", [(c, t, 1400.0 + 10 * t, False) for c in calls for t in range(3)])
    b = result("fast", [(c, t, 900.0 + 10 * t, False) for c in calls for t in range(3)])
    cmp = paired_compare(a, b, n_boot=500, seed=1)
    assert cmp["turns"] == 36 and cmp["calls"] == 12
    assert cmp["median_response_diff_ms"]["estimate"] == -500.0
    lo, hi = cmp["median_response_diff_ms"]["ci95"]
    assert lo == hi == -500.0  # every turn is exactly 500 ms faster
    assert cmp["interruption_rate_diff"]["estimate"] == 0.0


def test_interruption_difference_and_its_interval_cover_the_truth() -> None:
    calls = [f"c{i}" for i in range(20)]
    a = result("a", [(c, 0, 1000.0, False) for c in calls])
    # b cuts in on half the calls
    b = result("b", [(c, 0, 1000.0, i % 2 == 0) for i, c in enumerate(calls)])
    cmp = paired_compare(a, b, n_boot=2000, seed=0)
    est = cmp["interruption_rate_diff"]["estimate"]
    lo, hi = cmp["interruption_rate_diff"]["ci95"]
    assert est == 0.5
    assert lo < 0.5 < hi and lo > 0.1 and hi < 0.9


def test_latency_is_compared_only_on_turns_both_answered() -> None:
    a = result("a", [("c", 0, 1000.0, False), ("c", 1, 1000.0, False)])
    b = result("b", [("c", 0, 800.0, False), ("c", 1, None, False)])
    cmp = paired_compare(a, b, n_boot=100)
    assert cmp["turns_answered_by_both"] == 1
    assert cmp["median_response_diff_ms"]["estimate"] == -200.0
    assert cmp["missed_rate_diff"]["estimate"] == 0.5


def test_same_seed_same_interval() -> None:
    calls = [f"c{i}" for i in range(8)]
    a = result("a", [(c, 0, 1000.0 + i * 37 % 100, False) for i, c in enumerate(calls)])
    b = result("b", [(c, 0, 900.0 + i * 53 % 120, i % 3 == 0) for i, c in enumerate(calls)])
    assert paired_compare(a, b, seed=3) == paired_compare(a, b, seed=3)
