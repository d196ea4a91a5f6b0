"""The session's one audio timeline on real corpus audio: framing, one
16 kHz converter from any rate, the audio clock, the echo filter (and its
idle fast path giving the same verdicts), one VAD, the caller's own rate
told to the detector; and the plugins holding exactly one timeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from turnkit.audio.timeline import (
    FRAME_SAMPLES,
    SAMPLE_RATE,
    AudioClock,
    AudioTimeline,
)
from turnkit.audio.vad import VADAnalyzer
from turnkit.audio.wav import read_wav, resample
from turnkit.barge_in.echo import EchoFilter, EchoParams, align_reference
from turnkit.clock import VirtualClock
from turnkit.detectors.registry import create_detector

REC = Path(__file__).resolve().parents[1] / "recordings"
CALL = "booking-think-03"
ECHO_CALLS = ["account-bargein-07", "booking-think-03", "headset-bargein-11"]


def _starts(frames: list) -> list[float]:
    return [f.vad.speech_start for f in frames if f.vad.started]


async def _push_all(tl: AudioTimeline, audio: np.ndarray, rate: int, chunk_s: float) -> list:
    out = []
    step = max(1, int(chunk_s * rate))
    for i in range(0, len(audio), step):
        out += await tl.push(audio[i : i + step], rate)
    return out


async def test_frames_are_32_ms_on_the_audio_clock_whatever_the_chunks() -> None:
    audio = read_wav(REC / CALL / "caller.wav", SAMPLE_RATE)[: 5 * SAMPLE_RATE]
    clock = VirtualClock()
    tl = AudioTimeline(clock)
    seen: list[tuple[float, float]] = []
    frames = []
    # odd chunk sizes (7 ms, then 100 ms): framing must not care
    start = 0
    for n in [112] * 50 + [1600] * 40:
        got = await tl.push(audio[start : start + n], SAMPLE_RATE)
        start += n
        for f in got:
            seen.append((f.at, clock.now()))
        frames += got
    total = 112 * 50 + 1600 * 40
    assert len(frames) == total // FRAME_SAMPLES
    for k, f in enumerate(frames):
        assert f.at == pytest.approx(k * FRAME_SAMPLES / SAMPLE_RATE)
        assert len(f.audio) == FRAME_SAMPLES and f.vad is not None
        assert np.array_equal(f.audio, audio[k * FRAME_SAMPLES : (k + 1) * FRAME_SAMPLES])
    # the clock stood at least at each frame's end when the frames came back,
    # and is exactly the audio framed so far
    assert all(now >= at + FRAME_SAMPLES / SAMPLE_RATE - 1e-9 for at, now in seen)
    assert clock.now() == pytest.approx(len(frames) * FRAME_SAMPLES / SAMPLE_RATE)
    assert tl.now == clock.now()


async def test_int16_bytes_and_float_give_the_same_frames() -> None:
    audio = read_wav(REC / CALL / "caller.wav", SAMPLE_RATE)[: 2 * SAMPLE_RATE]
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
    a = await AudioTimeline(AudioClock()).push(pcm.tobytes(), SAMPLE_RATE)
    b = await AudioTimeline(AudioClock()).push(pcm.astype(np.float32) / 32768.0, SAMPLE_RATE)
    assert len(a) == len(b) > 0
    assert all(np.array_equal(x.audio, y.audio) for x, y in zip(a, b, strict=True))
    # interleaved stereo: the first channel is kept
    stereo = np.stack([pcm, np.zeros_like(pcm)], axis=1).ravel()
    c = await AudioTimeline(AudioClock()).push(stereo.tobytes(), SAMPLE_RATE, channels=2)
    assert all(np.array_equal(x.audio, y.audio) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("rate", [8000, 24000, 48000])
async def test_any_rate_is_resampled_once_and_the_detector_is_told_the_rate(rate: int) -> None:
    """The same call at 8/24/48 kHz, pushed in 20 ms chunks: the streamed
    conversion matches a one-shot resample of the whole file (no seams at
    chunk edges, no delay), the speech onsets match the 16 kHz ones, and a
    fused detector hears the line's rate."""
    path = REC / CALL / "caller.wav"
    ref = await _push_all(AudioTimeline(AudioClock()), read_wav(path, SAMPLE_RATE), SAMPLE_RATE, 0.02)
    clock = AudioClock()
    tl = AudioTimeline(clock)
    det = create_detector("fused", clock)
    tl.attach(det)
    src = read_wav(path, rate)
    got = await _push_all(tl, src, rate, 0.02)
    assert abs(len(got) - len(ref)) <= 1
    assert tl.source_rate == rate
    assert (det.scorer.audio_factor < 1.0) == (rate <= 8000)
    streamed = np.concatenate([f.audio for f in got])
    whole = resample(src, rate, SAMPLE_RATE)[: len(streamed)]
    # soxr's stream and one-shot agree sample for sample (to float noise)
    assert np.max(np.abs(streamed[1000:-1000] - whole[1000:-1000])) < 1e-3
    want, have = _starts(ref), _starts(got)
    near = [a for a in want if any(abs(a - b) <= 2 * FRAME_SAMPLES / SAMPLE_RATE for b in have)]
    # a telephone band moves a blip or two; the turns stay where they were
    assert len(near) >= 0.8 * len(want) and abs(len(have) - len(want)) <= 2


def test_set_source_rate_reaches_detectors_attached_later() -> None:
    clock = VirtualClock()
    tl = AudioTimeline(clock)
    tl.set_source_rate(8000)
    det = create_detector("fused", clock)
    tl.attach(det)
    assert det.scorer.audio_factor < 1.0
    tl.set_source_rate(16000)
    assert det.scorer.audio_factor == 1.0


async def test_a_line_rate_holds_over_the_rate_frames_arrive_at() -> None:
    """A phone call the framework already resampled (Twilio's 8 kHz line
    reaching Pipecat as 16 kHz frames): the host says the line rate and the
    detector keeps weighing the audio as telephone band."""
    clock = AudioClock()
    tl = AudioTimeline(clock)
    det = create_detector("fused", clock)
    tl.attach(det)
    tl.set_line_rate(8000)
    audio = read_wav(REC / CALL / "caller.wav", SAMPLE_RATE)[: SAMPLE_RATE]
    frames = await _push_all(tl, audio, SAMPLE_RATE, 0.02)
    assert frames and tl.source_rate == 8000
    assert det.scorer.audio_factor < 1.0
    tl.set_line_rate(None)  # back to the frames' own rate
    await _push_all(tl, audio[:3200], SAMPLE_RATE, 0.02)
    assert tl.source_rate == SAMPLE_RATE and det.scorer.audio_factor == 1.0


@pytest.mark.parametrize("call", ECHO_CALLS)
def test_echo_idle_skip_gives_the_same_verdicts(call: str) -> None:
    """The echo filter skips its spectral work on frames with nothing
    played nearby and catches up in a batch; every verdict and every output
    sample is what the full filter gives."""
    c = read_wav(REC / call / "caller.wav", SAMPLE_RATE)
    a = align_reference(read_wav(REC / call / "agent.wav", SAMPLE_RATE), SAMPLE_RATE, len(c))
    full, fast = EchoFilter(EchoParams(idle_skip=False)), EchoFilter()
    full.set_reference(a)
    fast.set_reference(a)
    for i in range(0, len(c) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        x = full.process(c[i : i + FRAME_SAMPLES], i / SAMPLE_RATE)
        y = fast.process(c[i : i + FRAME_SAMPLES], i / SAMPLE_RATE)
        assert np.array_equal(x.audio, y.audio), i
        assert (x.reference_active, x.caller_present, x.delay_ms, x.echo_power) == (
            y.reference_active,
            y.caller_present,
            y.delay_ms,
            y.echo_power,
        ), i
    assert fast.idle_frames > 100  # the agent is silent for much of the call
    assert full.idle_frames == 0


async def test_timeline_echo_filter_runs_before_the_one_vad() -> None:
    """Live shape: the agent's played audio pushed as it plays (at 24 kHz,
    through the timeline's own converter) and the mic after it; the echo
    filter judges echo-only frames and the VAD hears the cleaned audio."""
    call = "account-bargein-07"
    c = read_wav(REC / call / "caller.wav", SAMPLE_RATE)
    agent24 = read_wav(REC / call / "agent.wav", 24000)
    clock = AudioClock()
    tl = AudioTimeline(clock, echo=EchoFilter())
    frames = []
    step16, step24 = 320, 480  # 20 ms
    for k in range(len(c) // step16):
        # the loudspeaker plays this 20 ms as the mic hears it
        tl.push_reference(agent24[k * step24 : (k + 1) * step24], 24000, at=k * 0.02)
        frames += await tl.push(c[k * step16 : (k + 1) * step16], SAMPLE_RATE)
    assert tl.echo_frames > 20
    assert tl.echo is not None and tl.echo.delay_ms is not None
    assert tl.last_echo is not None
    # the VAD heard the echo-suppressed audio, not the raw mic
    raw = VADAnalyzer()
    raw_starts = [
        raw.analyze(c[i : i + FRAME_SAMPLES], i / SAMPLE_RATE).started
        for i in range(0, len(frames) * FRAME_SAMPLES, FRAME_SAMPLES)
    ]
    assert sum(f.vad.started for f in frames) < sum(raw_starts)


def test_plugins_hold_one_timeline_and_one_vad() -> None:
    pytest.importorskip("turnkit_pipecat")
    from turnkit_pipecat.engine import TurnkitTurnEngine

    engine = TurnkitTurnEngine("silence", echo=EchoFilter())
    assert engine.vad is engine.timeline.vad
    assert engine.echo is engine.timeline.echo
    assert engine.clock is engine.timeline.clock
