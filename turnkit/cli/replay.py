"""``turnkit replay``, ``turnkit validate`` and ``turnkit detectors``: recorded
calls through the end-of-turn detectors, recordings checked, detectors listed."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from turnkit import __version__
from turnkit.cli.common import (
    check_output,
    err,
    escape,
    json_safe,
    out,
    say_error,
    warn,
    write_atomic,
)
from turnkit.cli.common import fail as _fail
from turnkit.cli.common import fmt as _fmt
from turnkit.cli.common import setup_logging as _setup_logging

# ReplayConfig field -> the option that sets it, for one-line option errors.
_OPTION_OF = {
    "llm_ttft_ms": "--llm-ttft-ms",
    "tts_ttfb_ms": "--tts-ttfb-ms",
    "stt_delay_ms": "--stt-delay-ms",
    "stt_jitter_ms": "--stt-jitter-ms",
    "stt": "--stt",
    "timeout_s": "--timeout-s",
    "seed": "--seed",
    "eager": "--eager",
    "draft_hold": "--draft-hold",
    "preemptive_tts": "--preemptive-tts",
    "compute": "--compute",
    "filters": "--no-filters",
    "llm_url": "--llm-url",
    "llm_model": "--llm-model",
}


def default_workers(compute: str, llm_url: str | None, cores: int | None) -> int:
    """How many processes replay the calls when ``--workers`` is not given.

    A live engine measures TTFTs: the replay's own parallelism would load
    it (one worker). ``--compute measured`` times each model call on the
    wall clock, and a worker replays a call many times faster than it was
    spoken, so one worker per core keeps every core saturated as no live
    deployment's calls (a second of audio each second) do: on a 2-core
    machine two workers timed Smart Turn at ~88 ms against ~51 ms alone,
    and fused's median response on the real-call variants went 725 → 761 ms
    (the demo corpus 734 → 762 ms) for 7 % less wall time. Measured runs
    leave half the cores free; ``fixed`` and ``none`` charge no wall clock
    and use them all."""
    n = cores or 1
    if llm_url is not None:
        return 1
    if compute == "measured":
        return max(1, n // 2)
    return n


def _print_subsets(results: list[dict[str, Any]]) -> None:
    """Figures per corpus subset (call tags natural / stress / telephone)."""
    from turnkit.replay.metrics import subset_table

    table = subset_table(results)
    if table is not None:
        out.print(table)


def _config_error(exc: Exception) -> str:
    """A pydantic error on ReplayConfig as ``--option: why`` (no URL)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        e = exc.errors()[0]
        field = str(e["loc"][0]) if e["loc"] else ""
        option = _OPTION_OF.get(field, field or "option")
        return f"{option}: {e['msg'].removeprefix('Value error, ')} (got {e.get('input')!r})"
    return f"bad replay option: {str(exc).splitlines()[0]}"


__all__ = ["detectors", "register", "replay", "validate"]


def replay(
    paths: Annotated[
        list[Path], typer.Argument(help="call folders, or folders searched for call.json")
    ],
    detector: Annotated[
        list[str] | None,
        typer.Option(
            "--detector", "-d", help="detector spec, e.g. silence:stop_ms=500 (repeatable)"
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="write results as JSON here")
    ] = None,
    html_path: Annotated[
        Path | None, typer.Option("--html", help="write a self-contained HTML report here")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="parallel processes (default: cores; half of them under --compute measured, "
            "one with --llm-url: both time what the workers would load)"
        ),
    ] = 0,
    llm_ttft_ms: Annotated[
        str, typer.Option(help="LLM first-token latency: ms, or percentiles 'p50=300,p95=900'")
    ] = "350",
    tts_ttfb_ms: Annotated[
        str, typer.Option(help="TTS first-audio latency: ms or percentiles")
    ] = "150",
    stt_delay_ms: Annotated[
        float,
        typer.Option(
            help="transcription delay after each word (--stt segmented: after the VAD closed "
            "each run of speech); a streaming recogniser's is told to the barge-in controller "
            "(BargeInParams.word_delay_s), as a host that knows it would"
        ),
    ] = 0.0,
    stt_jitter_ms: Annotated[
        float,
        typer.Option(help="up to this much more delay per word (seeded; words stay in order)"),
    ] = 0.0,
    stt: Annotated[
        str,
        typer.Option(
            "--stt",
            help="the recogniser: streaming (each word as it is said, with word times: Deepgram) "
            "or segmented (each run of speech whole once the VAD closed it, no word times: "
            "Whisper behind a VAD, the example Pipecat agent's)",
        ),
    ] = "streaming",
    timeout_s: Annotated[
        float, typer.Option(help="no reply this long after a turn ends: missed")
    ] = 5.0,
    seed: Annotated[int, typer.Option(help="seed for sampled latencies")] = 0,
    per_turn: Annotated[bool, typer.Option(help="also print every turn")] = False,
    eager: Annotated[
        bool,
        typer.Option(
            help="draft replies on eager signals and use a draft if the turn is confirmed "
            "with its words, as turnkit's Responder and Pipecat setups and LiveKit's "
            "preemptive generation do (--no-eager: every reply waits for the commit)"
        ),
    ] = True,
    draft_hold: Annotated[
        bool,
        typer.Option(
            help="with --eager: a commit waits for its draft's first token (the LLM TTFT's "
            "5th percentile after the draft starts), and a commit due within that time drafts "
            "first: replies as soon, fewer callers cut off (--no-draft-hold: commits where "
            "the wait puts them, as Pipecat's and LiveKit's own drafting do)"
        ),
    ] = True,
    preemptive_tts: Annotated[
        bool,
        typer.Option(
            help="with --eager: a held draft's first sentence is rendered before the commit "
            "(turnkit's TTSProcessor, LiveKit's preemptive_tts): a used draft's audio is ready "
            "the TTS's time after its first token, and the commit waits for it, not for the "
            "first token alone: as soon, fewer callers cut off (--no-preemptive-tts: the TTS "
            "starts at the commit, as in Pipecat)"
        ),
    ] = True,
    compute: Annotated[
        str,
        typer.Option(
            help="model cost added to each decision: measured (wall clock, the default), "
            "fixed (each model's recorded benchmark figure: two runs give identical figures) "
            "or none"
        ),
    ] = "measured",
    llm_url: Annotated[
        str | None,
        typer.Option(
            help="live OpenAI-compatible engine (e.g. http://127.0.0.1:8000/v1): every LLM "
            "request (drafts included) goes to it with the agent's history (the words the caller "
            "heard); its tokens are the replies and its measured TTFTs replace --llm-ttft-ms; "
            "voided drafts and stopped replies are aborted on it. Each reply still plays for its "
            "recorded agent turn's length, so barge-in and echo figures line up; the recorded "
            "tool_call events still drive tools. A failed request falls back to the latency "
            "model and the recorded reply (counted). One worker unless --workers"
        ),
    ] = None,
    llm_model: Annotated[str, typer.Option(help="model name sent with --llm-url")] = "",
    latency_from_live: Annotated[
        bool,
        typer.Option(
            "--latency-from-live",
            help="a call a turnkit recorder wrote live answers at its host's measured latency "
            "(median from a committed user turn to the reply's first audio, as LLM TTFT with "
            "TTS 0) instead of --llm-ttft-ms/--tts-ttfb-ms: hold a replay against the live "
            "decisions at the host's speed; calls without live turns keep the latency model",
        ),
    ] = False,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="--llm-url is your own engine on a non-loopback, non-private address",
        ),
    ] = False,
    no_filters: Annotated[
        bool,
        typer.Option(
            "--no-filters",
            help="barge-in on any VAD speech onset (raw baseline): no echo or acknowledgement filter",
        ),
    ] = False,
    sweep: Annotated[
        bool,
        typer.Option(help="score each detector (and silence) across its threshold/delay grid"),
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Replay calls through each detector on a virtual clock and score them."""
    _setup_logging(verbose)
    from turnkit.clock import VirtualClock
    from turnkit.detectors.registry import DetectorSpecError, create_detector
    from turnkit.replay.compare import paired_compare
    from turnkit.replay.latency import LatencyModel, LatencySpecError
    from turnkit.replay.metrics import CallScore, aggregate
    from turnkit.replay.recording import find_recordings
    from turnkit.replay.simulator import (
        CallFailure,
        ReplayConfig,
        ReplayInterrupted,
        replay_many,
    )

    specs = detector or ["silence"]
    for spec in specs:
        try:
            create_detector(spec, VirtualClock())
        except DetectorSpecError as exc:
            _fail(str(exc))
        except Exception as exc:  # a detector that cannot start: one line, not a traceback
            first = (str(exc).strip().splitlines() or [""])[0]
            _fail(f"detector {spec!r} cannot start: {type(exc).__name__}: {first}", 1)
    for name, value in (("--llm-ttft-ms", llm_ttft_ms), ("--tts-ttfb-ms", tts_ttfb_ms)):
        try:
            LatencyModel.parse(value)
        except LatencySpecError as exc:
            _fail(f"{name}: {exc}")
    for name, number in (
        ("--stt-delay-ms", stt_delay_ms),
        ("--stt-jitter-ms", stt_jitter_ms),
        ("--timeout-s", timeout_s),
    ):
        if not math.isfinite(number):
            _fail(f"{name}: {number} is not a finite number")
    if workers < 0:
        _fail(f"--workers: {workers} is negative (0: one per core)")
    if latency_from_live and llm_url is not None:
        _fail("--latency-from-live and --llm-url both set the LLM's latency: give one")
    try:
        config = ReplayConfig(
            llm_ttft_ms=llm_ttft_ms,
            tts_ttfb_ms=tts_ttfb_ms,
            stt_delay_ms=stt_delay_ms,
            stt_jitter_ms=stt_jitter_ms,
            stt=stt,  # type: ignore[arg-type]  # checked by ReplayConfig
            timeout_s=timeout_s,
            seed=seed,
            eager=eager,
            draft_hold=draft_hold,
            preemptive_tts=preemptive_tts,
            compute=compute,
            filters=not no_filters,
            llm_url=llm_url,
            llm_model=llm_model,
            latency_from_live=latency_from_live,
        )
    except ValueError as exc:
        _fail(_config_error(exc))
    # Outputs are checked before the run: a typo must not cost the run.
    for option, target in (("--json", json_path), ("--html", html_path)):
        if target is not None:
            check_output(target, option)
    if llm_url is not None:
        _check_engine(llm_url, allow_remote)

    grids: dict[str, tuple[str, list[tuple[float, str]]]] = {}
    if sweep:
        from turnkit.replay.sweep import BASELINE, grid

        seen: set[tuple[str, ...]] = set()
        for spec in [BASELINE, *specs]:
            try:
                g = grid(spec)
            except ValueError as exc:
                _fail(str(exc))
            key = tuple(s for _, s in g[1])
            if key not in seen:  # "silence:stop_ms=500" sweeps the baseline's grid
                seen.add(key)
                grids[spec] = g
    run_specs = list(dict.fromkeys([*specs, *(s for _, pts in grids.values() for _, s in pts)]))

    search_notes: list[str] = []
    calls = find_recordings(paths, search_notes)
    if not any(_has_manifest(c) for c in calls):
        _no_recordings(paths)
    warnings: list[dict[str, Any]] = [
        {"path": n.split(": ", 1)[0], "warning": n} for n in search_notes
    ]
    for n in search_notes:
        warn(n)
    n_workers = workers if workers > 0 else default_workers(compute, llm_url, os.cpu_count())
    n_workers = min(n_workers, len(calls))

    by_path: dict[str, list[CallScore]] = {}
    failed: list[dict[str, str]] = []
    t0 = time.perf_counter()
    shown = len(warnings)
    batch = replay_many(calls, run_specs, config, n_workers, warnings)
    try:
        with Progress(
            TextColumn("[bold]replay"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("calls"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as progress:
            task = progress.add_task("replay", total=len(calls))
            for path, res in batch:
                if isinstance(res, CallFailure):
                    failed.append({"path": res.path, "error": res.error})
                    say_error(res.error)
                else:
                    by_path[path] = res
                for w in warnings[shown:]:
                    warn(w["warning"])
                shown = len(warnings)
                progress.advance(task)
    except ReplayInterrupted as exc:
        batch.close()
        say_error(f"{exc}: workers stopped, nothing written", "stopped")
        raise typer.Exit(128 + exc.signum) from None
    except KeyboardInterrupt:
        batch.close()
        say_error("interrupted (Ctrl-C): workers stopped, nothing written", "stopped")
        raise typer.Exit(130) from None
    finally:
        batch.close()
    elapsed = time.perf_counter() - t0

    # Two calls with one id would merge in paired statistics and the report:
    # the first in search order (as validate reads them) keeps it, each
    # other one fails.
    order = {str(c): i for i, c in enumerate(calls)}
    owner: dict[str, str] = {}
    for path in sorted(by_path, key=lambda p: (order.get(p, len(order)), p)):
        call_id = by_path[path][0].call if by_path[path] else None
        if call_id is None:
            continue
        if call_id in owner:
            msg = (
                f"{Path(path) / 'call.json'}: id: {call_id!r} is already the id of "
                f"{owner[call_id]} (ids must be unique in a batch)"
            )
            failed.append({"path": path, "error": msg})
            say_error(msg)
            del by_path[path]
        else:
            owner[call_id] = path
    scores: dict[str, list[CallScore]] = {s: [] for s in run_specs}
    for res in by_path.values():
        for spec, score in zip(run_specs, res, strict=True):
            scores[spec].append(score)

    results = []
    for spec in specs:
        ordered = sorted(scores[spec], key=lambda s: s.call)
        results.append(aggregate(spec, ordered))
    failed.sort(key=lambda f: f["path"])
    for r in results:
        n_fallback = r.get("fallback_decisions") or 0
        if n_fallback:
            note = (
                f"{r['detector']}: {n_fallback} of {r.get('decisions', '?')} end-of-turn "
                "decisions fell back (its model or engine failed; see fallback_decisions)"
            )
            if compute == "measured":
                # The replay runs many times faster than the call did: an
                # engine's asks (and prewarms) from every worker arrive far
                # closer together than live, and miss a live deadline.
                note += (
                    "; if it timed out: the replay feeds an engine faster than a live call would, "
                    "--compute fixed waits for its answers and charges the recorded cost"
                )
            warn(note)
            warnings.append({"path": None, "detector": r["detector"], "warning": note})

    comparisons: list[dict[str, Any]] = []
    sweeps: list[dict[str, Any]] = []
    if not by_path:
        # Nothing replayed (each call failed, said above): no figures to
        # print, compare or report; the JSON still records the failures.
        say_error(f"no call could be replayed: {len(failed)} of {len(calls)} failed")
        results = []
    else:
        _print_results(
            results,
            len(calls),
            len(failed),
            elapsed,
            n_workers,
            config.eager,
            config.draft_hold,
            config.preemptive_tts,
        )
        _print_subsets(results)
        _print_drafting(results)
        _print_tools(results)
        _print_live(results)
        no_ref = sorted({c for r in results for c in r.get("echo_reference_missing", [])})
        if no_ref:
            err.print(
                f"echo filter: no agent.wav in {len(no_ref)} call(s), transcript check only: "
                + ", ".join(no_ref),
                highlight=False,
                markup=False,
            )
        comparisons = [paired_compare(results[0], r, seed=seed) for r in results[1:]]
        if comparisons:
            _print_comparisons(comparisons)
        sweeps = _sweeps(grids, scores)
        if sweeps:
            _print_sweeps(sweeps)
        if per_turn:
            _print_turns(results)
    write_failed = False
    # JSON first: the HTML report is the one more likely to fail (size,
    # odd text), and it must not take the results with it.
    if json_path is not None:
        doc: dict[str, Any] = {
            "turnkit": __version__,
            "recordings": len(calls),
            "failed": failed,
            "warnings": warnings,
            "config": config.model_dump(),
            "workers": n_workers,
            "elapsed_seconds": round(elapsed, 3),
            "results": results,
            "comparisons": comparisons,
            "sweeps": sweeps,
        }
        try:
            text = json.dumps(json_safe(doc), indent=2, allow_nan=False) + "\n"
            write_atomic(json_path, text)
            err.print(f"wrote {json_path}", highlight=False, markup=False)
        except (OSError, ValueError) as exc:
            write_failed = True
            reason = getattr(exc, "strerror", None) or exc
            say_error(f"--json {json_path}: cannot write ({reason})")
    if html_path is not None and not results:
        say_error(f"--html {html_path}: not written (no call was replayed)")
    elif html_path is not None:
        from turnkit.replay.report import write_report

        try:
            write_report(
                html_path,
                results=results,
                comparisons=comparisons,
                sweeps=sweeps,
                calls={spec: sorted(scores[spec], key=lambda s: s.call) for spec in specs},
                failed=failed,
            )
            err.print(f"wrote {html_path}", highlight=False, markup=False)
        except (OSError, ValueError) as exc:
            write_failed = True
            reason = getattr(exc, "strerror", None) or exc
            say_error(f"--html {html_path}: cannot write ({reason})")
    if failed or write_failed:
        raise typer.Exit(1)


def _no_recordings(paths: list[Path]) -> None:
    """Exit 2 with one line: what is wrong with the paths given (a symlink
    loop, a NUL, nothing there), or that they hold no call.json."""
    from turnkit.replay.recording import path_problem

    problems = [m for m in (path_problem(p) for p in paths) if m is not None]
    if len(problems) == len(paths) == 1:
        _fail(problems[0])
    _fail(f"no recordings (no call.json) under {', '.join(str(p) for p in paths)}")


def _has_manifest(folder: Path) -> bool:
    try:
        return (folder / "call.json").is_file()
    except (OSError, ValueError):
        return False


def _check_engine(url: str, allow_remote: bool = False) -> None:
    """One line and exit 2 when ``--llm-url`` is outside the target policy
    (:func:`turnkit.net.check_target`) or does not answer ``GET /models``
    like an OpenAI-compatible engine within 5 s in total (a server that
    trickles bytes cannot hold it longer)."""
    from turnkit.net import FetchError, TargetRefused, check_target, fetch_sync

    try:
        check_target(url, allow_remote, what="--llm-url")
    except TargetRefused as exc:
        _fail(str(exc))
    models = f"{url.rstrip('/')}/models"
    try:
        r = fetch_sync("GET", models, deadline_s=5.0, max_bytes=4 * 1024 * 1024)
    except FetchError as exc:
        _fail(f"--llm-url {url}: {exc}")
    if r.status_code != 200:
        _fail(f"--llm-url {url}: {models} answered HTTP {r.status_code}")


def _detector_table(title: str, *columns: str) -> Table:
    """A table of one row per detector: its name left, ``columns`` right."""
    table = Table(title=title, title_justify="left")
    table.add_column("detector", justify="left")
    for col in columns:
        table.add_column(col, justify="right")
    return table


def _print_drafting(results: list[dict[str, Any]]) -> None:
    rows = [r for r in results if r["drafts"]["started"] or r.get("llm_live")]
    if not rows:
        return
    table = _detector_table(
        "LLM requests",
        "drafts started / used / cancelled",
        "LLM req/turn",
        "saved by drafts p50",
        "live TTFT p50 / p95",
        "live errors",
    )
    for r in rows:
        d, live = r["drafts"], r.get("llm_live")
        table.add_row(
            escape(r["detector"]),
            f"{d['started']} / {d['used']} / {d['cancelled']}",
            "—" if r["llm_requests_per_turn"] is None else f"{r['llm_requests_per_turn']:.2f}",
            _fmt(r["draft_saved_ms"]["p50"], " ms"),
            "—"
            if live is None
            else f"{_fmt(live['ttft_ms']['p50'], ' ms')} / {_fmt(live['ttft_ms']['p95'], ' ms')}",
            "—" if live is None else str(live["errors"]),
        )
    out.print(table)


def _print_tools(results: list[dict[str, Any]]) -> None:
    """Calls with recorded tool calls: what the gate let run, and when.
    ``early``: writes that started before the caller turn they answer had
    ended (the agent acted on a turn the caller was still saying)."""
    rows = [r for r in results if (r.get("tools") or {}).get("calls_with_tools")]
    if not rows:
        return
    table = _detector_table(
        "tools (calls with tool_call events)",
        "calls",
        "tool calls",
        "writes",
        "early",
        "withdrawn",
        "from discarded drafts",
        "fillers",
        "filler ack p50",
    )
    for r in rows:
        t = r["tools"]
        table.add_row(
            escape(r["detector"]),
            str(t["calls_with_tools"]),
            str(t["calls"]),
            str(t["writes"]),
            str(t.get("writes_early", 0)),
            str(t.get("writes_withdrawn", 0)),
            str(t["writes_from_discarded_drafts"]),
            str(t["fillers"]),
            _fmt(t["filler_ack_ms"]["p50"], " ms"),
        )
    out.print(table)


def _print_live(results: list[dict[str, Any]]) -> None:
    """Calls recorded live with the replayed detector's decisions: does the
    replay decide where the live agent did (turnkit.replay.live)?"""
    rows = [r for r in results if r.get("live_agreement")]
    if not rows:
        return
    table = _detector_table(
        "replay against the live decisions",
        "calls",
        "live decisions",
        "matched",
        "within 32 ms",
        "|Δ| p50 / p95 / max",
        "live only",
        "replay only",
    )
    for r in rows:
        a = r["live_agreement"]
        d = a["abs_delta_ms"]
        table.add_row(
            escape(r["detector"]),
            str(a["calls"]),
            str(a["live_decisions"]),
            str(a["matched"]),
            str(a["within_frame"]),
            f"{_fmt(d['p50'], '')} / {_fmt(d['p95'], '')} / {_fmt(d['max'], ' ms')}",
            str(a["live_only"]),
            str(a["replay_only"]),
        )
    out.print(table)


def _print_results(
    results: list[dict[str, Any]],
    n_calls: int,
    n_failed: int,
    elapsed: float,
    workers: int,
    eager: bool = True,
    draft_hold: bool = True,
    preemptive_tts: bool = True,
) -> None:
    # Whether replies were drafted moves every response figure by ~100 ms:
    # say which agent these are (and, per detector, what it cost in requests).
    drafts = "replies drafted on eager signals" if eager else "no drafts (--no-eager)"
    if eager and not draft_hold:
        drafts += ", commits not held for them (--no-draft-hold)"
    if eager and not preemptive_tts:
        drafts += ", TTS from the commit (--no-preemptive-tts)"
    table = Table(
        title=f"turnkit replay — {n_calls - n_failed}/{n_calls} calls, {workers} workers, "
        f"{elapsed:.1f} s, {drafts}",
        title_justify="left",
    )
    for col, just in (
        ("detector", "left"),
        ("turns", "right"),
        ("resp p50", "right"),
        ("resp p95", "right"),
        ("resp mean", "right"),
        ("interrupt", "right"),
        ("missed", "right"),
        ("eot p50", "right"),
        ("false barge-in bc/echo/noise", "right"),
        ("barge-in recall", "right"),
        ("stop p50", "right"),
        ("LLM req/turn", "right"),
        ("× RT/core", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in results:
        fbi = r["false_barge_in_rate"]
        speed = r["audio_seconds"] / r["wall_seconds"] if r["wall_seconds"] else None
        table.add_row(
            escape(r["detector"]),
            str(r["turns"]),
            _fmt(r["response_ms"]["p50"], " ms"),
            _fmt(r["response_ms"]["p95"], " ms"),
            _fmt(r["response_ms"]["mean"], " ms"),
            _fmt(r["interruption_rate"], pct=True),
            _missed(r),
            _fmt(r["eot_delay_ms"]["p50"], " ms"),
            " / ".join(_fmt(fbi[k], pct=True) for k in ("backchannel", "echo", "noise")),
            _fmt(r["barge_in_recall"], pct=True),
            _fmt(r["barge_in_stop_ms"]["p50"], " ms"),
            "—" if r["llm_requests_per_turn"] is None else f"{r['llm_requests_per_turn']:.2f}",
            "—" if speed is None else f"{speed:.0f}×",
        )
    out.print(table)


def _missed(r: dict[str, Any]) -> str:
    """The missed rate, and how many of those turns the caller went on from
    by themselves (spoke again within the timeout: no detector could have
    answered before them)."""
    rate = _fmt(r["missed_rate"], pct=True)
    went_on = r.get("missed_caller_went_on") or 0
    return f"{rate} ({went_on} went on)" if went_on else rate


def _ci(d: dict[str, Any], pct: bool = False) -> str:
    est, (lo, hi) = d["estimate"], d["ci95"]
    if est is None:
        return "—"
    if pct:
        return f"{est * 100:+.1f} pp  [{lo * 100:+.1f}, {hi * 100:+.1f}]"
    return f"{est:+.0f} ms  [{lo:+.0f}, {hi:+.0f}]"


def _print_comparisons(comparisons: list[dict[str, Any]]) -> None:
    table = Table(
        title=f"paired vs {escape(comparisons[0]['baseline'])} — same turns, 95% bootstrap CI over calls",
        title_justify="left",
    )
    for col in ("detector", "turns", "Δ median response", "Δ interruption rate", "Δ missed rate"):
        table.add_column(col)
    for c in comparisons:
        table.add_row(
            escape(c["detector"]),
            f"{c['turns']} ({c['calls']} calls)",
            _ci(c["median_response_diff_ms"]),
            _ci(c["interruption_rate_diff"], pct=True),
            _ci(c["missed_rate_diff"], pct=True),
        )
    out.print(table)


def _sweeps(
    grids: dict[str, tuple[str, list[tuple[float, str]]]], scores: dict[str, Any]
) -> list[dict[str, Any]]:
    from turnkit.replay.metrics import aggregate
    from turnkit.replay.sweep import budgets, sweep_point

    out = []
    for name, (param, pts) in grids.items():
        points = []
        for value, spec in pts:
            calls = sorted(scores[spec], key=lambda s: s.call)
            holds: dict[str, list[int]] = {}
            for c in calls:
                for kind, (h, cut) in c.holds.items():
                    acc = holds.setdefault(kind, [0, 0])
                    acc[0] += h
                    acc[1] += cut
            points.append(sweep_point(value, aggregate(spec, calls), holds))
        out.append({"detector": name, "param": param, "points": points, **budgets(points)})
    return out


def _print_sweeps(sweeps: list[dict[str, Any]]) -> None:
    table = Table(
        title="operating points (holds ≥ 100 ms; latency = mean end-of-turn decision delay)",
        title_justify="left",
    )
    for col in (
        "detector",
        "grid",
        "cutoff @300 ms",
        "cutoff @600 ms",
        "latency @5%",
        "latency @10%",
    ):
        table.add_column(col)
    for sw in sweeps:
        values = [p["value"] for p in sw["points"]]
        table.add_row(
            escape(sw["detector"]),
            f"{sw['param']} {min(values):g}…{max(values):g} ({len(values)})",
            _fmt(sw["cutoff_at_300ms"], pct=True),
            _fmt(sw["cutoff_at_600ms"], pct=True),
            _fmt(sw["latency_at_5pct_ms"], " ms"),
            _fmt(sw["latency_at_10pct_ms"], " ms"),
        )
    out.print(table)
    for sw in sweeps:
        pts = Table(title=f"{escape(sw['detector'])} by {sw['param']}", title_justify="left")
        for col in (sw["param"], "hold cutoff", "eot mean", "eot p50", "interruption", "resp p50"):
            pts.add_column(col, justify="right")
        for p in sw["points"]:
            pts.add_row(
                f"{p['value']:g}",
                _fmt(p["hold_cutoff_rate"], pct=True),
                _fmt(p["eot_mean_ms"], " ms"),
                _fmt(p["eot_p50_ms"], " ms"),
                _fmt(p["interruption_rate"], pct=True),
                _fmt(p["response_p50_ms"], " ms"),
            )
        out.print(pts)


def _print_turns(results: list[dict[str, Any]]) -> None:
    for r in results:
        table = Table(title=f"per turn — {escape(r['detector'])}", title_justify="left")
        for col in ("call", "turn", "end (s)", "response", "eot delay", "cutoffs", "missed"):
            table.add_column(col)
        for t in r["per_turn"]:
            table.add_row(
                escape(t["call"]),
                str(t["turn"]),
                f"{t['end']:.2f}",
                _fmt(t["response_ms"], " ms"),
                _fmt(t["eot_delay_ms"], " ms"),
                str(t["cutoffs"]),
                ("yes, caller went on" if t.get("continued") else "yes") if t["missed"] else "",
            )
        out.print(table)


def validate(
    paths: Annotated[
        list[Path], typer.Argument(help="call folders, or folders searched for call.json")
    ],
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Check recordings against turnkit.recording/v1 and print per-call stats."""
    _setup_logging(verbose)
    from turnkit.replay.recording import RecordingError, find_recordings, load_recording

    notes: list[str] = []
    calls = find_recordings(paths, notes)
    if not any(_has_manifest(c) for c in calls):
        _no_recordings(paths)
    for n in notes:
        warn(n)
    table = Table(title="recordings", title_justify="left")
    for col in (
        "call",
        "seconds",
        "caller turns",
        "holds",
        "backchannels",
        "echo",
        "noise",
        "barge-ins",
        "agent.wav",
    ):
        table.add_column(col)
    bad = 0
    owner: dict[str, Path] = {}
    try:
        for folder in calls:
            try:
                rec = load_recording(folder, check_audio=True)
            except RecordingError as exc:
                bad += 1
                say_error(str(exc), "invalid")
                continue
            except Exception as exc:  # load_recording should not, but one call never stops it
                bad += 1
                first = (str(exc).strip().splitlines() or [""])[0]
                say_error(f"{folder}: cannot load: {type(exc).__name__}: {first}", "invalid")
                continue
            if rec.id in owner:
                bad += 1
                say_error(
                    f"{folder / 'call.json'}: id: {rec.id!r} is already the id of "
                    f"{owner[rec.id]} (ids must be unique in a batch)",
                    "invalid",
                )
                continue
            owner[rec.id] = folder
            for w in rec.warnings:
                warn(w)
            holds: Counter[str] = Counter(g[2] for t in rec.caller_turns for g in t.gaps())
            barge = sum(
                1
                for t in rec.caller_turns
                if any(a.start < t.start < a.end for a in rec.agent_turns)
            )
            table.add_row(
                escape(rec.id),
                f"{rec.duration:.1f}",
                str(len(rec.caller_turns)),
                ", ".join(f"{k} {v}" for k, v in sorted(holds.items())) or "0",
                str(len(rec.backchannels)),
                str(len(rec.echoes)),
                str(len(rec.noises)),
                str(barge),
                "yes" if rec.agent_path else "no",
            )
    except KeyboardInterrupt:
        say_error("interrupted (Ctrl-C)", "stopped")
        raise typer.Exit(130) from None
    out.print(table)
    out.print(f"{len(calls) - bad} valid, {bad} invalid", highlight=False)
    if bad:
        raise typer.Exit(1)


def detectors() -> None:
    """List the end-of-turn detectors and their parameters."""
    from turnkit.detectors.registry import available

    table = Table(title="detectors", title_justify="left")
    table.add_column("name")
    table.add_column("parameters (default)")
    table.add_column("decides on")
    for name, cls in available().items():
        params = ", ".join(f"{k}={f.default}" for k, f in cls.Params.model_fields.items())
        doc = ((cls.__module__ and sys.modules[cls.__module__].__doc__) or "").strip().splitlines()
        table.add_row(name, params or "—", doc[0] if doc else "")
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add ``replay``, ``validate`` and ``detectors`` to ``turnkit``."""
    app.command("replay")(replay)
    app.command("validate")(validate)
    app.command("detectors")(detectors)
