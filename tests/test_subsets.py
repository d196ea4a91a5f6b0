"""Figures per corpus subset (call tags natural / stress / telephone): the
function over per-turn records, and `turnkit replay` reporting them on real
calls of the demo corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from turnkit.replay.metrics import subset_figures, subset_table

REPO = Path(__file__).resolve().parent.parent
STRESS_CALL = REPO / "recordings" / "easy-short-08"
NATURAL_CALL = REPO / "recordings" / "appointment-natural-13"  # also telephone


def _row(call: str, turn: int, ms: float | None, interrupted: bool = False) -> dict:
    return {
        "call": call,
        "turn": turn,
        "response_ms": ms,
        "interrupted": interrupted,
        "missed": ms is None,
    }


def test_subset_figures_on_known_rows() -> None:
    rows = [
        _row("a", 0, 1000.0),
        _row("a", 1, 2000.0, interrupted=True),
        _row("b", 0, 500.0),
        _row("b", 1, None),
        _row("c", 0, 700.0),
    ]
    tags = {"a": ["stress"], "b": ["natural", "telephone"], "c": ["other"]}
    out = subset_figures(rows, tags)
    assert set(out) == {"stress", "natural", "telephone"}  # "other" is not a subset
    assert out["stress"]["calls"] == 1 and out["stress"]["turns"] == 2
    assert out["stress"]["response_ms"]["p50"] == 1500.0
    assert out["stress"]["interruption_rate"] == 0.5 and out["stress"]["missed_rate"] == 0.0
    assert out["natural"] == out["telephone"]
    assert out["natural"]["turns"] == 2 and out["natural"]["missed_rate"] == 0.5
    assert out["natural"]["response_ms"]["p50"] == 500.0  # the missed turn has no latency
    assert subset_figures(rows, {"c": ["other"]}) == {}
    assert subset_table([{"detector": "x", "subsets": {}}]) is None


def test_subset_table_prints_a_spec_as_text_not_markup() -> None:
    """A detector spec is user text: brackets in it print as written (an
    unescaped ``[/x]`` would raise rich's MarkupError, ``[bold]`` vanish)."""
    figs = {"calls": 1, "turns": 2, "response_ms": {"p50": 500.0, "p95": 900.0}}
    spec = "fused:profile=[bold]x[/bold][/nope]"
    console = Console(record=True, width=200)
    console.print(subset_table([{"detector": spec, "subsets": {"natural": figs}}]))
    text = console.export_text()
    assert spec in text and "500 ms" in text


def test_replay_reports_each_subset(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnkit.cli",
            "replay",
            str(STRESS_CALL),
            str(NATURAL_CALL),
            "-d",
            "silence:stop_ms=500",
            "--workers",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "per subset" in proc.stdout and "natural" in proc.stdout
    (res,) = json.loads(out.read_text())["results"]
    subs = res["subsets"]
    assert set(subs) == {"natural", "stress", "telephone"}
    assert subs["stress"]["calls"] == 1 and subs["natural"]["calls"] == 1
    assert subs["stress"]["turns"] + subs["natural"]["turns"] == res["turns"]
    # the subsets split the per-turn rows exactly
    rows = res["per_turn"]
    nat = [r for r in rows if r["call"] == "appointment-natural-13"]
    assert subs["natural"]["turns"] == len(nat)
    assert subs["natural"]["missed_rate"] == pytest.approx(
        sum(r["missed"] for r in nat) / len(nat), abs=1e-4
    )
    # and the table prints one row per subset
    console = Console(record=True, width=200)
    console.print(subset_table([res]))
    text = console.export_text()
    assert all(tag in text for tag in ("natural", "stress", "telephone"))
