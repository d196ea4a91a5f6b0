"""``turnkit prompt-lint``, ``turnkit cache-report`` and ``turnkit loadtest``:
the LLM serving side, outside a call.

- ``prompt-lint FILE...``: shared-prefix share between consecutive chat
  request bodies, where the first difference is, per-call values near the top
  (:mod:`turnkit.llm.prompt_lint`).
- ``cache-report [FILE...] [--metrics-url URL]``: the prefix cache's share of
  prompt processing from SGLang logs, usage JSONL and/or Prometheus counters
  (:mod:`turnkit.llm.cache_report`).
- ``loadtest --base-url URL``: call-shaped load, TTFT per turn, goodput
  (:mod:`turnkit.llm.loadtest`).

Bad input is one line on stderr naming the file or URL, the rest is still
processed, and the exit status is 1.

Example::

    $ turnkit prompt-lint call1.json call2.json --json
    {"unit": "chars", "shared_prefix_ratio": 0.97, ...}
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["cache_report", "loadtest", "prompt_lint", "register"]


def _consoles() -> tuple[Any, Any]:
    from rich.console import Console

    out = Console() if sys.stdout.isatty() else Console(width=160)
    err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=200)
    return out, err


def _error(msg: str) -> None:
    _, err = _consoles()
    err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True, markup=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


# -- prompt-lint ---------------------------------------------------------------------


def prompt_lint(
    files: Annotated[list[Path], typer.Argument(help="chat request bodies (JSON), in order")],
    base_url: Annotated[
        str | None,
        typer.Option(help="engine /v1 URL: measure in its tokens (/apply-template, /tokenize)"),
    ] = None,
    model: Annotated[str, typer.Option(help="model name for engines that need one")] = "",
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="--base-url is your own non-local engine")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Shared-prefix share between consecutive requests, first difference, per-call values near the top."""
    from turnkit.llm.prompt_lint import lint_files
    from turnkit.net import TargetRefused, check_target

    if base_url is not None:
        try:
            check_target(base_url, allow_remote, what="--base-url")
        except TargetRefused as exc:
            _error(str(exc))
            raise typer.Exit(2) from None
    report = lint_files(files, base_url=base_url, model=model, on_error=_error)
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
    else:
        _print_lint(report)
    if report.errors:
        raise typer.Exit(1)


def _print_lint(report: Any) -> None:
    from rich.table import Table

    out, _ = _consoles()
    d = report.as_dict()
    table = Table(title=f"shared prefix ({d['unit']}, {d['method']})")
    for col in ("a", "b", "shared", "of", "share", "first difference"):
        table.add_column(col)
    for p in d["pairs"]:
        div = p["first_divergence"]
        where = "-" if not div else f"{div['field']} +{div.get('offset_in_field', 0)}"
        table.add_row(
            p["a"], p["b"], str(p["shared"]), str(p["total"]), _pct(p["ratio"]), where
        )
    if d["pairs"]:
        out.print(table)
        out.print(f"overall shared_prefix_ratio: {_pct(d['shared_prefix_ratio'])}")
    div = d["first_divergence"]
    if div:
        top = " (in the top: the part every call should share)" if div["in_top"] else ""
        out.print(
            f"first difference: {div['a']} vs {div['b']} at {div['field']}{top}: "
            f"{div['a_text']!r} vs {div['b_text']!r}",
            highlight=False,
        )
    for w in d["warnings"]:
        out.print(
            f"[yellow]warning:[/yellow] {w['file']}: {w['field']}: looks like a per-call "
            f"{w['kind']} near the top: {w['text']!r}",
            highlight=False,
        )


# -- cache-report --------------------------------------------------------------------


def cache_report(
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="SGLang server logs and/or JSONL of responses with usage"),
    ] = None,
    metrics_url: Annotated[
        list[str] | None,
        typer.Option(help="Prometheus /metrics URL (vLLM, SGLang, llama-server --metrics)"),
    ] = None,
    window_s: Annotated[
        float, typer.Option(help="seconds between the two scrapes (0: totals since start)")
    ] = 60.0,
    vllm_log: Annotated[
        list[Path] | None,
        typer.Option(help="vLLM server log: its last 'Prefix cache hit rate: N%' line"),
    ] = None,
    min_tokens: Annotated[
        int, typer.Option(help="skip prefills/requests of at most this many tokens (pings)")
    ] = 1000,
    alert_below: Annotated[float, typer.Option(help="alert under this share")] = 0.90,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="--metrics-url is your own non-local engine")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Cached share of prompt processing, from logs, usage files or metrics."""
    from turnkit.llm.cache_report import (
        CacheStats,
        ReportError,
        VllmLogRate,
        stats_from_file,
        vllm_log_from_file,
        window_stats,
    )
    from turnkit.net import TargetRefused, check_target

    files = files or []
    urls = metrics_url or []
    if not files and not urls and not vllm_log:
        _error("give log/usage files, --metrics-url and/or --vllm-log")
        raise typer.Exit(2)
    results: list[CacheStats] = []
    failed = 0
    allowed = []
    for url in urls:
        try:
            check_target(url, allow_remote, what="--metrics-url")
            allowed.append(url)
        except TargetRefused as exc:
            failed += 1
            _error(str(exc))
    urls = allowed
    for path in files:
        try:
            results.append(stats_from_file(path, min_tokens))
        except ReportError as exc:
            failed += 1
            _error(str(exc))

    async def scrape_all() -> list[CacheStats | ReportError]:
        async def one(url: str) -> CacheStats | ReportError:
            try:
                return await window_stats(url, window_s)
            except ReportError as exc:
                return exc

        return list(await asyncio.gather(*(one(u) for u in urls)))

    log_rates: list[VllmLogRate] = []  # shares only: listed, never summed into the total
    for path in vllm_log or []:
        try:
            log_rates.append(vllm_log_from_file(path))
        except ReportError as exc:
            failed += 1
            _error(str(exc))

    if urls:
        for r in asyncio.run(scrape_all()):
            if isinstance(r, ReportError):
                failed += 1
                _error(str(r))
            else:
                results.append(r)
    total = CacheStats(source="total")
    for r in results:
        total.new_tokens += r.new_tokens
        total.cached_tokens += r.cached_tokens
        total.prefills += r.prefills
        total.skipped += r.skipped
    alerts = [a for a in (r.alert(alert_below) for r in [*results, *log_rates]) if a]
    if as_json:
        body = total.as_dict()
        body.pop("source")
        body["sources"] = [r.as_dict() for r in results]
        if log_rates:
            body["vllm_logs"] = [r.as_dict() for r in log_rates]
        body["alerts"] = alerts
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
        _, err = _consoles()
        for a in alerts:
            err.print(a, style="bold red", highlight=False, soft_wrap=True)
    else:
        _print_cache(results, total, alerts, log_rates)
    if failed:
        raise typer.Exit(1)


def _print_cache(
    results: list[Any], total: Any, alerts: list[str], log_rates: list[Any] | None = None
) -> None:
    from rich.table import Table

    out, _ = _consoles()
    table = Table(title="prefix cache")
    for col in ("source", "engine", "cached share", "prefills", "skipped", "new", "cached"):
        table.add_column(col)
    for r in [*results, *([total] if len(results) > 1 else [])]:
        table.add_row(
            r.source, r.engine or "", _pct(r.cached_share), str(r.prefills), str(r.skipped),
            str(r.new_tokens), str(r.cached_tokens),
        )  # fmt: skip
    log_rates = log_rates or []
    for r in log_rates:  # a share from the log alone: no token counts to show
        table.add_row(r.source, r.engine, _pct(r.cached_share), "-", "-", "-", "-")
    if results or log_rates:
        out.print(table)
    for a in alerts:
        out.print(a, style="bold red", highlight=False, soft_wrap=True)


# -- loadtest ------------------------------------------------------------------------


def loadtest(
    base_url: Annotated[str, typer.Option(help="your engine's OpenAI /v1 URL (required)")],
    model: Annotated[str, typer.Option(help="model name, if the engine needs one")] = "",
    calls: Annotated[int, typer.Option(help="calls in the run")] = 8,
    concurrency: Annotated[int, typer.Option(help="calls in progress at most")] = 4,
    arrival: Annotated[str, typer.Option(help="poisson | uniform gaps between arrivals")] = "poisson",
    stagger_s: Annotated[float, typer.Option(help="mean gap between call arrivals")] = 1.0,
    agents: Annotated[int, typer.Option(help="distinct agent prompts")] = 2,
    turns: Annotated[int, typer.Option(help="turns per call")] = 4,
    think_s: Annotated[float, typer.Option(help="mean caller speaking time per turn")] = 2.0,
    context: Annotated[str, typer.Option(help="stable | changing (block changes on half the turns)")] = "stable",
    prewarm: Annotated[bool, typer.Option("--prewarm/--no-prewarm", help="prewarm each call")] = False,
    prompt_tokens: Annotated[int, typer.Option(help="approx. tokens of each agent prompt")] = 400,
    reply_tokens: Annotated[int, typer.Option(help="max_tokens of a reply")] = 16,
    tool_share: Annotated[float, typer.Option(help="share of turns with a tool call")] = 0.25,
    background_share: Annotated[float, typer.Option(help="share of turns with a background request")] = 0.25,
    slo: Annotated[str, typer.Option(help="ttft:MS, e.g. ttft:800")] = "ttft:1000",
    max_requests: Annotated[int, typer.Option(help="stop after this many requests")] = 500,
    max_duration_s: Annotated[float, typer.Option(help="stop issuing requests after this")] = 300.0,
    seed: Annotated[int, typer.Option()] = 0,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="the URL is your own non-local endpoint")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Call-shaped load against your own OpenAI-compatible engine: TTFT per turn, goodput, cached share."""
    from pydantic import ValidationError

    from turnkit.llm.loadtest import LoadConfig, RemoteURLRefused, check_target, run_load

    kind, _, ms = slo.partition(":")
    try:
        if kind != "ttft" or not ms:
            raise ValueError
        slo_ms = float(ms)
    except ValueError:
        _error(f"--slo {slo!r}: expected ttft:MS")
        raise typer.Exit(2) from None
    try:
        check_target(base_url, allow_remote)
    except RemoteURLRefused as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    try:
        cfg = LoadConfig(
            base_url=base_url, model=model, calls=calls, concurrency=concurrency,
            arrival=arrival, stagger_s=stagger_s, agents=agents, turns=turns, think_s=think_s,
            context=context, prewarm=prewarm, prompt_tokens=prompt_tokens,
            reply_tokens=reply_tokens, tool_share=tool_share, background_share=background_share,
            slo_ttft_ms=slo_ms, max_requests=max_requests, max_duration_s=max_duration_s,
            seed=seed, allow_remote=allow_remote,
        )  # fmt: skip
    except RemoteURLRefused as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "config"
        msg = str(e.get("ctx", {}).get("error") or e["msg"])
        _error(f"--{where.replace('_', '-')}: {msg}")
        raise typer.Exit(2) from None
    report = asyncio.run(run_load(cfg))
    summary = report.summary()
    answered = any(r.ok for r in report.records)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif answered:
        _print_load(summary, report)
    if not answered:
        errors = [r.error for r in report.records if r.error]
        first = f"; first: {errors[0]}" if errors else ""
        _error(
            f"--base-url {base_url}: no request answered in {summary['duration']} s "
            f"({len(report.records)} sent{first})"
        )
        raise typer.Exit(1)


def _print_load(s: dict[str, Any], report: Any) -> None:
    from rich.table import Table

    out, _ = _consoles()
    table = Table(title=f"TTFT per turn (ms), {s['context']} context, prewarm {s['prewarm']}")
    for col in ("turn", "n", "p50", "p90", "p99"):
        table.add_column(col)
    for t, row in s["per_turn"].items():
        table.add_row(
            t, str(row["n"]), str(row["p50_ttft_ms"]), str(row["p90_ttft_ms"]),
            str(row["p99_ttft_ms"]),
        )  # fmt: skip
    out.print(table)
    out.print(
        f"all caller-facing: p50 {s['p50_ttft_ms']} / p90 {s['p90_ttft_ms']} / p99 "
        f"{s['p99_ttft_ms']} ms; SLO ttft <= {s['slo_ttft_ms']:g} ms met by "
        f"{_pct(s['slo_attainment'])}; goodput {s['request_goodput']} req/s",
        highlight=False,
    )
    out.print(
        f"cached share {_pct(s['cached_share'])}; uncached prompt tokens/s "
        f"{s['uncached_prompt_tokens_per_s']}; {s['completed']} requests "
        f"({s['failed']} failed) in {s['duration']} s"
        + (f"; stopped: {s['stopped']}" if s["stopped"] else ""),
        highlight=False,
    )
    errors = [r.error for r in report.records if r.error]
    if errors:
        _error(f"{len(errors)} request(s) failed; first: {errors[0]}")


def register(app: typer.Typer) -> None:
    """Add ``prompt-lint``, ``cache-report`` and ``loadtest`` to ``turnkit``."""
    app.command("prompt-lint")(prompt_lint)
    app.command("cache-report")(cache_report)
    app.command("loadtest")(loadtest)
