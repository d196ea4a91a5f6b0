"""read_wav / iter_frames on real WAV files written with soundfile."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from turnkit.audio.wav import AudioError, iter_frames, iter_wav_frames, read_wav

SR = 16000


def sine(freq: float, seconds: float, rate: int, amp: float = 0.5) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def noise(n: int, seed: int = 0, amp: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.standard_normal(n) * amp, -0.99, 0.99).astype(np.float32)


def peak_hz(audio: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.fft.rfftfreq(len(audio), 1 / rate)[np.argmax(spectrum)])


def assert_one_line_naming(exc: pytest.ExceptionInfo, path: Path) -> None:
    msg = str(exc.value)
    assert str(path) in msg
    assert "\n" not in msg and "\r" not in msg


def test_mono_16k_pcm16_round_trip(tmp_path):
    x = noise(SR)
    path = tmp_path / "mono.wav"
    sf.write(path, x, SR, subtype="PCM_16")
    y = read_wav(path)
    assert y.dtype == np.float32
    assert y.ndim == 1
    assert len(y) == len(x)
    np.testing.assert_allclose(y, x, atol=1.0 / 32768 + 1e-6)


def test_float_wav_round_trip_is_exact(tmp_path):
    x = noise(SR // 2, seed=1)
    path = tmp_path / "float.wav"
    sf.write(path, x, SR, subtype="FLOAT")
    y = read_wav(path)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x)


def test_read_wav_accepts_str_paths(tmp_path):
    path = tmp_path / "s.wav"
    sf.write(path, noise(1000), SR, subtype="PCM_16")
    assert len(read_wav(str(path))) == 1000


def test_stereo_returns_first_channel_with_a_warning(tmp_path, caplog):
    left, right = noise(SR, seed=2), sine(440, 1.0, SR)
    path = tmp_path / "stereo.wav"
    sf.write(path, np.stack([left, right], axis=1), SR, subtype="FLOAT")
    with caplog.at_level(logging.WARNING, logger="turnkit.audio.wav"):
        y = read_wav(path)
    np.testing.assert_array_equal(y, left)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()
    assert "2 channels" in warnings[0].getMessage()


def test_mono_file_logs_no_warning(tmp_path, caplog):
    path = tmp_path / "mono.wav"
    sf.write(path, noise(1000), SR)
    with caplog.at_level(logging.WARNING, logger="turnkit.audio.wav"):
        read_wav(path)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("rate", [8000, 24000, 44100, 48000])
def test_supported_rates_are_resampled_to_16k_keeping_duration_and_pitch(tmp_path, rate):
    seconds = 1.5
    path = tmp_path / f"sine_{rate}.wav"
    sf.write(path, sine(440, seconds, rate), rate, subtype="PCM_16")
    y = read_wav(path)
    assert abs(len(y) - seconds * SR) <= 4
    assert abs(peak_hz(y, SR) - 440) <= 2
    # amplitude survives resampling (away from the filter's edge effects)
    mid = y[len(y) // 4 : 3 * len(y) // 4]
    assert np.max(np.abs(mid)) == pytest.approx(0.5, abs=0.02)


def test_resampled_audio_is_read_on_16_bit_levels(tmp_path):
    """An 8 kHz file reaches the detectors at 16 kHz on 16-bit PCM levels,
    as a host's transport delivers it (Pipecat's and LiveKit's frames are
    int16): the replay and the hosts then feed Smart Turn the same samples
    (a sub-LSB difference moved its P(complete) by 0.15 on a demo call)."""
    path = tmp_path / "tel.wav"
    sf.write(path, 0.01 * noise(8000), 8000, subtype="PCM_16")
    y = read_wav(path)
    np.testing.assert_array_equal(y * 32768.0, np.round(y * 32768.0))
    blocks = np.concatenate([b for _, b in iter_wav_frames(path, SR, 512)])
    np.testing.assert_array_equal(blocks[: len(y)], y)


def test_read_wav_resamples_to_a_requested_rate(tmp_path):
    path = tmp_path / "sine.wav"
    sf.write(path, sine(440, 1.0, SR), SR)
    y = read_wav(path, sample_rate=8000)
    assert abs(len(y) - 8000) <= 4
    assert abs(peak_hz(y, 8000) - 440) <= 2


@pytest.mark.parametrize("rate", [11025, 22050, 32000])
def test_unsupported_rate_raises_audio_error_naming_the_file(tmp_path, rate):
    path = tmp_path / f"odd_{rate}.wav"
    sf.write(path, sine(440, 0.5, rate), rate)
    with pytest.raises(AudioError, match=f"unsupported sample rate {rate}") as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_missing_file_raises_audio_error(tmp_path):
    path = tmp_path / "nope.wav"
    with pytest.raises(AudioError, match="not found") as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_directory_is_not_a_wav(tmp_path):
    path = tmp_path / "dir.wav"
    path.mkdir()
    with pytest.raises(AudioError) as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_empty_file_raises_audio_error(tmp_path):
    path = tmp_path / "empty.wav"
    path.write_bytes(b"")
    with pytest.raises(AudioError, match="empty") as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_text_file_named_wav_raises_audio_error(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("this is not audio\nsecond line\n")
    with pytest.raises(AudioError) as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_flac_file_named_wav_is_refused(tmp_path):
    flac = tmp_path / "x.flac"
    sf.write(flac, noise(SR), SR)
    path = tmp_path / "really_flac.wav"
    flac.rename(path)
    with pytest.raises(AudioError, match="not a WAV") as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT"])
def test_truncated_wav_reads_fewer_samples_or_raises_audio_error(tmp_path, subtype):
    x = noise(SR, seed=3)
    full = tmp_path / "full.wav"
    sf.write(full, x, SR, subtype=subtype)
    blob = full.read_bytes()
    path = tmp_path / "cut.wav"
    path.write_bytes(blob[: len(blob) // 2])
    try:
        y = read_wav(path)
    except AudioError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
    else:
        # libsndfile clamps the data chunk to what is there: the surviving
        # samples are the start of the original, unchanged.
        assert 0 < len(y) < len(x)
        tol = 0 if subtype == "FLOAT" else 1.0 / 32768 + 1e-6
        np.testing.assert_allclose(y, x[: len(y)], atol=tol)


def test_wav_cut_inside_its_header_raises_audio_error(tmp_path):
    full = tmp_path / "full.wav"
    sf.write(full, noise(SR), SR, subtype="PCM_16")
    path = tmp_path / "header_only.wav"
    path.write_bytes(full.read_bytes()[:30])
    with pytest.raises(AudioError) as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_wav_with_zero_samples_raises_audio_error(tmp_path):
    path = tmp_path / "zero.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), SR, subtype="PCM_16")
    assert path.stat().st_size > 0
    with pytest.raises(AudioError, match="no audio samples") as exc:
        read_wav(path)
    assert_one_line_naming(exc, path)


def test_audio_error_is_a_value_error():
    assert issubclass(AudioError, ValueError)


def test_iter_frames_pads_the_last_frame_with_zeros():
    audio = np.arange(1, 1201, dtype=np.float32)
    frames = list(iter_frames(audio, 512))
    assert [start for start, _ in frames] == [0, 512, 1024]
    assert all(len(f) == 512 for _, f in frames)
    np.testing.assert_array_equal(frames[0][1], audio[:512])
    np.testing.assert_array_equal(frames[1][1], audio[512:1024])
    last = frames[2][1]
    np.testing.assert_array_equal(last[:176], audio[1024:])
    assert not last[176:].any()


def test_iter_frames_exact_multiple_has_no_padding_frame():
    audio = np.ones(1024, dtype=np.float32)
    frames = list(iter_frames(audio, 512))
    assert [start for start, _ in frames] == [0, 512]
    assert all(f.all() for _, f in frames)


def test_iter_frames_short_and_empty_input():
    (start, frame), *rest = list(iter_frames(np.ones(10, dtype=np.float32), 512))
    assert rest == []
    assert start == 0 and len(frame) == 512 and frame.sum() == 10
    assert list(iter_frames(np.zeros(0, dtype=np.float32), 512)) == []
