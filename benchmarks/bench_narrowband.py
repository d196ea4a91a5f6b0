"""Wideband vs telephone band: Silero VAD, Smart Turn and the replayed
detectors on the demo corpus and on its narrowband copy (8 kHz, 300-3400 Hz,
G.711 μ-law round trip, made by ``scripts/narrowband.py``), side by side.

    python benchmarks/bench_narrowband.py [--corpus recordings] [--workers 2]
        [-d silence:stop_ms=500 -d ...] [--compute fixed] [--json out.json]
        [--no-replay]

Three measurements, each on both copies:

- **Silero VAD**, per 32 ms frame of caller.wav (read at 16 kHz, as replay
  does): frames inside a labelled caller span or backchannel are speech,
  frames at least 50 ms away from every labelled event are non-speech
  (background); frames in echo, noise or near an edge are left out. Reported:
  ROC AUC of the speech probability, recall and false-alarm rate at 0.5.
- **Smart Turn** separation: P(turn complete) on the audio up to a point
  inside each pause: ``min(0.2 s, pause length)`` after a hold starts (the
  detector's default min_wait is 200 ms of silence; the model never hears the
  speech that resumes) and 0.2 s after each turn's end. Reported: AUC of ends
  vs holds (0.5 = chance), overall, per hold kind, and per subset.
- **replay**: ``turnkit replay`` with each detector, its headline figures
  and the per-subset figures (``subsets`` in the JSON).

Calls already tagged ``telephone`` are narrowband in both copies (the
narrowband script copies them unchanged).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from common import ROOT  # noqa: E402

from turnkit.audio.vad import SileroVAD  # noqa: E402
from turnkit.audio.wav import read_wav  # noqa: E402
from turnkit.detectors.smart_turn import SmartTurnModel  # noqa: E402

DETECTORS = ["silence:stop_ms=500", "silence:stop_ms=800", "smart-turn", "semantic-text", "fused"]
SR = 16000
EVAL_AFTER_S = 0.2  # where Smart Turn is asked, after the silence starts
EDGE_S = 0.05  # VAD frames this close to a labelled edge are left out
SUBSETS = ("natural", "stress", "telephone")


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half."""
    if not pos or not neg:
        return None
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(np.mean((p > n) + 0.5 * (p == n)))


def calls_in(corpus: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [(p.parent, json.loads(p.read_text())) for p in sorted(corpus.rglob("call.json"))]


def vad_frames(corpus: Path) -> dict[str, Any]:
    vad = SileroVAD()
    probs: dict[str, list[float]] = {"speech": [], "background": []}
    for folder, m in calls_in(corpus):
        audio = read_wav(folder / m["audio"]["caller"], SR)
        vad.reset()
        n = len(audio) // SileroVAD.frame_samples
        t_mid = (np.arange(n) + 0.5) * SileroVAD.frame_samples / SR
        p = np.array([vad(audio[i * 512 : (i + 1) * 512]) for i in range(n)], dtype=np.float64)
        speech = np.zeros(n, bool)
        near_any = np.zeros(n, bool)
        for ev in m["events"]:
            if ev["type"] == "agent_turn":
                continue  # the agent's own channel, not caller.wav
            near_any |= (t_mid > ev["start"] - EDGE_S) & (t_mid < ev["end"] + EDGE_S)
            spans = ev.get("spans") or [[ev["start"], ev["end"]]]
            if ev["type"] in ("caller_turn", "backchannel"):
                for s, e in spans:
                    speech |= (t_mid > s + EDGE_S) & (t_mid < e - EDGE_S)
        probs["speech"] += p[speech].tolist()
        probs["background"] += p[~near_any].tolist()
    sp, bg = np.asarray(probs["speech"]), np.asarray(probs["background"])
    return {
        "frames_speech": int(sp.size),
        "frames_background": int(bg.size),
        "auc": auc(sp.tolist(), bg.tolist()),
        "recall_at_0.5": float(np.mean(sp >= 0.5)),
        "false_alarm_at_0.5": float(np.mean(bg >= 0.5)),
    }


def smart_turn_separation(corpus: Path) -> dict[str, Any]:
    model = SmartTurnModel()
    ends: dict[str, list[float]] = {"all": []}
    holds: dict[str, list[float]] = {"all": []}
    for folder, m in calls_in(corpus):
        audio = read_wav(folder / m["audio"]["caller"], SR)
        groups = ["all", *(t for t in SUBSETS if t in m.get("tags", []))]

        def p_at(t: float, audio: np.ndarray = audio) -> float:
            i = min(len(audio), round(t * SR))
            return model.predict(audio[max(0, i - 8 * SR) : i])

        for ev in m["events"]:
            if ev["type"] != "caller_turn":
                continue
            pe = p_at(ev["end"] + EVAL_AFTER_S)
            for g in groups:
                ends.setdefault(g, []).append(pe)
            for h in ev.get("holds", []):
                ph = p_at(h["start"] + min(EVAL_AFTER_S, h["end"] - h["start"]))
                for g in [*groups, f"kind:{h['kind']}"]:
                    holds.setdefault(g, []).append(ph)
    out: dict[str, Any] = {}
    for g, hv in holds.items():
        ev = ends["all"] if g.startswith("kind:") else ends.get(g, [])
        out[g] = {
            "holds": len(hv),
            "ends": len(ev),
            "auc": auc(ev, hv),
            "p_hold_median": float(np.median(hv)) if hv else None,
            "p_end_median": float(np.median(ev)) if ev else None,
        }
    return out


def replay(corpus: Path, detectors: list[str], workers: int, compute: str | None) -> list[dict]:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "r.json"
        cmd = [sys.executable, "-m", "turnkit.cli", "replay", str(corpus), "--json", str(out)]
        cmd += ["--workers", str(workers)]
        if compute:
            cmd += ["--compute", compute]
        for d in detectors:
            cmd += ["-d", d]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"turnkit replay failed on {corpus}:\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text())["results"]


def _ms(v: float | None) -> str:
    return "   —  " if v is None else f"{v / 1000:5.2f}s"


def _pc(v: float | None) -> str:
    return "  —  " if v is None else f"{100 * v:5.1f}%"


def _fig(r: dict[str, Any] | None) -> str:
    if not r:
        return f"{'—':>27}"
    resp = r.get("response_ms") or {}
    return (
        f"{_ms(resp.get('p50'))} {_ms(resp.get('p95'))} "
        f"{_pc(r.get('interruption_rate'))} {_pc(r.get('missed_rate'))}"
    )


def print_report(res: dict[str, Any]) -> None:
    wb, nb = res["wideband"], res["narrowband"]
    print("\nSilero VAD per 32 ms frame (caller.wav at 16 kHz)")
    print(f"{'':12} {'AUC':>6} {'recall@.5':>9} {'false alarm@.5':>14}")
    for name, v in (("wideband", wb["vad"]), ("narrowband", nb["vad"])):
        print(
            f"{name:12} {v['auc']:6.3f} {v['recall_at_0.5']:9.1%} {v['false_alarm_at_0.5']:14.1%}"
        )
    print(f"\nSmart Turn: AUC of P(complete) at ends vs at holds ({EVAL_AFTER_S}s into the pause)")
    print(
        f"{'group':26} {'holds':>5} {'wideband':>9} {'narrowband':>10}  p(hold)/p(end) medians wb | nb"
    )
    for g in wb["smart_turn"]:
        a, b = wb["smart_turn"][g], nb["smart_turn"].get(g, {})

        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.3f}"

        print(
            f"{g:26} {a['holds']:5d} {f(a['auc']):>9} {f(b.get('auc')):>10}  "
            f"{f(a['p_hold_median'])}/{f(a['p_end_median'])} | "
            f"{f(b.get('p_hold_median'))}/{f(b.get('p_end_median'))}"
        )
    if "replay" not in wb:
        return
    print("\nreplay: resp p50, p95, interruptions, missed — wideband | narrowband")
    for rw, rn in zip(wb["replay"], nb["replay"], strict=True):
        # "telephone": the natural calls made in telephone band (wideband
        # copy) | every call (narrowband copy)
        for sub in ("all", "stress", "natural", "telephone"):
            a = rw if sub == "all" else rw.get("subsets", {}).get(sub)
            b = rn if sub == "all" else rn.get("subsets", {}).get(sub)
            n = (a or {}).get("turns", "")
            print(f"{rw['detector']:22} {sub:9} {n!s:>3}  {_fig(a)} | {_fig(b)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "recordings")
    ap.add_argument(
        "--narrowband", type=Path, help="an existing narrowband copy (default: make one)"
    )
    ap.add_argument("-d", "--detector", action="append", dest="detectors")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--compute", default=None, help="passed to turnkit replay --compute")
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    detectors = args.detectors or DETECTORS
    with tempfile.TemporaryDirectory() as td:
        nb_dir = args.narrowband
        if nb_dir is None:
            nb_dir = Path(td) / "narrowband"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "scripts" / "narrowband.py"),
                    str(args.corpus),
                    str(nb_dir),
                ],
                check=True,
                capture_output=True,
            )
        res: dict[str, Any] = {}
        for name, corpus in (("wideband", args.corpus), ("narrowband", nb_dir)):
            r: dict[str, Any] = {
                "vad": vad_frames(corpus),
                "smart_turn": smart_turn_separation(corpus),
            }
            if not args.no_replay:
                r["replay"] = replay(corpus, detectors, args.workers, args.compute)
            res[name] = r
            print(f"{name}: done", file=sys.stderr)
    print_report(res)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
