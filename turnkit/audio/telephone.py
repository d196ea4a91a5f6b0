"""Telephone channel: what a phone line delivers from wideband speech.

:func:`telephone` turns audio at any rate into narrowband telephone audio:
resampled to 8 kHz, band-limited to the 300-3400 Hz voice channel
(ITU-T G.712) with a linear-phase windowed-sinc FIR, then encoded to G.711
μ-law (8 bits a sample) and decoded back, as a PSTN or SIP/PCMU leg does.
The result is returned at 8 kHz; a replay resamples it to 16 kHz for the
models as it does for any 8 kHz recording (:func:`turnkit.audio.wav.resample`).

Only numpy and soxr are used. The FIR is zero-phase (symmetric taps applied
centred), so the channel adds no delay and labels measured on the wideband
audio stay valid on the narrowband copy.
"""

from __future__ import annotations

import numpy as np

from turnkit.audio.wav import resample, to_pcm16

__all__ = [
    "TELEPHONE_RATE",
    "bandpass_fir",
    "mulaw_decode",
    "mulaw_encode",
    "telephone",
]

TELEPHONE_RATE = 8000
LOW_HZ = 300.0
HIGH_HZ = 3400.0
# -6 dB points of the FIR, set outside the nominal band so that 300-3400 Hz
# is passband: the Kaiser design's transition is about 90 Hz wide at 321 taps.
_EDGE_MARGIN_HZ = 50.0
_TAPS = 321  # 40 ms at 8 kHz
_STOP_DB = 60.0

# G.711 μ-law (16-bit linear in, as in the reference g711.c)
_BIAS = 0x84
_CLIP = 32635


def bandpass_fir(
    low_hz: float = LOW_HZ - _EDGE_MARGIN_HZ,
    high_hz: float = HIGH_HZ + _EDGE_MARGIN_HZ,
    rate: int = TELEPHONE_RATE,
    taps: int = _TAPS,
    stop_db: float = _STOP_DB,
) -> np.ndarray:
    """Linear-phase band-pass taps (odd length, symmetric): the difference of
    two windowed-sinc low-passes at ``high_hz`` and ``low_hz`` (their -6 dB
    points), Kaiser window for ``stop_db`` of stopband attenuation, unit gain
    at the band's centre."""
    if taps % 2 == 0:
        raise ValueError("taps must be odd")
    if not 0 < low_hz < high_hz < rate / 2:
        raise ValueError(f"band {low_hz}-{high_hz} Hz does not fit {rate} Hz")
    n = np.arange(taps) - (taps - 1) / 2
    beta = (
        0.1102 * (stop_db - 8.7)
        if stop_db > 50
        else 0.5842 * (stop_db - 21) ** 0.4 + 0.07886 * (stop_db - 21)
    )
    win = np.kaiser(taps, beta)

    def lowpass(fc: float) -> np.ndarray:
        return 2 * fc / rate * np.sinc(2 * fc / rate * n)

    h = (lowpass(high_hz) - lowpass(low_hz)) * win
    fc = np.sqrt(low_hz * high_hz)
    gain = abs(np.sum(h * np.exp(-2j * np.pi * fc / rate * n)))
    return (h / gain).astype(np.float64)


def mulaw_encode(audio: np.ndarray) -> np.ndarray:
    """G.711 μ-law codes (uint8) of float audio in ±1 (clipped there)."""
    x = to_pcm16(np.asarray(audio, np.float64)).astype(np.int32)
    sign = np.where(x < 0, 0x80, 0).astype(np.int32)
    mag = np.minimum(np.abs(x), _CLIP) + _BIAS  # 132 .. 32767
    # exponent: position of the highest set bit among bits 7..14
    exponent = np.zeros_like(mag)
    top = mag >> 7  # 1 .. 255
    for e in range(1, 8):
        exponent[top >= (1 << e)] = e
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """Float audio (float32, ±1 scale) of G.711 μ-law codes."""
    b = ~np.asarray(codes, np.int32) & 0xFF
    sign = b & 0x80
    exponent = (b >> 4) & 0x07
    mantissa = b & 0x0F
    mag = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return (np.where(sign != 0, -mag, mag) / 32768.0).astype(np.float32)


def telephone(
    audio: np.ndarray,
    sample_rate: int,
    *,
    mu_law: bool = True,
    taps: int = _TAPS,
) -> np.ndarray:
    """What a phone line delivers of ``audio`` (mono float, ±1 scale, at
    ``sample_rate``): 8 kHz, 300-3400 Hz, μ-law encoded and decoded
    (``mu_law=False`` skips the codec). Returns float32 at
    :data:`TELEPHONE_RATE`, as many samples as soxr's resampler gives."""
    x = np.asarray(audio, np.float32)
    if x.ndim != 1:
        raise ValueError("telephone() takes mono audio (one dimension)")
    x8 = resample(x, sample_rate, TELEPHONE_RATE).astype(np.float64)
    if len(x8) == 0:
        return x8.astype(np.float32)
    h = bandpass_fir(taps=taps)
    # zero-phase: symmetric taps applied centred ("same" keeps the length)
    if len(x8) >= len(h):
        y = np.convolve(x8, h, mode="same")
    else:  # shorter than the filter: pad, filter, take the middle back
        pad = np.zeros(len(h))
        y = np.convolve(np.concatenate([pad, x8, pad]), h, mode="same")[len(h) : len(h) + len(x8)]
    if mu_law:
        return mulaw_decode(mulaw_encode(y))
    return np.clip(y, -1.0, 1.0).astype(np.float32)
