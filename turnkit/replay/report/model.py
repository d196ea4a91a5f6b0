"""Typed views of what the HTML report reads from a replay.

``turnkit replay`` produces plain dicts in the ``--json`` contract shape
(:func:`turnkit.replay.metrics.aggregate`, :func:`turnkit.replay.compare.paired_compare`,
:func:`turnkit.replay.sweep.budgets`, the failed-call lines) and one
:class:`~turnkit.replay.metrics.CallScore` per call and detector whose
``replies`` are dicts too. The report validates each of them once, here,
into the models below, and draws from typed fields only: a key the report
needs that is missing or of the wrong type fails there, as a ``ValueError``
naming the field, instead of deep inside a chart. Keys the report does not
draw are ignored.

Example::

    data = ReportData.build(results=results, comparisons=comparisons,
                            sweeps=sweeps, calls=calls, failed=failed)
    data.results[0].response_ms.p50
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from turnkit.replay.metrics import CallScore

__all__ = [
    "CallView",
    "Comparison",
    "FailedCall",
    "Interval",
    "ReplyMark",
    "ReportData",
    "ReportInputs",
    "Result",
    "Sweep",
    "SweepPoint",
]


class _View(BaseModel):
    """Read-only, and blind to keys the report does not draw."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Quantiles(_View):
    """A distribution's summary as the results carry it (ms or rates)."""

    p50: float | None = None
    p95: float | None = None
    mean: float | None = None


class HoldCutoff(_View):
    """False cutoffs at holds of one kind: ``cutoffs`` of ``holds``."""

    holds: int
    cutoffs: int
    rate: float | None = None


class FalseBargeInCount(_View):
    """Events of one kind that met the agent speaking, and how many stopped it."""

    stopped: int
    events: int


class TurnRow(_View):
    """One caller turn's row of ``per_turn``; the CDF reads its latency."""

    response_ms: float | None = None
    continued: bool = False  # missed, the caller went on by themselves (clerk silent)


class Result(_View):
    """One detector's aggregate over the replayed calls (``results[i]`` of
    the JSON): the figures the results table, the CDF and the operating
    point read."""

    detector: str
    calls: int | None = None
    turns: int = 0
    audio_seconds: float = 0.0
    response_ms: Quantiles
    eot_delay_ms: Quantiles = Quantiles()
    interruption_rate: float | None = None
    missed_rate: float | None = None
    false_barge_in_rate: dict[str, float | None] = Field(default_factory=dict)
    false_barge_in_counts: dict[str, FalseBargeInCount] = Field(default_factory=dict)
    barge_in_count: int | None = None
    barge_in_recall: float | None = None
    barge_in_stop_ms: Quantiles | None = None
    spurious_replies: int | None = None
    compute_ms_per_decision: Quantiles | None = None
    hold_cutoff_rate: dict[str, HoldCutoff | None] = Field(default_factory=dict)
    per_turn: list[TurnRow] = Field(default_factory=list)

    def answered_ms(self) -> list[float]:
        """Response latencies of the answered turns, sorted."""
        return sorted(t.response_ms for t in self.per_turn if t.response_ms is not None)

    def judged_turns(self) -> int:
        """Turns a reply was judged for: all of them (a turn the caller went
        on from before any reply, ``continued``, is a miss by the recording
        contract)."""
        return self.turns

    def operating_point(self) -> tuple[float, float] | None:
        """(mean end-of-turn delay in ms, false-cutoff rate over all holds),
        or None without holds or decided ends: where this detector, as
        configured, sits on the operating-point chart."""
        holds = [h for h in self.hold_cutoff_rate.values() if h is not None]
        n = sum(h.holds for h in holds)
        cut = sum(h.cutoffs for h in holds)
        eot = self.eot_delay_ms.mean
        if n == 0 or eot is None:
            return None
        return eot, cut / n


class Interval(_View):
    """A paired difference: point estimate and 95 % bootstrap interval."""

    estimate: float | None = None
    ci95: list[float | None] = Field(default_factory=lambda: [None, None])

    def bounds(self) -> tuple[float | None, float | None]:
        lo, hi = ([*self.ci95, None, None])[:2]
        return lo, hi


class Bootstrap(_View):
    """How the paired intervals were drawn: the number of bootstrap samples."""

    samples: int | str = "?"


class Comparison(_View):
    """One detector against the first one on the same turns
    (``comparisons[i]`` of the JSON)."""

    detector: str
    baseline: str = ""
    calls: int | str = "—"
    turns: int | str = "—"
    turns_answered_by_both: int | str = "—"
    median_response_diff_ms: Interval
    interruption_rate_diff: Interval
    missed_rate_diff: Interval
    bootstrap: Bootstrap = Bootstrap()


class SweepPoint(_View):
    """One grid value of a ``--sweep``: its spec and the figures there."""

    value: float | int | str | None = None
    spec: str | None = None
    holds: int | str = "—"
    hold_cutoff_rate: float | None = None
    eot_mean_ms: float | None = None
    eot_p50_ms: float | None = None
    interruption_rate: float | None = None
    response_p50_ms: float | None = None

    def plotted(self) -> tuple[float, float] | None:
        """(eot mean ms, false-cutoff rate) where both are known."""
        if self.eot_mean_ms is None or self.hold_cutoff_rate is None:
            return None
        return self.eot_mean_ms, self.hold_cutoff_rate


class Sweep(_View):
    """One detector swept across one parameter (``sweeps[i]`` of the JSON),
    with the budgets read off its curve."""

    detector: str
    param: str = ""
    points: list[SweepPoint] = Field(default_factory=list)
    cutoff_at_300ms: float | None = None
    cutoff_at_600ms: float | None = None
    latency_at_5pct_ms: float | None = None
    latency_at_10pct_ms: float | None = None


class FailedCall(_View):
    """A recording that could not be replayed: where, and why."""

    path: str = ""
    error: str = ""


class ReplyMark(_View):
    """One end-of-turn decision in a replayed call and the agent audio it
    led to (``CallScore.replies[i]``): what a detector lane draws."""

    decision_at: float
    compute_ms: float | None = None
    first_audio_at: float | None = None
    stopped_at: float | None = None
    planned_end: float | None = None
    stop_reason: str | None = None
    turn: int | None = None
    cutoff: bool = False

    @property
    def audio_end(self) -> float | None:
        """Where the reply's audio ended: stopped, else as planned."""
        return self.stopped_at if self.stopped_at is not None else self.planned_end

    def latest(self) -> float:
        """The last moment this reply touches (for the timeline's extent)."""
        times = (self.decision_at, self.first_audio_at, self.stopped_at, self.planned_end)
        return max(t for t in times if t is not None)


class CallView(BaseModel):
    """One call as one detector replayed it: its score (per-call table) and
    its replies, typed (timeline lane)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    score: CallScore
    replies: list[ReplyMark]

    @classmethod
    def of(cls, score: CallScore) -> CallView:
        return cls(score=score, replies=[ReplyMark.model_validate(r) for r in score.replies])


class ReportInputs(TypedDict):
    """What ``turnkit replay`` hands the report, as it holds it: the
    results, comparisons and sweeps as JSON-shaped dicts (or their typed
    views), the scored calls per detector spec, and the failed recordings."""

    results: Sequence[Mapping[str, Any] | Result]
    comparisons: Sequence[Mapping[str, Any] | Comparison]
    sweeps: Sequence[Mapping[str, Any] | Sweep]
    calls: Mapping[str, Sequence[CallScore]]
    failed: Sequence[Mapping[str, Any] | FailedCall]


class ReportData(BaseModel):
    """Everything one report draws, typed: the detectors' results (in the
    order given: the first is the comparisons' baseline), the paired
    comparisons, the sweeps, every replayed call per detector spec, and the
    recordings that failed."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    results: list[Result]
    comparisons: list[Comparison]
    sweeps: list[Sweep]
    calls: dict[str, list[CallView]]
    failed: list[FailedCall]

    @classmethod
    def build(cls, **inputs: Unpack[ReportInputs]) -> ReportData:
        """Validate the replay's dicts (``ValueError`` naming the field when
        one the report needs is missing or mistyped)."""
        return cls(
            results=[Result.model_validate(r) for r in inputs["results"]],
            comparisons=[Comparison.model_validate(c) for c in inputs["comparisons"]],
            sweeps=[Sweep.model_validate(s) for s in inputs["sweeps"]],
            calls={
                spec: [CallView.of(s) for s in scores] for spec, scores in inputs["calls"].items()
            },
            failed=[FailedCall.model_validate(f) for f in inputs["failed"]],
        )
