"""Audio input: WAV reading, resampling, framing, and the Silero VAD."""

from turnkit.audio.wav import AudioError, iter_frames, read_wav, resample

__all__ = ["AudioError", "iter_frames", "read_wav", "resample"]
