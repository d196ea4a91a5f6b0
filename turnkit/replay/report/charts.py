"""The report's charts, each one inline SVG drawn from typed results: the
paired-difference forest plot, the response-latency CDFs, the
operating-point curves of a ``--sweep``, and a call's timeline (labels above
one lane per detector with its end-of-turn decisions and replayed audio).

Each chart decides only geometry (scales, ticks, where a mark goes) and
what its tooltips say; the page (:mod:`turnkit.replay.report.page`) decides
which charts appear and the text around them.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnkit.replay.metrics import EVENT_KINDS
from turnkit.replay.recording import Recording
from turnkit.replay.report.model import CallView, Comparison, Result, Sweep
from turnkit.replay.report.svg import (
    SWEEP_PALETTE,
    PlotBox,
    colour,
    esc,
    g,
    legend,
    num,
    short,
    svg_open,
    tick_label,
    ticks,
    title,
)

__all__ = [
    "STOP_COLOURS",
    "latency_cdf",
    "operating_points",
    "paired_forest",
    "sweep_colour",
    "timeline",
    "timeline_legend",
]

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

LANE_H = 20
LABEL_W = 170
TL_WIDTH = 1000


# ----------------------------------------------------------------- paired differences


def paired_forest(comparisons: Sequence[Comparison], colours: dict[str, str]) -> str:
    """Point estimates with 95 % CIs, one panel per metric, zero marked."""
    panels = (
        ("Δ median response (ms)", "median_response_diff_ms", 1.0),
        ("Δ interruption (pp)", "interruption_rate_diff", 100.0),
        ("Δ missed (pp)", "missed_rate_diff", 100.0),
    )
    row_h, top, label_w, panel_w, gap = 22, 24, 170, 250, 20
    height = top + row_h * len(comparisons) + 26
    width = label_w + len(panels) * (panel_w + gap)
    parts = [svg_open(width, height, "paired differences")]
    for j, c in enumerate(comparisons):
        y = top + row_h * j + row_h / 2
        parts.append(
            f'<text x="{label_w - 6}" y="{num(y + 4)}" font-size="11" text-anchor="end">'
            f"{title(c.detector)}{esc(short(c.detector, 26))}</text>"
        )
    for p, (label, key, scale) in enumerate(panels):
        x0 = label_w + p * (panel_w + gap)
        vals: list[float] = [0.0]
        for c in comparisons:
            d = getattr(c, key)
            for v in (d.estimate, *d.ci95):
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
            f'<text x="{num(x0 + panel_w / 2)}" y="14" font-size="12" text-anchor="middle" '
            f'font-weight="600">{esc(label)}</text>'
        )
        parts.append(
            f'<rect x="{num(x0)}" y="{top}" width="{panel_w}" height="{row_h * len(comparisons)}" '
            'fill="#fafafa" stroke="#ccc"/>'
        )
        zx = sx(0.0)
        parts.append(
            f'<line x1="{num(zx)}" y1="{top}" x2="{num(zx)}" y2="{y_bot}" stroke="#888" '
            'stroke-dasharray="3,3"/>'
        )
        parts.append(
            f'<text x="{num(x0)}" y="{y_bot + 14}" font-size="10" fill="#666">{num(lo)}</text>'
            f'<text x="{num(x0 + panel_w)}" y="{y_bot + 14}" font-size="10" fill="#666" '
            f'text-anchor="end">{num(hi)}</text>'
            f'<text x="{num(zx)}" y="{y_bot + 14}" font-size="10" fill="#666" '
            'text-anchor="middle">0</text>'
        )
        for j, c in enumerate(comparisons):
            d = getattr(c, key)
            est = d.estimate
            if est is None:
                continue
            y = top + row_h * j + row_h / 2
            col = colours.get(c.detector, "#333")
            ci_lo, ci_hi = d.bounds()
            tip = f"{c.detector}: {label} {est * scale:+.1f}"
            if ci_lo is not None and ci_hi is not None:
                tip += f" [{ci_lo * scale:+.1f}, {ci_hi * scale:+.1f}]"
                parts.append(
                    f'<line x1="{num(sx(ci_lo * scale))}" y1="{num(y)}" '
                    f'x2="{num(sx(ci_hi * scale))}" y2="{num(y)}" stroke="{col}" stroke-width="2"/>'
                )
            parts.append(
                f'<circle cx="{num(sx(est * scale))}" cy="{num(y)}" r="4" fill="{col}">'
                f"{title(tip)}</circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------- latency CDF


def latency_cdf(results: Sequence[Result]) -> str | None:
    """Each detector's share of the caller turns answered within x ms (a
    curve that stops below 1 is the missed turns; turns the caller went on
    from before any reply are left out); None when no turn was answered by
    any detector."""
    series = []
    for i, r in enumerate(results):
        vals = r.answered_ms()
        series.append((r.detector, colour(i), vals, max(r.judged_turns(), len(vals))))
    if not any(s[2] for s in series):
        return None
    x_max = max(v for s in series for v in s[2])
    xtop, xticks = ticks(x_max * 1.02)
    yticks = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    width, height = 1000, 340
    box = PlotBox(x0=60, y0=14, w=680, h=270, xtop=xtop, ytop=1.0)
    sx, sy = box.sx, box.sy
    parts = [svg_open(width, height, "response latency CDF")]
    parts += box.axes(
        xticks,
        yticks,
        xlabel="response latency (ms): caller turn end → agent first audio",
        ylabel="share of turns",
        yfmt=lambda t: f"{t:.1f}",
    )
    entries = []
    for name, col, vals, n in series:
        if not vals or n == 0:
            entries.append((col, f"{name} (no answers)", name))
            continue
        pts = [(sx(0), sy(0))]
        for k, v in enumerate(vals):
            pts.append((sx(v), sy(k / n)))
            pts.append((sx(v), sy((k + 1) / n)))
        pts.append((sx(xtop), sy(len(vals) / n)))
        path = " ".join(f"{num(a)},{num(b)}" for a, b in pts)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2">'
            f"{title(f'{name}: {len(vals)} of {n} turns answered')}</polyline>"
        )
        entries.append((col, f"{name} ({len(vals)}/{n})", f"{name}: {len(vals)} of {n} answered"))
    parts += legend(box.x0 + box.w + 24, box.y0 + 14, entries)
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------- operating points


def sweep_colour(i: int) -> str:
    """The colour of the ``i``-th sweep's curve (its own palette)."""
    return colour(i, SWEEP_PALETTE)


def operating_points(sweeps: Sequence[Sweep], results: Sequence[Result]) -> str:
    """False-cutoff rate against mean end-of-turn delay: each sweep as a
    curve across its grid, each configured detector as a diamond, with the
    300/600 ms and 5/10 % budgets dashed."""
    curves_pts = [
        (s, sweep_colour(i), [(p, xy) for p in s.points if (xy := p.plotted()) is not None])
        for i, s in enumerate(sweeps)
    ]
    ops = [
        (r.detector, colour(i), op)
        for i, r in enumerate(results)
        if (op := r.operating_point()) is not None
    ]
    xs = [xy[0] for _, _, pts in curves_pts for _, xy in pts] + [op[0] for _, _, op in ops]
    ys = [xy[1] for _, _, pts in curves_pts for _, xy in pts] + [op[1] for _, _, op in ops]
    xtop, xticks = ticks(max([700.0, *xs]) * 1.02)
    ytop, yticks = ticks(min(1.0, max([0.12, *ys]) * 1.05), 5)
    width, height = 1000, 380
    box = PlotBox(x0=60, y0=14, w=680, h=310, xtop=xtop, ytop=ytop)
    sx, sy = box.sx, box.sy
    x0, y0, w, h = box.x0, box.y0, box.w, box.h
    parts = [svg_open(width, height, "operating points")]
    parts += box.axes(
        xticks,
        yticks,
        xlabel="mean end-of-turn delay (ms)",
        ylabel="false-cutoff rate at holds ≥ 100 ms",
        yfmt=lambda t: f"{t * 100:g}%",
    )
    # Budget lines.
    for b in (300, 600):
        x = sx(b)
        parts.append(
            f'<line x1="{num(x)}" y1="{y0}" x2="{num(x)}" y2="{y0 + h}" stroke="#c44" '
            f'stroke-dasharray="5,4"/><text x="{num(x + 3)}" y="{y0 + 12}" font-size="10" '
            f'fill="#c44">{b} ms</text>'
        )
    for b in (0.05, 0.10):
        if b > ytop:
            continue
        y = sy(b)
        parts.append(
            f'<line x1="{x0}" y1="{num(y)}" x2="{x0 + w}" y2="{num(y)}" stroke="#c44" '
            f'stroke-dasharray="5,4"/><text x="{x0 + w - 3}" y="{num(y - 3)}" font-size="10" '
            f'fill="#c44" text-anchor="end">{b * 100:g}%</text>'
        )
    entries = []
    for s, col, pts in curves_pts:
        name = s.detector
        if pts:
            path = " ".join(f"{num(sx(ex))},{num(sy(cut))}" for _, (ex, cut) in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"/>')
            for p, (ex, cut) in pts:
                spec = p.spec if p.spec is not None else name
                tip = (
                    f"{spec}: {s.param}={g(p.value)}, "
                    f"eot mean {ex:.0f} ms, "
                    f"false cutoff {cut * 100:.1f}%"
                )
                parts.append(
                    f'<circle cx="{num(sx(ex))}" cy="{num(sy(cut))}" '
                    f'r="4" fill="{col}">{title(tip)}</circle>'
                )
        entries.append((col, f"{name} by {s.param or '?'}", name))
    for name, col, (ox, oy) in ops:
        x, y = sx(ox), sy(oy)
        parts.append(
            f'<path d="M{num(x)},{num(y - 7)} L{num(x + 7)},{num(y)} L{num(x)},{num(y + 7)} '
            f'L{num(x - 7)},{num(y)} Z" fill="none" stroke="{col}" stroke-width="2">'
            f"{title(f'{name}: eot mean {ox:.0f} ms, false cutoff {oy * 100:.1f}%')}</path>"
        )
    parts += legend(x0 + w + 24, y0 + 14, entries)
    ly = y0 + 14 + 17 * len(entries) + 10
    diamonds = [(col, name, name) for name, col, _op in ops]
    parts += legend(x0 + w + 24, ly, diamonds, marker="diamond", cut=32)
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------- timelines


def timeline_legend() -> str:
    """The key to every timeline's colours and marks."""
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
    marks = [(col, label, "box") for col, label in items] + [
        (TICK_COLOUR, "end-of-turn decision", "tick"),
        (CUTOFF_COLOUR, "cutoff (too early)", "tick"),
    ]
    parts = [svg_open(TL_WIDTH, 44, "timeline legend")]
    x = 4.0
    y = 14
    for col, label, mark in marks:
        width = 24 + 6.6 * len(label)
        if x + width > TL_WIDTH:
            x, y = 4.0, y + 18
        if mark == "box":
            parts.append(f'<rect x="{num(x)}" y="{y - 9}" width="14" height="10" fill="{col}"/>')
        else:
            parts.append(
                f'<line x1="{num(x + 7)}" y1="{y - 11}" x2="{num(x + 7)}" y2="{y + 2}" '
                f'stroke="{col}" stroke-width="2"/>'
            )
        parts.append(f'<text x="{num(x + 18)}" y="{y}" font-size="11">{esc(label)}</text>')
        x += width
    parts.append("</svg>")
    return "".join(parts)


def timeline(rec: Recording, per_detector: Sequence[tuple[str, str, CallView | None]]) -> str:
    """One call's lanes: the labels (caller turns with their holds,
    backchannel/echo/noise, the recorded agent), then one lane per detector
    (spec, colour, its replay of this call or None) with its end-of-turn
    decisions as ticks (cutoffs red) and its replies' audio as bars
    coloured by how they ended."""
    end_t = float(rec.duration or 0.0)
    for _spec, _col, view in per_detector:
        if view is None:
            continue
        for r in view.replies:
            end_t = max(end_t, r.latest())
    end_t = max(end_t, 1.0)
    top_s, axis_ticks = ticks(end_t, 12)
    plot_w = TL_WIDTH - LABEL_W - 10
    lanes = ["caller", "events", "agent (recorded)", *(s for s, _, _ in per_detector)]
    axis_h = 22
    height = axis_h + LANE_H * len(lanes) + 4

    def sx(t: float) -> float:
        return LABEL_W + t / top_s * plot_w

    def lane_y(i: int) -> float:
        return axis_h + i * LANE_H

    def bar(t0: float, t1: float, y: float, hh: float, col: str, tip: str) -> str:
        x = sx(t0)
        wd = max(sx(t1) - x, 1.0)
        return (
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(wd)}" height="{num(hh)}" fill="{col}"'
            f">{title(tip)}</rect>"
        )

    parts = [svg_open(TL_WIDTH, height, "call timeline")]
    # Lane backgrounds and names.
    for i, name in enumerate(lanes):
        y = lane_y(i)
        if i % 2 == 0:
            parts.append(
                f'<rect x="{LABEL_W}" y="{num(y)}" width="{plot_w}" height="{LANE_H}" fill="#f7f7f7"/>'
            )
        col = per_detector[i - 3][1] if i >= 3 else "#444"
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{num(y + 14)}" font-size="11" text-anchor="end" '
            f'fill="{col}">{title(name)}{esc(short(name, 28))}</text>'
        )
    # Time axis (seconds), with grid lines.
    bottom = lane_y(len(lanes))
    for t in axis_ticks:
        x = sx(t)
        parts.append(
            f'<line x1="{num(x)}" y1="{axis_h - 4}" x2="{num(x)}" y2="{num(bottom)}" stroke="#e4e4e4"/>'
            f'<text x="{num(x)}" y="{axis_h - 7}" font-size="10" text-anchor="middle">'
            f"{tick_label(t)}</text>"
        )
    parts.append(
        f'<text x="{LABEL_W - 6}" y="{axis_h - 7}" font-size="10" text-anchor="end" '
        'fill="#666">seconds</text>'
    )
    # Lane 0: caller turns.
    y = lane_y(0)
    for k, turn in enumerate(rec.caller_turns):
        tip = f"caller turn {k} ({turn.start:.2f}–{turn.end:.2f} s): {turn.text}"
        parts.append(f"<g>{title(tip)}")
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
                    f'<text x="{num((sx(g0) + sx(g1)) / 2)}" y="{num(y + 14)}" font-size="9" '
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
    for j, (spec, _col, view) in enumerate(per_detector):
        y = lane_y(3 + j)
        if view is None:
            continue
        for r in view.replies:
            first, end = r.first_audio_at, r.audio_end
            reason = r.stop_reason or "completed"
            if first is not None and end is not None and end >= first:
                tip = (
                    f"{spec}: reply to turn {r.turn}, audio {first:.2f}–{end:.2f} s, {reason}"
                    if r.turn is not None
                    else f"{spec}: reply (no turn), audio {first:.2f}–{end:.2f} s, {reason}"
                )
                parts.append(
                    bar(first, end, y + 5, LANE_H - 10, STOP_COLOURS.get(reason, "#999"), tip)
                )
        for r in view.replies:
            d = r.decision_at
            col = CUTOFF_COLOUR if r.cutoff else TICK_COLOUR
            tip = (
                f"{spec}: {'CUTOFF ' if r.cutoff else ''}decision at {d:.2f} s "
                f"(turn {r.turn}, compute {float(r.compute_ms or 0):.2f} ms)"
            )
            x = sx(d)
            parts.append(
                f'<line x1="{num(x)}" y1="{num(y + 1)}" x2="{num(x)}" y2="{num(y + LANE_H - 1)}" '
                f'stroke="{col}" stroke-width="2">{title(tip)}</line>'
            )
    parts.append("</svg>")
    return "".join(parts)
