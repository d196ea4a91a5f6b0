"""Filler lines: real espeak-ng rendering, the prerender cache, and the
scheduler's timing on a VirtualClock (exact instants, no wall-clock asserts).

Tests that need espeak-ng skip without it — unless ``TURNKIT_REQUIRE_TTS=1``
(CI), where they fail. Install: ``apt-get install -y espeak-ng``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest
from real_tts import require_espeak

from turnkit.clock import RealClock, VirtualClock, settle
from turnkit.fillers import FillerBank, FillerScheduler, filler_key
from turnkit.frames import AudioOutFrame
from turnkit.tts import TTS, EspeakTTS, TTSUnavailable
from turnkit.tts.espeak import espeak_version

LINES = (
    "One moment, let me check that.",
    "Just a second.",
    "Let me look that up for you.",
)
RATE = 16000
FRAME_S = 0.02
FRAME_N = int(FRAME_S * RATE)




class CountingTTS:
    """Wraps a real TTS and counts the lines it is asked to render."""

    def __init__(self, inner: EspeakTTS) -> None:
        self.inner = inner
        self.calls: list[str] = []

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def voice(self) -> str:
        return self.inner.voice

    @property
    def sample_rate(self) -> int:
        return self.inner.sample_rate

    async def synthesize(self, text: str) -> np.ndarray:
        self.calls.append(text)
        return await self.inner.synthesize(text)


@pytest.fixture(scope="module")
def espeak() -> EspeakTTS:
    require_espeak()
    return EspeakTTS("en-us")


@pytest.fixture(scope="module")
def cache_dir(espeak: EspeakTTS, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A disk cache holding LINES at RATE, rendered once for the module."""
    d = tmp_path_factory.mktemp("fillers")
    asyncio.run(FillerBank(LINES, espeak, RATE, cache_dir=d).prerender())
    return d


@pytest.fixture
async def bank(espeak: EspeakTTS, cache_dir: Path) -> FillerBank:
    """A fresh bank (own rotation state) loaded from the module's cache."""
    b = FillerBank(LINES, espeak, RATE, cache_dir=cache_dir)
    await b.prerender()
    assert b.loaded == len(LINES) and b.rendered == 0
    return b


# --- EspeakTTS ---------------------------------------------------------------


async def test_espeak_renders_real_audio_with_plausible_duration(espeak: EspeakTTS):
    assert isinstance(espeak, TTS)
    audio = await espeak.synthesize(LINES[0])
    assert audio.dtype == np.float32 and audio.ndim == 1
    duration = len(audio) / espeak.sample_rate
    assert 1.0 < duration < 4.0, duration  # six words at 170 wpm, ~2 s
    assert float(np.sqrt(np.mean(audio**2))) > 0.02  # speech, not silence
    assert float(np.max(np.abs(audio))) <= 1.0
    short = await espeak.synthesize("Okay.")
    assert len(short) < len(audio)


def test_espeak_identity_carries_version_and_settings(espeak: EspeakTTS):
    version = espeak_version()
    assert re.fullmatch(r"\d+(\.\d+)+\S*", version), version
    assert f"espeak-ng {version}" in espeak.identity
    assert "voice=en-us" in espeak.identity
    assert EspeakTTS("en-gb").identity != espeak.identity
    assert EspeakTTS("en-us", speed=140).identity != espeak.identity


async def test_espeak_speaks_text_that_looks_like_an_option(espeak: EspeakTTS):
    audio = await espeak.synthesize("-v hello")
    assert len(audio) > 0.2 * espeak.sample_rate


def test_missing_binary_is_a_one_line_error_with_the_apt_command():
    with pytest.raises(TTSUnavailable) as info:
        EspeakTTS(binary="espeak-ng-not-installed-here")
    msg = str(info.value)
    assert "\n" not in msg and "apt-get install -y espeak-ng" in msg


# --- FillerBank ----------------------------------------------------------------


async def test_prerender_caches_in_memory_and_on_disk_and_a_fresh_bank_skips_the_tts(
    espeak: EspeakTTS, tmp_path: Path
):
    tts = CountingTTS(espeak)
    first = FillerBank(LINES, tts, RATE, cache_dir=tmp_path)
    lines = await first.prerender()
    assert sorted(tts.calls) == sorted(LINES) and first.rendered == len(LINES)
    for line in lines:
        assert line.sample_rate == RATE
        assert 0.3 < line.duration < 3.0
        assert (tmp_path / f"{line.key}.npy").is_file()
    await first.prerender()  # in memory: nothing to do
    assert len(tts.calls) == len(LINES)

    second = FillerBank(LINES, tts, RATE, cache_dir=tmp_path)
    await second.prerender()
    assert len(tts.calls) == len(LINES), "same key: loaded from disk, no TTS call"
    assert second.loaded == len(LINES) and second.rendered == 0
    for a, b in zip(first.lines, second.lines, strict=True):
        assert a.key == b.key and np.array_equal(a.audio, b.audio)

    # another rate: new keys, rendered again
    wide = FillerBank(LINES, tts, 24000, cache_dir=tmp_path)
    await wide.prerender()
    assert len(tts.calls) == 2 * len(LINES)
    for a, b in zip(first.lines, wide.lines, strict=True):
        assert a.key != b.key
        assert abs(b.duration - a.duration) < 0.01  # same speech, resampled
    # one new line: only it is rendered
    edited = FillerBank((*LINES[:2], "Hang on a moment."), tts, RATE, cache_dir=tmp_path)
    await edited.prerender()
    assert tts.calls[2 * len(LINES) :] == ["Hang on a moment."]
    # another voice: rendered again
    gb = FillerBank(LINES, CountingTTS(EspeakTTS("en-gb")), RATE, cache_dir=tmp_path)
    await gb.prerender()
    assert gb.rendered == len(LINES) and gb.loaded == 0
    assert {line.key for line in gb.lines}.isdisjoint(line.key for line in first.lines)


def test_key_changes_with_identity_voice_text_and_rate():
    base = filler_key("espeak-ng 1.51|voice=en-us", "en-us", "Just a second.", 16000)
    assert base == filler_key("espeak-ng 1.51|voice=en-us", "en-us", "Just a second.", 16000)
    assert base != filler_key("espeak-ng 1.52|voice=en-us", "en-us", "Just a second.", 16000)
    assert base != filler_key("espeak-ng 1.51|voice=en-us", "en-gb", "Just a second.", 16000)
    assert base != filler_key("espeak-ng 1.51|voice=en-us", "en-us", "Just a sec.", 16000)
    assert base != filler_key("espeak-ng 1.51|voice=en-us", "en-us", "Just a second.", 8000)


async def test_a_corrupt_cache_file_is_rendered_again(espeak: EspeakTTS, tmp_path: Path):
    tts = CountingTTS(espeak)
    bank = FillerBank(LINES[:2], tts, RATE, cache_dir=tmp_path)
    bank.path_for(LINES[0]).parent.mkdir(parents=True, exist_ok=True)
    bank.path_for(LINES[0]).write_bytes(b"not numpy")
    await bank.prerender()
    assert sorted(tts.calls) == sorted(LINES[:2])
    again = FillerBank(LINES[:2], tts, RATE, cache_dir=tmp_path)
    await again.prerender()
    assert again.loaded == 2


async def test_next_line_never_repeats_back_to_back_and_deals_each_line_per_round(
    bank: FillerBank,
):
    dealt = [bank.next_line().text for _ in range(300)]
    assert all(a != b for a, b in itertools.pairwise(dealt))
    for r in range(0, 300, len(LINES)):
        assert sorted(dealt[r : r + len(LINES)]) == sorted(LINES)


def test_bank_refuses_configurations_that_would_repeat(espeak: EspeakTTS):
    with pytest.raises(ValueError, match="at least two"):
        FillerBank(["Just a second."], espeak)
    with pytest.raises(ValueError, match="duplicate"):
        FillerBank(["Just a second.", "Just a second."], espeak)
    with pytest.raises(RuntimeError, match="prerender"):
        FillerBank(LINES, espeak).next_line()


# --- FillerScheduler on a VirtualClock --------------------------------------------


class Harness:
    def __init__(self, bank: FillerBank, **kw) -> None:
        self.clock = VirtualClock()
        self.frames: list[AudioOutFrame] = []
        self.sched = FillerScheduler(
            bank, self.clock, sink=self.frames.append, frame_s=FRAME_S, **kw
        )

    async def call(self, tool: str, duration: float):
        async with self.sched.guard(tool) as g:
            await self.clock.sleep(duration)
        return g

    async def run(self, script, until: float):
        task = asyncio.create_task(script())
        await settle()
        await self.clock.advance_to(until)
        assert task.done()
        return task.result()

    def frames_between(self, t0: float, t1: float) -> list[AudioOutFrame]:
        return [f for f in self.frames if t0 <= f.at < t1]


async def test_tool_faster_than_threshold_plays_no_filler(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0)
    g = await h.run(lambda: h.call("lookup", 0.5), until=5.0)
    assert h.frames == []
    assert g.record.ack_latency_s is None and g.record.answer_latency_s == 0.5
    st = h.sched.stats["lookup"]
    assert (st.calls, st.started, st.cancelled) == (1, 0, 1)
    assert bank.last_played is None  # a cancelled filler consumes no line


async def test_slow_tool_gets_a_filler_exactly_at_the_threshold(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0)
    g = await h.run(lambda: h.call("lookup", 1.5), until=10.0)
    rec = g.record
    assert h.frames[0].at == 1.0
    assert rec.first_audio_at == 1.0 and rec.filler_delay_s == 0.0
    assert rec.filler_delay_s <= FRAME_S
    assert rec.ack_latency_s == 1.0 and rec.answer_latency_s == 1.5  # measured apart
    line = bank.line(rec.lines[0])
    # on_result="finish": the whole line, paced one frame per frame_s
    assert len(h.frames) == math.ceil(len(line.audio) / FRAME_N)
    assert all(f.sample_rate == RATE and len(f.audio) == FRAME_N for f in h.frames)
    np.testing.assert_allclose([f.at for f in h.frames], 1.0 + FRAME_S * np.arange(len(h.frames)))
    played = np.concatenate([f.audio for f in h.frames])[: len(line.audio)]
    assert np.array_equal(played, line.audio)
    st = h.sched.stats["lookup"]
    assert (st.started, st.finished, st.stopped, st.cancelled) == (1, 1, 0, 0)


async def test_slow_tools_in_a_row_get_different_lines(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0)

    async def script():
        guards = []
        for _ in range(8):
            guards.append(await h.call("lookup", 2.0))
            await guards[-1].finished()
        return guards

    guards = await h.run(script, until=200.0)
    said = [g.record.lines[0] for g in guards]
    assert all(a != b for a, b in itertools.pairwise(said)), said
    assert all(g.record.filler_delay_s == 0.0 for g in guards)


async def test_per_tool_thresholds(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0, per_tool_threshold={"payment": 3.0, "cache": 0.2})

    async def script():
        out = {}
        out["payment_fast"] = await h.call("payment", 2.0)  # under its 3 s
        out["payment_slow"] = await h.call("payment", 4.0)
        await out["payment_slow"].finished()
        out["cache"] = await h.call("cache", 0.5)
        await out["cache"].finished()
        out["lookup"] = await h.call("lookup", 1.2)
        return out

    g = await h.run(script, until=100.0)
    assert g["payment_fast"].record.first_audio_at is None
    assert g["payment_slow"].record.ack_latency_s == pytest.approx(3.0, abs=1e-9)
    assert g["cache"].record.ack_latency_s == pytest.approx(0.2, abs=1e-9)
    assert g["lookup"].record.ack_latency_s == pytest.approx(1.0, abs=1e-9)
    for name in ("payment_slow", "cache", "lookup"):
        assert g[name].record.filler_delay_s == pytest.approx(0.0, abs=1e-9)
    assert h.sched.stats["payment"].cancelled == 1 and h.sched.stats["payment"].started == 1


async def test_on_result_stop_cuts_within_a_frame_with_a_fade(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0, on_result="stop")
    g = await h.run(lambda: h.call("lookup", 1.1), until=10.0)
    assert h.frames[0].at == 1.0
    assert h.frames[-1].at <= 1.1 + FRAME_S + 1e-9
    assert abs(h.frames[-1].audio[-1]) < 1e-6  # faded to zero, no click
    st = h.sched.stats["lookup"]
    assert (st.started, st.stopped, st.finished) == (1, 1, 0)
    assert g.record.answer_latency_s == pytest.approx(1.1)


async def test_result_during_a_line_lets_it_finish_by_default_and_finished_waits(
    bank: FillerBank,
):
    h = Harness(bank, threshold_s=1.0)

    async def script():
        g = await h.call("lookup", 1.1)
        result_at = h.clock.now()
        await g.finished()
        return g, result_at, h.clock.now()

    g, result_at, quiet_at = await h.run(script, until=10.0)
    line = bank.line(g.record.lines[0])
    assert result_at == pytest.approx(1.1)
    assert quiet_at >= 1.0 + line.duration - 1e-9  # the answer waits for the line to end
    assert h.frames[-1].at < quiet_at


async def test_cancelled_call_cuts_the_filler(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0)
    task = asyncio.create_task(h.call("lookup", 10.0))
    await settle()
    await h.clock.advance_to(1.2)
    task.cancel()
    await settle()
    await h.clock.advance_to(10.0)
    assert h.frames[-1].at <= 1.2 + FRAME_S + 1e-9
    assert h.sched.stats["lookup"].stopped == 1


async def test_one_filler_at_a_time_across_parallel_tools(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0)

    async def script():
        return await asyncio.gather(h.call("a", 2.0), h.call("b", 2.0))

    ga, gb = await h.run(script, until=10.0)
    assert ga.record.first_audio_at == 1.0 and gb.record.first_audio_at is None
    assert h.sched.stats["b"].skipped_busy == 1
    ats = [f.at for f in h.frames]
    assert len(ats) == len(set(ats))  # never two frames at once


async def test_repeat_after_plays_another_different_line(bank: FillerBank):
    h = Harness(bank, threshold_s=1.0, repeat_after_s=1.0)
    g = await h.run(lambda: h.call("payment", 12.0), until=30.0)
    lines = g.record.lines
    assert len(lines) >= 2 and all(a != b for a, b in itertools.pairwise(lines))
    assert h.frames[-1].at < 12.0 + 3.0


async def test_real_clock_smoke(bank: FillerBank):
    frames: list[AudioOutFrame] = []

    async def sink(frame: AudioOutFrame) -> None:
        frames.append(frame)

    sched = FillerScheduler(bank, RealClock(), sink=sink, threshold_s=0.05, on_result="stop")
    async with sched.guard("lookup") as g:
        await asyncio.sleep(0.15)
    await g.finished()
    assert frames and g.record.first_audio_at is not None
    assert sched.stats["lookup"].started == 1
