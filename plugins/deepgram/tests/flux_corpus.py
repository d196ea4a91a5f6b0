"""Recorded-shaped Flux streams built from the demo corpus's real timings.

Each caller turn of ``recordings/*/call.json`` becomes the ``TurnInfo``
messages Flux sends for it, timed from the turn's measured word times and
holds, and serialised with the SDK's own models (``ListenV2TurnInfo``):

* ``StartOfTurn`` at the end of the first word, then an ``Update`` every
  240 ms with the words spoken so far;
* at every hold of at least ``EAGER_HOLD_S``: ``EagerEndOfTurn`` 300 ms into
  it with the confidence of its kind (``KIND_CONF``), and ``TurnResumed``
  100 ms after speech resumes;
* at the turn's end: ``EagerEndOfTurn`` 250 ms after it (``END_EAGER_CONF``)
  and ``EndOfTurn`` 500 ms after it (``END_CONF``, trigger ``model``).

``received_at`` is the audio time the message describes (zero network delay).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgram.listen.v2.types import ListenV2Connected, ListenV2TurnInfo

ROOT = Path(__file__).resolve().parents[3]
RECORDINGS = ROOT / "recordings"

EAGER_HOLD_S = 0.4
KIND_CONF = {"mid-sentence": 0.40, "comma": 0.45, "between-sentences": 0.62}
END_EAGER_CONF = 0.66
END_CONF = 0.82
SPEAKING_CONF = 0.05
UPDATE_S = 0.24


@dataclass(slots=True)
class TurnPlan:
    """What a turn's stream holds, for the tests' expectations."""

    text: str
    eager_holds: list[str]  # kinds of the holds that got an EagerEndOfTurn
    start: float
    end: float


def caller_turns(call_id: str) -> list[dict[str, Any]]:
    data = json.loads((RECORDINGS / call_id / "call.json").read_text())
    return [e for e in data["events"] if e["type"] == "caller_turn" and e.get("words")]


def all_call_ids() -> list[str]:
    return sorted(p.parent.name for p in RECORDINGS.glob("*/call.json"))


def _turn_messages(idx: int, turn: dict[str, Any], seq: list[int]) -> list[dict[str, Any]]:
    words = turn["words"]
    t0 = float(turn["start"])
    end = float(turn["end"])
    holds = [h for h in turn.get("holds", []) if h["end"] - h["start"] >= EAGER_HOLD_S]

    def info(event: str, t: float, conf: float, trigger: str | None = None) -> dict[str, Any]:
        said = [w for w in words if w["end"] <= t + 1e-9]
        seq[0] += 1
        msg = ListenV2TurnInfo(
            request_id="corpus",
            sequence_id=seq[0],
            event=event,
            turn_index=idx,
            audio_window_start=t0,
            audio_window_end=round(t, 3),
            transcript=" ".join(w["text"] for w in said),
            words=[
                {"word": w["text"], "confidence": 0.95, "start": w["start"], "end": w["end"]}
                for w in said
            ],
            end_of_turn_confidence=conf,
            trigger=trigger,
        )
        out = msg.model_dump(mode="json", exclude_none=True)
        out["received_at"] = round(t, 3)
        return out

    def conf_at(t: float) -> float:
        # Flux's confidence rises only in the holds long enough for its eager.
        for h in holds:
            if h["start"] + 0.2 <= t < h["end"]:
                return KIND_CONF[h["kind"]]
        return END_EAGER_CONF if t >= end + 0.2 else SPEAKING_CONF

    events: list[tuple[float, str, float, str | None]] = [
        (words[0]["end"], "StartOfTurn", SPEAKING_CONF, None)
    ]
    for h in holds:
        events.append((h["start"] + 0.3, "EagerEndOfTurn", KIND_CONF[h["kind"]], None))
        events.append((h["end"] + 0.1, "TurnResumed", SPEAKING_CONF, None))
    events.append((end + 0.25, "EagerEndOfTurn", END_EAGER_CONF, None))
    events.append((end + 0.5, "EndOfTurn", END_CONF, "model"))
    t = words[0]["end"] + UPDATE_S
    while t < end + 0.5:
        if all(abs(t - e[0]) > 0.02 for e in events):
            events.append((t, "Update", conf_at(t), None))
        t += UPDATE_S
    events.sort(key=lambda e: e[0])
    return [info(ev, at, conf, trig) for at, ev, conf, trig in events]


def flux_stream(call_id: str) -> tuple[list[dict[str, Any]], list[TurnPlan]]:
    """The message dicts (JSONL lines) of a call and what each turn holds."""
    seq = [0]
    msgs: list[dict[str, Any]] = [
        ListenV2Connected(request_id="corpus", sequence_id=0).model_dump(mode="json")
    ]
    plans: list[TurnPlan] = []
    for i, turn in enumerate(caller_turns(call_id)):
        msgs.extend(_turn_messages(i, turn, seq))
        plans.append(
            TurnPlan(
                text=" ".join(w["text"] for w in turn["words"]),
                eager_holds=[
                    h["kind"]
                    for h in turn.get("holds", [])
                    if h["end"] - h["start"] >= EAGER_HOLD_S
                ],
                start=float(turn["start"]),
                end=float(turn["end"]),
            )
        )
    msgs.sort(key=lambda m: m.get("received_at", 0.0))
    return msgs, plans


def write_stream(call_id: str, path: Path) -> list[TurnPlan]:
    msgs, plans = flux_stream(call_id)
    path.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    return plans
