"""Whisper-style log-mel features, in numpy, for the Smart Turn v3 model.

Smart Turn v3.x is a Whisper-encoder classifier whose ONNX input is
``input_features`` of shape ``(batch, 80, 800)``: 80 mel bins over 8 s of
16 kHz audio (hop 160 samples, 10 ms). :func:`smart_turn_features` turns the
caller's audio into that input exactly as the model was fed in training and
as Pipecat feeds it:

1. keep the **last** 8 s; shorter audio is zero-padded at the **start**, so
   the end of the speech always sits at the right edge of the window;
2. normalise the waveform to zero mean and unit variance;
3. centred STFT (reflect padding, periodic Hann window of 400, hop 160),
   power spectrum, Slaney mel filterbank (80 bins, 0–8 kHz);
4. ``log10`` (floor 1e-10), drop the last frame, clamp to ``max - 8``,
   scale by ``(x + 4) / 4``.

The window and filterbank are built once at import. The output matches
``transformers.WhisperFeatureExtractor(chunk_length=8)`` (and Pipecat's
vendored copy of it) to float32 precision; the spectrum is computed in
float64 because the ``max - 8`` clamp keeps bins 80 dB below the peak, where
a float32 FFT would be visibly off.

Example::

    feats = smart_turn_features(audio_16k)     # (80, 800) float32
    batch = feats[np.newaxis]                  # model input
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from turnkit.audio import SAMPLE_RATE

__all__ = [
    "HOP_LENGTH",
    "N_FFT",
    "N_FRAMES",
    "N_MELS",
    "SAMPLE_RATE",
    "WINDOW_SAMPLES",
    "fit_window",
    "log_mel",
    "mel_filterbank",
    "smart_turn_features",
]

N_FFT = 400
HOP_LENGTH = 160
N_MELS = 80
WINDOW_S = 8
WINDOW_SAMPLES = WINDOW_S * SAMPLE_RATE  # 128000
N_FRAMES = WINDOW_SAMPLES // HOP_LENGTH  # 800
_MEL_FLOOR = 1e-10
_NORM_EPS = 1e-7


def _hz_to_mel(freq: np.ndarray) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz, logarithmic above."""
    freq = np.asarray(freq, dtype=np.float64)
    logstep = 27.0 / np.log(6.4)
    return np.where(
        freq >= 1000.0,
        15.0 + np.log(np.maximum(freq, 1e-12) / 1000.0) * logstep,
        3.0 * freq / 200.0,
    )


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    mels = np.asarray(mels, dtype=np.float64)
    logstep = np.log(6.4) / 27.0
    return np.where(mels >= 15.0, 1000.0 * np.exp(logstep * (mels - 15.0)), 200.0 * mels / 3.0)


def mel_filterbank(
    n_fft: int = N_FFT, n_mels: int = N_MELS, sample_rate: int = SAMPLE_RATE
) -> np.ndarray:
    """Slaney-normalised triangular filters, shape ``(n_mels, n_fft // 2 + 1)``,
    from 0 Hz to Nyquist (as librosa's and Whisper's ``mel_filters``)."""
    n_bins = n_fft // 2 + 1
    mel_points = np.linspace(_hz_to_mel(0.0), _hz_to_mel(sample_rate / 2.0), n_mels + 2)
    hz_points = _mel_to_hz(mel_points)
    fft_freqs = np.linspace(0.0, sample_rate // 2, n_bins)
    widths = np.diff(hz_points)
    slopes = hz_points[np.newaxis, :] - fft_freqs[:, np.newaxis]  # (n_bins, n_mels + 2)
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))  # (n_bins, n_mels)
    filters *= 2.0 / (hz_points[2 : n_mels + 2] - hz_points[:n_mels])
    return np.ascontiguousarray(filters.T)


# Built once: a periodic Hann window (torch.hann_window) and the filterbank.
_WINDOW = np.hanning(N_FFT + 1)[:-1]
_FILTERS = mel_filterbank()


def fit_window(audio: np.ndarray, n_samples: int = WINDOW_SAMPLES) -> np.ndarray:
    """The last ``n_samples`` of ``audio`` as float32, zero-padded at the start
    when shorter (the speech's end stays at the right edge)."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if x.size >= n_samples:
        return x[x.size - n_samples :]
    out = np.zeros(n_samples, dtype=np.float32)
    if x.size:
        out[n_samples - x.size :] = x
    return out


def log_mel(window: np.ndarray, normalize: bool = True) -> np.ndarray:
    """Whisper log-mel of an already fitted window, ``(80, len // 160)`` float32.

    ``normalize`` applies the zero-mean, unit-variance waveform scaling
    (in float32, as the reference does) before the spectrum.
    """
    x = np.asarray(window, dtype=np.float32).reshape(-1)
    if normalize:
        x = (x - x.mean()) / np.sqrt(x.var() + _NORM_EPS)
    pad = N_FFT // 2
    padded = np.pad(x.astype(np.float64), (pad, pad), mode="reflect")
    frames = sliding_window_view(padded, N_FFT)[::HOP_LENGTH]  # (n_frames + 1, 400)
    spec = np.fft.rfft(frames * _WINDOW, axis=-1)
    power = spec.real**2 + spec.imag**2  # (n_frames + 1, 201)
    mel = np.maximum(_MEL_FLOOR, _FILTERS @ power.T)  # (80, n_frames + 1)
    logspec = np.log10(mel[:, :-1])
    logspec = np.maximum(logspec, logspec.max() - 8.0)
    return ((logspec + 4.0) / 4.0).astype(np.float32)


def smart_turn_features(audio: np.ndarray) -> np.ndarray:
    """Model input for Smart Turn v3.x from 16 kHz mono audio of any length:
    ``(80, 800)`` float32 over the last 8 s (see the module docstring)."""
    return log_mel(fit_window(audio))
