"""Silero VAD cost per 32 ms frame, against an RMS energy gate on the same
frames (the cheapest VAD there is), both measured in this run.

    python benchmarks/bench_vad.py [--frames 3000]

Prints microseconds per frame, the real-time factor on one core (frame
duration / cost) and the ratio to the energy gate. Absolute times move with
the machine's load; the ratios are what to compare between runs.
"""

from __future__ import annotations

import argparse

import numpy as np
from common import ROOT, best_of

from turnkit.audio.vad import SileroVAD
from turnkit.audio.wav import iter_frames, read_wav


def corpus_frames(n: int) -> list[np.ndarray]:
    frames: list[np.ndarray] = []
    for wav in sorted((ROOT / "recordings").glob("*/caller.wav")):
        frames.extend(f for _, f in iter_frames(read_wav(wav), 512))
        if len(frames) >= n:
            break
    while len(frames) < n:  # a short corpus is cycled
        frames.extend(frames[: n - len(frames)])
    return frames[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    frames = corpus_frames(args.frames)
    vad = SileroVAD()

    def silero() -> None:
        vad.reset()
        for f in frames:
            vad(f)

    def energy() -> None:
        for f in frames:
            float(np.sqrt(np.mean(f * f))) > 0.01  # noqa: B015

    silero()  # warm up the session
    t_silero = best_of(silero, args.repeats) / len(frames)
    t_energy = best_of(energy, args.repeats) / len(frames)
    frame_s = 512 / 16000
    print(f"frames: {len(frames)} x 32 ms from recordings/, best of {args.repeats}")
    print(
        f"silero vad:  {t_silero * 1e6:8.1f} us/frame   {frame_s / t_silero:7.0f}x real time on one core"
    )
    print(
        f"energy gate: {t_energy * 1e6:8.1f} us/frame   {frame_s / t_energy:7.0f}x real time on one core"
    )
    print(f"ratio silero / energy gate: {t_silero / t_energy:.1f}")


if __name__ == "__main__":
    main()
