"""Semantic-text cost per decision on one core: v2 (the default) against v1,
and against the silence detector's cost per audio frame, all in this run.

    python benchmarks/bench_semantic_text.py [--decisions 2000]

A decision is one model score of a new transcript, as the detector does once
per pause or transcript change (v1: feature hashing + a weight sum + a
sigmoid; v2: the same plus a GRU step per word); the texts are the demo
corpus transcripts and their prefixes with the agent's preceding line. Each
decision is timed alone, ``--repeats`` times (its fastest kept); prints p50
and p95 per decision for v1 and v2, the ratio v2/v1, the share of the 5 ms
budget, and the silence detector's per-frame ``on_audio``.
Absolute times move with the machine's load; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import numpy as np
from common import ROOT, best_of

from turnkit.audio.vad import VADStep
from turnkit.clock import VirtualClock
from turnkit.detectors import create_detector
from turnkit.frames import AudioInFrame
from turnkit.text.normalize import normalize_text
from turnkit.text.semantic_model import SemanticTextModel


def corpus_texts(n: int) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for path in sorted((ROOT / "recordings").glob("*/call.json")):
        agent = ""
        for e in sorted(json.loads(path.read_text())["events"], key=lambda e: e["start"]):
            if e["type"] == "agent_turn":
                agent = e["text"]
            elif e["type"] == "caller_turn":
                words = normalize_text(e["text"]).split()
                pairs += [(" ".join(words[:k]), agent) for k in range(1, len(words) + 1)]
    while len(pairs) < n:
        pairs.extend(pairs[: n - len(pairs)])
    return pairs[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--decisions", type=int, default=2000)
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    texts = corpus_texts(args.decisions)
    models = {v: SemanticTextModel.load(v) for v in ("v1", "v2")}

    def per_decision(model) -> np.ndarray:
        best = np.full(len(texts), np.inf)
        for _ in range(args.repeats):
            for i, (text, agent) in enumerate(texts):
                t = time.perf_counter()
                model.predict(text, agent)
                best[i] = min(best[i], time.perf_counter() - t)
        return best

    clock = VirtualClock()
    det = create_detector("silence", clock)
    audio = np.zeros(512, dtype=np.float32)
    steps = [
        VADStep(prob=0.9 if (i // 40) % 2 else 0.0, speaking=bool((i // 40) % 2), speech_end=0.0)
        for i in range(args.frames)
    ]
    frames = [
        AudioInFrame(at=i * 0.032, audio=audio, sample_rate=16000) for i in range(args.frames)
    ]

    def silence() -> None:
        async def run() -> None:
            for f, s in zip(frames, steps, strict=True):
                await det.on_audio(f, s)

        asyncio.run(run())

    for m in models.values():  # warm up
        for text, agent in texts[:50]:
            m.predict(text, agent)
    times = {v: per_decision(m) for v, m in models.items()}
    t_sil = best_of(silence, args.repeats) / len(frames)
    print(f"decisions: {len(texts)} transcripts from recordings/, best of {args.repeats}, one core")
    p50 = {}
    for v, t in times.items():
        p50[v] = float(np.median(t))
        p95 = float(np.percentile(t, 95))
        print(
            f"semantic-text {v}: p50 {p50[v] * 1e6:8.1f} us/decision  p95 {p95 * 1e6:8.1f} us"
            f"   ({p50[v] * 1e3 / 5:.3f} of the 5 ms budget)"
        )
    print(f"ratio v2 / v1 (p50 per decision): {p50['v2'] / p50['v1']:.1f}")
    print(f"silence:       {t_sil * 1e6:8.1f} us/frame")
    print(f"ratio semantic-text v2 decision / silence frame: {p50['v2'] / t_sil:.1f}")


if __name__ == "__main__":
    main()
