"""Per-frame cost of turnkit's strategies and filters inside Pipecat, and the
plugin's import time.

Overhead: the same corpus call (caller audio in 32 ms InputAudioRawFrames,
its words as transcription frames, fed in lock step) goes through a real
Pipecat pipeline with an ``LLMUserAggregator``:

* **bare** — Pipecat's default user turn strategies, no VAD (the baseline:
  what the aggregator costs anyway);
* **pipecat vad** — the same with Pipecat's own ``SileroVADAnalyzer`` in the
  aggregator (what a Pipecat agent runs per frame without turnkit);
* **turnkit silence** — turnkit's start/stop strategies with the silence
  detector (turnkit's Silero VAD each frame + the acknowledgement filter);
* **turnkit fused + echo** — the fused detector (Smart Turn audio model +
  text model) and the echo filter before the VAD, reference ``agent.wav``.

Each figure is the best of ``--repeats`` runs, in microseconds per audio
frame, and its ratio to bare measured in the same process. Import: best of
fresh interpreters, ``import turnkit_pipecat`` against the Pipecat modules a
Pipecat agent imports anyway (pipeline, task, aggregators, turns).

    python benchmarks/bench_pipecat_overhead.py [--call easy-order-status-01] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from common import ROOT
from loguru import logger
from pipecat.frames.frames import EndFrame, Frame, InputAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from turnkit_pipecat import (
    TurnkitTurnEngine,
    TurnkitUserTurnStartStrategy,
    TurnkitUserTurnStopStrategy,
)
from turnkit_pipecat.replay import feed_frames, recording_frames

from turnkit.audio.wav import read_wav
from turnkit.barge_in.echo import EchoFilter, align_reference
from turnkit.replay.recording import load_recording

PIPECAT_IMPORT = (
    "import pipecat.pipeline.pipeline, pipecat.pipeline.task, "
    "pipecat.processors.aggregators.llm_response_universal, "
    "pipecat.turns.user_turn_strategies"
)


def _engine(case: str, rec) -> TurnkitTurnEngine | None:  # type: ignore[no-untyped-def]
    if case in ("bare", "pipecat vad"):
        return None
    if case == "silence":
        return TurnkitTurnEngine("silence")
    echo = EchoFilter()
    n = len(rec.caller_audio(16000))
    echo.set_reference(align_reference(read_wav(rec.agent_path, 16000), 16000, n))
    return TurnkitTurnEngine("fused", echo=echo)


async def _run_once(case: str, rec, frames: list[Frame]) -> float:  # type: ignore[no-untyped-def]
    engine = _engine(case, rec)
    vad = None
    if case == "pipecat vad":
        from pipecat.audio.vad.silero import SileroVADAnalyzer

        vad = SileroVADAnalyzer()
    if engine is None:
        strategies = UserTurnStrategies()
    else:
        strategies = UserTurnStrategies(
            start=[TurnkitUserTurnStartStrategy(engine)],
            stop=[TurnkitUserTurnStopStrategy(engine)],
        )
    agg = LLMUserAggregator(
        LLMContext(),
        params=LLMUserAggregatorParams(
            user_turn_strategies=strategies,
            user_turn_stop_timeout=3600.0,
            audio_idle_timeout=0,
            vad_analyzer=vad,
        ),
    )
    task = PipelineTask(
        Pipeline([agg]),
        params=PipelineParams(audio_in_sample_rate=16000),
        cancel_on_idle_timeout=False,
    )
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    t0 = 0.0

    async def feed() -> None:
        nonlocal t0
        await asyncio.sleep(0.2)  # pipeline started
        t0 = time.perf_counter()
        if engine is not None:
            await feed_frames(task, engine, frames)
        else:
            # No engine to wait on: the same frames, each awaited through the
            # task's queue (transcripts cannot be overtaken by much: no VAD).
            for f in frames:
                await task.queue_frame(f)
                await asyncio.sleep(0)
        await task.queue_frame(EndFrame())

    await asyncio.gather(runner.run(), feed())
    return time.perf_counter() - t0


def _import_ms(code: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - t)
    return best * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--call", default="easy-order-status-01")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    logger.remove()
    rec = load_recording(ROOT / "recordings" / args.call)
    frames = recording_frames(rec)
    n_audio = sum(isinstance(f, InputAudioRawFrame) for f in frames)
    print(f"call {rec.id}: {n_audio} audio frames of 32 ms, {len(frames) - n_audio} transcripts")
    us: dict[str, float] = {}
    for case in ("bare", "pipecat vad", "silence", "fused+echo"):
        best = min(asyncio.run(_run_once(case, rec, frames)) for _ in range(args.repeats))
        us[case] = best / n_audio * 1e6
    for case, v in us.items():
        extra = v - us["bare"]
        print(
            f"{case:<12} {v:8.0f} us/frame  {v / us['bare']:5.2f}x bare  "
            f"{v / us['pipecat vad']:5.2f}x pipecat vad  "
            f"(+{extra:.0f} us over bare = {extra / 32000 * 100:.2f}% of a 32 ms frame)"
        )
    bare = _import_ms("pass", args.repeats + 2)
    pc = _import_ms(PIPECAT_IMPORT, args.repeats + 2) - bare
    tk = _import_ms("import turnkit_pipecat", args.repeats + 2) - bare
    print(f"import pipecat (agent modules) {pc:6.0f} ms")
    print(f"import turnkit_pipecat          {tk:6.0f} ms  {tk / pc:.2f}x  (adds {tk - pc:+.0f} ms)")


if __name__ == "__main__":
    main()
