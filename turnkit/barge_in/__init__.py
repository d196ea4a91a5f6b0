"""Barge-in: whether caller sound while the agent speaks takes the floor.

Echo filter (the agent's own voice in the caller's microphone), acknowledgement
filter ("uh-huh" is not a bid for the floor), the policies that combine them,
and the processors that stop, flush and resume agent playback.
"""

from turnkit.barge_in.ack import AckFilter, AckParams, Decision
from turnkit.barge_in.echo import EchoFilter, EchoParams, EchoStep, EchoTranscriptCheck
from turnkit.barge_in.lexicon import is_backchannel
from turnkit.barge_in.policy import BargeInPolicy, FilteredBargeIn, VADBargeIn

__all__ = [
    "AckFilter",
    "AckParams",
    "BargeInPolicy",
    "Decision",
    "EchoFilter",
    "EchoParams",
    "EchoStep",
    "EchoTranscriptCheck",
    "FilteredBargeIn",
    "VADBargeIn",
    "is_backchannel",
]
