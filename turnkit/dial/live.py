"""A live call measured, written and scored like a replayed one.

What the agent did is measured from the audio the caller heard
(:func:`agent_runs`: 20 ms frames above ``-45 dBFS``, gaps shorter than
``merge_gap_s`` joined unless the agent reported an interruption in them,
runs shorter than ``min_run_s`` dropped), because that is all a caller
knows (and the agent's interruption messages, which it also hears: a reply
begun 0.3 s after the one the caller cut off is another reply, not its
tail). Each run becomes a replay
:class:`~turnkit.replay.agent.Reply` whose decision and first audio are the
run's start (a live agent's decision is not observable on the line, so a
reply that starts playing inside a caller turn counts as a cutoff of it,
and its latency is the turn's ``end`` to the run's start), attributed to the
latest caller turn begun by then (the replay's rule, ``LabelPlanner``). A run
that ends within ``INTERRUPT_MATCH_S`` of an interruption message from the
agent was stopped by it (``interrupted``); otherwise it completed. The replies
are then scored by the replay's own :func:`~turnkit.replay.metrics.score_call`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from turnkit.audio.wav import to_pcm16
from turnkit.dial.caller import LiveCall
from turnkit.dial.transport import SEND_RATE
from turnkit.replay.agent import Reply
from turnkit.replay.metrics import CallScore, score_call
from turnkit.replay.recording import FORMAT, Recording, load_recording
from turnkit.replay.simulator import LabelPlanner

__all__ = ["agent_runs", "live_replies", "score_live", "write_live_recording"]

FRAME = 320  # 20 ms at 16 kHz
THRESHOLD_DBFS = -45.0
INTERRUPT_MATCH_S = 0.3


def agent_runs(
    audio: np.ndarray,
    rate: int = SEND_RATE,
    *,
    merge_gap_s: float = 0.5,
    min_run_s: float = 0.06,
    threshold_dbfs: float = THRESHOLD_DBFS,
    breaks: Sequence[float] = (),
) -> list[tuple[float, float]]:
    """Stretches of agent sound as ``(start, end)`` seconds. ``breaks``:
    times the agent reported its audio interrupted; a gap that holds one
    (from ``INTERRUPT_MATCH_S`` before the sound stopped) is never joined."""
    frame = round(rate * FRAME / SEND_RATE)
    n = len(audio) // frame
    if n == 0:
        return []
    blocks = audio[: n * frame].astype(np.float64).reshape(n, frame)
    rms = np.sqrt((blocks**2).mean(axis=1))
    loud = 20 * np.log10(np.maximum(rms, 1e-10)) > threshold_dbfs
    runs: list[list[float]] = []
    for i in np.flatnonzero(loud):
        s, e = i * frame / rate, (i + 1) * frame / rate
        if (
            runs
            and s - runs[-1][1] < merge_gap_s
            and not any(runs[-1][1] - INTERRUPT_MATCH_S <= t <= s for t in breaks)
        ):
            runs[-1][1] = e
        else:
            runs.append([s, e])
    return [(round(s, 3), round(e, 3)) for s, e in runs if e - s >= min_run_s]


def _runs(call: LiveCall) -> list[tuple[float, float]]:
    """The agent's runs on the call, split where it reported an interruption."""
    return agent_runs(call.agent, breaks=call.interruptions)


def live_replies(call: LiveCall) -> list[Reply]:
    """The agent's runs as replay replies (see the module docstring)."""
    planner = LabelPlanner(call.rec, 2.0)
    out: list[Reply] = []
    for i, (s, e) in enumerate(_runs(call)):
        stopped = any(abs(t - e) <= INTERRUPT_MATCH_S for t in call.interruptions)
        out.append(
            Reply(
                id=i,
                decision_at=s,
                compute_ms=0.0,
                latency_ms=0.0,
                audio_due=s,
                turn=planner.turn_for(s),
                first_audio_at=s,
                planned_end=e,
                stopped_at=e if stopped else None,
                stop_reason="interrupted" if stopped else "completed",
                reason="live",
            )
        )
    return out


def score_live(call: LiveCall, rec: Recording, *, timeout_s: float, grace_s: float) -> CallScore:
    """The live call scored against the original labels with the replay's
    metrics (``rec`` is the live recording, whose labels are the original's)."""
    score = score_call(
        rec,
        live_replies(call),
        timeout_s=timeout_s,
        grace_s=grace_s,
        wall_seconds=call.wall_s,
        llm_requests=0,
    )
    score.echo_reference = "live"
    return score


def _kept(message: dict[str, Any]) -> bool:
    kind = str(message.get("type", ""))
    return kind.startswith("turnkit") or kind == "bot-text"


def write_live_recording(call: LiveCall, folder: Path) -> Recording:
    """Write the live call as ``turnkit.recording/v1``: ``caller.wav`` as
    sent, ``agent.wav`` as heard, the original caller-side labels (those that
    fit in what was sent), and the live ``agent_turn`` runs. Returns it loaded
    (and so checked) by :func:`load_recording`."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    dur = len(call.caller) / SEND_RATE
    sf.write(folder / "caller.wav", call.caller, SEND_RATE, subtype="PCM_16")
    sf.write(
        folder / "agent.wav",
        to_pcm16(call.agent),
        SEND_RATE,
        subtype="PCM_16",
    )
    orig = call.rec.manifest
    events: list[dict[str, Any]] = [
        e.model_dump(exclude_none=True)
        for e in orig.events
        if e.type != "agent_turn" and e.end <= dur + 1e-6
    ]
    texts = [m.get("text", "") for m in call.messages if m.get("type") == "bot-text"]
    for k, (s, e) in enumerate(_runs(call)):
        events.append(
            {"type": "agent_turn", "start": s, "end": min(e, dur), "text": ""}
            | ({"text": texts[k]} if k < len(texts) else {})
        )
    events.sort(key=lambda e: (e["start"], e["type"]))
    manifest = {
        "format": FORMAT,
        "id": orig.id,
        "language": orig.language,
        "audio": {"caller": "caller.wav", "agent": "agent.wav"},
        "source": "turnkit dial",
        "tags": [*orig.tags, "live"],
        "events": events,
        "live": {
            "original": str(call.rec.folder),
            "url": call.url,
            "transport": call.transport,
            "failure": call.failure,
            "wall_s": round(call.wall_s, 3),
            "audio_chunks": call.chunks,
            "interruptions": call.interruptions,
            # turnkit's own messages (stage figures, reply texts); the
            # framework's chatter (RTVI events, per-token text) only counted.
            "agent_messages": [m for m in call.messages if _kept(m)],
            "other_agent_messages": sum(1 for m in call.messages if not _kept(m)),
            "agent_run_threshold_dbfs": THRESHOLD_DBFS,
        },
    }
    (folder / "call.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return load_recording(folder)


STAGE_KEYS = (
    "stt_ms",
    "llm_ttft_ms",
    "tts_ttfb_ms",
    "eot_delay_ms",
    "response_ms",
    "decision_to_token_ms",
    "token_to_audio_ms",
    "decision_at_s",
    "speech_end_s",
    "decision_lag_ms",
    "decision_to_audio_ms",
)
MATCH_S = 1.0


def turn_stages(call: LiveCall, replies: list[Reply]) -> dict[int, dict[str, float]]:
    """The agent's own stage figures per caller turn, from its
    ``turnkit-metrics`` messages (sent when it started speaking). A message
    that carries ``decision_at_s`` (the agent's turn-end decision on its
    audio clock, which is the caller's timeline: every frame arrives) goes to
    the caller turn begun last by then, the replay's rule; one without it, to
    the turn of the reply whose first audio is nearest (within ``MATCH_S``).
    The first message for a turn wins."""
    planner = LabelPlanner(call.rec, 2.0)
    out: dict[int, dict[str, float]] = {}
    for m in call.messages:
        if m.get("type") != "turnkit-metrics":
            continue
        turn: int | None = None
        if isinstance(m.get("decision_at_s"), int | float):
            turn = planner.turn_for(float(m["decision_at_s"]))
        else:
            near = [r for r in replies if r.first_audio_at is not None and r.turn is not None]
            best = min(near, key=lambda r: abs(r.first_audio_at - m["at"]), default=None)  # type: ignore[operator]
            if best is not None and abs(best.first_audio_at - m["at"]) <= MATCH_S:  # type: ignore[operator]
                turn = best.turn
        if turn is None:
            continue
        if turn in out:
            continue
        st = {k: float(m[k]) for k in STAGE_KEYS if isinstance(m.get(k), int | float)}
        _shared_clock(call, m, st)
        out[turn] = st
    return out


def _shared_clock(call: LiveCall, m: dict[str, Any], st: dict[str, float]) -> None:
    """With the agent on this host, its ``decision_mono`` / ``audio_out_mono``
    (the monotonic clock, shared by every process here) put its decision and
    its first written audio on the caller's timeline: the lag then includes
    the input transport, which the agent's own estimate cannot see. A remote
    agent's clock gives nonsense here (more than a minute off), and is left
    out."""
    dm, am, at = m.get("decision_mono"), m.get("audio_out_mono"), m.get("decision_at_s")
    if call.t0_monotonic is None or not all(isinstance(x, int | float) for x in (dm, am, at)):
        return
    decided = float(dm) - call.t0_monotonic  # type: ignore[arg-type]
    out = float(am) - call.t0_monotonic  # type: ignore[arg-type]
    lag = decided - float(at)  # type: ignore[arg-type]
    if not (-0.05 <= lag <= 60.0 and 0.0 <= out - decided <= 60.0):
        return
    st["decision_lag_ms"] = round(max(0.0, lag) * 1000, 1)
    st["decision_to_audio_ms"] = round((out - decided) * 1000, 1)
    st["shared_clock"] = 1.0


def explain_missed(
    call: LiveCall, rec: Recording, score: CallScore, timeout_s: float
) -> dict[int, str]:
    """Why each missed caller turn got no answer, in the caller's terms."""
    turns = rec.caller_turns
    runs = _runs(call)
    dur = len(call.caller) / SEND_RATE
    out: dict[int, str] = {}
    for ts in score.turns:
        if not ts.missed:
            continue
        i = ts.turn
        end = turns[i].end
        nxt = turns[i + 1].start if i + 1 < len(turns) else None
        inside = [s for s, _ in runs if turns[i].start <= s < end]
        later = [s for s, _ in runs if end <= s]
        stops = [t for t in call.interruptions if end <= t and (nxt is None or t <= nxt + 0.5)]
        # An agent turn that began before this caller turn and was still
        # playing when it began: the caller spoke over the agent, who did
        # not yield (its barge-in policy kept the floor, e.g. on "yes").
        over = [(s, e) for s, e in runs if s < turns[i].start < e]
        if call.cut_short and dur < end + timeout_s:
            out[i] = f"call ended early: {call.failure}"
        elif over and not [s for s in later if s - end <= timeout_s]:
            s, e = over[0]
            out[i] = (
                f"spoken over the agent: its audio from {s:.2f} s ran on to {e:.2f} s, "
                "over this turn, and no new reply followed in time"
            )
        elif inside and not later:
            out[i] = f"the agent spoke inside the turn (at {inside[0]:.2f} s), before its end"
        elif nxt is not None and nxt < end + timeout_s and not [s for s in later if s < nxt]:
            why = "; the agent reported an interruption of its reply" if stops else ""
            out[i] = (
                f"talked over: the caller's next turn began {1000 * (nxt - end):.0f} ms after "
                f"this one ended, before any agent audio{why}"
            )
        elif later and later[0] - end > timeout_s and (nxt is None or later[0] < nxt):
            out[i] = (
                f"answered too late: first agent audio {1000 * (later[0] - end):.0f} ms after the turn"
            )
        else:
            out[i] = f"no agent audio within {timeout_s:g} s"
    return out
