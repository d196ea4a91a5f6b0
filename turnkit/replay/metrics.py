"""Scoring a replayed call against its labels, exactly as RECORDING_FORMAT.md
defines the metrics, and aggregating calls into a detector's result.

Per caller turn: response latency (turn ``end`` → the agent's first audio for
it), false cutoffs (an end-of-turn commit before ``end``, whether or not its
audio got out), missed (no audio for it within the timeout). Per
backchannel/echo/noise event that meets the agent speaking: whether the agent
stopped (a false barge-in). Per caller turn that starts while the agent
speaks (a real barge-in): whether, and how fast, the agent stopped.

A barge-in *pause* that the agent resumed from (a false interruption, as live
hosts resume) counts as a stop, at the moment its audio paused, unless the
audio gap was under :data:`RESUMED_GAP_S` (150 ms: too short to be heard as
the agent stopping). A paused barge-in that was confirmed stopped the agent
when it paused. (:func:`stop_times`)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from turnkit.barge_in.controller import HEARD_GAP_S
from turnkit.replay.agent import Reply
from turnkit.replay.live import LiveAgreement, combine
from turnkit.replay.recording import Recording

if TYPE_CHECKING:
    from rich.table import Table

    from turnkit.drafting.tools import ToolGate
    from turnkit.fillers.scheduler import FillerScheduler
    from turnkit.replay.engine import ToolExecution, ToolLog

__all__ = [
    "SUBSET_TAGS",
    "CallScore",
    "EventScore",
    "ToolFigures",
    "TurnScore",
    "aggregate",
    "score_call",
    "subset_figures",
    "subset_table",
]

EPS = 1e-6
MIN_HOLD_S = 0.1
EVENT_KINDS = ("backchannel", "echo", "noise")


@dataclass
class TurnScore:
    """How one caller turn went in a replay: the response latency (turn end
    to agent audio), whether a decision cut it off (and at which holds), was
    missed, and, for a turn begun while the agent spoke, whether and how fast
    the agent stopped."""

    call: str
    turn: int
    start: float
    end: float
    response_ms: float | None
    interrupted: bool
    missed: bool
    cutoffs: int = 0
    eot_delay_ms: float | None = None
    cut_hold_kinds: list[str] = field(default_factory=list)
    barge_in: bool = False  # started while the agent spoke
    barge_in_stopped: bool = False
    stop_latency_ms: float | None = None
    # Missed, and the caller's next turn began within the timeout with the
    # recorded clerk silent in between (back-to-back turns): still a miss,
    # counted apart so that such structural misses can be told from a
    # caller left waiting.
    continued: bool = False

    def row(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "turn": self.turn,
            "end": round(self.end, 3),
            "response_ms": None if self.response_ms is None else round(self.response_ms, 1),
            "interrupted": self.interrupted,
            "missed": self.missed,
            "cutoffs": self.cutoffs,
            "eot_delay_ms": None if self.eot_delay_ms is None else round(self.eot_delay_ms, 1),
            "continued": self.continued,
        }


@dataclass
class EventScore:
    """One backchannel, echo or noise event of a replayed call: whether it
    met the agent speaking and made it stop (a false barge-in) or only
    hold briefly."""

    kind: str
    start: float
    end: float
    agent_speaking: bool  # the event met the agent speaking
    stopped: bool  # ... and the agent stopped for it (a false barge-in)
    # ... and the agent held its audio for it under RESUMED_GAP_S, then went on
    # (not a stop, but a hiccup the caller may hear)
    brief_hold: bool = False


@dataclass
class CallScore:
    """One call replayed through one detector, scored: per-turn and
    per-event scores, hold cutoffs by kind, decisions and their compute,
    spurious replies, drafts, the replies' timeline and tool figures; what
    :func:`aggregate` and the report read."""

    call: str
    audio_seconds: float
    wall_seconds: float
    turns: list[TurnScore]
    events: list[EventScore]
    holds: dict[str, list[int]]  # kind -> [holds, holds with a cutoff]
    decisions: int
    compute_ms: list[float]
    spurious_replies: int
    llm_requests: int = 0
    drafts: dict[str, int] = field(
        default_factory=lambda: {"started": 0, "used": 0, "cancelled": 0}
    )
    path: str = ""
    # A live engine's figures when --llm-url was used: requests, errors,
    # measured TTFTs (ms).
    live_llm: dict[str, Any] | None = None
    # Turn ends the agent talked through (speech the barge-in policy kept it
    # talking over: an acknowledgement or echo), not answered.
    ignored_decisions: int = 0
    # The agent's timeline, for reports: one dict per reply (decision,
    # first audio, stop, reason, the turn it answers).
    replies: list[dict[str, Any]] = field(default_factory=list)
    # The echo filter's reference: "agent.wav", "missing" (transcript check
    # only) or "off" (filters off); "" from older results.
    echo_reference: str = ""
    # The replay's decisions against the live detector's, where the call was
    # recorded live with them (turnkit.replay.live).
    live_agreement: LiveAgreement | None = None
    # The live host's commit-to-audio latency (ms) the replay answered at
    # (ReplayConfig.latency_from_live); None: the latency model's.
    live_latency_ms: float | None = None
    # The call's manifest tags (subsets such as "natural", "stress", "telephone").
    tags: list[str] = field(default_factory=list)
    # Tool calls (a call with ``tool_call`` events): see ToolFigures.figures.
    tools: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CallScore:
        d = dict(d)
        d["turns"] = [TurnScore(**t) for t in d["turns"]]
        d["events"] = [EventScore(**e) for e in d["events"]]
        if isinstance(d.get("live_agreement"), dict):
            d["live_agreement"] = LiveAgreement(**d["live_agreement"])
        return cls(**d)


LIVE_COUNTS = ("tokens", "aborted", "drafts_cancelled", "drafts_aborted")


def _live(calls: list[CallScore]) -> dict[str, Any] | None:
    live = [c.live_llm for c in calls if c.live_llm is not None]
    if not live:
        return None
    ttft = [x for d in live for x in d.get("ttft_ms", [])]
    return {
        "requests": sum(d.get("requests", 0) for d in live),
        "errors": sum(d.get("errors", 0) for d in live),
        "ttft_ms": _pct(ttft, 50, 95),
        # the engine's reply tokens, streams aborted on it, per-reply rows
        **{k: sum(d.get(k, 0) for d in live) for k in LIVE_COUNTS},
        "turns": [t for d in live for t in d.get("turns", [])],
    }


class ToolFigures:
    """What a replayed call's tools did, read from the gate, the backend's
    execution log and the filler scheduler (see :meth:`figures`)."""

    def __init__(
        self,
        gate: ToolGate,
        log: ToolLog,
        fillers: FillerScheduler,
        turn_ends: list[float] | None = None,
    ) -> None:
        self.gate = gate
        self.log = log
        self.fillers = fillers
        # the labelled end of each caller turn (what writes_early reads)
        self.turn_ends = list(turn_ends or [])

    def figures(self) -> dict[str, Any]:
        """``calls``: tool calls the engine made through the gate;
        ``reads_in_drafts``: reads run inside an open eager draft;
        ``writes``: write executions (the backend ran); ``writes_repeated``:
        executions of a write whose idempotency key had run before (must be
        0: each write once); ``writes_from_discarded_drafts``: executions
        of a write a discarded draft asked for that no confirmed turn asked
        for (must be 0); ``filler_ack_ms``: tool start -> first filler
        audio, per filler played; ``filler_late_ms``: threshold -> first
        filler audio; ``executed_writes``: name and start of each write run."""
        asked = {k for t in self.gate.recent_turns for k in t.write_keys}
        writes = self.log.writes
        keys = [w.key for w in writes]
        recs = [r for r in self.fillers.records if r.first_audio_at is not None]
        return {
            # the writes that ran: name and when (the backend's own log)
            "executed_writes": [
                {"name": w.name, "at": round(w.started_at, 4), "turn": w.turn} for w in writes
            ],
            "calls": self.gate.calls,
            "reads_in_drafts": self.gate.draft_reads,
            "writes": len(writes),
            "writes_repeated": len(keys) - len(set(keys)),
            "writes_from_discarded_drafts": sum(
                1 for k in keys if k in self.gate.discarded_write_keys and k not in asked
            ),
            # writes discarded drafts asked for (held back, never run)
            "draft_writes_discarded": self.gate.discarded_writes,
            "writes_deferred": self.gate.deferred_writes,
            "writes_early": sum(1 for w in writes if self._early(w)),
            "writes_withdrawn": self.gate.withdrawn_writes,
            "filler_ack_ms": [round(1000 * (r.ack_latency_s or 0.0), 3) for r in recs],
            "filler_late_ms": [round(1000 * (r.filler_delay_s or 0.0), 3) for r in recs],
        }

    def _early(self, w: ToolExecution) -> bool:
        ends = self.turn_ends
        return w.turn is not None and 0 <= w.turn < len(ends) and w.started_at < ends[w.turn]


def _tools(calls: list[CallScore]) -> dict[str, Any]:
    with_tools = [c.tools for c in calls if c.tools is not None]
    out: dict[str, Any] = {
        k: sum(int(t.get(k, 0)) for t in with_tools)
        for k in (
            "calls",
            "reads_in_drafts",
            "writes",
            "writes_from_discarded_drafts",
            "draft_writes_discarded",
            "writes_early",
            "writes_withdrawn",
        )
    }
    acks = [x for t in with_tools for x in t.get("filler_ack_ms", [])]
    out["filler_ack_ms"] = {k: v for k, v in _pct(acks, 50, 95).items() if k != "mean"}
    out["fillers"] = len(acks)
    out["calls_with_tools"] = len(with_tools)
    return out


# A barge-in pause the agent resumed from counts as a stop unless its audio
# gap was shorter than this (a hold that short is not heard as stopping):
# the gap the barge-in controller's early hold is kept under.
RESUMED_GAP_S = HEARD_GAP_S


def stop_times(r: Reply) -> list[float]:
    """When barge-ins stopped the reply's audio, as the caller heard it: a
    stop ("interrupted": a confirmed pause's time is when its audio
    stopped) and every pause it resumed from after a gap of at least
    :data:`RESUMED_GAP_S`."""
    out = [
        float(p0)
        for p0, p1 in r.pauses
        if p0 is not None and p1 is not None and p1 - p0 >= RESUMED_GAP_S - EPS
    ]
    if r.stop_reason == "interrupted" and r.stopped_at is not None:
        out.append(r.stopped_at)
    return sorted(out)


def _play_end(r: Reply) -> float:
    if r.stopped_at is not None:
        return r.stopped_at
    return r.planned_end if r.planned_end is not None else r.first_audio_at or 0.0


def score_call(
    rec: Recording,
    replies: list[Reply],
    *,
    timeout_s: float,
    grace_s: float,
    wall_seconds: float = 0.0,
    llm_requests: int | None = None,
    drafts: dict[str, int] | None = None,
    live_llm: dict[str, Any] | None = None,
    ignored_decisions: int = 0,
    tools: dict[str, Any] | None = None,
) -> CallScore:
    """Score one replayed call. ``replies`` carry the turn each answers
    (``Reply.turn``, attributed by the labels at decision time)."""
    turns_out: list[TurnScore] = []
    used: set[int] = set()
    hold_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    audible = [r for r in replies if r.audible]

    caller_turns = rec.caller_turns
    agent_turns = rec.agent_turns
    for i, turn in enumerate(caller_turns):
        mine = [r for r in replies if r.turn == i]
        cut = [r for r in mine if r.decision_at < turn.end - EPS]
        used.update(r.id for r in cut)
        # Published end-of-turn benchmarks count every pause of 100 ms or
        # more as a hold; shorter gaps are part of the speech.
        gaps = [g for g in turn.gaps() if g[1] - g[0] >= MIN_HOLD_S]
        cut_kinds: list[str] = []
        for g in gaps:
            hold_counts[g[2]][0] += 1
        hit_gaps: set[int] = set()
        for r in cut:
            # The hold a cutoff belongs to: the last one begun by then (a
            # decision can land just after speech resumes, before the VAD
            # confirms it).
            idx = max((k for k, g in enumerate(gaps) if g[0] <= r.decision_at + EPS), default=None)
            if idx is not None:
                hit_gaps.add(idx)
        for k in sorted(hit_gaps):
            hold_counts[gaps[k][2]][1] += 1
            cut_kinds.append(gaps[k][2])

        answer = next((r for r in mine if r.decision_at >= turn.end - EPS and r.audible), None)
        response_ms = eot_ms = None
        missed = True
        continued = False
        if answer is not None:
            used.add(answer.id)
            assert answer.first_audio_at is not None
            latency = answer.first_audio_at - turn.end
            if latency <= timeout_s + EPS:
                missed = False
                response_ms = latency * 1000
                eot_ms = (answer.decision_at - turn.end) * 1000
        nxt = caller_turns[i + 1].start if i + 1 < len(caller_turns) else None
        if (
            missed
            and nxt is not None
            and nxt < turn.end + timeout_s - EPS
            and not any(turn.start < a.start < nxt for a in agent_turns)
        ):
            # The caller spoke again, of their own accord (the recorded
            # clerk said nothing in between), before the timeout ran out.
            # Still a miss by the recording contract ("no response within
            # the replay's timeout after end"); flagged so that a report can
            # say how many misses are such back-to-back turns (a 0.3 s gap
            # no agent could answer) rather than callers left waiting.
            continued = True

        score = TurnScore(
            call=rec.id,
            turn=i,
            start=turn.start,
            end=turn.end,
            response_ms=response_ms,
            interrupted=bool(cut),
            missed=missed,
            cutoffs=len(cut),
            eot_delay_ms=eot_ms,
            cut_hold_kinds=cut_kinds,
            continued=continued,
        )
        # A real barge-in: the turn starts while a reply is playing.
        talking = [
            r
            for r in audible
            if r.first_audio_at <= turn.start + EPS and _play_end(r) > turn.start + EPS
        ]  # type: ignore[operator]
        if talking:
            score.barge_in = True
            stops = [
                t
                for r in talking
                for t in stop_times(r)
                if turn.start - EPS <= t <= turn.end + grace_s
            ]
            if stops:
                score.barge_in_stopped = True
                score.stop_latency_ms = (min(stops) - turn.start) * 1000
        turns_out.append(score)

    events_out: list[EventScore] = []
    # Each stop is blamed on the labelled sound that began last before it
    # (within its extent + grace): a barge-in inside a long echo stretch,
    # or a backchannel inside it, is not the echo's false barge-in.
    labelled = [
        (ev.start, ev.end, id(ev))
        for ev in [*rec.caller_turns, *rec.backchannels, *rec.echoes, *rec.noises]
    ]
    def blame(times: Iterable[float]) -> set[int]:
        out: set[int] = set()
        for t in times:
            cands = [x for x in labelled if x[0] - EPS <= t <= x[1] + grace_s]
            if cands:
                out.add(max(cands, key=lambda x: x[0])[2])
        return out

    blamed = blame(t for r in audible for t in stop_times(r))
    held = blame(
        float(p0)
        for r in audible
        for p0, p1 in r.pauses
        if p0 is not None and p1 is not None and p1 - p0 < RESUMED_GAP_S - EPS
    )
    for kind, evs in (
        ("backchannel", rec.backchannels),
        ("echo", rec.echoes),
        ("noise", rec.noises),
    ):
        for ev in evs:
            meets = [r for r in audible if r.first_audio_at < ev.end and _play_end(r) > ev.start]  # type: ignore[operator]
            stopped = id(ev) in blamed
            events_out.append(
                EventScore(
                    kind,
                    ev.start,
                    ev.end,
                    bool(meets),
                    bool(meets) and stopped,
                    brief_hold=bool(meets) and not stopped and id(ev) in held,
                )
            )

    spurious = sum(1 for r in audible if r.id not in used)
    return CallScore(
        call=rec.id,
        audio_seconds=rec.duration,
        wall_seconds=wall_seconds,
        turns=turns_out,
        events=events_out,
        holds={k: list(v) for k, v in sorted(hold_counts.items())},
        decisions=len(replies),
        compute_ms=[r.compute_ms for r in replies],
        spurious_replies=spurious,
        llm_requests=len(replies) if llm_requests is None else llm_requests,
        drafts=drafts or {"started": 0, "used": 0, "cancelled": 0},
        path=str(rec.folder),
        tags=list(rec.manifest.tags),
        live_llm=live_llm,
        ignored_decisions=ignored_decisions,
        tools=tools,
        replies=[
            {
                "decision_at": round(r.decision_at, 4),
                "compute_ms": round(r.compute_ms, 3),
                "first_audio_at": None if r.first_audio_at is None else round(r.first_audio_at, 4),
                "stopped_at": None if r.stopped_at is None else round(r.stopped_at, 4),
                "planned_end": None if r.planned_end is None else round(r.planned_end, 4),
                "stop_reason": r.stop_reason,
                # barge-in holds: [paused at, resumed at (None: confirmed)]
                "pauses": [
                    [round(float(a or 0.0), 4), None if b is None else round(b, 4)]
                    for a, b in r.pauses
                ],
                "turn": r.turn,
                "cutoff": r.turn is not None and r.decision_at < rec.caller_turns[r.turn].end - EPS,
                "reason": r.reason,
                "drafted": r.drafted,
                "saved_ms": round(r.saved_ms, 3),
                # words the caller heard of a stopped reply / words in it
                "heard_words": r.heard_words,
                "words": r.words,
                "filler": r.filler,
            }
            for r in replies
        ],
    )


def _pct(values: list[float], *qs: int) -> dict[str, float | None]:
    if not values:
        return {f"p{q}": None for q in qs} | {"mean": None}
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"p{q}": round(float(np.percentile(arr, q)), 1) for q in qs}
    out["mean"] = round(float(arr.mean()), 1)
    return out


def _rate(num: int, den: int) -> float | None:
    return None if den == 0 else round(num / den, 4)


def aggregate(detector: str, calls: list[CallScore]) -> dict[str, Any]:
    """One detector's result over calls, in the ``turnkit replay --json``
    contract shape (plus extra keys)."""
    turns = [t for c in calls for t in c.turns]
    n = len(turns)
    responded = [t.response_ms for t in turns if t.response_ms is not None]
    eot = [t.eot_delay_ms for t in turns if t.eot_delay_ms is not None]
    fbi: dict[str, float | None] = {}
    fbi_counts: dict[str, dict[str, int]] = {}
    brief: dict[str, int] = {}
    for kind in EVENT_KINDS:
        evs = [e for c in calls for e in c.events if e.kind == kind and e.agent_speaking]
        stopped = sum(e.stopped for e in evs)
        fbi[kind] = _rate(stopped, len(evs))
        fbi_counts[kind] = {"events": len(evs), "stopped": stopped}
        brief[kind] = sum(e.brief_hold for e in evs)
    barge = [t for t in turns if t.barge_in]
    stop_ms = [t.stop_latency_ms for t in barge if t.stop_latency_ms is not None]
    holds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in calls:
        for k, (h, cut) in c.holds.items():
            holds[k][0] += h
            holds[k][1] += cut
    compute = [x for c in calls for x in c.compute_ms]
    return {
        "detector": detector,
        "calls": len(calls),
        "turns": n,
        "response_ms": _pct(responded, 50, 95),
        "interruption_rate": _rate(sum(t.interrupted for t in turns), n),
        "missed_rate": _rate(sum(t.missed for t in turns), n),
        # Of the missed turns, those the caller went on from by themselves
        # (next turn within the timeout, the recorded clerk silent too).
        "missed_caller_went_on": sum(t.continued for t in turns),
        "eot_delay_ms": _pct(eot, 50, 95),
        "false_barge_in_rate": fbi,
        "false_barge_in_counts": fbi_counts,
        # Events the agent held its audio for under 150 ms, then went on
        # (not stops: hiccups the caller may hear).
        "barge_in_brief_holds": brief,
        "barge_in_recall": _rate(sum(t.barge_in_stopped for t in barge), len(barge)),
        "barge_in_count": len(barge),
        "barge_in_stop_ms": _pct(stop_ms, 50, 95),
        "hold_cutoff_rate": {
            k: {"holds": h, "cutoffs": cut, "rate": _rate(cut, h)}
            for k, (h, cut) in sorted(holds.items())
        },
        "drafts": {
            k: sum(c.drafts.get(k, 0) for c in calls) for k in ("started", "used", "cancelled")
        },
        "llm_requests_per_turn": None
        if n == 0
        else round(sum(c.llm_requests for c in calls) / n, 3),
        # LLM time a confirmed draft hid: how much earlier its first token
        # was there than a fresh request's would have been.
        "draft_saved_ms": _pct(
            [r["saved_ms"] for c in calls for r in c.replies if r.get("drafted")], 50, 95
        ),
        "llm_live": _live(calls),
        "tools": _tools(calls),
        "decisions": sum(c.decisions for c in calls),
        # Decisions a detector fell back on (e.g. llm-eou's engine timed out).
        "fallback_decisions": sum(
            1 for c in calls for r in c.replies if r.get("reason", "").startswith("fallback")
        ),
        "spurious_replies": sum(c.spurious_replies for c in calls),
        "ignored_decisions": sum(c.ignored_decisions for c in calls),
        "echo_reference_missing": sorted(c.call for c in calls if c.echo_reference == "missing"),
        # Calls recorded live with this detector's decisions: where the replay
        # decided as the live agent did (None: no such call).
        "live_agreement": _live_row(calls),
        # Calls answered at their live host's measured latency (--latency-from-live):
        # how many, and those latencies (ms).
        "live_latency_ms": _live_latency_row(calls),
        "compute_ms_per_decision": _pct(compute, 50, 95),
        "audio_seconds": round(sum(c.audio_seconds for c in calls), 3),
        "wall_seconds": round(sum(c.wall_seconds for c in calls), 3),
        "per_turn": [t.row() for t in turns],
        "subsets": subset_figures(turns, {c.call: c.tags for c in calls}),
    }


def _live_latency_row(calls: Sequence[CallScore]) -> dict[str, Any] | None:
    got = [c.live_latency_ms for c in calls if c.live_latency_ms is not None]
    return None if not got else {"calls": len(got), **_pct(got, 50, 95)}


def _live_row(calls: Sequence[CallScore]) -> dict[str, Any] | None:
    both = combine(c.live_agreement for c in calls)
    return None if both is None else agreement_row(both)


def agreement_row(a: LiveAgreement) -> dict[str, Any]:
    """The ``live_agreement`` figures of ``turnkit replay --json``."""
    gaps = [abs(d) for d in a.deltas_ms]
    return {
        "calls": a.calls,
        "live_decisions": a.live,
        "replayed_decisions": a.replayed,
        "matched": a.matched,
        "live_only": a.live_only,
        "replay_only": a.replay_only,
        "abs_delta_ms": _pct(gaps, 50, 95) | {"max": round(max(gaps), 1) if gaps else None},
        # within one 32 ms frame: the same decision on the same frame, or the next
        "within_frame": sum(g <= 32.0 + 1e-6 for g in gaps),
    }


# Call tags that name a subset of the demo corpus, reported apart.
SUBSET_TAGS = ("natural", "stress", "telephone")


def _field(turn: TurnScore | Mapping[str, Any], name: str) -> Any:
    return turn[name] if isinstance(turn, Mapping) else getattr(turn, name)


def subset_figures(
    turns: Iterable[TurnScore | Mapping[str, Any]],
    tags_by_call: Mapping[str, Sequence[str]],
    subset_tags: Sequence[str] = SUBSET_TAGS,
) -> dict[str, dict[str, Any]]:
    """Headline figures per subset of calls: for each tag in ``subset_tags``
    carried by at least one call, the turns of the calls with that tag and
    their response latency (p50/p95), interruption rate and missed rate.

    ``turns`` are per-turn records (:class:`TurnScore`, or the ``per_turn``
    rows of a result: ``call``, ``response_ms``, ``interrupted``, ``missed``);
    ``tags_by_call`` maps a call id to its manifest tags."""
    turns = list(turns)
    out: dict[str, dict[str, Any]] = {}
    for tag in subset_tags:
        sel = [t for t in turns if tag in tags_by_call.get(_field(t, "call"), ())]
        if not sel:
            continue
        n = len(sel)
        responded = [_field(t, "response_ms") for t in sel]
        out[tag] = {
            "calls": len({_field(t, "call") for t in sel}),
            "turns": n,
            "response_ms": _pct([r for r in responded if r is not None], 50, 95),
            "interruption_rate": _rate(sum(bool(_field(t, "interrupted")) for t in sel), n),
            "missed_rate": _rate(sum(bool(_field(t, "missed")) for t in sel), n),
        }
    return out


def subset_table(results: Sequence[Mapping[str, Any]]) -> Table | None:
    """A rich table of each result's ``subsets`` (one row per detector and
    subset), or None where no call carries a subset tag."""
    rows = [(r, tag, f) for r in results for tag, f in (r.get("subsets") or {}).items()]
    if not rows:
        return None
    from rich.markup import escape
    from rich.table import Table

    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v:.0f} ms"

    def pc(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.1f}%"

    table = Table(title="per subset (call tags)", title_justify="left")
    for col in ("detector", "subset", "calls", "turns", "resp p50", "resp p95"):
        table.add_column(col, justify="left" if col in ("detector", "subset") else "right")
    table.add_column("interrupt", justify="right")
    table.add_column("missed", justify="right")
    for r, tag, f in rows:
        resp = f.get("response_ms") or {}
        table.add_row(
            escape(str(r.get("detector", ""))),  # a spec's [..] is not rich markup
            escape(tag),
            str(f.get("calls", "")),
            str(f.get("turns", "")),
            ms(resp.get("p50")),
            ms(resp.get("p95")),
            pc(f.get("interruption_rate")),
            pc(f.get("missed_rate")),
        )
    return table
