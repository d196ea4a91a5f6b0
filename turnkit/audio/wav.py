"""Reading call audio: WAV in, mono float32 at the rate a model needs out.

Accepts mono or multi-channel (first channel kept, with a warning), PCM 16-bit
or float, at 8, 16, 24, 44.1 or 48 kHz; other rates are refused so that a
mislabelled file is caught rather than silently resampled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

__all__ = [
    "SUPPORTED_RATES",
    "AudioError",
    "check_not_truncated",
    "iter_frames",
    "read_wav",
    "resample",
]

log = logging.getLogger(__name__)

SUPPORTED_RATES = (8000, 16000, 24000, 44100, 48000)


class AudioError(ValueError):
    """A WAV file that cannot be used; the message names the file."""


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    if src_rate == dst_rate:
        return audio.astype(np.float32, copy=False)
    return soxr.resample(audio, src_rate, dst_rate, quality="HQ").astype(np.float32, copy=False)


def read_wav(path: str | Path, sample_rate: int = 16000) -> np.ndarray:
    """Read ``path`` as mono float32 at ``sample_rate``.

    Raises :class:`AudioError` (one line, naming the file) for a missing,
    empty, truncated or non-WAV file, or an unsupported sample rate.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: empty file")
    try:
        info = sf.info(str(path))
    except Exception as exc:  # libsndfile's own words name the problem
        raise AudioError(f"{path}: not a readable WAV file ({_first_line(exc)})") from None
    if info.format != "WAV" and info.format != "WAVEX":
        raise AudioError(f"{path}: not a WAV file (format {info.format})")
    if info.samplerate not in SUPPORTED_RATES:
        raise AudioError(
            f"{path}: unsupported sample rate {info.samplerate} Hz "
            f"(supported: {', '.join(str(r) for r in SUPPORTED_RATES)})"
        )
    check_not_truncated(path)
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:
        raise AudioError(f"{path}: truncated or corrupt audio ({_first_line(exc)})") from None
    if data.shape[0] == 0:
        raise AudioError(f"{path}: no audio samples")
    if data.shape[1] > 1:
        log.warning("%s: %d channels, using the first", path, data.shape[1])
    mono = np.ascontiguousarray(data[:, 0])
    return resample(mono, rate, sample_rate)


def iter_frames(audio: np.ndarray, frame_samples: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(start_sample, frame)`` in fixed-size frames; the last one is
    zero-padded so every frame has ``frame_samples`` samples."""
    n = len(audio)
    for start in range(0, n, frame_samples):
        frame = audio[start : start + frame_samples]
        if len(frame) < frame_samples:
            frame = np.pad(frame, (0, frame_samples - len(frame)))
        yield start, frame


def check_not_truncated(path: Path) -> None:
    """libsndfile silently reads what is there when a WAV is cut short; a
    replay of half a call would then be scored as if it were whole. Compare
    the RIFF ``data`` chunk's declared size with the bytes on disk."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(12)
        if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
            return  # not plain RIFF/WAVE: libsndfile has already judged it
        pos = 12
        while pos + 8 <= size:
            fh.seek(pos)
            chunk = fh.read(8)
            if len(chunk) < 8:
                return
            declared = int.from_bytes(chunk[4:8], "little")
            if chunk[:4] == b"data":
                # 0 and 0xFFFFFFFF mean "unknown" (streamed writers, RF64).
                if declared not in (0, 0xFFFFFFFF) and pos + 8 + declared > size:
                    raise AudioError(
                        f"{path}: truncated: the header declares {declared} bytes of audio, "
                        f"the file holds {size - pos - 8}"
                    )
                return
            pos += 8 + declared + (declared & 1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
