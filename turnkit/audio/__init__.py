"""Audio input: WAV reading, resampling, framing, the Silero VAD, and the
session's one :class:`~turnkit.audio.timeline.AudioTimeline`.

``SAMPLE_RATE`` (16 kHz) and ``FRAME_SAMPLES`` (512: 32 ms) are what every
turnkit policy hears; they are defined here, once."""

SAMPLE_RATE = 16000  # every turnkit policy hears 16 kHz
FRAME_SAMPLES = 512  # 32 ms: Silero's frame, the echo filter's and every detector's

from turnkit.audio.wav import AudioError, iter_frames, read_wav, resample  # noqa: E402

__all__ = ["FRAME_SAMPLES", "SAMPLE_RATE", "AudioError", "iter_frames", "read_wav", "resample"]
