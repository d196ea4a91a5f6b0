"""What every ``turnkit`` command shares: the consoles, one-line failures,
logging set-up and number formatting."""

from __future__ import annotations

import logging
import sys

import typer
from rich.console import Console
from rich.logging import RichHandler

__all__ = ["err", "fail", "fmt", "out", "setup_logging"]

# Piped output (CI logs, `| tee`) has no terminal width; don't squeeze the
# results table into 80 columns there.
out = Console() if sys.stdout.isatty() else Console(width=180)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_time=False, show_path=False)],
    )


def fail(msg: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def fmt(v: float | None, unit: str = "", pct: bool = False) -> str:
    if v is None:
        return "—"
    if pct:
        return f"{v * 100:.1f}%"
    return f"{v:.0f}{unit}"
