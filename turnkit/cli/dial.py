"""``turnkit dial``: a recorded caller calls a running agent over a real
transport; each live call is written as ``turnkit.recording/v1``, scored
with the replay's metrics, and set beside ``turnkit replay``'s prediction
for the same detector and latency settings."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from rich.table import Table

from turnkit.cli.common import err, out
from turnkit.cli.common import fail as _fail
from turnkit.cli.common import fmt as _fmt
from turnkit.cli.common import setup_logging as _setup_logging
from turnkit.text.recogniser import RecogniserKind

__all__ = ["dial", "register"]

STAGES = ("stt_ms", "llm_ttft_ms", "tts_ttfb_ms")


def _check_url(url: str, allow_remote: bool) -> None:
    from urllib.parse import urlsplit

    from turnkit.net import TargetRefused, check_target

    scheme = urlsplit(url).scheme
    as_http = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    try:
        check_target(as_http + url[len(scheme) :], allow_remote, what="URL")
    except TargetRefused as exc:
        _fail(str(exc).replace(as_http + url[len(scheme) :], url))


def agent_stage_latencies(messages: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The agent's own per-turn stage figures (its ``turnkit-metrics``
    messages), by stage."""
    keys = (
        *STAGES,
        "eot_delay_ms",
        "decision_lag_ms",
        "decision_to_audio_ms",
        "decision_to_token_ms",
        "token_to_audio_ms",
    )
    out_: dict[str, list[float]] = {k: [] for k in keys}
    for m in messages:
        if m.get("type") != "turnkit-metrics":
            continue
        for k in out_:
            v = m.get(k)
            if isinstance(v, int | float):
                out_[k].append(float(v))
    return out_


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def dial(
    url: Annotated[str, typer.Argument(help="the agent, e.g. ws://127.0.0.1:8765/ws")],
    recordings: Annotated[list[Path], typer.Argument(help="call folders, or folders of calls")],
    transport: Annotated[
        str, typer.Option(help="websocket (Pipecat protobuf) or webrtc (Pipecat SmallWebRTC)")
    ] = "websocket",
    out_dir: Annotated[
        Path, typer.Option("--out", help="write each live call here, as turnkit.recording/v1")
    ] = Path("dial-calls"),
    json_path: Annotated[Path | None, typer.Option("--json", help="write results here")] = None,
    html_path: Annotated[
        Path | None, typer.Option("--html", help="write an HTML report (live beside predicted)")
    ] = None,
    detector: Annotated[
        str, typer.Option("--detector", "-d", help="the agent's detector, for the prediction")
    ] = "fused",
    llm_ttft_ms: Annotated[str, typer.Option(help="prediction: LLM first-token latency")] = "350",
    tts_ttfb_ms: Annotated[str, typer.Option(help="prediction: TTS first-audio latency")] = "150",
    stt_delay_ms: Annotated[float, typer.Option(help="prediction: transcription delay")] = 0.0,
    stt: Annotated[
        str,
        typer.Option(
            "--stt",
            help="prediction: the agent's recogniser, streaming or segmented (Whisper behind "
            "a VAD, as the example agent runs it): see turnkit replay --stt",
        ),
    ] = "streaming",
    latency_from_agent: Annotated[
        bool,
        typer.Option(
            help="predict each turn with the stage latencies the agent reported for it "
            "(its turnkit-metrics messages: STT, LLM TTFT, TTS TTFB) fed to the replay; "
            "other turns with their medians"
        ),
    ] = False,
    draft_hold: Annotated[
        bool,
        typer.Option(
            help="prediction: the agent holds each end for its draft's first token (turnkit's "
            "drafter given or learning it, as the example agent does): see turnkit replay "
            "--draft-hold; never with a decision-to-audio figure, which is not a first token"
        ),
    ] = True,
    preemptive_tts: Annotated[
        bool,
        typer.Option(
            help="prediction: the agent renders a held draft's first sentence before the "
            "commit and holds the commit for its first audio (turnkit's TTSProcessor; see "
            "turnkit replay --preemptive-tts). Off by default: the Pipecat example agent's "
            "speculation holds the LLM's output, so its TTS starts at the commit"
        ),
    ] = False,
    timeout_s: Annotated[
        float, typer.Option(help="no reply this long after a turn ends: missed")
    ] = 5.0,
    connect_timeout_s: Annotated[float, typer.Option(help="give up connecting after this")] = 10.0,
    call_timeout_s: Annotated[float, typer.Option(help="hang up a call after this")] = 120.0,
    allow_remote: Annotated[
        bool,
        typer.Option("--allow-remote", help="URL is your own agent on a non-private address"),
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Call a running agent with recorded callers; score the live calls."""
    _setup_logging(verbose)
    from turnkit.clock import VirtualClock
    from turnkit.detectors.registry import DetectorSpecError, create_detector
    from turnkit.dial import DialConfig, DialError, get_transport
    from turnkit.dial.transport import TRANSPORTS
    from turnkit.replay.latency import LatencyModel, LatencySpecError
    from turnkit.replay.recording import RecordingError, find_recordings, load_recording

    if transport not in TRANSPORTS:
        _fail(f"--transport: unknown transport {transport!r} (known: {', '.join(TRANSPORTS)})")
    try:
        create_detector(detector, VirtualClock())
    except DetectorSpecError as exc:
        _fail(f"--detector: {exc}")
    for name, value in (("--llm-ttft-ms", llm_ttft_ms), ("--tts-ttfb-ms", tts_ttfb_ms)):
        try:
            LatencyModel.parse(value)
        except LatencySpecError as exc:
            _fail(f"{name}: {exc}")
    for name, v in (
        ("--timeout-s", timeout_s),
        ("--connect-timeout-s", connect_timeout_s),
        ("--call-timeout-s", call_timeout_s),
    ):
        if not v > 0:
            _fail(f"{name}: must be > 0, got {v:g}")
    if stt_delay_ms < 0:
        _fail(f"--stt-delay-ms: must be >= 0, got {stt_delay_ms:g}")
    kinds = get_args(RecogniserKind)
    if stt not in kinds:
        _fail(f"--stt: one of {', '.join(kinds)}, got {stt!r}")
    _check_url(url, allow_remote)
    try:
        tr = get_transport(transport)
    except DialError as exc:
        _fail(f"--transport: {exc}")
    paths = find_recordings(recordings)
    cfg = DialConfig(
        connect_timeout_s=connect_timeout_s,
        call_timeout_s=call_timeout_s,
        answer_timeout_s=timeout_s,
    )
    t0 = time.perf_counter()
    results = asyncio.run(
        _dial_all(paths, tr, url, cfg, out_dir, timeout_s, load_recording, RecordingError)
    )
    failed = [r for r in results if r["failure"]]
    messages = [m for r in results for m in r.get("messages", [])]
    stages = agent_stage_latencies(messages)
    llm, tts, stt_ms = llm_ttft_ms, tts_ttfb_ms, stt_delay_ms
    fed: dict[str, float] | None = None
    if latency_from_agent:
        med = {k: m for k, v in stages.items() if (m := _median(v)) is not None}
        if "decision_to_audio_ms" in med:
            fed = med  # the median reply's stages, mapped as each turn's (_fed_config)
        else:
            llm = f"{med['llm_ttft_ms']:.0f}" if "llm_ttft_ms" in med else llm
            tts = f"{med['tts_ttfb_ms']:.0f}" if "tts_ttfb_ms" in med else tts
            stt_ms = med.get("stt_ms", stt_ms)
    report = _predict_and_compare(
        results,
        detector,
        llm,
        tts,
        stt_ms,
        timeout_s,
        per_turn_stages=latency_from_agent,
        stt_mode=stt,
        draft_hold=draft_hold,
        preemptive_tts=preemptive_tts,
        stages=fed,
    )
    report["elapsed_s"] = round(time.perf_counter() - t0, 2)
    report["agent_stages_ms"] = {k: _pcts(v) for k, v in stages.items()}
    _print(report)
    if json_path is not None:
        json_path.write_text(json.dumps(_jsonable(report), indent=1) + "\n", encoding="utf-8")
    if html_path is not None:
        from turnkit.replay.report import write_report

        write_report(
            html_path,
            results=[report["live"], report["predicted"]],
            comparisons=[],
            sweeps=[],
            calls={"live": report["_live_scores"], detector: report["_pred_scores"]},
            failed=[{"path": r["path"], "error": r["failure"]} for r in failed],
        )
    if failed:
        raise typer.Exit(1)


def _pcts(xs: list[float]) -> dict[str, float | None]:
    import numpy as np

    if not xs:
        return {"p50": None, "p95": None, "n": 0}
    a = np.asarray(xs)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "n": len(xs),
    }


async def _dial_all(
    paths: list[Path],
    tr: Any,
    url: str,
    cfg: Any,
    out_dir: Path,
    timeout_s: float,
    load_recording: Any,
    recording_error: type[Exception],
) -> list[dict[str, Any]]:
    from turnkit.dial import dial_call, score_live, write_live_recording

    results: list[dict[str, Any]] = []
    for path in paths:
        entry: dict[str, Any] = {"path": str(path), "failure": None, "messages": []}
        results.append(entry)
        try:
            rec = load_recording(path)
        except recording_error as exc:
            entry["failure"] = str(exc)
            err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            continue
        entry["rec"] = rec
        call = await dial_call(rec, tr, url, cfg)
        entry["messages"] = call.messages
        if call.failure:
            entry["failure"] = f"{path}: {call.failure}"
            err.print(f"[red]error:[/red] {entry['failure']}", highlight=False, soft_wrap=True)
        if len(call.caller) == 0:
            continue  # nothing was sent: nothing to write
        try:
            live_rec = write_live_recording(call, out_dir / rec.id)
        except (recording_error, OSError) as exc:
            msg = f"{path}: writing the live call: {exc}"
            entry["failure"] = entry["failure"] or msg
            err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
            continue
        from turnkit.dial.live import explain_missed, live_replies, turn_stages

        entry["live_path"] = str(live_rec.folder)
        entry["score"] = score = score_live(call, live_rec, timeout_s=timeout_s, grace_s=0.5)
        entry["stages"] = turn_stages(call, live_replies(call))
        entry["missed"] = explain_missed(call, live_rec, score, timeout_s)
    return results


def _predict_and_compare(
    results: list[dict[str, Any]],
    detector: str,
    llm: str,
    tts: str,
    stt: float,
    timeout_s: float,
    per_turn_stages: bool = False,
    stt_mode: str = "streaming",
    draft_hold: bool = True,
    preemptive_tts: bool = False,
    stages: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Replay each original call (``replay_call``, in-process) and set its
    per-turn response latency beside the live one. With ``per_turn_stages``
    a turn whose stage latencies the agent reported is predicted by a
    replay fed exactly those (constant LLM TTFT, TTS TTFB, STT delay),
    except a turn the recording answered with a tool call: the agent's
    measured decision-to-audio already holds its own tool call and filler,
    and the replay would run the recorded tool on top of it (a 1.8 s lookup
    predicted 2436 ms against 1070 ms live); such a turn is predicted with
    the plain figures and not marked fed. ``stages``: the agent's median
    stages, fed to every call's replay the same way (:func:`_fed_config`)."""
    from turnkit.replay.metrics import aggregate
    from turnkit.replay.simulator import ReplayConfig, replay_call

    base = ReplayConfig(
        llm_ttft_ms=llm,
        tts_ttfb_ms=tts,
        stt_delay_ms=stt,
        stt=stt_mode,  # type: ignore[arg-type]  # checked by the command
        timeout_s=timeout_s,
        # The example agent holds its ends for its speculation's first
        # token as it learns it live (FirstTokenObserver): so does the
        # prediction, given the LLM's first-token figure (see _fed_config).
        draft_hold=draft_hold,
        # Pipecat renders no speech before the commit (its speculation
        # holds the LLM's output): neither does the prediction, unless the
        # agent does (turnkit's own TTSProcessor).
        preemptive_tts=preemptive_tts,
    )
    if stages is not None:
        base = _fed_config(base, stages) or base
    live_scores, pred_scores, turns = [], [], []
    for r in results:
        if "score" not in r:
            continue
        live = r["score"]
        cache: dict[ReplayConfig, Any] = {base: asyncio.run(replay_call(r["rec"], detector, base))}
        pred = cache[base]
        tool_turns = {t.turn for t in r["rec"].tool_calls}
        live_scores.append(live)
        pred_scores.append(pred)
        for lt, pt in zip(live.turns, pred.turns, strict=False):
            st = r.get("stages", {}).get(lt.turn, {})
            fed = None
            cfg = None
            pred_of = pred
            if per_turn_stages and lt.turn not in tool_turns:
                cfg = _fed_config(base, st)
            if cfg is not None:
                if cfg not in cache:
                    cache[cfg] = asyncio.run(replay_call(r["rec"], detector, cfg))
                pt = cache[cfg].turns[lt.turn]
                pred_of = cache[cfg]
                fed = {k: round(v, 1) for k, v in st.items()}
            # Compared on the first audio after the turn's end even past the
            # missed-turn timeout (a slow agent is still compared).
            live_raw, pred_raw = _first_audio_ms(live, lt.turn), _first_audio_ms(pred_of, lt.turn)
            diff = None if live_raw is None or pred_raw is None else round(live_raw - pred_raw, 1)
            turns.append(
                {
                    "call": live.call,
                    "turn": lt.turn,
                    "end": round(lt.end, 3),
                    "live_ms": None if lt.response_ms is None else round(lt.response_ms, 1),
                    "predicted_ms": None if pt.response_ms is None else round(pt.response_ms, 1),
                    "live_first_audio_ms": live_raw,
                    "predicted_first_audio_ms": pred_raw,
                    "diff_ms": diff,
                    "live_missed": lt.missed,
                    "live_interrupted": lt.interrupted,
                    "missed_reason": r.get("missed", {}).get(lt.turn),
                    "predicted_missed": pt.missed,
                    "predicted_interrupted": pt.interrupted,
                    "live_agent_eot_ms": st.get("eot_delay_ms"),
                    # The agent's decision from the labelled end, the
                    # reference the prediction's eot_delay_ms is measured
                    # from (the agent's own eot_delay_ms counts from its
                    # VAD's speech end, which trailing breath can move).
                    "live_agent_decision_ms": None
                    if "decision_at_s" not in st
                    else round((st["decision_at_s"] - lt.end) * 1000, 1),
                    "predicted_eot_ms": None
                    if pt.eot_delay_ms is None
                    else round(pt.eot_delay_ms, 1),
                    "agent_stages_ms": st,
                    "tool_turn": lt.turn in tool_turns,
                    "fed_to_replay": fed,
                }
            )
    diffs = [t["diff_ms"] for t in turns if t["diff_ms"] is not None]
    abs_diffs = [abs(d) for d in diffs]
    return {
        "url": None,
        "detector": detector,
        "prediction_config": {
            "llm_ttft_ms": base.llm_ttft_ms,
            "tts_ttfb_ms": base.tts_ttfb_ms,
            "stt_delay_ms": base.stt_delay_ms,
            "stt": stt_mode,
            "draft_hold": base.draft_hold,
            "preemptive_tts": base.preemptive_tts,
            "eager": base.eager,
            "count_compute": base.count_compute,
        },
        "live": aggregate("live", live_scores),
        "predicted": aggregate(detector, pred_scores),
        "per_turn": turns,
        "diff_ms": _pcts(diffs),
        "abs_diff_ms": _pcts(abs_diffs),
        "calls": [
            {
                "path": r["path"],
                "live_path": r.get("live_path"),
                "failure": r["failure"],
            }
            for r in results
        ],
        "failed": sum(1 for r in results if r["failure"]),
        "_live_scores": live_scores,
        "_pred_scores": pred_scores,
    }


def _first_audio_ms(score: Any, turn: int) -> float | None:
    """Turn end to the first audio of a reply that answers it (decided at or
    after the end), however late: the response latency without the
    missed-turn timeout."""
    end = score.turns[turn].end
    firsts = [
        r["first_audio_at"]
        for r in score.replies
        if r["turn"] == turn and r["first_audio_at"] is not None and r["decision_at"] >= end - 1e-6
    ]
    return round((min(firsts) - end) * 1000, 1) if firsts else None


def _fed_config(base: Any, st: dict[str, float]) -> Any:
    """The replay config for one turn from the agent's measured stages.

    The replay's model is ``decision + compute + LLM TTFT + TTS TTFB``, its
    decision on the audio clock. The agent reports, for its reply to the
    turn: ``decision_lag_ms`` (its decision came out this long after the
    audio it decided on arrived: queueing and model time, which the replay
    calls compute) and ``decision_to_audio_ms`` (turn end to the reply's
    first TTS audio: waiting for a segmented STT's transcript, the LLM
    request and TTFT, sentence aggregation, the TTS). Fed: LLM TTFT = lag +
    decision-to-audio, TTS TTFB = 0, no separate compute (it is in the lag),
    and the STT's measured processing time as the transcription delay (the
    replay's detector then sees the words as late as the agent's did). What is left between live and predicted is then the
    detector's decision time (agent vs replay, on the same audio) and the
    transport. Without those figures, the plain ``llm_ttft_ms`` /
    ``tts_ttfb_ms`` and ``stt_ms`` are fed."""
    if "decision_to_audio_ms" in st:
        return base.model_copy(
            update={
                "llm_ttft_ms": f"{st.get('decision_lag_ms', 0.0) + st['decision_to_audio_ms']:.1f}",
                "tts_ttfb_ms": "0",
                # Not a first token: no hold for one (a held live decision
                # is later; the comparison takes each side's own delay out).
                "draft_hold": False,
                # Counted from the agent's decision, with its own draft's head
                # start already in it: a replay draft begun before the
                # replay's decision would count that head start twice (576
                # ms early on a turn the replay drafted).
                "eager": False,
                # The transcript reaches a text-reading detector this late.
                "stt_delay_ms": st.get("stt_ms", 0.0),
                "count_compute": "decision_lag_ms" not in st,
            }
        )
    if "llm_ttft_ms" in st and "tts_ttfb_ms" in st:
        return base.model_copy(
            update={
                "llm_ttft_ms": f"{st['llm_ttft_ms']:.1f}",
                "tts_ttfb_ms": f"{st['tts_ttfb_ms']:.1f}",
                "stt_delay_ms": st.get("stt_ms", base.stt_delay_ms),
            }
        )
    return None


def _jsonable(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if not k.startswith("_")}


def _print(report: dict[str, Any]) -> None:
    t = Table(title=f"live vs predicted ({report['detector']}), response latency per turn")
    for col in ("call", "turn", "end s", "live", "predicted", "live − predicted"):
        t.add_column(col, justify="left" if col == "call" else "right")

    def cell(ms: float | None, missed: bool, cut: bool) -> str:
        if ms is None:
            return "missed" + (" (cut off)" if cut else "") if missed else "—"
        return f"{ms:.0f} ms" + (" (cut off)" if cut else "")

    for row in report["per_turn"]:
        if row["missed_reason"]:
            err.print(
                f"{row['call']} turn {row['turn']}: missed: {row['missed_reason']}",
                highlight=False,
                soft_wrap=True,
            )
        t.add_row(
            row["call"],
            str(row["turn"]),
            f"{row['end']:.2f}",
            cell(row["live_ms"], row["live_missed"], row["live_interrupted"]),
            cell(row["predicted_ms"], row["predicted_missed"], row["predicted_interrupted"]),
            "—" if row["diff_ms"] is None else f"{row['diff_ms']:+.0f} ms",
        )
    out.print(t)
    s = Table(title="scored with the replay's metrics")
    for col in ("", "turns", "p50", "p95", "interrupted", "missed", "false barge-in", "recall"):
        s.add_column(col, justify="right")
    for name in ("live", "predicted"):
        a = report[name]
        fbi = [v for v in a["false_barge_in_rate"].values() if v is not None]
        s.add_row(
            name,
            str(a["turns"]),
            _fmt(a["response_ms"]["p50"], " ms"),
            _fmt(a["response_ms"]["p95"], " ms"),
            _fmt(a["interruption_rate"], pct=True),
            _fmt(a["missed_rate"], pct=True),
            _fmt(max(fbi) if fbi else None, pct=True),
            _fmt(a["barge_in_recall"], pct=True),
        )
    out.print(s)
    d = report["diff_ms"]
    out.print(
        f"live − predicted: median {_fmt(d['p50'], ' ms')}, p95 {_fmt(d['p95'], ' ms')} "
        f"over {d['n']} compared turns; prediction with {report['prediction_config']}; "
        f"{report['failed']} call(s) failed; {report['elapsed_s']} s"
    )
    st = report["agent_stages_ms"]
    if any(v["n"] for v in st.values()):
        out.print(
            "agent stages (its own figures): "
            + ", ".join(
                f"{k} p50 {_fmt(v['p50'])} p95 {_fmt(v['p95'])}" for k, v in st.items() if v["n"]
            )
        )


def register(app: typer.Typer) -> None:
    app.command("dial")(dial)
