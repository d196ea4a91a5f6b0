"""turnkit: turn-taking components for voice agents.

Framework-free policy objects (end-of-turn detectors, barge-in policies, ...)
driven by typed frames and an injected clock, plus ``turnkit replay``, which
runs recorded calls through the same objects on a virtual clock.
"""

__version__ = "0.1.0"
