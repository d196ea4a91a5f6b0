"""Eager drafting on the replay corpus: each detector with and without
drafting in the same run (same calls, same seeded latency model).

    python benchmarks/bench_drafting.py [-d fused -d fused:audio=off] [--llm-ttft-ms 350]

Prints, per detector: median response without and with drafts, the saving
and its ratio to the no-draft baseline, the median of the per-turn savings
(paired: the same turn with and without drafts), LLM requests per turn
without and with drafts (without drafts a detector already makes more than
one request per caller turn when it answers at holds, backchannels or echo),
drafts started / used / cancelled, and the LLM time the confirmed drafts hid.
Model compute is counted (``count_compute``) as in ``turnkit replay``, so
figures with Smart Turn move with the machine's load; ``--no-compute``
removes that noise.
"""

from __future__ import annotations

import argparse
import os
import statistics

from common import ROOT

from turnkit.replay.metrics import CallScore, aggregate
from turnkit.replay.recording import find_recordings
from turnkit.replay.simulator import CallFailure, ReplayConfig, replay_many


def run(specs: list[str], config: ReplayConfig, workers: int) -> dict[str, dict]:
    calls = find_recordings([ROOT / "recordings"])
    scores: dict[str, list[CallScore]] = {s: [] for s in specs}
    for path, res in replay_many(calls, specs, config, workers):
        if isinstance(res, CallFailure):
            raise SystemExit(f"{path}: {res.error}")
        for spec, score in zip(specs, res, strict=True):
            scores[spec].append(score)
    return {s: aggregate(s, sorted(v, key=lambda c: c.call)) for s, v in scores.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-d", "--detector", action="append")
    ap.add_argument("--llm-ttft-ms", default="350")
    ap.add_argument("--tts-ttfb-ms", default="150")
    ap.add_argument("--no-compute", action="store_true")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    specs = args.detector or ["fused", "fused:audio=off"]
    base = dict(
        llm_ttft_ms=args.llm_ttft_ms,
        tts_ttfb_ms=args.tts_ttfb_ms,
        count_compute=not args.no_compute,
    )
    plain = run(specs, ReplayConfig(**base, eager=False), args.workers)
    eager = run(specs, ReplayConfig(**base, eager=True), args.workers)
    print(
        f"LLM TTFT {args.llm_ttft_ms} ms, TTS TTFB {args.tts_ttfb_ms} ms, "
        f"compute {'off' if args.no_compute else 'counted'}"
    )
    head = (
        f"{'detector':<18}{'p50 plain':>10}{'p50 eager':>10}{'saved':>8}{'ratio':>7}"
        f"{'paired':>8}{'req/turn':>13}{'drafts s/u/c':>14}{'hidden p50':>11}{'interrupt':>16}"
    )
    print(head)
    for s in specs:
        a, b = plain[s], eager[s]
        pa, pb = a["response_ms"]["p50"], b["response_ms"]["p50"]
        d = b["drafts"]
        pairs = [
            x["response_ms"] - y["response_ms"]
            for x, y in zip(a["per_turn"], b["per_turn"], strict=True)
            if x["response_ms"] is not None and y["response_ms"] is not None
        ]
        paired = statistics.median(pairs) if pairs else float("nan")
        print(
            f"{s:<18}{pa:>8.0f}ms{pb:>8.0f}ms{pa - pb:>6.0f}ms{pb / pa:>7.2f}{paired:>6.0f}ms"
            f"{a['llm_requests_per_turn']:>7.2f}→{b['llm_requests_per_turn']:.2f}"
            f"{d['started']:>6}/{d['used']}/{d['cancelled']:<4}"
            f"{b['draft_saved_ms']['p50'] or 0:>9.0f}ms"
            f"{a['interruption_rate'] * 100:>8.1f}→{b['interruption_rate'] * 100:.1f}%"
        )


if __name__ == "__main__":
    main()
