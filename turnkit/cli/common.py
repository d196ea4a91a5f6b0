"""What every ``turnkit`` command shares: the consoles, one-line failures
and warnings, output files checked before a run and written atomically,
logging set-up and number formatting.

Nothing a user wrote (a path, a call id, a transcript, an error that quotes
one) is read as rich markup: every message goes through :func:`escape`, so
``calls [draft]/c1`` prints as itself and ``x[/b]`` cannot raise."""

from __future__ import annotations

import logging
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from turnkit.fileio import write_atomic

__all__ = [
    "check_output",
    "err",
    "escape",
    "fail",
    "fmt",
    "json_safe",
    "out",
    "say_error",
    "setup_logging",
    "warn",
    "write_atomic",
]

# Piped output (CI logs, `| tee`) has no terminal width; don't squeeze the
# results table into 80 columns there.
out = Console() if sys.stdout.isatty() else Console(width=180)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_time=False, show_path=False, markup=False)],
    )


def _one_line(msg: str) -> str:
    # A folder or an id may hold a line break; the message stays one line.
    return escape(msg.replace("\r", "\\r").replace("\n", "\\n"))


def say_error(msg: str, label: str = "error") -> None:
    """One ``error: …`` line on stderr; ``msg`` is printed as written (line
    breaks in it shown as ``\\n``)."""
    err.print(f"[red]{label}:[/red] {_one_line(msg)}", highlight=False, soft_wrap=True)


def warn(msg: str) -> None:
    """One ``warning: …`` line on stderr; ``msg`` is printed as written."""
    err.print(f"[yellow]warning:[/yellow] {_one_line(msg)}", highlight=False, soft_wrap=True)


def fail(msg: str, code: int = 2) -> None:
    say_error(msg)
    raise typer.Exit(code)


def check_output(path: Path, option: str) -> None:
    """Before a run: ``path`` can be written (its folder is created if
    missing), else one line naming ``option`` and exit 2 — so that a long
    run is not lost to a typo in an output path."""
    where = f"{option} {path}"
    if "\0" in str(path):
        fail(f"{option}: the path contains a NUL character")
    try:
        if path.is_dir():
            fail(f"{where}: is a directory")
        if path.exists() and not os.access(path, os.W_OK):
            fail(f"{where}: not writable")
        parent = path.parent
        for above in (parent, *parent.parents):
            if above.exists():
                if not above.is_dir():
                    fail(f"{where}: {above} is not a folder")
                break
        parent.mkdir(parents=True, exist_ok=True)
        # The only sure test: create a file beside it (read-only file
        # systems, ACLs, quotas say no here, not after the run).
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except typer.Exit:
        raise
    except (OSError, RuntimeError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        fail(f"{where}: cannot write there ({reason})")


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as ``null``: what ``json``
    writes stays JSON (``NaN``/``Infinity`` are not)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def fmt(v: float | None, unit: str = "", pct: bool = False) -> str:
    if v is None:
        return "—"
    if pct:
        return f"{v * 100:.1f}%"
    return f"{v:.0f}{unit}"
