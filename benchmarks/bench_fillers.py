"""Filler start delay past the threshold on a real clock, and prerender cost.

    python benchmarks/bench_fillers.py [--runs 100] [--threshold 0.05] [--busy-ms 5]

1. Start delay: N guarded "tool calls" on :class:`~turnkit.clock.RealClock`
   with asyncio, each longer than the threshold; the delay is (first filler
   frame's time − threshold time), printed as p50/p95/max in frames of
   ``frame_s`` (the promise is < 1 frame). Baseline, same process: a bare
   ``clock.sleep(threshold)`` wake lateness (the event loop's own floor).
   Then the same with a busy loop (a task blocking it ``--busy-ms`` at a
   time, like a pipeline doing other work), to show where the delay comes
   from.
2. Prerender: espeak-ng render time per line vs the line's audio duration
   (real-time factor), and the disk-cache load time per line.

Absolute times move with the machine's load; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time

import numpy as np

from turnkit.clock import RealClock
from turnkit.fillers import DEFAULT_LINES, FillerBank, FillerScheduler
from turnkit.frames import AudioOutFrame
from turnkit.tts import EspeakTTS


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


async def busy_loop(block_s: float, every_s: float) -> None:
    while True:
        t = time.perf_counter()
        while time.perf_counter() - t < block_s:
            pass  # blocks the event loop, as a CPU-bound step would
        await asyncio.sleep(every_s)


async def sleep_lateness(clock: RealClock, threshold: float, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = clock.now()
        await clock.sleep(threshold)
        out.append(clock.now() - t0 - threshold)
    return out


async def filler_delays(
    bank: FillerBank, clock: RealClock, threshold: float, frame_s: float, runs: int
) -> list[float]:
    def sink(frame: AudioOutFrame) -> None:
        pass

    sched = FillerScheduler(
        bank, clock, sink=sink, threshold_s=threshold, frame_s=frame_s, on_result="stop"
    )
    out = []
    for _ in range(runs):
        async with sched.guard("tool") as g:
            await clock.sleep(threshold + 2 * frame_s)
        await g.finished()
        assert g.record.filler_delay_s is not None
        out.append(g.record.filler_delay_s)
    return out


def row(name: str, delays: list[float], frame_s: float, base_p50: float | None) -> str:
    p50, p95, mx = pct(delays, 50), pct(delays, 95), max(delays)
    ratio = f"  p50 x{p50 / base_p50:5.2f} bare sleep" if base_p50 else ""
    return (
        f"{name:28s} p50 {p50 * 1e3:6.2f} ms = {p50 / frame_s:5.3f} frame   "
        f"p95 {p95 * 1e3:6.2f} ms = {p95 / frame_s:5.3f} frame   "
        f"max {mx / frame_s:5.3f} frame{ratio}"
    )


async def start_delay(args: argparse.Namespace, bank: FillerBank) -> None:
    clock = RealClock()
    fs = args.frame_s
    print(
        f"start delay past a {args.threshold * 1e3:.0f} ms threshold, "
        f"{args.runs} runs, frame {fs * 1e3:.0f} ms (RealClock, asyncio)"
    )
    base = await sleep_lateness(clock, args.threshold, args.runs)
    fill = await filler_delays(bank, clock, args.threshold, fs, args.runs)
    print(row("bare clock.sleep (baseline)", base, fs, None))
    print(row("filler first audio", fill, fs, pct(base, 50)))
    busy = asyncio.create_task(busy_loop(args.busy_ms / 1e3, 0.001))
    try:
        base_b = await sleep_lateness(clock, args.threshold, args.runs)
        fill_b = await filler_delays(bank, clock, args.threshold, fs, args.runs)
    finally:
        busy.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy
    print(f"with the loop blocked {args.busy_ms:g} ms at a time:")
    print(row("bare clock.sleep (baseline)", base_b, fs, None))
    print(row("filler first audio", fill_b, fs, pct(base_b, 50)))


class TimedTTS:
    """Wraps a TTS and times each synthesize call (wall clock)."""

    def __init__(self, inner: EspeakTTS) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.voice = inner.voice
        self.sample_rate = inner.sample_rate
        self.seconds: dict[str, float] = {}

    async def synthesize(self, text: str) -> np.ndarray:
        t = time.perf_counter()
        audio = await self.inner.synthesize(text)
        self.seconds[text] = time.perf_counter() - t
        return audio


async def prerender(args: argparse.Namespace) -> FillerBank:
    tts = TimedTTS(EspeakTTS("en-us"))
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as d4:
        cold = FillerBank(DEFAULT_LINES, tts, args.rate, cache_dir=d, concurrency=1)
        t = time.perf_counter()
        await cold.prerender()  # one line at a time: the per-line cost
        serial = time.perf_counter() - t
        par = FillerBank(DEFAULT_LINES, TimedTTS(tts.inner), args.rate, cache_dir=d4)
        t = time.perf_counter()
        await par.prerender()  # default concurrency (4 subprocesses)
        parallel = time.perf_counter() - t
        bank = FillerBank(DEFAULT_LINES, tts, args.rate, cache_dir=d)
        t = time.perf_counter()
        await bank.prerender()  # all from disk
        load = (time.perf_counter() - t) / len(DEFAULT_LINES)
        assert bank.loaded == len(DEFAULT_LINES)
    n = len(DEFAULT_LINES)
    audio = sum(line.duration for line in cold.lines)
    print(f"prerender with {tts.identity} at {args.rate} Hz (trimmed line durations):")
    for line in cold.lines:
        dt = tts.seconds[line.text]
        print(
            f"  {line.text!r:34s} espeak-ng {dt * 1e3:6.1f} ms for {line.duration:5.2f} s "
            f"of audio = {dt / line.duration:6.3f} x duration ({line.duration / dt:5.1f}x real time)"
        )
    print(
        f"  whole bank, one at a time: {serial / n * 1e3:.1f} ms/line = {serial / audio:.3f} x "
        f"audio duration (incl. resample, trim, disk write); 4 at a time: {parallel * 1e3:.0f} ms "
        f"for {n} lines"
    )
    print(
        f"  disk-cache load: {load * 1e3:.2f} ms/line ({serial / n / load:.0f}x faster than rendering)"
    )
    return bank


async def main_async(args: argparse.Namespace) -> None:
    bank = await prerender(args)
    print()
    await start_delay(args, bank)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--frame-s", type=float, default=0.02)
    ap.add_argument("--rate", type=int, default=16000)
    ap.add_argument("--busy-ms", type=float, default=5.0)
    args = ap.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
