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

import inspect
import json
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, Protocol, runtime_checkable

import typer
from pydantic import BaseModel, ConfigDict, ValidationError

from turnkit.fileio import write_atomic

__all__ = ["TextScorer", "eot_eval", "eot_score", "register", "text_scorer"]

# TEN's own 7B model on its English test set (TEN-framework/ten-turn-detection).
TEN_PUBLISHED = {"finished": 0.9064, "unfinished": 0.9844, "wait": 0.91}


@runtime_checkable
class TextScorer(Protocol):
    """What ``turnkit eot eval`` needs of a detector's text scorer: P(end of
    turn) for a caller transcript given the agent's last words, and the
    ``threshold`` at or above which that P counts as "finished"."""

    threshold: float

    def predict(self, text: str, agent_text: str = "") -> float: ...


def _consoles():
    from rich.console import Console

    out = Console() if sys.stdout.isatty() else Console(width=180)
    err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)
    return out, err


def _fail(msg: str, code: int = 2) -> NoReturn:
    _, err = _consoles()
    err.print(f"[red]error:[/red] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def escape(text: str) -> str:
    """``text`` with rich markup escaped (paths like ``calls [draft]/c1``)."""
    from rich.markup import escape as _escape

    return _escape(text)


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
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise ValueError(f"malformed JSON ({str(exc).split(':')[0]})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
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
    scorer = _scorer_or_fail(detector)
    name = "<stdin>" if str(file) == "-" else str(file)
    try:
        data = sys.stdin.buffer.read() if name == "<stdin>" else file.read_bytes()
    except OSError as exc:
        _fail(f"{name}: cannot read ({exc.__class__.__name__}: {exc})", 1)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    bad = 0
    write = sys.stdout.write
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
                ) from None
            item = _parse(line)
            p = _predict(
                scorer, item.text, item.agent_text(), [m.model_dump() for m in item.context]
            )
        except ValueError as exc:
            bad += 1
            msg = f"{name}:{n}: {exc}"
            sys.stderr.write(msg + "\n")
            write(json.dumps({"error": msg}) + "\n")
            continue
        write(json.dumps({"p_end": round(p, 6), "end": p >= scorer.threshold}) + "\n")
    sys.stdout.flush()
    if bad:
        raise typer.Exit(1)


def _scorer_or_fail(spec: str) -> TextScorer:
    """The scorer of ``spec``, or one line naming the option and exit 2."""
    from turnkit.detectors.registry import DetectorSpecError

    try:
        return text_scorer(spec)
    except DetectorSpecError as exc:
        _fail(str(exc))
    except (ValueError, TypeError) as exc:  # a detector's own check of its parameters
        _fail(f"--detector {spec}: {' '.join(str(exc).split())}")


def _predict(
    scorer: TextScorer, text: str, agent_text: str, context: list[dict[str, str]] | None = None
) -> float:
    """P(end) of one text; ValueError (one line) when the scorer fails on it
    (an engine that is down or answers nonsense, a text the model cannot
    take) or returns no probability. A scorer that reads the conversation
    (``llm-eou``) gets the line's whole ``context``; others its last agent
    message."""
    try:
        if context and "context" in inspect.signature(scorer.predict).parameters:
            p = float(scorer.predict(text, agent_text, context))  # type: ignore[call-arg]
        else:
            p = float(scorer.predict(text, agent_text))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # any detector's scorer: one line, the rest still scored
        why = " ".join(str(exc).split())[:300]
        raise ValueError(f"scorer failed: {type(exc).__name__}: {why}") from None
    if not math.isfinite(p):
        raise ValueError(f"scorer returned {p}, not a probability")
    return p


_ASCII_WORD = re.compile(r"[A-Za-z]")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _english(lines: list[str]) -> list[str]:
    return [s.strip() for s in lines if _ASCII_WORD.search(s) and not _CJK.search(s)]


EvalSets = dict[str, list[tuple[str, list[str], bool]]]


def load_eval(
    eval_dir: Path, on_error: Callable[[str], None] | None = None
) -> EvalSets:
    """{set: [(class, texts, is_end)]} from the TEN and turnsense files.

    A file that cannot be read (not UTF-8, malformed JSON, not a list) is
    reported through ``on_error`` (one line naming it) and left out; a
    turnsense entry without ``prompt`` / ``response.eou_probability`` is
    skipped and counted in one line per file. Without ``on_error`` the first
    problem raises ValueError."""

    def error(msg: str) -> None:
        if on_error is None:
            raise ValueError(msg)
        on_error(msg)

    sets: EvalSets = {}
    ten = []
    for cls, end in (("finished", True), ("unfinished", False), ("wait", True)):
        f = eval_dir / f"ten_{cls}.txt"
        if not f.is_file():
            continue
        try:
            text = f.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            error(f"{f}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})")
            continue
        except OSError as exc:
            error(f"{f}: cannot read ({exc.__class__.__name__}: {exc.strerror or exc})")
            continue
        ten.append((cls, _english(text.splitlines()), end))
    if ten:
        sets["TEN (English)"] = ten
    ts = sorted(eval_dir.glob("turnsense_dataset_*.json"))
    if ts:
        loaded = _load_turnsense(ts[0], error)
        if loaded is not None:
            complete, incomplete = loaded
            sets["turnsense"] = [("complete", complete, True), ("incomplete", incomplete, False)]
    return sets


def _load_turnsense(f: Path, error: Callable[[str], None]) -> tuple[list[str], list[str]] | None:
    try:
        doc = json.loads(f.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        error(f"{f}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})")
        return None
    except OSError as exc:
        error(f"{f}: cannot read ({exc.__class__.__name__}: {exc.strerror or exc})")
        return None
    except json.JSONDecodeError as exc:
        error(f"{f}: malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
        return None
    except (ValueError, RecursionError) as exc:
        error(f"{f}: malformed JSON ({exc.__class__.__name__})")
        return None
    if not isinstance(doc, list):
        error(f"{f}: expected a JSON list of entries, got {type(doc).__name__}")
        return None
    complete: list[str] = []
    incomplete: list[str] = []
    skipped: list[str] = []
    for i, d in enumerate(doc):
        resp = d.get("response") if isinstance(d, dict) else None
        prob = resp.get("eou_probability") if isinstance(resp, dict) else None
        prompt = d.get("prompt") if isinstance(d, dict) else None
        if not isinstance(prompt, str):
            skipped.append(f"[{i}].prompt")
        elif isinstance(prob, bool) or not isinstance(prob, int | float):
            skipped.append(f"[{i}].response.eou_probability")
        elif prob == 1.0:
            complete.append(prompt)
        elif prob == 0.1:
            incomplete.append(prompt)
    if skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        error(
            f"{f}: {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} without a string "
            f"prompt and a number response.eou_probability, left out: {skipped[0]}{more}"
        )
    return complete, incomplete


def evaluate(
    scorer: TextScorer,
    eval_dir: Path,
    on_error: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Accuracy per (set, class). A text the scorer fails on is left out of
    its class and counted in ``failed`` (one line per class through
    ``on_error``; without it the first failure raises ValueError)."""
    rows = []
    for set_name, classes in load_eval(eval_dir, on_error).items():
        for cls, texts, end in classes:
            hits = scored = 0
            failures: list[str] = []
            for t in texts:
                try:
                    p = _predict(scorer, t, "")
                except ValueError as exc:
                    if on_error is None:
                        raise
                    failures.append(str(exc))
                    continue
                scored += 1
                hits += (p >= scorer.threshold) == end
            if failures and on_error is not None:
                on_error(
                    f"{eval_dir} {set_name} / {cls}: {len(failures)} of {len(texts)} texts "
                    f"not scored; first: {failures[0]}"
                )
            rows.append(
                {
                    "set": set_name,
                    "class": cls,
                    "label": "end" if end else "hold",
                    "n": scored,
                    "failed": len(failures),
                    "accuracy": hits / scored if scored else None,
                    "published": TEN_PUBLISHED.get(cls) if set_name.startswith("TEN") else None,
                }
            )
    return rows


def _check_output(path: Path, option: str) -> None:
    """Exit 2 with one line, before any work, if ``path`` cannot be written."""
    if path.is_dir():
        _fail(f"{option} {path}: is a folder, expected a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        _fail(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _fail(f"{option} {path}: not writable")


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

    if json_path is not None:
        _check_output(json_path, "--json")
    if not eval_dir.is_dir():
        _fail(f"--eval-dir {eval_dir}: no such folder")
    scorer = _scorer_or_fail(detector)
    errors: list[str] = []
    _, err = _consoles()

    def on_error(msg: str) -> None:
        errors.append(msg)
        err.print(f"[red]error:[/red] {escape(msg)}", highlight=False, soft_wrap=True)

    rows = evaluate(scorer, eval_dir, on_error)
    if not rows:
        _fail(f"--eval-dir {eval_dir}: no readable ten_*.txt or turnsense_dataset_*.json", 1)
    out, _ = _consoles()
    table = Table(
        title=escape(f"eot-eval — {detector} (threshold {scorer.threshold:.2f})"),
        title_justify="left",
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
            str(r["n"]) + (f" ({r['failed']} failed)" if r["failed"] else ""),
            "—" if acc is None else f"{acc * 100:.2f}%",
            "—" if pub is None else f"{pub * 100:.2f}%",
        )
    out.print(table)
    if json_path is not None:
        body = {"detector": detector, "rows": rows, "errors": errors}
        try:
            write_atomic(json_path, json.dumps(body, indent=2) + "\n")
        except OSError as exc:
            _fail(f"--json {json_path}: cannot write ({exc.strerror or exc})", 1)
    if errors:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``eot-score`` and ``eot-eval`` to the ``turnkit`` command."""
    app.command("eot-score")(eot_score)
    app.command("eot-eval")(eot_eval)
