"""Barge-in policies: does caller sound during agent speech stop the agent?

A host (turnkit's pipeline, the replay's simulated agent, a plugin) feeds a
policy every caller frame with its VAD verdict (:meth:`should_stop`), every
transcript update (:meth:`on_transcript`) and the agent's playback
(:meth:`on_agent_started` / :meth:`on_agent_stopped`), and stops the agent's
audio when either answers True.

:class:`VADBargeIn` is the baseline every stack ships: any speech the VAD
confirms while the agent is speaking stops it. It cannot tell "uh-huh", the
agent's own echo or a cough from a real interruption.
:class:`FilteredBargeIn` can: it runs the acknowledgement filter
(:class:`~turnkit.barge_in.ack.AckFilter`) on VAD evidence that has already
passed the echo filter (:class:`~turnkit.barge_in.echo.EchoFilter`, which
the host runs before its VAD).

Example::

    policy = FilteredBargeIn(clock, language="en")
    policy.on_agent_started("Your order ships Friday.", at=clock.now())
    stop = policy.should_stop(frame, frame.vad)      # each caller frame
    stop = stop or policy.on_transcript(transcript)  # each transcript update
"""

from __future__ import annotations

from typing import Protocol

from turnkit.audio.vad import VADStep
from turnkit.barge_in.ack import AckFilter, AckParams, Decision
from turnkit.barge_in.echo import EchoTranscriptCheck
from turnkit.clock import Clock
from turnkit.frames import AudioInFrame, TranscriptFrame

__all__ = ["BargeInPolicy", "FilteredBargeIn", "VADBargeIn"]


class BargeInPolicy(Protocol):
    def should_stop(self, frame: AudioInFrame, vad: VADStep) -> bool:
        """Called for each caller frame; True stops the agent if it speaks."""
        ...

    def on_transcript(self, frame: TranscriptFrame) -> bool:
        """Called for each transcript update; True stops the agent."""
        ...

    def on_agent_started(self, text: str, at: float) -> None: ...

    def on_agent_stopped(self, at: float) -> None: ...

    def should_resume(self) -> bool:
        """The last stop was a false interruption: resume the agent."""
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

    def on_transcript(self, frame: TranscriptFrame) -> bool:
        return False

    def on_agent_started(self, text: str, at: float) -> None:
        pass

    def on_agent_stopped(self, at: float) -> None:
        pass

    def should_resume(self) -> bool:
        return False

    def reset(self) -> None:
        pass


class FilteredBargeIn:
    """Stop the agent only for a bid for the floor: not for an
    acknowledgement, not for its own echo (the transcript check here; the
    acoustic check is the echo filter in front of the VAD), not for a noise
    the VAD does not call speech. Decides within ``max_listen_s`` of onset;
    a stop with no words after it is flagged for resume."""

    def __init__(
        self,
        clock: Clock,
        language: str = "en",
        params: AckParams | None = None,
        echo_check: EchoTranscriptCheck | None = None,
    ) -> None:
        self.clock = clock
        self.ack = AckFilter(clock, language, params, echo_check)
        self._resume = False
        self.last_decision = Decision.KEEP

    @property
    def reason(self) -> str:
        return self.ack.reason

    def _take(self, d: Decision) -> bool:
        self.last_decision = d
        if d is Decision.RESUME:
            self._resume = True
        return d is Decision.STOP

    def should_stop(self, frame: AudioInFrame, vad: VADStep) -> bool:
        return self._take(self.ack.on_vad(vad))

    def on_transcript(self, frame: TranscriptFrame) -> bool:
        return self._take(self.ack.on_transcript(frame.text))

    def on_agent_started(self, text: str, at: float) -> None:
        self.ack.agent_started(text, at)

    def on_agent_stopped(self, at: float) -> None:
        self.ack.agent_stopped()

    def should_resume(self) -> bool:
        resume, self._resume = self._resume, False
        return resume

    def reset(self) -> None:
        self.ack.reset()
        self._resume = False
