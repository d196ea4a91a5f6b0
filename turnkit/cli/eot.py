"""``turnkit eot-score`` and ``turnkit eot-eval``: text end-of-turn detectors
outside a call.

A detector is text-capable when its class has a ``text_scorer(params)``
classmethod returning a :class:`TextScorer` (``predict(text, agent_text)`` →
P(end of turn), and its default ``threshold``). ``semantic-text`` is one;
any detector registered with such a classmethod is picked up by name.

Example::

    $ echo '{"text": "yes", "context": [{"role": "assistant", "content": "Is that right?"}]}' \\
        | turnkit eot-score -
    {"p_end": 0.97, "end": true}

Kept light to import: models load only when a command runs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Protocol, runtime_checkable

import typer
from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["TextScorer", "eot_eval", "eot_score", "register", "text_scorer"]

# TEN's own 7B model on its English test set (TEN-framework/ten-turn-detection).
TEN_PUBLISHED = {"finished": 0.9064, "unfinished": 0.9844, "wait": 0.91}


@runtime_checkable
class TextScorer(Protocol):
    threshold: float

    def predict(self, text: str, agent_text: str = "") -> float: ...


def _consoles():
    from rich.console import Console

    out = Console() if sys.stdout.isatty() else Console(width=180)
    err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)
    return out, err


def _fail(msg: str, code: int = 2) -> None:
    _, err = _consoles()
    err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def text_scorer(spec: str) -> TextScorer:
    """The text scorer of detector ``spec`` (``name[:key=value,...]``).

    Raises :class:`~turnkit.detectors.registry.DetectorSpecError` for an
    unknown or bad spec, or a detector that does not score text."""
    from turnkit.clock import VirtualClock
    from turnkit.detectors.registry import DetectorSpecError, available, parse_spec

    name, _ = parse_spec(spec)
    cls = available().get(name)
    capable = sorted(n for n, c in available().items() if hasattr(c, "text_scorer"))
    if cls is not None and not hasattr(cls, "text_scorer"):
        raise DetectorSpecError(
            f"detector {name!r} does not score text (text detectors: {', '.join(capable)})"
        )
    from turnkit.detectors.registry import create_detector

    det = create_detector(spec, VirtualClock())  # validates the parameters
    return type(det).text_scorer(det.params)  # type: ignore[attr-defined]


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str
    context: list[_Message] = []

    def agent_text(self) -> str:
        return next((m.content for m in reversed(self.context) if m.role == "assistant"), "")


def _parse(line: str) -> _Input:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    try:
        return _Input.model_validate(doc)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(p) for p in e["loc"]) or "(line)"
        raise ValueError(f"{where}: {e['msg']}") from None


def eot_score(
    file: Annotated[
        Path,
        typer.Argument(help='JSONL: {"text": ..., "context": [{"role", "content"}]}; - for stdin'),
    ],
    detector: Annotated[
        str, typer.Option("--detector", "-d", help="text-capable detector spec")
    ] = "semantic-text",
) -> None:
    """Score each line's text as finished or not: one {"p_end", "end"} JSON line per input line."""
    from turnkit.detectors.registry import DetectorSpecError

    try:
        scorer = text_scorer(detector)
    except DetectorSpecError as exc:
        _fail(str(exc))
    name = "<stdin>" if str(file) == "-" else str(file)
    try:
        lines = (
            sys.stdin.read().splitlines() if name == "<stdin>" else file.read_text().splitlines()
        )
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"{name}: cannot read ({exc.__class__.__name__}: {exc})")
    bad = 0
    write = sys.stdout.write
    for n, line in enumerate(lines, 1):
        try:
            item = _parse(line)
        except ValueError as exc:
            bad += 1
            msg = f"{name}:{n}: {exc}"
            sys.stderr.write(msg + "\n")
            write(json.dumps({"error": msg}) + "\n")
            continue
        p = float(scorer.predict(item.text, item.agent_text()))
        write(json.dumps({"p_end": round(p, 6), "end": p >= scorer.threshold}) + "\n")
    sys.stdout.flush()
    if bad:
        raise typer.Exit(1)


_ASCII_WORD = re.compile(r"[A-Za-z]")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _english(lines: list[str]) -> list[str]:
    return [s.strip() for s in lines if _ASCII_WORD.search(s) and not _CJK.search(s)]


def load_eval(eval_dir: Path) -> dict[str, list[tuple[str, list[str], bool]]]:
    """{set: [(class, texts, is_end)]} from the TEN and turnsense files."""
    sets: dict[str, list[tuple[str, list[str], bool]]] = {}
    ten = []
    for cls, end in (("finished", True), ("unfinished", False), ("wait", True)):
        f = eval_dir / f"ten_{cls}.txt"
        if f.is_file():
            ten.append((cls, _english(f.read_text(encoding="utf-8").splitlines()), end))
    if ten:
        sets["TEN (English)"] = ten
    ts = sorted(eval_dir.glob("turnsense_dataset_*.json"))
    if ts:
        doc = json.loads(ts[0].read_text(encoding="utf-8"))
        complete = [d["prompt"] for d in doc if d["response"]["eou_probability"] == 1.0]
        incomplete = [d["prompt"] for d in doc if d["response"]["eou_probability"] == 0.1]
        sets["turnsense"] = [("complete", complete, True), ("incomplete", incomplete, False)]
    return sets


def evaluate(scorer: TextScorer, eval_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for set_name, classes in load_eval(eval_dir).items():
        for cls, texts, end in classes:
            hits = sum((scorer.predict(t, "") >= scorer.threshold) == end for t in texts)
            rows.append(
                {
                    "set": set_name,
                    "class": cls,
                    "label": "end" if end else "hold",
                    "n": len(texts),
                    "accuracy": hits / len(texts) if texts else None,
                    "published": TEN_PUBLISHED.get(cls) if set_name.startswith("TEN") else None,
                }
            )
    return rows


def eot_eval(
    detector: Annotated[
        str, typer.Option("--detector", "-d", help="text-capable detector spec")
    ] = "semantic-text",
    eval_dir: Annotated[
        Path, typer.Option(help="folder with ten_*.txt and turnsense_dataset_*.json")
    ] = Path("../shared/eval"),
    json_path: Annotated[Path | None, typer.Option("--json", help="also write rows here")] = None,
) -> None:
    """Accuracy per class on TEN's English test set and turnsense, beside TEN 7B's published figures."""
    from rich.table import Table

    from turnkit.detectors.registry import DetectorSpecError

    try:
        scorer = text_scorer(detector)
    except DetectorSpecError as exc:
        _fail(str(exc))
    if not eval_dir.is_dir():
        _fail(f"{eval_dir}: no such folder (pass --eval-dir)")
    rows = evaluate(scorer, eval_dir)
    if not rows:
        _fail(f"{eval_dir}: no ten_*.txt or turnsense_dataset_*.json")
    out, _ = _consoles()
    table = Table(
        title=f"eot-eval — {detector} (threshold {scorer.threshold:.2f})", title_justify="left"
    )
    for col, just in (
        ("set", "left"),
        ("class", "left"),
        ("label", "left"),
        ("n", "right"),
        ("accuracy", "right"),
        ("TEN 7B (published)", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        acc, pub = r["accuracy"], r["published"]
        table.add_row(
            r["set"],
            r["class"],
            r["label"],
            str(r["n"]),
            "—" if acc is None else f"{acc * 100:.2f}%",
            "—" if pub is None else f"{pub * 100:.2f}%",
        )
    out.print(table)
    if json_path is not None:
        json_path.write_text(json.dumps({"detector": detector, "rows": rows}, indent=2) + "\n")


def register(app: typer.Typer) -> None:
    """Add ``eot-score`` and ``eot-eval`` to the ``turnkit`` command."""
    app.command("eot-score")(eot_score)
    app.command("eot-eval")(eot_eval)
