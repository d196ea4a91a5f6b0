"""The self-contained HTML report of ``turnkit replay --html FILE``.

One file, nothing fetched: inline CSS, charts drawn here as inline SVG, no
script (sections fold with ``<details>``). It shows what was replayed and what
failed, the results table, the paired comparisons against the first detector,
the response-latency CDFs, the operating-point curves of a ``--sweep``, and a
timeline per call: the labels (caller turns with their holds, backchannels,
echo, noise, the recorded agent) above one lane per detector with its
end-of-turn decisions and the replayed agent audio.

Every piece of text that comes from the data (call ids, paths, transcripts,
detector specs, error messages) is escaped, in element content and in
attribute values alike. The output depends only on the inputs: the same
inputs give the same bytes.

Example::

    write_report(Path("report.html"), results=results, comparisons=comparisons,
                 sweeps=sweeps, calls=calls, failed=failed)
"""

from __future__ import annotations

import contextlib
import html
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from turnkit.replay.metrics import EVENT_KINDS, CallScore
from turnkit.replay.recording import load_recording

__all__ = ["write_report"]

# Detector colours, by position in the results (colour-blind friendly-ish).
PALETTE = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
SWEEP_PALETTE = ("#3b5b92", "#6a9a3a", "#7b4f9e", "#a0522d", "#c2185b", "#00838f")
STOP_COLOURS = {
    "completed": "#5b9bd5",
    "interrupted": "#ff7f0e",
    "cancelled": "#b0b0b0",
    "superseded": "#c5b0d5",
}
EVENT_COLOURS = {"backchannel": "#2ca02c", "echo": "#9e9e9e", "noise": "#8c564b"}
HOLD_COLOURS = {
    "mid-sentence": "#f4b6b6",
    "between-sentences": "#f9d98b",
    "comma": "#cfe3f7",
    "unlabelled": "#e0e0e0",
}
HOLD_SHORT = {"mid-sentence": "mid", "between-sentences": "betw", "comma": "comma"}
CALLER_COLOUR = "#1f4e79"
AGENT_COLOUR = "#9ecae1"
CUTOFF_COLOUR = "#d62728"
TICK_COLOUR = "#222"

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


# ----------------------------------------------------------------- helpers


def esc(value: Any) -> str:
    """Escape any value for HTML element content or a quoted attribute."""
    return html.escape(str(value), quote=True)


def _n(x: float) -> str:
    """A coordinate: one decimal, no ``-0.0`` (stable output)."""
    s = f"{x:.1f}"
    if s.endswith(".0"):
        s = s[:-2]
    return "0" if s == "-0" else s


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f} ms"


def _pct(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def _signed(v: float | None, scale: float = 1.0, digits: int = 0) -> str:
    if v is None:
        return "—"
    x = v * scale
    s = f"{x:+.{digits}f}"
    return s.replace("-", "−")


def _ci(d: dict[str, Any], unit: str, scale: float = 1.0, digits: int = 0) -> str:
    est = d.get("estimate")
    lo, hi = (d.get("ci95") or [None, None])[:2]
    if est is None:
        return "—"
    return (
        f"{_signed(est, scale, digits)} {unit} "
        f'<span class="muted">[{_signed(lo, scale, digits)}, {_signed(hi, scale, digits)}]</span>'
    )


def _nice_step(span: float, n: int) -> float:
    if span <= 0:
        return 1.0
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ticks(hi: float, n: int = 6) -> tuple[float, list[float]]:
    """Axis top (rounded up to a tick) and ticks from 0."""
    step = _nice_step(hi, n)
    top = step * math.ceil(hi / step - 1e-9) if hi > 0 else step
    count = round(top / step)
    return top, [round(i * step, 10) for i in range(count + 1)]


def _g(v: Any) -> str:
    if isinstance(v, int | float):
        return f"{v:g}"
    return "—" if v is None else esc(v)


def _tick_label(v: float) -> str:
    return f"{v:g}"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _colour(i: int, palette: Sequence[str] = PALETTE) -> str:
    return palette[i % len(palette)]


def _title(text: str) -> str:
    return f"<title>{esc(text)}</title>"


def _swatch(colour: str) -> str:
    return f'<span class="swatch" style="background:{colour}"></span>'


# ----------------------------------------------------------------- sections


def _header(
    results: list[dict[str, Any]], calls: dict[str, list[CallScore]], failed: list[dict]
) -> str:
    call_ids = sorted({c.call for scores in calls.values() for c in scores})
    n_turns = results[0]["turns"] if results else 0
    audio_s = results[0].get("audio_seconds", 0.0) if results else 0.0
    out = ["<h1>turnkit replay</h1>"]
    out.append(
        f"<p>{len(call_ids)} call{'s' if len(call_ids) != 1 else ''} replayed "
        f"({n_turns} caller turns, {audio_s:.1f} s of audio) through "
        f"{len(results)} detector{'s' if len(results) != 1 else ''}: "
        + ", ".join(
            f"{_swatch(_colour(i))}<code>{esc(r['detector'])}</code>" for i, r in enumerate(results)
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
                f'<tr><td class="l"><code>{esc(f.get("path", ""))}</code></td>'
                f'<td class="l err">{esc(f.get("error", ""))}</td></tr>'
            )
        out.append("</table>")
    out.append(
        '<p class="muted">Sections: <a href="#results">results</a> · '
        '<a href="#compare">paired comparisons</a> · <a href="#cdf">latency CDF</a> · '
        '<a href="#sweep">operating points</a> · <a href="#calls">calls</a></p>'
    )
    return "\n".join(out)


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


def _result_cells(r: dict[str, Any]) -> list[str]:
    fbi = r.get("false_barge_in_rate", {})
    counts = r.get("false_barge_in_counts", {})
    cells = [
        str(r.get("calls", "—")),
        str(r.get("turns", "—")),
        _ms(r["response_ms"]["p50"]),
        _ms(r["response_ms"]["p95"]),
        _ms(r["response_ms"]["mean"]),
        _pct(r.get("interruption_rate")),
        _pct(r.get("missed_rate")),
        _ms(r["eot_delay_ms"]["p50"]),
    ]
    for k in EVENT_KINDS:
        c = counts.get(k, {})
        extra = f' <span class="muted">({c["stopped"]}/{c["events"]})</span>' if c else ""
        cells.append(_pct(fbi.get(k)) + extra)
    n_barge = r.get("barge_in_count")
    cells.append(
        _pct(r.get("barge_in_recall"))
        + (f' <span class="muted">(n={n_barge})</span>' if n_barge is not None else "")
    )
    cells.append(_ms((r.get("barge_in_stop_ms") or {}).get("p50")))
    cells.append(str(r.get("spurious_replies", "—")))
    comp = r.get("compute_ms_per_decision") or {}
    for q in ("p50", "p95"):
        v = comp.get(q)
        cells.append("—" if v is None else f"{v:.2f} ms")
    return cells


def _results(results: list[dict[str, Any]]) -> str:
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
            f'<tr><td class="l">{_swatch(_colour(i))}<code>{esc(r["detector"])}</code></td>'
            + "".join(f"<td>{c}</td>" for c in _result_cells(r))
            + "</tr>"
        )
    out.append("</table>")
    # False cutoffs by hold kind.
    kinds = sorted({k for r in results for k in r.get("hold_cutoff_rate", {})})
    if kinds:
        out.append('<table><tr><th class="l">false cutoffs at holds ≥ 100 ms</th>')
        out.append("".join(f"<th>{esc(k)}</th>" for k in kinds) + "</tr>")
        for i, r in enumerate(results):
            row = r.get("hold_cutoff_rate", {})
            cells = []
            for k in kinds:
                h = row.get(k)
                cells.append(
                    "—"
                    if h is None
                    else f'{_pct(h["rate"])} <span class="muted">({h["cutoffs"]}/{h["holds"]})</span>'
                )
            out.append(
                f'<tr><td class="l">{_swatch(_colour(i))}<code>{esc(r["detector"])}</code></td>'
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


def _forest(comparisons: list[dict[str, Any]], colours: dict[str, str]) -> str:
    """Point estimates with 95 % CIs, one panel per metric, zero marked."""
    panels = (
        ("Δ median response (ms)", "median_response_diff_ms", 1.0),
        ("Δ interruption (pp)", "interruption_rate_diff", 100.0),
        ("Δ missed (pp)", "missed_rate_diff", 100.0),
    )
    row_h, top, label_w, panel_w, gap = 22, 24, 170, 250, 20
    height = top + row_h * len(comparisons) + 26
    width = label_w + len(panels) * (panel_w + gap)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="paired differences">'
    ]
    for j, c in enumerate(comparisons):
        y = top + row_h * j + row_h / 2
        parts.append(
            f'<text x="{label_w - 6}" y="{_n(y + 4)}" font-size="11" text-anchor="end">'
            f"{_title(c['detector'])}{esc(_short(c['detector'], 26))}</text>"
        )
    for p, (label, key, scale) in enumerate(panels):
        x0 = label_w + p * (panel_w + gap)
        vals: list[float] = [0.0]
        for c in comparisons:
            d = c.get(key) or {}
            for v in (d.get("estimate"), *(d.get("ci95") or [])):
                if v is not None:
                    vals.append(v * scale)
        lo, hi = min(vals), max(vals)
        span = max(hi - lo, 1e-9)
        lo, hi = lo - 0.08 * span, hi + 0.08 * span
        if hi - lo < 1e-6:
            lo, hi = -1.0, 1.0

        def sx(v: float, x0: float = x0, lo: float = lo, hi: float = hi) -> float:
            return x0 + (v - lo) / (hi - lo) * panel_w

        y_bot = top + row_h * len(comparisons)
        parts.append(
            f'<text x="{_n(x0 + panel_w / 2)}" y="14" font-size="12" text-anchor="middle" '
            f'font-weight="600">{esc(label)}</text>'
        )
        parts.append(
            f'<rect x="{_n(x0)}" y="{top}" width="{panel_w}" height="{row_h * len(comparisons)}" '
            'fill="#fafafa" stroke="#ccc"/>'
        )
        zx = sx(0.0)
        parts.append(
            f'<line x1="{_n(zx)}" y1="{top}" x2="{_n(zx)}" y2="{y_bot}" stroke="#888" '
            'stroke-dasharray="3,3"/>'
        )
        parts.append(
            f'<text x="{_n(x0)}" y="{y_bot + 14}" font-size="10" fill="#666">{_n(lo)}</text>'
            f'<text x="{_n(x0 + panel_w)}" y="{y_bot + 14}" font-size="10" fill="#666" '
            f'text-anchor="end">{_n(hi)}</text>'
            f'<text x="{_n(zx)}" y="{y_bot + 14}" font-size="10" fill="#666" '
            'text-anchor="middle">0</text>'
        )
        for j, c in enumerate(comparisons):
            d = c.get(key) or {}
            est = d.get("estimate")
            if est is None:
                continue
            y = top + row_h * j + row_h / 2
            col = colours.get(c["detector"], "#333")
            ci = d.get("ci95") or [None, None]
            tip = f"{c['detector']}: {label} {est * scale:+.1f}"
            if ci[0] is not None and ci[1] is not None:
                tip += f" [{ci[0] * scale:+.1f}, {ci[1] * scale:+.1f}]"
                parts.append(
                    f'<line x1="{_n(sx(ci[0] * scale))}" y1="{_n(y)}" '
                    f'x2="{_n(sx(ci[1] * scale))}" y2="{_n(y)}" stroke="{col}" stroke-width="2"/>'
                )
            parts.append(
                f'<circle cx="{_n(sx(est * scale))}" cy="{_n(y)}" r="4" fill="{col}">'
                f"{_title(tip)}</circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _comparisons(comparisons: list[dict[str, Any]], colours: dict[str, str]) -> str:
    out = ['<h2 id="compare">Paired comparisons</h2>']
    if not comparisons:
        out.append('<p class="muted">One detector only: nothing to compare.</p>')
        return "\n".join(out)
    base = comparisons[0].get("baseline", "")
    boot = comparisons[0].get("bootstrap", {})
    out.append(
        f"<p>Against the first detector, <code>{esc(base)}</code>, on the same turns; "
        f"95 % bootstrap intervals over calls ({esc(boot.get('samples', '?'))} samples). "
        "Negative is better for all three.</p>"
    )
    out.append(
        '<table><tr><th class="l">detector</th><th>turns</th><th>answered by both</th>'
        "<th>Δ median response</th><th>Δ interruption</th><th>Δ missed</th></tr>"
    )
    for c in comparisons:
        col = colours.get(c["detector"], "#333")
        out.append(
            f'<tr><td class="l">{_swatch(col)}<code>{esc(c["detector"])}</code></td>'
            f"<td>{esc(c.get('turns', '—'))} ({esc(c.get('calls', '—'))} calls)</td>"
            f"<td>{esc(c.get('turns_answered_by_both', '—'))}</td>"
            f"<td>{_ci(c['median_response_diff_ms'], 'ms')}</td>"
            f"<td>{_ci(c['interruption_rate_diff'], 'pp', 100.0, 1)}</td>"
            f"<td>{_ci(c['missed_rate_diff'], 'pp', 100.0, 1)}</td></tr>"
        )
    out.append("</table>")
    out.append(_forest(comparisons, colours))
    return "\n".join(out)


def _axes(
    *,
    x0: float,
    y0: float,
    w: float,
    h: float,
    xticks: list[float],
    xtop: float,
    yticks: list[float],
    ytop: float,
    xlabel: str,
    ylabel: str,
    yfmt: Any = _tick_label,
) -> list[str]:
    """Frame, grid, ticks and labels of a plot whose data box is
    (x0, y0)-(x0+w, y0+h), data ranges [0, xtop] × [0, ytop]."""
    parts = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="#fff" stroke="#999"/>']
    for t in xticks:
        x = x0 + t / xtop * w
        parts.append(
            f'<line x1="{_n(x)}" y1="{y0}" x2="{_n(x)}" y2="{y0 + h}" stroke="#eee"/>'
            f'<line x1="{_n(x)}" y1="{y0 + h}" x2="{_n(x)}" y2="{y0 + h + 4}" stroke="#999"/>'
            f'<text x="{_n(x)}" y="{y0 + h + 16}" font-size="11" text-anchor="middle">'
            f"{_tick_label(t)}</text>"
        )
    for t in yticks:
        y = y0 + h - t / ytop * h
        parts.append(
            f'<line x1="{x0}" y1="{_n(y)}" x2="{x0 + w}" y2="{_n(y)}" stroke="#eee"/>'
            f'<line x1="{x0 - 4}" y1="{_n(y)}" x2="{x0}" y2="{_n(y)}" stroke="#999"/>'
            f'<text x="{x0 - 6}" y="{_n(y + 4)}" font-size="11" text-anchor="end">'
            f"{yfmt(t)}</text>"
        )
    parts.append(
        f'<text x="{_n(x0 + w / 2)}" y="{y0 + h + 34}" font-size="12" '
        f'text-anchor="middle">{esc(xlabel)}</text>'
        f'<text x="14" y="{_n(y0 + h / 2)}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {_n(y0 + h / 2)})">{esc(ylabel)}</text>'
    )
    return parts


def _legend(x: float, y: float, entries: Iterable[tuple[str, str, str]]) -> list[str]:
    """Legend rows (colour, label, tooltip) from (x, y) downward."""
    parts = []
    for i, (col, label, tip) in enumerate(entries):
        yy = y + i * 17
        parts.append(
            f'<g>{_title(tip)}<rect x="{_n(x)}" y="{_n(yy - 9)}" width="14" height="4" '
            f'fill="{col}"/><text x="{_n(x + 20)}" y="{_n(yy - 3)}" font-size="11">'
            f"{esc(_short(label, 34))}</text></g>"
        )
    return parts


def _cdf(results: list[dict[str, Any]]) -> str:
    out = ['<h2 id="cdf">Response latency</h2>']
    series = []
    for i, r in enumerate(results):
        vals = sorted(
            t["response_ms"] for t in r.get("per_turn", []) if t.get("response_ms") is not None
        )
        series.append((r["detector"], _colour(i), vals, max(r.get("turns", 0), len(vals))))
    if not any(s[2] for s in series):
        out.append('<p class="muted">No answered turns.</p>')
        return "\n".join(out)
    x_max = max(v for s in series for v in s[2])
    xtop, xticks = _ticks(x_max * 1.02)
    yticks = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    width, height = 1000, 340
    x0, y0, w, h = 60, 14, 680, 270

    def sx(v: float) -> float:
        return x0 + v / xtop * w

    def sy(v: float) -> float:
        return y0 + h - v * h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="response latency CDF">'
    ]
    parts += _axes(
        x0=x0,
        y0=y0,
        w=w,
        h=h,
        xticks=xticks,
        xtop=xtop,
        yticks=yticks,
        ytop=1.0,
        xlabel="response latency (ms): caller turn end → agent first audio",
        ylabel="share of turns",
        yfmt=lambda t: f"{t:.1f}",
    )
    legend = []
    for name, col, vals, n in series:
        if not vals or n == 0:
            legend.append((col, f"{name} (no answers)", name))
            continue
        pts = [(sx(0), sy(0))]
        for k, v in enumerate(vals):
            pts.append((sx(v), sy(k / n)))
            pts.append((sx(v), sy((k + 1) / n)))
        pts.append((sx(xtop), sy(len(vals) / n)))
        path = " ".join(f"{_n(a)},{_n(b)}" for a, b in pts)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2">'
            f"{_title(f'{name}: {len(vals)} of {n} turns answered')}</polyline>"
        )
        legend.append((col, f"{name} ({len(vals)}/{n})", f"{name}: {len(vals)} of {n} answered"))
    parts += _legend(x0 + w + 24, y0 + 14, legend)
    parts.append("</svg>")
    out.append("".join(parts))
    out.append(
        '<p class="muted">Share of all caller turns answered within x ms; a curve that stops '
        "below 1 is the missed turns.</p>"
    )
    return "\n".join(out)


def _result_operating_point(r: dict[str, Any]) -> tuple[float, float] | None:
    holds = r.get("hold_cutoff_rate") or {}
    n = sum(h["holds"] for h in holds.values())
    cut = sum(h["cutoffs"] for h in holds.values())
    eot = (r.get("eot_delay_ms") or {}).get("mean")
    if n == 0 or eot is None:
        return None
    return eot, cut / n


def _sweep(sweeps: list[dict[str, Any]], results: list[dict[str, Any]]) -> str:
    out = ['<h2 id="sweep">Operating points</h2>']
    if not sweeps:
        out.append(
            '<p class="muted">No sweep: run with <code>--sweep</code> for each detector\'s '
            "false-cutoff / latency curve.</p>"
        )
        return "\n".join(out)
    curves = []
    for i, s in enumerate(sweeps):
        pts = [
            p
            for p in s.get("points", [])
            if p.get("eot_mean_ms") is not None and p.get("hold_cutoff_rate") is not None
        ]
        curves.append((s, _colour(i, SWEEP_PALETTE), pts))
    ops = [
        (r["detector"], _colour(i), op)
        for i, r in enumerate(results)
        if (op := _result_operating_point(r)) is not None
    ]
    xs = [p["eot_mean_ms"] for _, _, pts in curves for p in pts] + [op[0] for _, _, op in ops]
    ys = [p["hold_cutoff_rate"] for _, _, pts in curves for p in pts] + [op[1] for _, _, op in ops]
    xtop, xticks = _ticks(max([700.0, *xs]) * 1.02)
    ytop, yticks = _ticks(min(1.0, max([0.12, *ys]) * 1.05), 5)
    width, height = 1000, 380
    x0, y0, w, h = 60, 14, 680, 310

    def sx(v: float) -> float:
        return x0 + v / xtop * w

    def sy(v: float) -> float:
        return y0 + h - v / ytop * h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="operating points">'
    ]
    parts += _axes(
        x0=x0,
        y0=y0,
        w=w,
        h=h,
        xticks=xticks,
        xtop=xtop,
        yticks=yticks,
        ytop=ytop,
        xlabel="mean end-of-turn delay (ms)",
        ylabel="false-cutoff rate at holds ≥ 100 ms",
        yfmt=lambda t: f"{t * 100:g}%",
    )
    # Budget lines.
    for b in (300, 600):
        x = sx(b)
        parts.append(
            f'<line x1="{_n(x)}" y1="{y0}" x2="{_n(x)}" y2="{y0 + h}" stroke="#c44" '
            f'stroke-dasharray="5,4"/><text x="{_n(x + 3)}" y="{y0 + 12}" font-size="10" '
            f'fill="#c44">{b} ms</text>'
        )
    for b in (0.05, 0.10):
        if b > ytop:
            continue
        y = sy(b)
        parts.append(
            f'<line x1="{x0}" y1="{_n(y)}" x2="{x0 + w}" y2="{_n(y)}" stroke="#c44" '
            f'stroke-dasharray="5,4"/><text x="{x0 + w - 3}" y="{_n(y - 3)}" font-size="10" '
            f'fill="#c44" text-anchor="end">{b * 100:g}%</text>'
        )
    legend = []
    for s, col, pts in curves:
        name = s["detector"]
        if pts:
            path = " ".join(
                f"{_n(sx(p['eot_mean_ms']))},{_n(sy(p['hold_cutoff_rate']))}" for p in pts
            )
            parts.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"/>')
            for p in pts:
                tip = (
                    f"{p.get('spec', name)}: {s.get('param', '')}={_g(p.get('value'))}, "
                    f"eot mean {p['eot_mean_ms']:.0f} ms, "
                    f"false cutoff {p['hold_cutoff_rate'] * 100:.1f}%"
                )
                parts.append(
                    f'<circle cx="{_n(sx(p["eot_mean_ms"]))}" cy="{_n(sy(p["hold_cutoff_rate"]))}" '
                    f'r="4" fill="{col}">{_title(tip)}</circle>'
                )
        legend.append((col, f"{name} by {s.get('param', '?')}", name))
    for name, col, (ox, oy) in ops:
        x, y = sx(ox), sy(oy)
        parts.append(
            f'<path d="M{_n(x)},{_n(y - 7)} L{_n(x + 7)},{_n(y)} L{_n(x)},{_n(y + 7)} '
            f'L{_n(x - 7)},{_n(y)} Z" fill="none" stroke="{col}" stroke-width="2">'
            f"{_title(f'{name}: eot mean {ox:.0f} ms, false cutoff {oy * 100:.1f}%')}</path>"
        )
    parts += _legend(x0 + w + 24, y0 + 14, legend)
    ly = y0 + 14 + 17 * len(legend) + 10
    for k, (name, col, _op) in enumerate(ops):
        yy = ly + k * 17
        parts.append(
            f'<g>{_title(name)}<path d="M{x0 + w + 31},{yy - 12} l5,5 l-5,5 l-5,-5 Z" '
            f'fill="none" stroke="{col}" stroke-width="1.5"/><text x="{x0 + w + 44}" '
            f'y="{yy - 3}" font-size="11">{esc(_short(name, 32))}</text></g>'
        )
    parts.append("</svg>")
    out.append("".join(parts))
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
    for s, col, _pts in curves:
        values = [p.get("value") for p in s.get("points", [])]
        grid = (
            f"{esc(s.get('param', ''))} {_g(values[0])}…{_g(values[-1])} ({len(values)})"
            if values
            else "—"
        )
        out.append(
            f'<tr><td class="l">{_swatch(col)}<code>{esc(s["detector"])}</code></td>'
            f'<td class="l">{grid}</td>'
            f"<td>{_pct(s.get('cutoff_at_300ms'))}</td><td>{_pct(s.get('cutoff_at_600ms'))}</td>"
            f"<td>{_ms(s.get('latency_at_5pct_ms'))}</td>"
            f"<td>{_ms(s.get('latency_at_10pct_ms'))}</td></tr>"
        )
    out.append("</table>")
    for s, col, _pts in curves:
        out.append(
            f"<details><summary>{_swatch(col)}{esc(s['detector'])} by "
            f"{esc(s.get('param', ''))}: every grid point</summary>"
        )
        out.append(
            f"<table><tr><th>{esc(s.get('param', ''))}</th><th>holds</th><th>hold cutoff</th>"
            "<th>eot mean</th><th>eot p50</th><th>interruption</th><th>resp p50</th></tr>"
        )
        for p in s.get("points", []):
            out.append(
                f"<tr><td>{_g(p.get('value'))}</td><td>{esc(p.get('holds', '—'))}</td>"
                f"<td>{_pct(p.get('hold_cutoff_rate'))}</td><td>{_ms(p.get('eot_mean_ms'))}</td>"
                f"<td>{_ms(p.get('eot_p50_ms'))}</td><td>{_pct(p.get('interruption_rate'))}</td>"
                f"<td>{_ms(p.get('response_p50_ms'))}</td></tr>"
            )
        out.append("</table></details>")
    return "\n".join(out)


# ----------------------------------------------------------------- timelines

LANE_H = 20
LABEL_W = 170
TL_WIDTH = 1000


def _timeline_legend() -> str:
    items: list[tuple[str, str]] = [
        (CALLER_COLOUR, "caller speech"),
        *(
            (HOLD_COLOURS[k], f"hold: {k}" + (f" ({HOLD_SHORT[k]})" if HOLD_SHORT[k] != k else ""))
            for k in ("mid-sentence", "between-sentences", "comma")
        ),
        *((EVENT_COLOURS[k], k) for k in EVENT_KINDS),
        (AGENT_COLOUR, "recorded agent"),
        *((STOP_COLOURS[k], f"reply {k}") for k in STOP_COLOURS),
    ]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{TL_WIDTH}" height="44" '
        f'viewBox="0 0 {TL_WIDTH} 44" role="img" aria-label="timeline legend">'
    ]
    x = 4.0
    y = 14
    for col, label in items:
        width = 24 + 6.6 * len(label)
        if x + width > TL_WIDTH:
            x, y = 4.0, y + 18
        parts.append(
            f'<rect x="{_n(x)}" y="{y - 9}" width="14" height="10" fill="{col}"/>'
            f'<text x="{_n(x + 18)}" y="{y}" font-size="11">{esc(label)}</text>'
        )
        x += width
    for col, label in (
        (TICK_COLOUR, "end-of-turn decision"),
        (CUTOFF_COLOUR, "cutoff (too early)"),
    ):
        width = 24 + 6.6 * len(label)
        if x + width > TL_WIDTH:
            x, y = 4.0, y + 18
        parts.append(
            f'<line x1="{_n(x + 7)}" y1="{y - 11}" x2="{_n(x + 7)}" y2="{y + 2}" stroke="{col}" '
            f'stroke-width="2"/><text x="{_n(x + 18)}" y="{y}" font-size="11">{esc(label)}</text>'
        )
        x += width
    parts.append("</svg>")
    return "".join(parts)


def _call_table(call_id: str, per_detector: list[tuple[str, str, CallScore | None]]) -> str:
    out = [
        '<table><tr><th class="l">detector</th><th>turns</th><th>answered</th>'
        "<th>resp p50</th><th>interrupted</th><th>missed</th><th>cutoffs</th>"
        "<th>spurious</th></tr>"
    ]
    for spec, col, score in per_detector:
        if score is None:
            out.append(
                f'<tr><td class="l">{_swatch(col)}<code>{esc(spec)}</code></td>'
                '<td class="l" colspan="7">not replayed</td></tr>'
            )
            continue
        resp = sorted(t.response_ms for t in score.turns if t.response_ms is not None)
        p50 = None
        if resp:
            m = len(resp) // 2
            p50 = resp[m] if len(resp) % 2 else (resp[m - 1] + resp[m]) / 2
        out.append(
            f'<tr><td class="l">{_swatch(col)}<code>{esc(spec)}</code></td>'
            f"<td>{len(score.turns)}</td><td>{len(resp)}</td><td>{_ms(p50)}</td>"
            f"<td>{sum(t.interrupted for t in score.turns)}</td>"
            f"<td>{sum(t.missed for t in score.turns)}</td>"
            f"<td>{sum(t.cutoffs for t in score.turns)}</td>"
            f"<td>{score.spurious_replies}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _timeline(rec: Any, per_detector: list[tuple[str, str, CallScore | None]]) -> str:
    """One call's lanes: labels, then one lane per detector."""
    end_t = float(rec.duration or 0.0)
    for _spec, _col, score in per_detector:
        if score is None:
            continue
        for r in score.replies:
            for key in ("decision_at", "first_audio_at", "stopped_at", "planned_end"):
                v = r.get(key)
                if v is not None:
                    end_t = max(end_t, float(v))
    end_t = max(end_t, 1.0)
    top_s, ticks = _ticks(end_t, 12)
    plot_w = TL_WIDTH - LABEL_W - 10
    lanes = ["caller", "events", "agent (recorded)", *(s for s, _, _ in per_detector)]
    axis_h = 22
    height = axis_h + LANE_H * len(lanes) + 4

    def sx(t: float) -> float:
        return LABEL_W + t / top_s * plot_w

    def lane_y(i: int) -> float:
        return axis_h + i * LANE_H

    def bar(t0: float, t1: float, y: float, hh: float, col: str, tip: str, extra: str = "") -> str:
        x = sx(t0)
        wd = max(sx(t1) - x, 1.0)
        return (
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(wd)}" height="{_n(hh)}" fill="{col}"'
            f"{extra}>{_title(tip)}</rect>"
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{TL_WIDTH}" height="{height}" '
        f'viewBox="0 0 {TL_WIDTH} {height}" role="img" aria-label="call timeline">'
    ]
    # Lane backgrounds and names.
    for i, name in enumerate(lanes):
        y = lane_y(i)
        if i % 2 == 0:
            parts.append(
                f'<rect x="{LABEL_W}" y="{_n(y)}" width="{plot_w}" height="{LANE_H}" fill="#f7f7f7"/>'
            )
        col = per_detector[i - 3][1] if i >= 3 else "#444"
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{_n(y + 14)}" font-size="11" text-anchor="end" '
            f'fill="{col}">{_title(name)}{esc(_short(name, 28))}</text>'
        )
    # Time axis (seconds), with grid lines.
    bottom = lane_y(len(lanes))
    for t in ticks:
        x = sx(t)
        parts.append(
            f'<line x1="{_n(x)}" y1="{axis_h - 4}" x2="{_n(x)}" y2="{_n(bottom)}" stroke="#e4e4e4"/>'
            f'<text x="{_n(x)}" y="{axis_h - 7}" font-size="10" text-anchor="middle">'
            f"{_tick_label(t)}</text>"
        )
    parts.append(
        f'<text x="{LABEL_W - 6}" y="{axis_h - 7}" font-size="10" text-anchor="end" '
        'fill="#666">seconds</text>'
    )
    # Lane 0: caller turns.
    y = lane_y(0)
    for k, turn in enumerate(rec.caller_turns):
        tip = f"caller turn {k} ({turn.start:.2f}–{turn.end:.2f} s): {turn.text}"
        parts.append(f"<g>{_title(tip)}")
        for s0, s1 in turn.speech_spans():
            parts.append(bar(s0, s1, y + 3, LANE_H - 6, CALLER_COLOUR, tip))
        for g0, g1, kind in turn.gaps():
            col = HOLD_COLOURS.get(kind, HOLD_COLOURS["unlabelled"])
            htip = f"hold ({kind}) {g0:.2f}–{g1:.2f} s, {(g1 - g0) * 1000:.0f} ms"
            parts.append(bar(g0, g1, y + 3, LANE_H - 6, col, htip))
            label = HOLD_SHORT.get(kind, "")
            if label and sx(g1) - sx(g0) < 5.5 * len(label) + 2:
                label = label[0] if sx(g1) - sx(g0) >= 6 else ""
            if label:
                parts.append(
                    f'<text x="{_n((sx(g0) + sx(g1)) / 2)}" y="{_n(y + 14)}" font-size="9" '
                    f'text-anchor="middle" fill="#333">{label}</text>'
                )
        parts.append("</g>")
    # Lane 1: backchannel / echo / noise.
    y = lane_y(1)
    for kind, evs in (
        ("echo", rec.echoes),
        ("noise", rec.noises),
        ("backchannel", rec.backchannels),
    ):
        hh = LANE_H - 10 if kind == "echo" else LANE_H - 6
        yy = y + 5 if kind == "echo" else y + 3
        for ev in evs:
            what = getattr(ev, "text", "") or getattr(ev, "label", "")
            tip = f"{kind} {ev.start:.2f}–{ev.end:.2f} s" + (f": {what}" if what else "")
            parts.append(bar(ev.start, ev.end, yy, hh, EVENT_COLOURS[kind], tip))
    # Lane 2: recorded agent turns.
    y = lane_y(2)
    for k, at in enumerate(rec.agent_turns):
        tip = f"agent turn {k} ({at.start:.2f}–{at.end:.2f} s): {at.text}"
        parts.append(bar(at.start, at.end, y + 3, LANE_H - 6, AGENT_COLOUR, tip))
    # Detector lanes.
    for j, (spec, _col, score) in enumerate(per_detector):
        y = lane_y(3 + j)
        if score is None:
            continue
        for r in score.replies:
            first = r.get("first_audio_at")
            stop = r.get("stopped_at")
            end = stop if stop is not None else r.get("planned_end")
            reason = r.get("stop_reason") or "completed"
            turn = r.get("turn")
            if first is not None and end is not None and end >= first:
                tip = (
                    f"{spec}: reply to turn {turn}, audio {first:.2f}–{end:.2f} s, {reason}"
                    if turn is not None
                    else f"{spec}: reply (no turn), audio {first:.2f}–{end:.2f} s, {reason}"
                )
                parts.append(
                    bar(
                        first,
                        end,
                        y + 5,
                        LANE_H - 10,
                        STOP_COLOURS.get(reason, "#999"),
                        tip,
                    )
                )
        for r in score.replies:
            d = float(r["decision_at"])
            cut = bool(r.get("cutoff"))
            col = CUTOFF_COLOUR if cut else TICK_COLOUR
            tip = (
                f"{spec}: {'CUTOFF ' if cut else ''}decision at {d:.2f} s "
                f"(turn {r.get('turn')}, compute {float(r.get('compute_ms') or 0):.2f} ms)"
            )
            x = sx(d)
            parts.append(
                f'<line x1="{_n(x)}" y1="{_n(y + 1)}" x2="{_n(x)}" y2="{_n(y + LANE_H - 1)}" '
                f'stroke="{col}" stroke-width="2">{_title(tip)}</line>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _calls(calls: dict[str, list[CallScore]], colours: dict[str, str]) -> str:
    out = ['<h2 id="calls">Calls</h2>']
    specs = list(calls)
    by_call: dict[str, dict[str, CallScore]] = {}
    for spec in specs:
        for score in calls[spec]:
            by_call.setdefault(score.call, {})[spec] = score
    if not by_call:
        out.append('<p class="muted">No calls.</p>')
        return "\n".join(out)
    out.append(
        "<p>Per call: caller turns (speech bars, holds shaded by kind; hover for the text), "
        "backchannel/echo/noise, the recorded agent, then per detector its end-of-turn "
        "decisions (ticks; red = cutoff inside the turn) and the replayed agent audio "
        "(bars, coloured by how they ended).</p>"
    )
    out.append(_timeline_legend())
    for n, call_id in enumerate(sorted(by_call)):
        per_spec = by_call[call_id]
        per_detector = [(s, colours.get(s, "#333"), per_spec.get(s)) for s in specs]
        path = next(sc.path for sc in per_spec.values())
        out.append(
            f'<details open id="call-{n}"><summary><code>{esc(call_id)}</code> '
            f'<span class="muted">{esc(path)}</span></summary>'
        )
        try:
            rec = load_recording(Path(path))
        except Exception as exc:  # the labels are gone or broken: say so, draw nothing
            out.append(f'<p class="err">cannot load the labels: {esc(exc)}</p>')
        else:
            out.append(_timeline(rec, per_detector))
        out.append(_call_table(call_id, per_detector))
        out.append("</details>")
    return "\n".join(out)


# ----------------------------------------------------------------- entry


def render_report(
    *,
    results: list[dict[str, Any]],
    comparisons: list[dict[str, Any]],
    sweeps: list[dict[str, Any]],
    calls: dict[str, list[CallScore]],
    failed: list[dict[str, Any]],
) -> str:
    """The report as one HTML string."""
    colours = {r["detector"]: _colour(i) for i, r in enumerate(results)}
    for spec in calls:
        colours.setdefault(spec, _colour(len(colours)))
    body = [
        _header(results, calls, failed),
        _results(results),
        _comparisons(comparisons, colours),
        _cdf(results),
        _sweep(sweeps, results),
        _calls(calls, colours),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>turnkit replay report</title>\n"
        f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )


def write_report(
    path: Path,
    *,
    results: list[dict[str, Any]],
    comparisons: list[dict[str, Any]],
    sweeps: list[dict[str, Any]],
    calls: dict[str, list[CallScore]],
    failed: list[dict[str, Any]],
) -> None:
    """Write the self-contained HTML report to ``path`` (UTF-8; text that is
    not valid Unicode is replaced, never refused): rendered first, then
    written to a temporary file beside ``path`` and renamed over it, so a
    failure (full disk) leaves no half report. Raises ``OSError``."""
    text = render_report(
        results=results, comparisons=comparisons, sweeps=sweeps, calls=calls, failed=failed
    )
    data = text.encode("utf-8", errors="replace")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode(path))  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would give: the existing file's, else
    0666 less the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
