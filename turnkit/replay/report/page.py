"""The report page: which sections appear, in what order, with which
tables and prose around the charts, all drawn from :class:`ReportData`
(typed results), and the atomic write of the one HTML file.

Sections: what was replayed and what failed, the results table (and false
cutoffs by hold kind), the paired comparisons against the first detector,
the response-latency CDF, the operating points of a ``--sweep``, and one
folded timeline per call with its per-detector table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Unpack

from turnkit.fileio import write_atomic
from turnkit.replay.metrics import EVENT_KINDS
from turnkit.replay.recording import load_recording
from turnkit.replay.report import charts
from turnkit.replay.report.model import (
    CallView,
    Comparison,
    FailedCall,
    ReportData,
    ReportInputs,
    Result,
    Sweep,
)
from turnkit.replay.report.svg import ci, colour, esc, g, ms, pct, swatch

__all__ = ["render_page", "render_report", "write_report"]

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;
color:#222;max-width:1180px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafafa}
.muted{color:#777}.bad{color:#b00020}.swatch{display:inline-block;width:10px;height:10px;
margin-right:4px;border-radius:2px;vertical-align:baseline}
code{font-size:12px;background:#f4f4f4;padding:1px 3px;border-radius:3px}
details{margin:4px 0 10px}summary{cursor:pointer;font-weight:600}
svg{display:block;margin:4px 0}svg text{font-family:system-ui,sans-serif}
.err{color:#b00020;white-space:pre-wrap;font-family:monospace;font-size:12px}
"""

RESULT_COLUMNS = (
    "detector",
    "calls",
    "turns",
    "resp p50",
    "resp p95",
    "resp mean",
    "interruption",
    "missed",
    "eot p50",
    *(f"false barge-in {k}" for k in EVENT_KINDS),
    "barge-in recall",
    "barge-in stop p50",
    "spurious replies",
    "compute/decision p50",
    "compute/decision p95",
)


def _detector_cell(spec: str, col: str) -> str:
    return f'<td class="l">{swatch(col)}<code>{esc(spec)}</code></td>'


def _dash(v: int | str | None) -> str:
    return "—" if v is None else str(v)


# ----------------------------------------------------------------- sections


def _header(
    results: Sequence[Result], calls: Mapping[str, Sequence[CallView]], failed: Sequence[FailedCall]
) -> str:
    call_ids = sorted({v.score.call for views in calls.values() for v in views})
    n_turns = results[0].turns if results else 0
    audio_s = results[0].audio_seconds if results else 0.0
    out = ["<h1>turnkit replay</h1>"]
    out.append(
        f"<p>{len(call_ids)} call{'s' if len(call_ids) != 1 else ''} replayed "
        f"({n_turns} caller turns, {audio_s:.1f} s of audio) through "
        f"{len(results)} detector{'s' if len(results) != 1 else ''}: "
        + ", ".join(
            f"{swatch(colour(i))}<code>{esc(r.detector)}</code>" for i, r in enumerate(results)
        )
        + "."
        + (f' <span class="bad">{len(failed)} failed.</span>' if failed else "")
        + "</p>"
    )
    if failed:
        out.append('<h2 id="failed">Failed calls</h2><table><tr><th class="l">call</th>')
        out.append('<th class="l">error</th></tr>')
        for f in failed:
            out.append(
                f'<tr><td class="l"><code>{esc(f.path)}</code></td>'
                f'<td class="l err">{esc(f.error)}</td></tr>'
            )
        out.append("</table>")
    out.append(
        '<p class="muted">Sections: <a href="#results">results</a> · '
        '<a href="#compare">paired comparisons</a> · <a href="#cdf">latency CDF</a> · '
        '<a href="#sweep">operating points</a> · <a href="#calls">calls</a></p>'
    )
    return "\n".join(out)


def _result_cells(r: Result) -> list[str]:
    cells = [
        _dash(r.calls),
        str(r.turns),
        ms(r.response_ms.p50),
        ms(r.response_ms.p95),
        ms(r.response_ms.mean),
        pct(r.interruption_rate),
        pct(r.missed_rate),
        ms(r.eot_delay_ms.p50),
    ]
    for k in EVENT_KINDS:
        c = r.false_barge_in_counts.get(k)
        extra = f' <span class="muted">({c.stopped}/{c.events})</span>' if c else ""
        cells.append(pct(r.false_barge_in_rate.get(k)) + extra)
    cells.append(
        pct(r.barge_in_recall)
        + (
            f' <span class="muted">(n={r.barge_in_count})</span>'
            if r.barge_in_count is not None
            else ""
        )
    )
    cells.append(ms(r.barge_in_stop_ms.p50 if r.barge_in_stop_ms else None))
    cells.append(_dash(r.spurious_replies))
    comp = r.compute_ms_per_decision
    for v in (comp.p50, comp.p95) if comp else (None, None):
        cells.append("—" if v is None else f"{v:.2f} ms")
    return cells


def _results(results: Sequence[Result]) -> str:
    out = ['<h2 id="results">Results</h2>']
    if not results:
        return out[0] + '<p class="muted">No results.</p>'
    out.append("<table><tr>")
    out.append(
        "".join(
            f'<th class="{"l" if i == 0 else ""}">{c}</th>' for i, c in enumerate(RESULT_COLUMNS)
        )
    )
    out.append("</tr>")
    for i, r in enumerate(results):
        out.append(
            f"<tr>{_detector_cell(r.detector, colour(i))}"
            + "".join(f"<td>{c}</td>" for c in _result_cells(r))
            + "</tr>"
        )
    out.append("</table>")
    # False cutoffs by hold kind.
    kinds = sorted({k for r in results for k in r.hold_cutoff_rate})
    if kinds:
        out.append('<table><tr><th class="l">false cutoffs at holds ≥ 100 ms</th>')
        out.append("".join(f"<th>{esc(k)}</th>" for k in kinds) + "</tr>")
        for i, r in enumerate(results):
            cells = []
            for k in kinds:
                h = r.hold_cutoff_rate.get(k)
                cells.append(
                    "—"
                    if h is None
                    else f'{pct(h.rate)} <span class="muted">({h.cutoffs}/{h.holds})</span>'
                )
            out.append(
                f"<tr>{_detector_cell(r.detector, colour(i))}"
                + "".join(f"<td>{c}</td>" for c in cells)
                + "</tr>"
            )
        out.append("</table>")
    out.append(
        '<p class="muted">Response: caller turn end → agent first audio, over answered turns. '
        "Interruption: share of turns with an end-of-turn commit before the turn's end. "
        "Missed: no audio within the timeout. False barge-in: share of backchannel/echo/noise "
        "events meeting the agent speaking that made it stop.</p>"
    )
    return "\n".join(out)


def _comparisons(comparisons: Sequence[Comparison], colours: dict[str, str]) -> str:
    out = ['<h2 id="compare">Paired comparisons</h2>']
    if not comparisons:
        out.append('<p class="muted">One detector only: nothing to compare.</p>')
        return "\n".join(out)
    first = comparisons[0]
    out.append(
        f"<p>Against the first detector, <code>{esc(first.baseline)}</code>, on the same turns; "
        f"95 % bootstrap intervals over calls ({esc(first.bootstrap.samples)} samples). "
        "Negative is better for all three.</p>"
    )
    out.append(
        '<table><tr><th class="l">detector</th><th>turns</th><th>answered by both</th>'
        "<th>Δ median response</th><th>Δ interruption</th><th>Δ missed</th></tr>"
    )
    for c in comparisons:
        col = colours.get(c.detector, "#333")
        resp, inter, miss = c.median_response_diff_ms, c.interruption_rate_diff, c.missed_rate_diff
        out.append(
            f"<tr>{_detector_cell(c.detector, col)}"
            f"<td>{esc(c.turns)} ({esc(c.calls)} calls)</td>"
            f"<td>{esc(c.turns_answered_by_both)}</td>"
            f"<td>{ci(resp.estimate, resp.bounds(), 'ms')}</td>"
            f"<td>{ci(inter.estimate, inter.bounds(), 'pp', 100.0, 1)}</td>"
            f"<td>{ci(miss.estimate, miss.bounds(), 'pp', 100.0, 1)}</td></tr>"
        )
    out.append("</table>")
    out.append(charts.paired_forest(comparisons, colours))
    return "\n".join(out)


def _cdf(results: Sequence[Result]) -> str:
    out = ['<h2 id="cdf">Response latency</h2>']
    chart = charts.latency_cdf(results)
    if chart is None:
        out.append('<p class="muted">No answered turns.</p>')
        return "\n".join(out)
    out.append(chart)
    out.append(
        '<p class="muted">Share of all caller turns answered within x ms; a curve that stops '
        "below 1 is the missed turns.</p>"
    )
    return "\n".join(out)


def _sweep(sweeps: Sequence[Sweep], results: Sequence[Result]) -> str:
    out = ['<h2 id="sweep">Operating points</h2>']
    if not sweeps:
        out.append(
            '<p class="muted">No sweep: run with <code>--sweep</code> for each detector\'s '
            "false-cutoff / latency curve.</p>"
        )
        return "\n".join(out)
    out.append(charts.operating_points(sweeps, results))
    out.append(
        '<p class="muted">Lines: each detector across its grid (circles; hover for the value). '
        "Diamonds: the detectors as configured. Dashed: 300/600 ms latency and 5/10 % "
        "false-cutoff budgets. Down and left is better.</p>"
    )
    out.append(
        '<table><tr><th class="l">detector</th><th class="l">grid</th>'
        "<th>cutoff @300 ms</th><th>cutoff @600 ms</th><th>latency @5%</th>"
        "<th>latency @10%</th></tr>"
    )
    for i, s in enumerate(sweeps):
        values = [p.value for p in s.points]
        grid = f"{esc(s.param)} {g(values[0])}…{g(values[-1])} ({len(values)})" if values else "—"
        out.append(
            f"<tr>{_detector_cell(s.detector, charts.sweep_colour(i))}"
            f'<td class="l">{grid}</td>'
            f"<td>{pct(s.cutoff_at_300ms)}</td><td>{pct(s.cutoff_at_600ms)}</td>"
            f"<td>{ms(s.latency_at_5pct_ms)}</td>"
            f"<td>{ms(s.latency_at_10pct_ms)}</td></tr>"
        )
    out.append("</table>")
    for i, s in enumerate(sweeps):
        out.append(
            f"<details><summary>{swatch(charts.sweep_colour(i))}{esc(s.detector)} by "
            f"{esc(s.param)}: every grid point</summary>"
        )
        out.append(
            f"<table><tr><th>{esc(s.param)}</th><th>holds</th><th>hold cutoff</th>"
            "<th>eot mean</th><th>eot p50</th><th>interruption</th><th>resp p50</th></tr>"
        )
        for p in s.points:
            out.append(
                f"<tr><td>{g(p.value)}</td><td>{esc(p.holds)}</td>"
                f"<td>{pct(p.hold_cutoff_rate)}</td><td>{ms(p.eot_mean_ms)}</td>"
                f"<td>{ms(p.eot_p50_ms)}</td><td>{pct(p.interruption_rate)}</td>"
                f"<td>{ms(p.response_p50_ms)}</td></tr>"
            )
        out.append("</table></details>")
    return "\n".join(out)


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    m = len(values) // 2
    return values[m] if len(values) % 2 else (values[m - 1] + values[m]) / 2


def _call_table(per_detector: Sequence[tuple[str, str, CallView | None]]) -> str:
    out = [
        '<table><tr><th class="l">detector</th><th>turns</th><th>answered</th>'
        "<th>resp p50</th><th>interrupted</th><th>missed</th><th>cutoffs</th>"
        "<th>spurious</th></tr>"
    ]
    for spec, col, view in per_detector:
        if view is None:
            out.append(
                f'<tr>{_detector_cell(spec, col)}<td class="l" colspan="7">not replayed</td></tr>'
            )
            continue
        score = view.score
        resp = sorted(t.response_ms for t in score.turns if t.response_ms is not None)
        out.append(
            f"<tr>{_detector_cell(spec, col)}"
            f"<td>{len(score.turns)}</td><td>{len(resp)}</td><td>{ms(_median(resp))}</td>"
            f"<td>{sum(t.interrupted for t in score.turns)}</td>"
            f"<td>{sum(t.missed for t in score.turns)}</td>"
            f"<td>{sum(t.cutoffs for t in score.turns)}</td>"
            f"<td>{score.spurious_replies}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _calls(calls: Mapping[str, Sequence[CallView]], colours: dict[str, str]) -> str:
    out = ['<h2 id="calls">Calls</h2>']
    specs = list(calls)
    by_call: dict[str, dict[str, CallView]] = {}
    for spec in specs:
        for view in calls[spec]:
            by_call.setdefault(view.score.call, {})[spec] = view
    if not by_call:
        out.append('<p class="muted">No calls.</p>')
        return "\n".join(out)
    out.append(
        "<p>Per call: caller turns (speech bars, holds shaded by kind; hover for the text), "
        "backchannel/echo/noise, the recorded agent, then per detector its end-of-turn "
        "decisions (ticks; red = cutoff inside the turn) and the replayed agent audio "
        "(bars, coloured by how they ended).</p>"
    )
    out.append(charts.timeline_legend())
    for n, call_id in enumerate(sorted(by_call)):
        per_spec = by_call[call_id]
        per_detector = [(s, colours.get(s, "#333"), per_spec.get(s)) for s in specs]
        path = next(v.score.path for v in per_spec.values())
        out.append(
            f'<details open id="call-{n}"><summary><code>{esc(call_id)}</code> '
            f'<span class="muted">{esc(path)}</span></summary>'
        )
        try:
            rec = load_recording(Path(path))
        except Exception as exc:  # the labels are gone or broken: say so, draw nothing
            out.append(f'<p class="err">cannot load the labels: {esc(exc)}</p>')
        else:
            out.append(charts.timeline(rec, per_detector))
        out.append(_call_table(per_detector))
        out.append("</details>")
    return "\n".join(out)


# ----------------------------------------------------------------- entry


def render_page(data: ReportData) -> str:
    """The report as one HTML string, from typed results. Colours follow
    the results' order, then any spec that only has calls."""
    colours = {r.detector: colour(i) for i, r in enumerate(data.results)}
    for spec in data.calls:
        colours.setdefault(spec, colour(len(colours)))
    body = [
        _header(data.results, data.calls, data.failed),
        _results(data.results),
        _comparisons(data.comparisons, colours),
        _cdf(data.results),
        _sweep(data.sweeps, data.results),
        _calls(data.calls, colours),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>turnkit replay report</title>\n"
        f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )


def render_report(**inputs: Unpack[ReportInputs]) -> str:
    """The report as one HTML string, from the replay's results as
    ``turnkit replay`` holds them (validated into :class:`ReportData`;
    ``ValueError`` naming a field the report needs that is missing)."""
    return render_page(ReportData.build(**inputs))


def write_report(path: Path, **inputs: Unpack[ReportInputs]) -> None:
    """Write the self-contained HTML report to ``path`` (UTF-8; text that is
    not valid Unicode is replaced, never refused): rendered first, then
    written to a temporary file beside ``path`` and renamed over it, so a
    failure (full disk) leaves no half report. Raises ``OSError``, or
    ``ValueError`` for results the report cannot read."""
    write_atomic(Path(path), render_report(**inputs))
