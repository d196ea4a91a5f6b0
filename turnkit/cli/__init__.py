"""``turnkit`` command line, one module per command group:

- :mod:`turnkit.cli.replay`: ``replay``, ``validate``, ``detectors``;
- :mod:`turnkit.cli.eot`: ``eot-score``, ``eot-eval``;
- :mod:`turnkit.cli.serving`: ``prompt-lint``, ``cache-report``, ``loadtest``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from turnkit import __version__
from turnkit.cli import dial, eot, replay, serving
from turnkit.cli.common import out

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Turn-taking for voice agents: replay recorded calls through end-of-turn detectors.",
)


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version")] = False,
) -> None:
    if version:
        out.print(__version__)
        raise typer.Exit(0)


for _group in (replay, eot, serving, dial):
    _group.register(app)


def main() -> None:
    app()
