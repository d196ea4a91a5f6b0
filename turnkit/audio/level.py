"""A frame's level: what the caller's voice sounds like against other sound.

The barge-in controller reads it against the caller's own speech level (a
murmur, a breath, residual echo are far softer); endpointing reads it to
tell the caller's own drawn-out sound from a voice under the line.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["HUM_CUTOFF_HZ", "frame_energy_db"]

# Energy below this is the line's, not the voice's: a DC offset, mains hum
# (50/60 Hz); voices start above it (a low male voice ~85 Hz).
HUM_CUTOFF_HZ = 80.0


def frame_energy_db(audio: np.ndarray, rate: int = 16000) -> float:
    """The frame's level (dB re full scale) above ``HUM_CUTOFF_HZ``: a DC
    offset or mains hum on the line would otherwise set a floor under every
    frame, and quiet frames (a pause inside "uh-huh", the end of a sound)
    would stop reading as quiet against the caller's level."""
    n = len(audio)
    if not n:
        return 20.0 * math.log10(1e-6)
    x = audio.astype(np.float64)
    power = np.abs(np.fft.rfft(x - float(np.mean(x)))) ** 2
    k0 = math.ceil(HUM_CUTOFF_HZ * n / rate)
    # Parseval: twice the one-sided bins (DC and Nyquist once) over n^2.
    ms = (2.0 * float(np.sum(power[max(k0, 1) :])) - (power[-1] if n % 2 == 0 else 0.0)) / (n * n)
    return 20.0 * math.log10(max(math.sqrt(max(ms, 0.0)), 1e-6))
