"""History truncation on Pipecat's context: Pipecat's real assistant
aggregator writes an interrupted reply, HeardTruncation (after the output)
cuts it to the words whose audio played — real espeak-ng audio of the reply,
its exact word timings as the reference."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from turnkit.barge_in.controller import BargeInController
from turnkit.clock import RealClock, VirtualClock
from turnkit.tts.espeak import EspeakTTS

from turnkit_pipecat.truncation import HeardTruncation
from turnkit_pipecat.tts import EspeakTTSService

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from real_tts import require_espeak


@pytest.fixture(autouse=True)
def _espeak() -> None:
    """Skips without espeak-ng; fails under TURNKIT_REQUIRE_TTS=1 (CI)."""
    require_espeak()


REPLY = "Your order shipped on Monday, and it should arrive on Friday before noon."
SECOND = "Would you like the tracking number sent to your phone?"
NOTE = " [interrupted by the caller]"


def _audio_frames(audio: np.ndarray, rate: int, until_s: float) -> list[Frame]:
    pcm = np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")
    n = rate // 50  # 20 ms, as an output transport writes
    stop = int(until_s * rate)
    return [
        OutputAudioRawFrame(audio=pcm[i : i + n].tobytes(), sample_rate=rate, num_channels=1)
        for i in range(0, min(stop, len(pcm)), n)
    ]


async def _run(frames: list[Frame]) -> tuple[LLMContext, HeardTruncation]:
    context = LLMContext([{"role": "user", "content": "where is my order"}])
    assistant = LLMAssistantAggregator(context)
    # The audio frames go in faster than they would play: on a clock that
    # does not move, the cursor counts only the audio written (a live output
    # writes at playback pace and the cursor extrapolates between frames).
    truncation = HeardTruncation(clock=VirtualClock())
    truncation.attach(assistant, context)
    await run_test(Pipeline([truncation, assistant]), frames_to_send=frames)
    return context, truncation


def _reply(context: LLMContext) -> str:
    msgs = [m for m in context.get_messages() if m.get("role") == "assistant"]
    assert len(msgs) == 1
    return str(msgs[0]["content"])


async def test_interrupted_reply_is_cut_to_the_words_played() -> None:
    tts = EspeakTTS("en-us")
    timed = await tts.synthesize_words(REPLY)
    words = REPLY.split()
    # The caller barges in just after the end of "Monday,".
    k = 5
    until = timed.words[k - 1].end + 0.05
    frames: list[Frame] = [
        LLMFullResponseStartFrame(),
        SleepFrame(sleep=0.1),
        BotStartedSpeakingFrame(),
        TTSTextFrame(text=REPLY, text_type="sentence"),  # released at audio start
        *_audio_frames(timed.audio, timed.sample_rate, until),
        SleepFrame(sleep=0.3),
        InterruptionFrame(),
        SleepFrame(sleep=0.3),
    ]
    context, truncation = await _run(frames)
    kept = _reply(context).removesuffix(NOTE)
    assert truncation.truncations == 1
    assert REPLY.startswith(kept) and len(kept) < len(REPLY)
    # One sentence, no timestamps, no anchor: the nominal speaking rate
    # (espeak-ng's word-by-word rendering is a little slower: one word over).
    assert abs(len(kept.split()) - k) <= 1, (kept, words[:k])
    assert truncation.cursor.played_s(truncation.reply) == pytest.approx(until, abs=0.03)


async def test_second_sentence_cut_with_the_first_as_anchor() -> None:
    """Two sentences, each released as its audio starts: where the second
    began anchors the rate, and the cut lands within one word."""
    tts = EspeakTTS("en-us")
    one = await tts.synthesize_words(REPLY)
    two = await tts.synthesize_words(SECOND)
    k = 4  # "Would you like the" heard
    until = two.words[k - 1].end + 0.05
    frames: list[Frame] = [
        LLMFullResponseStartFrame(),
        SleepFrame(sleep=0.1),
        BotStartedSpeakingFrame(),
        TTSTextFrame(text=REPLY, text_type="sentence"),
        *_audio_frames(one.audio, one.sample_rate, 99.0),
        TTSTextFrame(text=SECOND, text_type="sentence"),
        *_audio_frames(two.audio, two.sample_rate, until),
        SleepFrame(sleep=0.3),
        InterruptionFrame(),
        SleepFrame(sleep=0.3),
    ]
    context, truncation = await _run(frames)
    kept = _reply(context).removesuffix(NOTE)
    full = f"{REPLY} {SECOND}"
    assert truncation.truncations == 1 and full.startswith(kept)
    heard_second = kept[len(REPLY) :].split()
    assert abs(len(heard_second) - k) <= 1, kept


async def test_completed_reply_is_kept_whole() -> None:
    tts = EspeakTTS("en-us")
    audio = await tts.synthesize(REPLY)
    frames: list[Frame] = [
        LLMFullResponseStartFrame(),
        SleepFrame(sleep=0.1),
        BotStartedSpeakingFrame(),
        TTSTextFrame(text=REPLY, text_type="sentence"),
        *_audio_frames(audio, tts.sample_rate, 99.0),
        LLMFullResponseEndFrame(),
        SleepFrame(sleep=0.2),
        BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.2),
    ]
    context, truncation = await _run(frames)
    assert _reply(context) == REPLY
    assert truncation.truncations == 0


# --- Pipecat's own word-timestamp frames --------------------------------------


class _Speaker(BaseOutputTransport):
    """Pipecat's output transport over a sound device that plays in real
    time: each write blocks for the chunk's duration, as a device's blocking
    write does (what LocalAudioOutputTransport does through PyAudio); the
    samples go nowhere."""

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        await asyncio.sleep(frame.num_frames / frame.sample_rate)
        return True


class _Caller(FrameProcessor):
    """Interrupts once ``after_s`` seconds of the bot's audio have played,
    the way Pipecat's user aggregator does (an InterruptionFrame from the
    start of the pipeline)."""

    def __init__(self, after_s: float) -> None:
        super().__init__()
        self.after_s = after_s
        self.played_s = 0.0
        self.task: PipelineTask | None = None
        self.fired = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, OutputAudioRawFrame) and direction is FrameDirection.DOWNSTREAM:
            self.played_s += frame.num_frames / frame.sample_rate
            if self.played_s >= self.after_s and not self.fired and self.task is not None:
                self.fired = True
                await self.task.queue_frame(InterruptionFrame())
        await self.push_frame(frame, direction)


class _ToldProgress(BargeInController):
    """The real controller, keeping what it was told of the agent's progress."""

    def __init__(self, clock: RealClock) -> None:
        super().__init__(clock)
        self.told: list[int] = []

    def on_agent_progress(self, text_offset: int) -> None:
        self.told.append(text_offset)
        super().on_agent_progress(text_offset)


async def _word_timed_call(after_s: float, barge_in: BargeInController | None = None):
    """LLM text -> EspeakTTSService (word timings) -> a real output transport ->
    HeardTruncation -> Pipecat's assistant aggregator; the caller interrupts
    after ``after_s`` s of played audio. Returns (context, truncation)."""
    context = LLMContext([{"role": "user", "content": "where is my order"}])
    assistant = LLMAssistantAggregator(context)
    truncation = HeardTruncation(barge_in=barge_in)
    truncation.attach(assistant, context)
    stopped = asyncio.Event()

    @assistant.event_handler("on_assistant_turn_stopped")
    async def _done(_agg: object, _message: object) -> None:
        stopped.set()

    caller = _Caller(after_s)
    speaker = _Speaker(TransportParams(audio_out_enabled=True, audio_out_sample_rate=16000))
    task = PipelineTask(
        Pipeline([EspeakTTSService("en-us"), speaker, truncation, caller, assistant]),
        params=PipelineParams(audio_out_sample_rate=16000),
        cancel_on_idle_timeout=False,
    )
    caller.task = task
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)

    async def drive() -> None:
        await task.queue_frames(
            [
                LLMFullResponseStartFrame(),
                LLMTextFrame(f"{REPLY} {SECOND}"),
                LLMFullResponseEndFrame(),
            ]
        )
        # Generous: the words render first (a subprocess each), then play.
        await asyncio.wait_for(stopped.wait(), timeout=120)
        await task.queue_frame(EndFrame())

    await asyncio.gather(runner.run(), drive())
    return context, truncation


async def test_word_timestamps_from_a_real_tts_and_output_cut_the_context() -> None:
    """Pipecat's own path: a TTS service reporting word timestamps
    (add_word_timestamps), the output transport releasing each word's
    TTSTextFrame at its pts as it starts playing; the caller interrupts in
    the middle of a word of the second sentence (espeak-ng's word timings
    of the two sentences, back to back, as the reference). Pipecat's
    aggregator has that word (it started); the context keeps the words whose
    audio ended, and the barge-in controller was told how far that is."""
    one = await EspeakTTS("en-us").synthesize_words(REPLY)
    two = await EspeakTTS("en-us").synthesize_words(SECOND)
    ref = [(w.text, one.duration + w.start, one.duration + w.end) for w in two.words]
    ref = [(w.text, w.start, w.end) for w in one.words] + ref
    k = len(one.words) + 4  # "... Would you like the" heard, "tracking" half
    stop_at = (ref[k][1] + ref[k][2]) / 2
    clock = RealClock()
    ctl = _ToldProgress(clock)
    ctl.on_agent_started(f"{REPLY} {SECOND}", clock.now())
    context, truncation = await _word_timed_call(stop_at, barge_in=ctl)
    assert truncation.truncations == 1 and truncation.timed_words > k
    kept = _reply(context).removesuffix(NOTE)
    heard = truncation.cursor.heard(truncation.reply)
    assert heard.method == "timestamps"
    played = truncation.cursor.played_s(truncation.reply)
    assert abs(played - stop_at) < 0.1
    # Words whose end had played, give or take one 40 ms output chunk and
    # the release jitter of the transport's clock.
    lo = sum(1 for _, _, end in ref if end <= played - 0.05)
    hi = sum(1 for _, _, end in ref if end <= played + 0.05)
    assert lo == hi == k  # half way through a word: no doubt which
    assert kept.split() == f"{REPLY} {SECOND}".split()[:k], kept
    # The controller was told the cursor's progress as the audio played:
    # never backwards, and at the interruption the cut itself.
    assert ctl.told and ctl.told == sorted(ctl.told)
    assert ctl.told[-1] == len(kept), (ctl.told[-1], kept)
