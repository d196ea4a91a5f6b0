"""Barge-in policies: does caller sound during agent speech stop the agent?

:class:`VADBargeIn` is the baseline every stack ships: any speech the VAD
confirms while the agent is speaking stops it. It cannot tell "uh-huh", the
agent's own echo or a cough from a real interruption; the filters that can
are later policies with the same interface.

Example::

    policy = VADBargeIn(clock)
    if agent_speaking and policy.should_stop(frame, frame.vad):
        stop_playback()
"""

from __future__ import annotations

from typing import Protocol

from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.frames import AudioInFrame

__all__ = ["BargeInPolicy", "VADBargeIn"]


class BargeInPolicy(Protocol):
    def should_stop(self, frame: AudioInFrame, vad: VADStep) -> bool:
        """Called for each caller frame while the agent speaks."""
        ...

    def reset(self) -> None: ...


class VADBargeIn:
    """Stop the agent when the VAD confirms caller speech while it talks.

    Evidence: the VAD's speech-start edge only (edge, not level, so speech
    that was already going on when the agent began does not cut it at once).
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def should_stop(self, frame: AudioInFrame, vad: VADStep) -> bool:
        return vad.started

    def reset(self) -> None:
        pass
