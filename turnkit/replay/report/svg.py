"""Chart primitives of the HTML report: escaping, number formats, axis
ticks, palettes and the SVG/HTML building blocks (axes, legends, swatches,
tooltips) that the charts are drawn from.

Everything here is pure: the same arguments give the same string, and every
piece of text a caller passes as a label or tooltip is escaped here, in
element content and quoted attributes alike.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "PALETTE",
    "SWEEP_PALETTE",
    "PlotBox",
    "axes",
    "ci",
    "colour",
    "esc",
    "g",
    "legend",
    "ms",
    "num",
    "pct",
    "short",
    "signed",
    "svg_open",
    "swatch",
    "tick_label",
    "ticks",
    "title",
]

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


def esc(value: Any) -> str:
    """Escape any value for HTML element content or a quoted attribute."""
    return html.escape(str(value), quote=True)


def num(x: float) -> str:
    """A coordinate: one decimal, no ``-0.0`` (stable output)."""
    s = f"{x:.1f}"
    if s.endswith(".0"):
        s = s[:-2]
    return "0" if s == "-0" else s


def ms(v: float | None) -> str:
    """Milliseconds, whole, or a dash."""
    return "—" if v is None else f"{v:.0f} ms"


def pct(v: float | None, digits: int = 1) -> str:
    """A rate as a percentage, or a dash."""
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def signed(v: float | None, scale: float = 1.0, digits: int = 0) -> str:
    """A signed figure with a true minus sign, or a dash."""
    if v is None:
        return "—"
    x = v * scale
    s = f"{x:+.{digits}f}"
    return s.replace("-", "−")


def ci(
    estimate: float | None,
    bounds: tuple[float | None, float | None],
    unit: str,
    scale: float = 1.0,
    digits: int = 0,
) -> str:
    """An estimate with its interval muted after it, or a dash."""
    lo, hi = bounds
    if estimate is None:
        return "—"
    return (
        f"{signed(estimate, scale, digits)} {unit} "
        f'<span class="muted">[{signed(lo, scale, digits)}, {signed(hi, scale, digits)}]</span>'
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


def ticks(hi: float, n: int = 6) -> tuple[float, list[float]]:
    """Axis top (rounded up to a tick) and ticks from 0."""
    step = _nice_step(hi, n)
    top = step * math.ceil(hi / step - 1e-9) if hi > 0 else step
    count = round(top / step)
    return top, [round(i * step, 10) for i in range(count + 1)]


def g(v: Any) -> str:
    """A number in its shortest form; anything else escaped; None a dash."""
    if isinstance(v, int | float):
        return f"{v:g}"
    return "—" if v is None else esc(v)


def tick_label(v: float) -> str:
    return f"{v:g}"


def short(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with an ellipsis (escape after)."""
    return text if len(text) <= n else text[: n - 1] + "…"


def colour(i: int, palette: Sequence[str] = PALETTE) -> str:
    """The ``i``-th colour of ``palette``, cycling."""
    return palette[i % len(palette)]


def title(text: str) -> str:
    """An SVG tooltip (escaped)."""
    return f"<title>{esc(text)}</title>"


def swatch(col: str) -> str:
    """A small colour square for HTML text and table cells."""
    return f'<span class="swatch" style="background:{col}"></span>'


def svg_open(width: float, height: float, label: str) -> str:
    """The opening tag of a standalone inline SVG of this size."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}">'
    )


def axes(
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
    yfmt: Callable[[float], str] = tick_label,
) -> list[str]:
    """Frame, grid, ticks and labels of a plot whose data box is
    (x0, y0)-(x0+w, y0+h), data ranges [0, xtop] × [0, ytop]."""
    parts = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="#fff" stroke="#999"/>']
    for t in xticks:
        x = x0 + t / xtop * w
        parts.append(
            f'<line x1="{num(x)}" y1="{y0}" x2="{num(x)}" y2="{y0 + h}" stroke="#eee"/>'
            f'<line x1="{num(x)}" y1="{y0 + h}" x2="{num(x)}" y2="{y0 + h + 4}" stroke="#999"/>'
            f'<text x="{num(x)}" y="{y0 + h + 16}" font-size="11" text-anchor="middle">'
            f"{tick_label(t)}</text>"
        )
    for t in yticks:
        y = y0 + h - t / ytop * h
        parts.append(
            f'<line x1="{x0}" y1="{num(y)}" x2="{x0 + w}" y2="{num(y)}" stroke="#eee"/>'
            f'<line x1="{x0 - 4}" y1="{num(y)}" x2="{x0}" y2="{num(y)}" stroke="#999"/>'
            f'<text x="{x0 - 6}" y="{num(y + 4)}" font-size="11" text-anchor="end">'
            f"{yfmt(t)}</text>"
        )
    parts.append(
        f'<text x="{num(x0 + w / 2)}" y="{y0 + h + 34}" font-size="12" '
        f'text-anchor="middle">{esc(xlabel)}</text>'
        f'<text x="14" y="{num(y0 + h / 2)}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {num(y0 + h / 2)})">{esc(ylabel)}</text>'
    )
    return parts


def legend(
    x: float,
    y: float,
    entries: Iterable[tuple[str, str, str]],
    *,
    marker: Literal["bar", "diamond"] = "bar",
    cut: int = 34,
) -> list[str]:
    """Legend rows (colour, label, tooltip) from (x, y) downward, 17 px
    apart, each a short bar (a line's key) or an open diamond (a point's)
    and the label cut to ``cut`` characters."""
    parts = []
    for i, (col, label, tip) in enumerate(entries):
        yy = y + i * 17
        if marker == "bar":
            key = f'<rect x="{num(x)}" y="{num(yy - 9)}" width="14" height="4" fill="{col}"/>'
        else:
            key = (
                f'<path d="M{num(x + 7)},{num(yy - 12)} l5,5 l-5,5 l-5,-5 Z" '
                f'fill="none" stroke="{col}" stroke-width="1.5"/>'
            )
        parts.append(
            f'<g>{title(tip)}{key}<text x="{num(x + 20)}" y="{num(yy - 3)}" font-size="11">'
            f"{esc(short(label, cut))}</text></g>"
        )
    return parts


@dataclass(frozen=True, slots=True)
class PlotBox:
    """Where a plot's data box sits in its SVG ((x0, y0) to (x0+w, y0+h))
    and the data range it shows ([0, xtop] × [0, ytop]): maps data to
    coordinates (y grows upwards) and draws its own axes."""

    x0: float
    y0: float
    w: float
    h: float
    xtop: float
    ytop: float

    def sx(self, v: float) -> float:
        return self.x0 + v / self.xtop * self.w

    def sy(self, v: float) -> float:
        return self.y0 + self.h - v / self.ytop * self.h

    def axes(
        self,
        xticks: list[float],
        yticks: list[float],
        xlabel: str,
        ylabel: str,
        yfmt: Callable[[float], str] = tick_label,
    ) -> list[str]:
        """Frame, grid, ticks and labels (see :func:`axes`)."""
        return axes(
            x0=self.x0,
            y0=self.y0,
            w=self.w,
            h=self.h,
            xticks=xticks,
            xtop=self.xtop,
            yticks=yticks,
            ytop=self.ytop,
            xlabel=xlabel,
            ylabel=ylabel,
            yfmt=yfmt,
        )
