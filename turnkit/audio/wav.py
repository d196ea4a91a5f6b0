"""Reading call audio: WAV in, mono float32 at the rate a model needs out.

Accepts mono or multi-channel (first channel kept, with a warning), PCM 16-bit
or float, at 8, 16, 24, 44.1 or 48 kHz; other rates are refused so that a
mislabelled file is caught rather than silently resampled.

Samples must be finite: a NaN or infinite sample, or a float sample beyond
:data:`MAX_PEAK` (not audio scaled to ±1), is refused with the file, the
sample and its time; a float file that peaks above full scale but within that
bound is read as it is, and :class:`AudioStats` says so.

Long calls are read in blocks (:func:`iter_wav_blocks`,
:func:`iter_wav_frames`, :func:`scan_wav`), so memory stays flat with the
call's length; :func:`read_wav` still returns the whole track for callers that
need it (an echo reference).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

__all__ = [
    "MAX_PEAK",
    "SUPPORTED_RATES",
    "AudioError",
    "AudioStats",
    "check_not_truncated",
    "iter_frames",
    "iter_wav_blocks",
    "iter_wav_frames",
    "on_pcm16_grid",
    "open_wav",
    "read_wav",
    "resample",
    "resampled_length",
    "scan_wav",
    "to_pcm16",
]

log = logging.getLogger(__name__)

SUPPORTED_RATES = (8000, 16000, 24000, 44100, 48000)
# Float samples this far past full scale (±1) are not audio but garbage.
MAX_PEAK = 256.0
BLOCK_FRAMES = 1 << 16  # source frames per read: ~1.4-8 s, a few hundred kB


class AudioError(ValueError):
    """A WAV file that cannot be used; the message names the file."""


@dataclass
class AudioStats:
    """What reading a file found besides its samples: channel count, peak
    absolute sample, and warnings (one line each) about what is suspicious
    but usable."""

    path: Path
    channels: int = 1
    sample_rate: int = 0
    frames: int = 0
    peak: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def finish(self) -> None:
        if self.peak > 1.0:
            self.warnings.append(
                f"{self.path}: float samples exceed full scale (peak {self.peak:.3g}, "
                "expected within ±1): read as they are"
            )


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    if src_rate == dst_rate:
        return audio.astype(np.float32, copy=False)
    return soxr.resample(audio, src_rate, dst_rate, quality="HQ").astype(np.float32, copy=False)


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    """Float audio (±1 scale) as 16-bit PCM samples (``<i2``, k = round(x * 32768), clipped)."""
    return np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")


def on_pcm16_grid(audio: np.ndarray) -> np.ndarray:
    """``audio`` rounded to 16-bit PCM levels (k / 32768, :func:`to_pcm16`),
    as a host's transport delivers resampled audio (Pipecat and LiveKit pass
    int16 frames). The replay reads resampled files so, or its detectors
    would hear sub-LSB detail no host hears: Smart Turn's P(complete) moves
    by up to 0.15 on such a difference in a quiet recording."""
    return (to_pcm16(audio) / 32768.0).astype(np.float32)


def resampled_length(frames: int, src_rate: int, dst_rate: int) -> int:
    """Samples that ``frames`` at ``src_rate`` become at ``dst_rate`` (as
    soxr's one-shot resampler counts them)."""
    if src_rate == dst_rate:
        return frames
    return int(frames * dst_rate / src_rate + 0.5)


def _stat_error(path: Path, exc: BaseException) -> AudioError:
    if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == 40:
        return AudioError(f"{path}: symlink loop")
    if isinstance(exc, ValueError):
        return AudioError(f"{path!s:.200}: not a usable path ({exc})")
    return AudioError(f"{path}: cannot read ({type(exc).__name__}: {_first_line(exc)})")


def open_wav(path: str | Path) -> Any:
    """Check ``path`` and return its soundfile info; raises
    :class:`AudioError` (one line, naming the file) for a missing, empty,
    truncated or non-WAV file, or an unsupported sample rate."""
    path = Path(path)
    if "\0" in str(path):
        raise AudioError(f"{str(path)!r}: the path contains a NUL character")
    try:
        if not path.is_file():
            if path.is_symlink():
                path.resolve(strict=True)  # a dangling link or a loop says which
            raise AudioError(f"{path}: file not found")
        size = path.stat().st_size
    except AudioError:
        raise
    except (OSError, RuntimeError, ValueError) as exc:
        raise _stat_error(path, exc) from None
    if size == 0:
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
    if info.frames == 0:
        raise AudioError(f"{path}: no audio samples")
    try:
        check_not_truncated(path)
    except OSError as exc:
        raise _stat_error(path, exc) from None
    return info


def _check_block(path: Path, block: np.ndarray, first: int, rate: int, stats: AudioStats) -> None:
    finite = np.isfinite(block)
    if not finite.all():
        k = int(np.argmin(finite))
        kind = "NaN" if math.isnan(float(block[k])) else "infinite"
        raise AudioError(
            f"{path}: sample {first + k} ({(first + k) / rate:.3f} s) is {kind}: not audio"
        )
    if len(block):
        peak = float(np.max(np.abs(block)))
        if peak > MAX_PEAK:
            k = int(np.argmax(np.abs(block) > MAX_PEAK))
            raise AudioError(
                f"{path}: sample {first + k} ({(first + k) / rate:.3f} s) is {float(block[k]):.3g}: "
                f"not audio scaled to ±1 (limit ±{MAX_PEAK:g})"
            )
        stats.peak = max(stats.peak, peak)


def _source_blocks(path: Path, stats: AudioStats | None) -> Iterator[tuple[np.ndarray, int]]:
    """Checked first-channel blocks at the file's own rate, and that rate.
    Warnings go into ``stats``; without one, to the log."""
    info = open_wav(path)
    st = stats if stats is not None else AudioStats(path)
    st.channels, st.sample_rate, st.frames = info.channels, info.samplerate, info.frames
    if info.channels > 1:
        msg = f"{path}: {info.channels} channels, using the first"
        st.warnings.append(msg)
        if stats is None:
            log.warning("%s", msg)
    pos = 0
    try:
        with sf.SoundFile(str(path)) as fh:
            while True:
                try:
                    data = fh.read(BLOCK_FRAMES, dtype="float32", always_2d=True)
                except Exception as exc:
                    raise AudioError(
                        f"{path}: truncated or corrupt audio ({_first_line(exc)})"
                    ) from None
                if data.shape[0] == 0:
                    break
                mono = np.ascontiguousarray(data[:, 0])
                _check_block(path, mono, pos, info.samplerate, st)
                pos += len(mono)
                yield mono, info.samplerate
    except (OSError, RuntimeError) as exc:
        raise AudioError(f"{path}: cannot read ({_first_line(exc)})") from None
    if pos == 0:
        raise AudioError(f"{path}: no audio samples")
    st.finish()


def iter_wav_blocks(
    path: str | Path, sample_rate: int = 16000, stats: AudioStats | None = None
) -> Iterator[np.ndarray]:
    """``path`` as mono float32 blocks at ``sample_rate``, read and resampled
    a block at a time; concatenated they equal :func:`read_wav`'s array
    (same length; resampled in one stream, on 16-bit levels:
    :func:`on_pcm16_grid`). Raises :class:`AudioError` as soon as a block is
    bad."""
    path = Path(path)
    stream: soxr.ResampleStream | None = None
    src = 0
    produced = 0
    rate = sample_rate
    for mono, rate in _source_blocks(path, stats):
        src += len(mono)
        if rate == sample_rate:
            produced += len(mono)
            yield mono
            continue
        if stream is None:
            stream = soxr.ResampleStream(rate, sample_rate, 1, dtype="float32", quality="HQ")
        out = stream.resample_chunk(mono, last=False)
        produced += len(out)
        if len(out):
            yield on_pcm16_grid(out)
    if stream is not None:
        tail = stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        want = resampled_length(src, rate, sample_rate)
        if produced + len(tail) < want:
            tail = np.pad(tail, (0, want - produced - len(tail)))
        tail = tail[: max(0, want - produced)]
        if len(tail):
            yield on_pcm16_grid(tail)


def iter_wav_frames(
    path: str | Path, sample_rate: int, frame_samples: int, stats: AudioStats | None = None
) -> Iterator[tuple[int, np.ndarray]]:
    """:func:`iter_frames` over ``path`` without loading it whole: yields
    ``(start_sample, frame)``, the last frame zero-padded."""
    pending = np.zeros(0, dtype=np.float32)
    start = 0
    for block in iter_wav_blocks(path, sample_rate, stats):
        buf = np.concatenate([pending, block]) if len(pending) else block
        n_full = len(buf) // frame_samples * frame_samples
        for k in range(0, n_full, frame_samples):
            yield start, buf[k : k + frame_samples].copy()
            start += frame_samples
        pending = buf[n_full:].copy()
    if len(pending):
        yield start, np.pad(pending, (0, frame_samples - len(pending)))


def scan_wav(path: str | Path) -> AudioStats:
    """Decode ``path`` fully, a block at a time, checking every sample
    (``validate``): raises :class:`AudioError` or returns what it found."""
    stats = AudioStats(Path(path))
    for _ in _source_blocks(Path(path), stats):
        pass
    return stats


def read_wav(
    path: str | Path, sample_rate: int = 16000, stats: AudioStats | None = None
) -> np.ndarray:
    """Read ``path`` as mono float32 at ``sample_rate``, whole (one array,
    filled a block at a time: no second copy).

    Raises :class:`AudioError` (one line, naming the file) for a missing,
    empty, truncated or non-WAV file, an unsupported sample rate, or a sample
    that is not finite audio.
    """
    info = open_wav(path)
    out = np.empty(resampled_length(info.frames, info.samplerate, sample_rate), np.float32)
    pos = 0
    for block in iter_wav_blocks(path, sample_rate, stats):
        # The header's frame count is what libsndfile reads; guard anyway.
        if pos + len(block) > len(out):
            out = np.concatenate([out[:pos], np.empty(len(block), np.float32)])
        out[pos : pos + len(block)] = block
        pos += len(block)
    return out[:pos]


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
