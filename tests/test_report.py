"""The HTML report of ``turnkit replay --html``, from real replays.

A committed call is replayed through two detectors, scored, compared and
rendered; the HTML is parsed back with the standard library's parser and
checked for structure (balanced SVG, one chart per section, one timeline per
call), for figures that match the results, for self-containment, for stable
bytes, and for escaping of every piece of text that comes from the data."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from turnkit.replay.compare import paired_compare
from turnkit.replay.metrics import CallScore, aggregate
from turnkit.replay.recording import load_recording
from turnkit.replay.report import ReportData, render_page, render_report, write_report
from turnkit.replay.simulator import ReplayConfig, replay_call
from turnkit.replay.sweep import budgets

REPO = Path(__file__).resolve().parent.parent
CALL = REPO / "recordings" / "easy-short-08"
SPECS = ("silence", "silence:stop_ms=500")
PAYLOAD = "<script>alert(1)</script>\"&'"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;&#x27;"


class Doc(HTMLParser):
    """Tags, attribute values, text and table cells of an HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.attrs: list[tuple[str, str, str]] = []  # (tag, name, value)
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.order: list[tuple[str, dict[str, str]]] = []  # start tags in order

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] = self.starts.get(tag, 0) + 1
        self.order.append((tag, {k: v or "" for k, v in attrs}))
        for k, v in attrs:
            self.attrs.append((tag, k, v or ""))
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.ends[tag] = self.ends.get(tag, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] = self.ends.get(tag, 0) + 1
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> Doc:
    doc = Doc()
    doc.feed(text)
    doc.close()
    return doc


def fake_sweep() -> list[dict[str, Any]]:
    points = [
        {
            "value": float(v),
            "spec": f"silence:stop_ms={v}",
            "holds": 40,
            "hold_cutoff_rate": cut,
            "eot_mean_ms": lat,
            "eot_p50_ms": lat - 8,
            "ends_decided": 36,
            "turns": 36,
            "interruption_rate": cut,
            "response_p50_ms": lat + 490,
        }
        for v, lat, cut in (
            (100, 226.0, 0.9),
            (500, 610.0, 0.5),
            (1000, 1119.0, 0.2),
            (2000, 2112.0, 0.0),
        )
    ]
    return [{"detector": "silence", "param": "stop_ms", "points": points, **budgets(points)}]


def replay(folder: Path, specs: tuple[str, ...]) -> dict[str, list[CallScore]]:
    rec = load_recording(folder)
    return {s: [asyncio.run(replay_call(rec, s, ReplayConfig()))] for s in specs}


def inputs(calls: dict[str, list[CallScore]], failed: list[dict] | None = None) -> dict[str, Any]:
    results = [aggregate(s, scores) for s, scores in calls.items()]
    return {
        "results": results,
        "comparisons": [paired_compare(results[0], r, n_boot=200) for r in results[1:]],
        "sweeps": fake_sweep(),
        "calls": calls,
        "failed": failed or [],
    }


@pytest.fixture(scope="module")
def report_inputs() -> dict[str, Any]:
    return inputs(replay(CALL, SPECS))


@pytest.fixture(scope="module")
def report(report_inputs: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("report") / "r.html"
    write_report(path, **report_inputs)
    return path.read_text(encoding="utf-8")


def test_report_is_well_formed_with_a_chart_per_section(report: str) -> None:
    doc = parse(report)
    assert report.startswith("<!DOCTYPE html>")
    for tag in ("svg", "table", "tr", "details", "html", "body", "g"):
        assert doc.starts.get(tag, 0) == doc.ends.get(tag, 0), tag
    # Each section is followed by its own chart before the next section.
    sections: dict[str, int] = {}
    current = None
    for tag, attrs in doc.order:
        if tag == "h2":
            current = attrs.get("id")
        elif tag == "svg" and current:
            sections[current] = sections.get(current, 0) + 1
    for section in ("compare", "cdf", "sweep", "calls"):
        assert sections.get(section, 0) >= 1, section
    labels = [a.get("aria-label") for t, a in doc.order if t == "svg"]
    assert labels.count("response latency CDF") == 1
    assert labels.count("operating points") == 1
    assert labels.count("call timeline") == 1  # one call


def test_report_names_every_detector_and_matches_the_results(
    report: str, report_inputs: dict[str, Any]
) -> None:
    doc = parse(report)
    text = "".join(doc.text)
    for spec in SPECS:
        assert spec in text
    header = next(r for r in doc.rows if r and r[0] == "detector" and "resp p50" in r)
    for res in report_inputs["results"]:
        row = next(r for r in doc.rows if r and r[0] == res["detector"] and len(r) == len(header))
        cell = dict(zip(header, row, strict=True))
        assert cell["turns"] == str(res["turns"])
        assert cell["resp p50"] == f"{res['response_ms']['p50']:.0f} ms"
        assert cell["resp p95"] == f"{res['response_ms']['p95']:.0f} ms"
        assert cell["interruption"] == f"{res['interruption_rate'] * 100:.1f}%"
        assert cell["missed"] == f"{res['missed_rate'] * 100:.1f}%"
        assert cell["spurious replies"] == str(res["spurious_replies"])
    cmp = report_inputs["comparisons"][0]
    row = next(r for r in doc.rows if r and r[0] == cmp["detector"] and len(r) == 6)
    est = cmp["median_response_diff_ms"]["estimate"]
    assert row[3].startswith(f"{est:+.0f} ms".replace("-", "−"))
    # The sweep budgets table.
    row = next(r for r in doc.rows if r and r[0] == "silence" and "stop_ms" in r[1])
    assert row[2] == f"{report_inputs['sweeps'][0]['cutoff_at_300ms'] * 100:.1f}%"


def test_timeline_draws_every_caller_turn_and_every_decision(
    report: str, report_inputs: dict[str, Any]
) -> None:
    rec = load_recording(CALL)
    doc = parse(report)
    titles = "\n".join(doc.text)
    for k, turn in enumerate(rec.caller_turns):
        assert f"caller turn {k} " in titles and turn.text in titles
    for spec, scores in report_inputs["calls"].items():
        decisions = titles.count(f"{spec}: decision at") + titles.count(f"{spec}: CUTOFF decision")
        assert decisions == len(scores[0].replies) > 0


def test_report_is_self_contained_and_deterministic(
    report: str, report_inputs: dict[str, Any], tmp_path: Path
) -> None:
    lower = report.lower()
    assert "<script" not in lower and "<link" not in lower and "@import" not in lower
    assert "url(" not in lower
    doc = parse(report)
    for tag, name, value in doc.attrs:
        if name in ("src", "href"):
            assert value.startswith("#"), (tag, name, value)
    assert report.count("http") == report.count('xmlns="http://www.w3.org/2000/svg"')
    again = tmp_path / "again.html"
    write_report(again, **report_inputs)
    assert again.read_text(encoding="utf-8") == report
    assert len(report.encode()) < 100_000  # one call, two detectors


def test_data_text_is_escaped_everywhere(tmp_path: Path) -> None:
    folder = tmp_path / "evil"
    shutil.copytree(CALL, folder)
    manifest = json.loads((folder / "call.json").read_text())
    manifest["id"] = f"call {PAYLOAD}"
    first = next(e for e in manifest["events"] if e["type"] == "caller_turn")
    first["text"] = f"{first['text']} {PAYLOAD}"
    agent = next(e for e in manifest["events"] if e["type"] == "agent_turn")
    agent["text"] = PAYLOAD
    (folder / "call.json").write_text(json.dumps(manifest))
    calls = replay(folder, ("silence",))
    assert calls["silence"][0].call == f"call {PAYLOAD}"
    failed = [{"path": f"/calls/{PAYLOAD}", "error": f"bad file {PAYLOAD}"}]
    out = tmp_path / "r.html"
    data = inputs(calls, failed)
    data["comparisons"] = []
    write_report(out, **data)
    text = out.read_text(encoding="utf-8")

    assert "<script" not in text.lower()
    assert "alert(1)</" not in text and "\"&'" not in text
    assert text.count(ESCAPED) >= 5  # id, path, error, caller and agent text
    # Escaped, and read back as the very text, both in content and in <title>s.
    doc = parse(text)
    assert sum(PAYLOAD in t for t in doc.text) >= 5
    assert doc.starts.get("script", 0) == 0


def test_labels_that_cannot_be_loaded_show_the_error_and_skip_the_timeline(
    report_inputs: dict[str, Any], tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    calls = {
        s: [dataclasses.replace(c, path=str(gone)) for c in scores]
        for s, scores in report_inputs["calls"].items()
    }
    text = render_report(**{**report_inputs, "calls": calls})
    doc = parse(text)
    labels = [a.get("aria-label") for t, a in doc.order if t == "svg"]
    assert "call timeline" not in labels
    assert "cannot load the labels" in text and str(gone) in text


def test_one_detector_and_no_sweep_still_render(report_inputs: dict[str, Any]) -> None:
    first = SPECS[0]
    text = render_report(
        results=report_inputs["results"][:1],
        comparisons=[],
        sweeps=[],
        calls={first: report_inputs["calls"][first]},
        failed=[],
    )
    doc = parse(text)
    assert doc.starts["svg"] == doc.ends["svg"]
    assert "nothing to compare" in text and "--sweep" in text
    labels = [a.get("aria-label") for t, a in doc.order if t == "svg"]
    assert "operating points" not in labels and "call timeline" in labels


def test_cli_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnkit.cli",
            "replay",
            str(CALL),
            "-d",
            "silence",
            "-d",
            "silence:stop_ms=500",
            "--html",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    assert "silence:stop_ms=500" in text and text.count('aria-label="call timeline"') == 1


def test_the_page_draws_from_typed_results(report_inputs: dict[str, Any]) -> None:
    """The replay's dicts are validated once into typed views; the page
    drawn from them is the report, and a field the report needs that is
    missing is named (a ValueError, which the CLI reports in one line)."""
    data = ReportData.build(**report_inputs)
    assert render_page(data) == render_report(**report_inputs)
    first = report_inputs["results"][0]
    assert data.results[0].response_ms.p50 == first["response_ms"]["p50"]
    assert data.results[0].detector == first["detector"]
    spec = SPECS[0]
    replies = report_inputs["calls"][spec][0].replies
    assert [r.decision_at for r in data.calls[spec][0].replies] == [
        r["decision_at"] for r in replies
    ]
    assert data.sweeps[0].points[0].plotted() == (226.0, 0.9)
    broken = [{k: v for k, v in r.items() if k != "response_ms"} for r in report_inputs["results"]]
    with pytest.raises(ValueError, match="response_ms"):
        render_report(**{**report_inputs, "results": broken})
