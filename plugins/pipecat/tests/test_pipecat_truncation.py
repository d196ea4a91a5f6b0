"""History truncation on Pipecat's context: Pipecat's real assistant
aggregator writes an interrupted reply, HeardTruncation (after the output)
cuts it to the words whose audio played — real espeak-ng audio of the reply,
its exact word timings as the reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.tests.utils import SleepFrame, run_test
from turnkit.clock import VirtualClock
from turnkit.tts.espeak import EspeakTTS

from turnkit_pipecat.truncation import HeardTruncation

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
