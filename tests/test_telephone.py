"""The telephone channel (turnkit.audio.telephone) on real speech from the demo
corpus: 8 kHz out, the 300-3400 Hz band measured with an FFT, and G.711 μ-law
round-trip error within the codec's step size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from turnkit.audio.telephone import (
    TELEPHONE_RATE,
    bandpass_fir,
    mulaw_decode,
    mulaw_encode,
    telephone,
)
from turnkit.audio.wav import read_wav, resample

REPO = Path(__file__).resolve().parent.parent
WIDEBAND_CALL = REPO / "recordings" / "address-to-06"  # clean, 16 kHz, Piper speech


def _speech() -> tuple[np.ndarray, int]:
    x, sr = sf.read(WIDEBAND_CALL / "caller.wav", dtype="float32")
    assert sr == 16000
    return x, sr


def _band_db(x: np.ndarray, sr: int, lo: float, hi: float) -> float:
    """Energy (dB) of x between lo and hi Hz, from one FFT over the whole clip."""
    # |X|^2 / N^2: the same signal sampled at 8 or 16 kHz reads the same
    spec = (np.abs(np.fft.rfft(x.astype(np.float64) * np.hanning(len(x)))) / len(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / sr)
    return float(10 * np.log10(np.sum(spec[(f >= lo) & (f < hi)]) + 1e-20))


def test_output_is_8k_and_time_aligned() -> None:
    x, sr = _speech()
    y = telephone(x, sr)
    assert y.dtype == np.float32
    assert abs(len(y) - len(x) * TELEPHONE_RATE / sr) <= 1
    # Zero-phase channel: the speech envelope lines up with the input's
    # (labels measured on wideband audio stay valid).
    ref = np.abs(telephone(x, sr, mu_law=False))
    x8 = np.abs(x[:: sr // TELEPHONE_RATE][: len(ref)])
    win = TELEPHONE_RATE // 100
    e_in = np.convolve(x8, np.ones(win), "same")
    e_out = np.convolve(ref, np.ones(win), "same")
    lags = range(-40, 41)
    corr = [np.dot(e_in[50:-50], np.roll(e_out, k)[50:-50]) for k in lags]
    assert abs(list(lags)[int(np.argmax(corr))]) <= 2  # within 0.25 ms


def test_band_limits_on_real_speech() -> None:
    x, sr = _speech()
    y = telephone(x, sr)
    # Compare the same bands of input (16 kHz) and output (8 kHz): the
    # passband keeps its energy, the stopbands lose it.
    for lo, hi in ((400, 1000), (1000, 2000), (2000, 3200)):
        assert abs(_band_db(y, TELEPHONE_RATE, lo, hi) - _band_db(x, sr, lo, hi)) < 1.0, (lo, hi)
    # the band-pass alone: stopbands down by more than 35 dB
    f = telephone(x, sr, mu_law=False)
    assert _band_db(x, sr, 60, 200) - _band_db(f, TELEPHONE_RATE, 60, 200) > 35
    assert _band_db(x, sr, 3600, 3950) - _band_db(f, TELEPHONE_RATE, 3600, 3950) > 35
    # through the codec, its quantisation noise (white, ~38 dB under the
    # speech) fills the stopbands again: still well below the input there
    assert _band_db(x, sr, 60, 200) - _band_db(y, TELEPHONE_RATE, 60, 200) > 30
    assert _band_db(x, sr, 3600, 3950) - _band_db(y, TELEPHONE_RATE, 3600, 3950) > 15
    # nothing above 4 kHz can exist at 8 kHz; the input had speech there
    assert _band_db(x, sr, 4000, 8000) - _band_db(x, sr, 400, 3200) > -40


def test_fir_response() -> None:
    h = bandpass_fir()
    assert len(h) % 2 == 1 and np.allclose(h, h[::-1])  # linear phase
    f = np.array([100.0, 200.0, 300.0, 1000.0, 3400.0, 3500.0, 3800.0])
    n = np.arange(len(h)) - (len(h) - 1) / 2
    gain_db = 20 * np.log10(np.abs(np.exp(-2j * np.pi * np.outer(f, n) / TELEPHONE_RATE) @ h))
    g = dict(zip(f.tolist(), gain_db.tolist(), strict=True))
    assert g[300.0] > -0.5 and g[1000.0] > -0.1 and g[3400.0] > -0.5
    assert g[100.0] < -55 and g[200.0] < -55 and g[3500.0] < -55 and g[3800.0] < -55


def test_mulaw_round_trip_error_bound() -> None:
    x, _ = _speech()
    x = x / np.max(np.abs(x)) * 0.9
    y = mulaw_decode(mulaw_encode(x))
    # G.711: 8 segments of 16 steps; the decoder returns the middle of the
    # step, so |error| <= half a step = (|x| + bias) / 32 in 16-bit units.
    lin = np.abs(np.round(x.astype(np.float64) * 32768))
    bound = (lin + 0x84) / 32 + 1  # +1: rounding to 16 bits
    assert np.all(np.abs(y.astype(np.float64) * 32768 - np.round(x * 32768)) <= bound)
    # signal-to-quantisation noise of speech through μ-law: ~35-39 dB
    snr = 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum((y - x).astype(np.float64) ** 2))
    assert 30 < snr < 45


def test_mulaw_codes() -> None:
    codes = np.arange(256, dtype=np.uint8)
    levels = mulaw_decode(codes)
    # every code but the two zeros (0xFF, 0x7F) survives a round trip
    back = mulaw_encode(levels)
    assert np.array_equal(back[codes != 0x7F], codes[codes != 0x7F])
    assert levels[0xFF] == 0 and levels[0x7F] == 0
    # the largest magnitude is 32124/32768, positive codes 0x80-0xFF descending
    assert np.isclose(np.max(levels), 32124 / 32768) and np.isclose(np.min(levels), -32124 / 32768)
    assert np.all(np.diff(levels[0x80:]) < 0)
    # clipping: beyond full scale reads as the largest level
    assert mulaw_decode(mulaw_encode(np.array([1.5, -1.5]))).tolist() == [
        pytest.approx(32124 / 32768),
        pytest.approx(-32124 / 32768),
    ]
    assert mulaw_decode(mulaw_encode(np.zeros(4))).tolist() == [0, 0, 0, 0]


def test_any_rate_and_short_input() -> None:
    x, sr = _speech()
    x48 = resample(x[: sr * 2], sr, 48000)
    y = telephone(x48, 48000)
    assert abs(len(y) - 2 * TELEPHONE_RATE) <= 1
    y8 = telephone(x[:100], sr)  # shorter than the filter
    assert len(y8) == 50 and np.all(np.isfinite(y8))
    with pytest.raises(ValueError):
        telephone(np.zeros((10, 2), np.float32), sr)


def test_narrowband_script(tmp_path: Path) -> None:
    """scripts/narrowband.py writes an 8 kHz telephone copy of a corpus."""
    src = tmp_path / "src"
    (src / "one").mkdir(parents=True)
    for name in ("call.json", "caller.wav", "agent.wav"):
        (src / "one" / name).write_bytes((WIDEBAND_CALL / name).read_bytes())
    dst = tmp_path / "dst"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "narrowband.py"), str(src), str(dst)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    m_src = json.loads((src / "one" / "call.json").read_text())
    m = json.loads((dst / "one" / "call.json").read_text())
    assert "telephone" in m["tags"] and m["events"] == m_src["events"]
    for name in ("caller.wav", "agent.wav"):
        info = sf.info(dst / "one" / name)
        assert info.samplerate == TELEPHONE_RATE and info.subtype == "PCM_16"
    caller = read_wav(dst / "one" / "caller.wav", 16000)  # what a replay reads
    ref = read_wav(WIDEBAND_CALL / "caller.wav", 16000)
    assert abs(len(caller) - len(ref)) <= 2
    # a second run over the copy leaves an already-telephone call as it is
    again = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "narrowband.py"), str(dst), str(tmp_path / "d2")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert (
        json.loads((tmp_path / "d2" / "one" / "call.json").read_text())["tags"].count("telephone")
        == 1
    )
    assert (tmp_path / "d2" / "one" / "caller.wav").read_bytes() == (
        dst / "one" / "caller.wav"
    ).read_bytes()
    # --caller-gain-db: a quiet caller on the line, the agent's channel as it was
    quiet = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "narrowband.py"),
            str(dst),
            str(tmp_path / "q"),
            "--caller-gain-db",
            "-12",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quiet.returncode == 0, quiet.stderr
    loud, _ = sf.read(dst / "one" / "caller.wav", dtype="float64")
    soft, rate = sf.read(tmp_path / "q" / "one" / "caller.wav", dtype="float64")
    assert rate == TELEPHONE_RATE and len(soft) == len(loud)
    ratio_db = 10 * np.log10(np.sum(soft**2) / np.sum(loud**2))
    assert abs(ratio_db + 12.0) < 0.1
    assert (tmp_path / "q" / "one" / "agent.wav").read_bytes() == (
        dst / "one" / "agent.wav"
    ).read_bytes()
