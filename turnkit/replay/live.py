"""Does a replay decide where the live agent did? For calls turnkit recorded.

A call recorded by turnkit's recorders (``TurnkitRecorder`` in Pipecat,
``record_session`` in LiveKit) keeps every turn end its live detector
decided: ``live.turn_events`` in ``call.json``, kind ``end``, with the
detector's spec and the time on the recording's timeline. Replaying that
call through the same detector runs the same policy object on the same
audio and words, so it should decide at the same moments. Where it does
not, the replay's figures for that detector do not describe what the live
agent did: the live host fed the detector other evidence (words without
their times, a transcript that came late, audio the recording does not
hold), or the replay's own evidence differs (a recogniser's words written
from the labels).

:func:`agreement` pairs the live decisions with the replay's in time order:
a pair is the earliest of each within :data:`MATCH_MS` of the other; what is
left is a decision only one of them took. Evidence: the decisions' times
and the detector spec each was taken by; a replay of another spec (or of a
call recorded without decisions) has nothing to compare.

:func:`live_reply_latencies_ms` reads how fast that host answered, commit
to first audio, so a replay can answer at the same speed
(``turnkit replay --latency-from-live``): at the replay's 350 + 150 ms model
a reply the live host had already playing is still silent when the caller
speaks again, and the caller's next words meet another state.

Example::

    live = live_decisions(rec, "fused")          # None: not recorded
    a = agreement(live, [d.at for d in agent.decisions])
    a.matched, a.live_only, a.replay_only, a.deltas_ms

The JSON figures (``live_agreement``) are :func:`turnkit.replay.metrics.agreement_row`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnkit.replay.recording import Recording

__all__ = [
    "COMMIT_KINDS",
    "MATCH_MS",
    "LiveAgreement",
    "agreement",
    "combine",
    "live_decisions",
    "live_reply_latencies_ms",
]

# A live decision and a replayed one this close are the same decision; a
# detector's decisions on one call are seconds apart (a turn each, a hold).
MATCH_MS = 500.0

# Turn events that say the host committed a caller turn to its LLM (LiveKit's
# user turn, recorded with its text; the end of Pipecat's user turn). A
# detector's own decision ("end") is not one: a host may not act on it
# (LiveKit ignores a commit while the agent talks through the caller's sound).
COMMIT_KINDS = frozenset({"user_turn_end"})


@dataclass
class LiveAgreement:
    """Live and replayed decisions of one detector on the same calls."""

    calls: int = 0
    live: int = 0  # decisions the live detector took
    replayed: int = 0  # decisions the replay took over the recorded audio
    deltas_ms: list[float] = field(default_factory=list)  # replay - live, per pair

    @property
    def matched(self) -> int:
        return len(self.deltas_ms)

    @property
    def live_only(self) -> int:
        return self.live - self.matched

    @property
    def replay_only(self) -> int:
        return self.replayed - self.matched


def _event_times(rec: Recording, keep: Callable[[dict[str, Any]], bool]) -> list[float] | None:
    """The times (recording timeline, s) of the live turn events ``keep``
    accepts, sorted; None when the recording holds no ``live.turn_events``.
    An entry without a number for its time is skipped."""
    live = getattr(rec.manifest, "live", None)
    events = live.get("turn_events") if isinstance(live, dict) else None
    if not isinstance(events, list):
        return None
    return sorted(
        float(e["at"])
        for e in events
        if isinstance(e, dict)
        and isinstance(e.get("at"), int | float)
        and not isinstance(e.get("at"), bool)
        and keep(e)
    )


def live_decisions(rec: Recording, detector: str) -> list[float] | None:
    """The times (recording timeline, s) of the turn ends the live host's
    ``detector`` decided, or None when the recording holds none of its
    decisions (not recorded by turnkit, or by another detector)."""
    times = _event_times(rec, lambda e: e.get("kind") == "end" and e.get("detector") == detector)
    return times or None


def live_reply_latencies_ms(rec: Recording) -> list[float]:
    """How long the live host took from each caller turn it committed to its
    reply's first audio: from a commit (``live.turn_events``, a kind in
    :data:`COMMIT_KINDS`) to the first ``agent_turn`` that starts after it
    and before the next commit, in ms; a commit with no such reply (cut
    before its audio, or the call ended) gives none. Empty for a call not
    recorded by a turnkit recorder. Evidence: the recording's own timeline,
    so it holds everything between the host's decision and its audio (STT
    finalisation, the LLM's first token, the TTS's first audio, transport)."""
    commits = _event_times(rec, lambda e: e.get("kind") in COMMIT_KINDS) or []
    starts = sorted(t.start for t in rec.agent_turns)
    out = []
    for i, at in enumerate(commits):
        until = commits[i + 1] if i + 1 < len(commits) else float("inf")
        first = next((s for s in starts if at <= s < until), None)
        if first is not None:
            out.append(round((first - at) * 1000.0, 1))
    return out


def agreement(
    live: Sequence[float], replayed: Sequence[float], match_ms: float = MATCH_MS
) -> LiveAgreement:
    """Pair ``live`` and ``replayed`` decision times (s) in time order (see
    the module docstring)."""
    a, b = sorted(live), sorted(replayed)
    out = LiveAgreement(calls=1, live=len(a), replayed=len(b))
    i = j = 0
    while i < len(a) and j < len(b):
        d = (b[j] - a[i]) * 1000.0
        if abs(d) <= match_ms:
            out.deltas_ms.append(round(d, 3))
            i += 1
            j += 1
        elif d < 0:
            j += 1  # the replay decided where the live detector did not
        else:
            i += 1  # the live detector decided where the replay did not
    return out


def combine(parts: Iterable[LiveAgreement | None]) -> LiveAgreement | None:
    """One detector's agreement over calls (None when no call had any)."""
    got = [p for p in parts if p is not None]
    if not got:
        return None
    out = LiveAgreement()
    for p in got:
        out.calls += p.calls
        out.live += p.live
        out.replayed += p.replayed
        out.deltas_ms += p.deltas_ms
    return out
