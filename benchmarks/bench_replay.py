"""Replay throughput: audio seconds replayed per wall second per core, with
the silence detector, on the demo corpus.

    python benchmarks/bench_replay.py [--detector silence] [--repeats 3]

Baseline measured in the same run: the Silero VAD alone over the same audio
(no pipeline, no detector, no agent), i.e. the floor any replay pays. The
ratio replay/VAD-only says what the pipeline, oracle transcript, detector,
simulated agent and scoring cost on top. Single process, one core; "per
core" is audio seconds per CPU second of this process (``time.process_time``),
so a machine shared with other work measures the same; wall time is printed
beside it. ``--no-filters`` replays without the echo/acknowledgement filters.

The VAD-only line runs what the replay runs (``SileroVAD()``: the branch-free
16 kHz graph, ``silero_vad_16k.onnx``); the line below it runs the vendored
Silero graph as shipped (``silero_vad.onnx``, same probabilities, slower), so
ratios stay comparable with figures measured before the branch-free graph.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from turnkit.audio.vad import SILERO_MODEL_PATH, SileroVAD
from turnkit.audio.wav import iter_frames
from turnkit.replay.recording import find_recordings, load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--detector", default="silence")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-filters", action="store_true")
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "recordings"])
    args = ap.parse_args()
    recs = [load_recording(p) for p in find_recordings(args.paths)]
    audio = {r.id: r.caller_audio() for r in recs}
    seconds = sum(r.duration for r in recs)
    config = ReplayConfig(filters=not args.no_filters)

    async def replay_all() -> None:
        for r in recs:
            await replay_call(r, args.detector, config)

    vad = SileroVAD()
    vendored = SileroVAD(SILERO_MODEL_PATH)

    def vad_only(v: SileroVAD = vad) -> None:
        for r in recs:
            v.reset()
            for _, f in iter_frames(audio[r.id], 512):
                v(f)

    asyncio.run(replay_all())  # warm-up: sessions, imports
    cpu_replay = cpu_vad = wall_replay = wall_vad = cpu_vendored = float("inf")
    for _ in range(args.repeats):
        w, c = time.perf_counter(), time.process_time()
        asyncio.run(replay_all())
        cpu_replay = min(cpu_replay, time.process_time() - c)
        wall_replay = min(wall_replay, time.perf_counter() - w)
        w, c = time.perf_counter(), time.process_time()
        vad_only()
        cpu_vad = min(cpu_vad, time.process_time() - c)
        wall_vad = min(wall_vad, time.perf_counter() - w)
        c = time.process_time()
        vad_only(vendored)
        cpu_vendored = min(cpu_vendored, time.process_time() - c)
    print(
        f"{len(recs)} calls, {seconds:.1f} s of audio, detector {args.detector!r}, "
        f"filters {'off' if args.no_filters else 'on'}, best of {args.repeats}"
    )
    print(
        f"replay:   {cpu_replay:6.2f} s CPU ({wall_replay:6.2f} s wall)   "
        f"{seconds / cpu_replay:6.0f}x real time per core"
    )
    print(
        f"VAD only: {cpu_vad:6.2f} s CPU ({wall_vad:6.2f} s wall)   "
        f"{seconds / cpu_vad:6.0f}x real time per core"
    )
    print(
        f"VAD only, vendored graph: {cpu_vendored:6.2f} s CPU   "
        f"{seconds / cpu_vendored:6.0f}x real time per core"
    )
    print(f"ratio replay / VAD only (CPU): {cpu_replay / cpu_vad:.2f}")
    print(f"ratio replay / VAD only, vendored graph (CPU): {cpu_replay / cpu_vendored:.2f}")


if __name__ == "__main__":
    main()
