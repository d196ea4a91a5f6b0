#!/usr/bin/env python3
"""Self-check for turnkit.recording/v1 call folders.

    python recordings/check.py [CALL_DIR_OR_ROOT ...]   (default: every call under recordings/)

Re-reads each call.json + caller.wav (+ agent.wav) and asserts: format fields,
events sorted, times inside the audio, caller turns non-overlapping, spans
inside their turn and ordered, holds equal to the gaps between spans, words
inside spans, that the caller audio inside labelled spans is well above
the holds (the silence is real), that each agent turn starts 1.2-1.7 s after
the caller turn it answers, and that barge-ins start >= 1.2 s into the agent
turn. Prints a per-call summary.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

KINDS = {"mid-sentence", "between-sentences", "comma"}
TYPES = {"caller_turn", "agent_turn", "backchannel", "echo", "noise"}
MIN_SPAN_OVER_HOLD_DB = 15.0
REPLY_GAP = (1.2, 1.7)  # s from a caller turn's end to the next agent turn's start
MIN_BARGE_S = 1.2  # a barge-in starts at least this far into the agent turn


def rms_db(x):
    return 10 * np.log10(np.mean(np.asarray(x, np.float64) ** 2) + 1e-12)


def check_call(d: Path) -> dict:
    m = json.loads((d / "call.json").read_text())
    assert m["format"] == "turnkit.recording/v1"
    assert m["id"] == d.name, (m["id"], d.name)
    assert m["language"] == "en" and m["source"] == "synthetic"
    x, sr = sf.read(d / m["audio"]["caller"], dtype="float64", always_2d=True)
    x = x[:, 0]
    dur = len(x) / sr
    info = sf.info(d / m["audio"]["caller"])
    # telephone-band calls are written as the line delivers them: 8 kHz
    rate = 8000 if "telephone" in m.get("tags", []) else 16000
    assert info.subtype == "PCM_16" and sr == rate and info.channels == 1, (sr, rate)
    if "agent" in m["audio"]:
        ai = sf.info(d / m["audio"]["agent"])
        assert ai.channels == 1 and ai.samplerate in (8000, 16000)
        assert abs(ai.duration - dur) < 0.01, (ai.duration, dur)
    tools = [e for e in m["events"] if e["type"] == "tool_call"]
    n_turns = sum(1 for e in m["events"] if e["type"] == "caller_turn")
    for t in tools:  # labels only: when the recorded agent called a tool
        assert 0 <= t["turn"] < n_turns and 0 <= t["start"] <= dur and t["duration_s"] >= 0, t
        assert t["effect"] in ("read", "write") and (t["effect"] == "write" or not t.get("confirm"))
    starts = [e["start"] for e in m["events"]]
    assert starts == sorted(starts), "events not sorted"
    ev = [e for e in m["events"] if e["type"] != "tool_call"]
    for e in ev:
        assert e["type"] in TYPES, e
        assert 0 <= e["start"] < e["end"] <= dur, (e["type"], e["start"], e["end"], dur)
        for k in ("start", "end"):
            assert round(e[k], 3) == e[k]
    turns = [e for e in ev if e["type"] == "caller_turn"]
    agents = [e for e in ev if e["type"] == "agent_turn"]
    for a, b in itertools.pairwise(turns):
        assert a["end"] <= b["start"], ("caller turns overlap", a["start"], b["start"])

    def sec(t):
        return round(t * sr)

    holds = {k: 0 for k in sorted(KINDS)}
    min_margin = np.inf
    for t in turns:
        assert t["text"].strip()
        sp = t["spans"]
        assert sp[0][0] == t["start"] and sp[-1][1] == t["end"]
        for s, e in sp:
            assert t["start"] <= s < e <= t["end"]
        for (_s0, e0), (s1, _e1) in itertools.pairwise(sp):
            assert e0 < s1, "spans overlap"
        hl = t.get("holds", [])
        assert [[h["start"], h["end"]] for h in hl] == [
            [a[1], b[0]] for a, b in itertools.pairwise(sp)
        ], f"holds do not match span gaps at {t['start']}"
        span_db = rms_db(np.concatenate([x[sec(s) : sec(e)] for s, e in sp]))
        for h in hl:
            assert h["kind"] in KINDS
            holds[h["kind"]] += 1
            if any(
                o["type"] in ("echo", "noise", "backchannel")
                and o["start"] < h["end"]
                and h["start"] < o["end"]
                for o in ev
            ):
                continue  # another labelled sound is in this hold (e.g. echo of the agent at a barge-in)
            # inner part of the hold (edges are where the envelope crosses the threshold)
            a, b = h["start"] + 0.02, h["end"] - 0.02
            margin = span_db - rms_db(x[sec(a) : sec(b)])
            min_margin = min(min_margin, margin)
            assert margin >= MIN_SPAN_OVER_HOLD_DB, (t["text"], h, margin)
        words = t.get("words", [])
        if words:
            assert " ".join(w["text"] for w in words) == " ".join(
                w.strip(",.?!;:") for w in t["text"].split()
            )
            for w in words:
                assert w["start"] <= w["end"]
                assert any(s <= w["start"] and w["end"] <= e for s, e in sp), (w, sp)
    # backchannels must fall inside agent speech and outside caller turns
    bcs = [e for e in ev if e["type"] == "backchannel"]
    for b in bcs:
        assert any(a["start"] <= b["start"] and b["end"] <= a["end"] for a in agents), b
        assert not any(t["start"] < b["end"] and b["start"] < t["end"] for t in turns), b
    for n in (e for e in ev if e["type"] == "noise"):
        assert n.get("label")
        assert not any(t["start"] < n["end"] and n["start"] < t["end"] for t in turns), n
    # barge-ins: caller turn starting while the agent speaks
    barge = [t for t in turns if any(a["start"] < t["start"] < a["end"] for a in agents)]
    # the agent answers like a cascaded agent: 1.2-1.7 s after the caller's end;
    # a barge-in starts well inside the agent turn (>= 1.2 s after its start)
    reply_gap = tuple(m.get("generator", {}).get("reply_gap", REPLY_GAP))
    for t in turns:
        nxt = [a for a in agents if a["start"] >= t["end"]]
        if nxt and not any(t["end"] <= u["start"] < nxt[0]["start"] for u in turns if u is not t):
            gap = round(nxt[0]["start"] - t["end"], 3)
            assert reply_gap[0] <= gap <= reply_gap[1], ("reply gap", t["end"], gap)
    for t in barge:
        a = next(a for a in agents if a["start"] < t["start"] < a["end"])
        assert t["start"] - a["start"] >= MIN_BARGE_S, (
            "barge-in too early",
            t["start"],
            a["start"],
        )
    noise_during_agent = sum(
        1
        for n in ev
        if n["type"] == "noise" and any(a["start"] < n["start"] < a["end"] for a in agents)
    )
    return dict(
        id=m["id"],
        dur=dur,
        turns=len(turns),
        holds=holds,
        bc=len(bcs),
        echo=sum(e["type"] == "echo" for e in ev),
        noise=sum(e["type"] == "noise" for e in ev),
        noise_in_agent=noise_during_agent,
        barge=len(barge),
        margin=min_margin,
    )


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent]
    dirs = []
    for r in roots:
        dirs += (
            [r] if (r / "call.json").exists() else sorted(p.parent for p in r.rglob("call.json"))
        )
    print(
        f"{'call':26} {'dur':>5} {'turns':>5} {'mid':>3} {'sent':>4} {'comma':>5} {'bc':>3} "
        f"{'echo':>4} {'noise':>5} {'barge':>5} {'minΔdB':>6}"
    )
    tot = 0.0
    for d in dirs:
        r = check_call(d)
        tot += r["dur"]
        h = r["holds"]
        print(
            f"{r['id']:26} {r['dur']:5.1f} {r['turns']:5d} {h['mid-sentence']:3d} "
            f"{h['between-sentences']:4d} {h['comma']:5d} {r['bc']:3d} {r['echo']:4d} "
            f"{r['noise']:3d}/{r['noise_in_agent']:<1d} {r['barge']:5d} {r['margin']:6.1f}"
        )
    print(f"{len(dirs)} calls OK, {tot:.1f} s of audio")
    print_timing(dirs)
    return 0


def timing_stats(dirs: list[Path]) -> dict[str, dict]:
    """Conversational timing per tag (`natural`, `stress`, `telephone`, and
    `all`): hold durations, share of caller turns with a hold, caller turn
    length, backchannel length, and the recorded agent's reply gap."""
    groups: dict[str, list[dict]] = {"all": []}
    for d in dirs:
        m = json.loads((d / "call.json").read_text())
        groups["all"].append(m)
        for tag in ("natural", "stress", "telephone"):
            if tag in m.get("tags", []):
                groups.setdefault(tag, []).append(m)
    out = {}
    for tag, ms in groups.items():
        holds, turns_with, n_turns, turn_len, bc_len, gaps = [], 0, 0, [], [], []
        for m in ms:
            ev = m["events"]
            turns = [e for e in ev if e["type"] == "caller_turn"]
            agents = [e for e in ev if e["type"] == "agent_turn"]
            for t in turns:
                n_turns += 1
                hl = t.get("holds", [])
                turns_with += bool(hl)
                holds += [h["end"] - h["start"] for h in hl]
                turn_len.append(t["end"] - t["start"])
                nxt = [a for a in agents if a["start"] >= t["end"]]
                if nxt and not any(t["end"] <= u["start"] < nxt[0]["start"] for u in turns):
                    gaps.append(nxt[0]["start"] - t["end"])
            bc_len += [e["end"] - e["start"] for e in ev if e["type"] == "backchannel"]
        h = np.array(holds) if holds else np.array([np.nan])
        out[tag] = dict(
            calls=len(ms),
            turns=n_turns,
            holds=len(holds),
            hold_p50=float(np.percentile(h, 50)),
            hold_p75=float(np.percentile(h, 75)),
            hold_p90=float(np.percentile(h, 90)),
            holds_over_500ms=int(np.sum(h > 0.5)),
            turns_with_hold=turns_with / max(n_turns, 1),
            turn_p50=float(np.median(turn_len)) if turn_len else float("nan"),
            bc_min=min(bc_len, default=float("nan")),
            bc_max=max(bc_len, default=float("nan")),
            reply_gap_p50=float(np.median(gaps)) if gaps else float("nan"),
        )
    return out


def print_timing(dirs: list[Path]) -> None:
    print(
        f"{'subset':10} {'calls':>5} {'turns':>5} {'holds':>5} {'hold p50/p75/p90 s':>19} "
        f"{'>0.5s':>5} {'turns w/ hold':>13} {'turn p50':>8} {'bc s':>9} {'reply p50':>9}"
    )
    for tag, r in timing_stats(dirs).items():
        print(
            f"{tag:10} {r['calls']:5d} {r['turns']:5d} {r['holds']:5d} "
            f"{r['hold_p50']:5.2f}/{r['hold_p75']:4.2f}/{r['hold_p90']:4.2f}{'':5} "
            f"{r['holds_over_500ms']:5d} {r['turns_with_hold']:12.0%} {r['turn_p50']:7.2f}s "
            f"{r['bc_min']:4.2f}-{r['bc_max']:4.2f} {r['reply_gap_p50']:8.2f}s"
        )


if __name__ == "__main__":
    sys.exit(main())
