"""Filler lines in Pipecat: a real OpenAILLMService runs a slow and a fast
function (no request to any engine: the calls are handed to the service as
it would hand them after a stream), and FillerProcessor plays a line
pre-rendered by the real espeak-ng only for the slow one, as TTSAudioRawFrames
between the call's FunctionCallInProgressFrame and its result."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import (
    EndFrame,
    FunctionCallFromLLM,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.llm import OpenAILLMService
from test_pipecat_drafting import Tap
from turnkit.clock import RealClock
from turnkit.fillers.bank import FillerBank
from turnkit.fillers.scheduler import FillerScheduler
from turnkit.tts.espeak import EspeakTTS

from turnkit_pipecat.fillers import FillerProcessor

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from real_tts import require_espeak


@pytest.fixture(autouse=True)
def _espeak() -> None:
    """Skips without espeak-ng; fails under TURNKIT_REQUIRE_TTS=1 (CI)."""
    require_espeak()



async def test_filler_plays_only_during_the_slow_call(tmp_path: Path) -> None:
    bank = FillerBank(
        ["One moment, let me check that.", "Just a second."],
        EspeakTTS("en-us"),
        sample_rate=24000,
        cache_dir=tmp_path,
    )
    await bank.prerender()
    scheduler = FillerScheduler(bank, RealClock(), sink=lambda f: None, threshold_s=0.4)
    fillers = FillerProcessor(scheduler)
    llm = OpenAILLMService(
        api_key="none",
        base_url="http://127.0.0.1:9/v1",
        settings=OpenAILLMService.Settings(model="x"),
    )

    async def slow(params: FunctionCallParams) -> None:
        await asyncio.sleep(1.0)
        await params.result_callback({"status": "shipped"})

    async def fast(params: FunctionCallParams) -> None:
        await asyncio.sleep(0.05)
        await params.result_callback({"ok": True})

    llm.register_function("track_parcel", slow)
    llm.register_function("ping", fast)
    tap = Tap()
    task = PipelineTask(Pipeline([llm, fillers, tap]), cancel_on_idle_timeout=False)
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    run = asyncio.ensure_future(runner.run())
    try:
        await asyncio.sleep(0.3)
        ctx = LLMContext()
        await llm.run_function_calls([FunctionCallFromLLM("ping", "p1", {}, ctx)])
        await asyncio.sleep(0.7)
        assert not tap.of(TTSAudioRawFrame)  # fast call: no filler
        await llm.run_function_calls([FunctionCallFromLLM("track_parcel", "t1", {}, ctx)])
        await asyncio.sleep(2.5)
        await scheduler.idle()
    finally:
        await task.queue_frame(EndFrame())
        await asyncio.wait_for(run, 10)
    kinds = [type(f).__name__ for f, _ in tap.frames]
    first_audio = kinds.index("TTSAudioRawFrame")
    slow_start = next(
        i
        for i, (f, _) in enumerate(tap.frames)
        if isinstance(f, FunctionCallInProgressFrame) and f.tool_call_id == "t1"
    )
    assert slow_start < first_audio
    audio = tap.of(TTSAudioRawFrame)
    pcm = np.concatenate([np.frombuffer(a.audio, dtype="<i2") for a in audio])
    played = bank.line(bank.last_played or "").audio
    assert abs(len(pcm) - len(played)) <= scheduler.frame_samples
    assert all(a.sample_rate == 24000 for a in audio)
    assert scheduler.stats["track_parcel"].started == 1
    assert scheduler.stats["ping"].cancelled == 1
    rec = next(r for r in scheduler.records if r.tool == "track_parcel")
    # Never before the threshold; the answer came after the line started.
    assert rec.ack_latency_s is not None and rec.ack_latency_s >= 0.4 - 1e-3
    assert rec.answer_latency_s is not None and rec.answer_latency_s > rec.ack_latency_s
    assert [r.tool_call_id for r in tap.of(FunctionCallResultFrame)] == ["p1", "t1"]
