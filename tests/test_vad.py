"""Silero VAD on real audio, and the VADAnalyzer hysteresis by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from turnkit.audio.vad import (
    SILERO_16K_MODEL_PATH,
    SILERO_MODEL_PATH,
    SileroVAD,
    VADAnalyzer,
    VADParams,
    VADStep,
)
from turnkit.audio.wav import AudioError, iter_frames
from turnkit.replay.recording import RecordingError, load_recording

RECORDINGS = Path(__file__).resolve().parent.parent / "recordings"
FRAME_S = 512 / 16000  # 0.032
MAX_CALLS = 4  # enough evidence, keeps the file fast


@pytest.fixture(scope="module")
def silero() -> SileroVAD:
    return SileroVAD()


def _calls() -> list[Path]:
    return sorted(
        p.parent for p in RECORDINGS.glob("*/call.json") if (p.parent / "caller.wav").is_file()
    )


def test_silero_separates_labelled_caller_speech_from_long_silence(silero):
    calls = _calls()
    if not calls:
        pytest.skip(f"no recorded call (call.json + caller.wav) under {RECORDINGS}")
    speech_all: list[float] = []
    silence_all: list[float] = []
    used = 0
    for folder in calls:
        if used == MAX_CALLS:
            break
        try:
            rec = load_recording(folder)
            audio = rec.caller_audio()
        except (RecordingError, AudioError):
            continue  # a call being (re)generated right now is not ours to judge
        used += 1
        silero.reset()
        spans = [s for turn in rec.caller_turns for s in turn.speech_spans()]
        # Everything that puts sound into caller.wav is labelled: caller turns,
        # backchannels, echo (the agent coming back) and noise. agent_turn
        # marks agent.wav's timeline; its leakage is labelled as echo.
        sounds = [e for e in rec.manifest.events if e.type != "agent_turn"]
        speech, silence = [], []
        for start, frame in iter_frames(audio, silero.frame_samples):
            p = silero(frame)
            t0 = start / 16000
            t1 = t0 + FRAME_S
            if any(s <= t0 and t1 <= e for s, e in spans):
                speech.append(p)
            elif all(t1 < e.start - 1.0 or t0 > e.end + 1.0 for e in sounds):
                silence.append(p)
        if len(speech) >= 10 and len(silence) >= 10:
            assert np.mean(speech) > 0.6, f"{rec.id}: speech frames mean {np.mean(speech):.3f}"
            assert np.mean(silence) < 0.2, f"{rec.id}: silence frames mean {np.mean(silence):.3f}"
        speech_all += speech
        silence_all += silence
    if len(speech_all) < 50 or len(silence_all) < 50:
        pytest.skip(
            f"corpus under {RECORDINGS} has too few labelled speech ({len(speech_all)}) "
            f"or long-silence ({len(silence_all)}) frames"
        )
    assert np.mean(speech_all) - np.mean(silence_all) > 0.6


def test_silero_digital_silence_stays_below_0_1_for_two_seconds(silero):
    silero.reset()
    probs = [silero(np.zeros(512, dtype=np.float32)) for _ in range(63)]  # 2.016 s
    assert max(probs) < 0.1


def test_silero_rejects_wrong_frame_size(silero):
    for n in (256, 511, 513, 1024):
        with pytest.raises(ValueError, match="512"):
            silero(np.zeros(n, dtype=np.float32))


def test_silero_reset_makes_results_repeatable(silero):
    rng = np.random.default_rng(7)
    t = np.arange(512 * 40) / 16000
    # an amplitude-modulated harmonic tone plus noise: anything non-trivial
    audio = (
        0.3 * np.sin(2 * np.pi * 150 * t) * (1 + np.sin(2 * np.pi * 3 * t))
        + 0.05 * rng.standard_normal(len(t))
    ).astype(np.float32)
    frames = [f for _, f in iter_frames(audio, 512)]
    silero.reset()
    first = [silero(f) for f in frames]
    silero.reset()
    second = [silero(f) for f in frames]
    assert first == second
    # without a reset the carried state changes the answer
    third = [silero(f) for f in frames]
    assert third != first
    assert all(0.0 <= p <= 1.0 for p in first)


def test_two_silero_instances_keep_separate_state():
    a, b = SileroVAD(), SileroVAD()
    loud = (0.5 * np.sin(2 * np.pi * 200 * np.arange(512) / 16000)).astype(np.float32)
    quiet = np.zeros(512, dtype=np.float32)
    for _ in range(10):
        a(loud)
    b_alone = SileroVAD()
    assert b(quiet) == b_alone(quiet)


def test_branch_free_16k_model_matches_the_vendored_model_bit_for_bit():
    """SileroVAD's default model (silero_vad_16k.onnx, the vendored graph
    with its run-time branches resolved for 16 kHz, batch 1) gives exactly
    the vendored model's probabilities and state, frame after frame, on
    real calls (speech, echo, noise, silence) and on synthetic edge cases."""
    assert SileroVAD()._session is not SileroVAD(SILERO_MODEL_PATH)._session
    calls = _calls()[:2]
    if not calls:
        pytest.skip(f"no recorded call under {RECORDINGS}")
    audio = [load_recording(c).caller_audio() for c in calls]
    rng = np.random.default_rng(7)
    audio.append(
        np.concatenate(
            [
                np.zeros(4096, np.float32),
                np.clip(rng.standard_normal(8192), -1, 1).astype(np.float32),  # full-scale noise
                np.ones(2048, np.float32),
                -np.ones(2048, np.float32),
            ]
        )
    )
    fast, vendored = SileroVAD(SILERO_16K_MODEL_PATH), SileroVAD(SILERO_MODEL_PATH)
    n = 0
    for a in audio:
        fast.reset()
        vendored.reset()
        for _, frame in iter_frames(a, 512):
            assert fast(frame) == vendored(frame)
            n += 1
        assert np.array_equal(fast._state, vendored._state)
    assert n > 1000


# --- VADAnalyzer hysteresis, driven by hand-made probabilities ----------------


def analyzer(**params) -> VADAnalyzer:
    return VADAnalyzer(model=SileroVAD(), params=VADParams(**params))


def run(vad: VADAnalyzer, probs: list[float], t0: float = 0.0) -> list[VADStep]:
    return [vad.step(p, t0 + i * FRAME_S) for i, p in enumerate(probs)]


def test_speech_starts_after_start_ms_of_frames_at_or_above_threshold():
    vad = analyzer(threshold=0.5, start_ms=96)  # three 32 ms frames
    steps = run(vad, [0.1, 0.5, 0.9, 0.7, 0.8])
    assert [s.speaking for s in steps] == [False, False, False, True, True]
    assert [s.started for s in steps] == [False, False, False, True, False]
    assert steps[3].speech_start == pytest.approx(1 * FRAME_S)  # onset of first speech frame
    assert steps[3].speech_end == pytest.approx(4 * FRAME_S)  # end of the confirming frame


def test_threshold_is_inclusive_and_start_ms_zero_starts_on_first_frame():
    vad = analyzer(threshold=0.5, start_ms=0)
    steps = run(vad, [0.49, 0.5])
    assert [s.speaking for s in steps] == [False, True]
    assert steps[1].started


def test_short_blip_does_not_start_speech_or_move_speech_end():
    vad = analyzer(threshold=0.5, start_ms=96, stop_ms=96)
    # a real stretch of speech, ended ...
    steps = run(vad, [0.9, 0.9, 0.9, 0.9, 0.0, 0.0, 0.0])
    assert steps[-1].stopped
    end_before = steps[-1].speech_end
    assert end_before == pytest.approx(4 * FRAME_S)
    # ... then a two-frame blip (64 ms < start_ms)
    blip = run(vad, [0.95, 0.95, 0.1, 0.1], t0=7 * FRAME_S)
    assert not any(s.speaking or s.started for s in blip)
    assert all(s.speech_end == end_before for s in blip)
    assert vad.speech_end == end_before


def test_blip_broken_by_a_low_frame_restarts_the_onset_count():
    vad = analyzer(threshold=0.5, start_ms=96)
    steps = run(vad, [0.9, 0.9, 0.2, 0.9, 0.9, 0.9])
    assert [s.speaking for s in steps] == [False, False, False, False, False, True]
    assert steps[5].speech_start == pytest.approx(3 * FRAME_S)


def test_stop_needs_stop_ms_of_frames_below_neg_threshold():
    vad = analyzer(threshold=0.5, neg_threshold=0.35, start_ms=32, stop_ms=128)  # 4 frames
    steps = run(vad, [0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert [s.speaking for s in steps] == [True, True, True, True, True, False, False]
    assert [s.stopped for s in steps] == [False, False, False, False, False, True, False]
    assert steps[5].speech_end == pytest.approx(2 * FRAME_S)  # end of last speech frame


def test_quiet_run_interrupted_by_speech_restarts_the_stop_count():
    vad = analyzer(threshold=0.5, start_ms=32, stop_ms=96)  # 3 frames
    steps = run(vad, [0.9, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1])
    assert [s.speaking for s in steps] == [True, True, True, True, True, True, False]
    assert steps[-1].stopped
    assert steps[-1].speech_end == pytest.approx(4 * FRAME_S)


def test_probabilities_between_neg_and_threshold_keep_speaking_without_moving_speech_end():
    vad = analyzer(threshold=0.5, neg_threshold=0.3, start_ms=32, stop_ms=64)
    steps = run(vad, [0.9] + [0.4] * 20)
    assert all(s.speaking for s in steps)
    assert not any(s.stopped for s in steps)
    assert all(s.speech_end == pytest.approx(FRAME_S) for s in steps)
    # and a neg-band frame resets the quiet count
    more = run(vad, [0.1, 0.4, 0.1, 0.1], t0=21 * FRAME_S)
    assert [s.speaking for s in more] == [True, True, True, False]


def test_default_neg_threshold_is_threshold_minus_0_15():
    assert VADParams(threshold=0.5).neg == pytest.approx(0.35)
    assert VADParams(threshold=0.1).neg == pytest.approx(0.01)  # floored
    assert VADParams(threshold=0.5, neg_threshold=0.2).neg == 0.2
    vad = analyzer(threshold=0.5, start_ms=32, stop_ms=32)
    steps = run(vad, [0.9, 0.36, 0.34])
    assert [s.speaking for s in steps] == [True, True, False]


def test_second_speech_stretch_reports_its_own_onset_and_end():
    vad = analyzer(threshold=0.5, start_ms=64, stop_ms=64)
    probs = [0.9] * 3 + [0.0] * 3 + [0.1] * 2 + [0.8] * 4 + [0.0] * 2
    steps = run(vad, probs)
    starts = [i for i, s in enumerate(steps) if s.started]
    stops = [i for i, s in enumerate(steps) if s.stopped]
    assert starts == [1, 9]
    assert stops == [4, 13]
    assert steps[9].speech_start == pytest.approx(8 * FRAME_S)
    assert steps[13].speech_end == pytest.approx(12 * FRAME_S)


def test_reset_forgets_speech_state():
    vad = analyzer(threshold=0.5, start_ms=32)
    run(vad, [0.9, 0.9])
    assert vad.speaking
    vad.reset()
    assert not vad.speaking
    assert vad.speech_end == 0.0 and vad.speech_start == 0.0
    step = vad.step(0.1, 5.0)
    assert not step.speaking and step.speech_end == 0.0


def test_analyze_runs_the_model_on_the_frame(silero):
    vad = VADAnalyzer(model=silero)
    step = vad.analyze(np.zeros(512, dtype=np.float32), at=0.0)
    assert step.prob < 0.1 and not step.speaking
    with pytest.raises(ValueError):
        vad.analyze(np.zeros(480, dtype=np.float32), at=0.032)
