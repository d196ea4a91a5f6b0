"""Wire a turnkit detector into a running LiveKit ``AgentSession``.

:func:`attach` subscribes to the session's public events and decides
nothing itself; it carries evidence to the detector and decisions to the
record:

* ``user_input_transcribed`` → the caller's words go to a streaming detector
  that reads them (``fused``);
* ``conversation_item_added`` (assistant) → the agent's text becomes the
  detector's context (``set_agent_text``: "what is your card number?" makes
  "four one" read unfinished);
* ``conversation_item_added`` (user) → turnkit's evidence for the turn that
  just ended goes into that ``ChatMessage.metrics`` (LiveKit's own per-turn
  report, beside ``end_of_turn_delay``): ``turnkit_detector``,
  ``turnkit_end_of_turn_probability``, ``turnkit_compute_ms``,
  ``turnkit_reason``, and for audio detectors ``turnkit_eager`` (an eager
  signal preceded the end) and ``turnkit_silence_ms`` (audio silence when
  the detector decided).

Example::

    metrics = attach(session, detector)
    ...
    metrics.turns[-1]["turnkit_end_of_turn_probability"]
"""

from __future__ import annotations

import logging
from typing import Any

from livekit.agents import AgentSession, llm
from livekit.agents.voice.events import ConversationItemAddedEvent, UserInputTranscribedEvent

from turnkit.frames import TurnEagerFrame, TurnEndFrame, TurnResumedFrame
from turnkit_livekit.detectors import (
    TurnkitDetectorStream,
    TurnkitStreamingDetector,
    TurnkitTextDetector,
)

__all__ = ["TurnMetrics", "attach"]

log = logging.getLogger(__name__)


class TurnMetrics:
    """Per-turn turnkit metrics of one session (see :func:`attach`)."""

    def __init__(
        self, session: AgentSession, detector: TurnkitTextDetector | TurnkitStreamingDetector
    ) -> None:
        self.session = session
        self.detector = detector
        self.turns: list[dict[str, Any]] = []
        self._seen_signals = 0
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item)

    def _stream(self) -> TurnkitDetectorStream | None:
        d = self.detector
        if isinstance(d, TurnkitStreamingDetector) and d.streams:
            return d.streams[-1]  # one detector per session: its newest stream
        return None

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        s = self._stream()
        if s is not None:
            s.push_transcript(ev.transcript, ev.is_final)

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage):
            return
        if item.role == "assistant":
            s = self._stream()
            if s is not None:
                s.set_agent_text(item.text_content or "")
            return
        if item.role != "user":
            return
        report = self._report()
        # MetricsReport is a TypedDict (a plain dict at run time): LiveKit's
        # own keys stay as they are, turnkit's sit beside them.
        item.metrics.update(report)  # type: ignore[typeddict-item]
        self.turns.append(dict(report))

    def _report(self) -> dict[str, Any]:
        d = self.detector
        out: dict[str, Any] = {"turnkit_detector": d.spec}
        if isinstance(d, TurnkitTextDetector):
            last = d.last
            if last:
                out["turnkit_end_of_turn_probability"] = last["probability"]
                out["turnkit_compute_ms"] = last["compute_ms"]
                out["turnkit_reason"] = last["reason"]
            return out
        s = self._stream()
        if s is None:
            return out
        new = s.signals[self._seen_signals :]
        self._seen_signals = len(s.signals)
        # the stretch since the caller last went on: what decided this turn
        for i in range(len(new) - 1, -1, -1):
            if isinstance(new[i], TurnResumedFrame):
                new = new[i + 1 :]
                break
        end = next((x for x in reversed(new) if isinstance(x, TurnEndFrame)), None)
        out["turnkit_eager"] = any(isinstance(x, TurnEagerFrame) for x in new)
        if end is not None:
            out["turnkit_end_of_turn_probability"] = end.probability
            out["turnkit_compute_ms"] = end.compute_ms
            out["turnkit_reason"] = end.reason
            out["turnkit_silence_ms"] = round(s.end_silence_ms.get(id(end), 0.0), 1)
        else:
            out["turnkit_reason"] = "LiveKit committed without a turnkit end (timeout or manual)"
        return out


def attach(
    session: AgentSession, detector: TurnkitTextDetector | TurnkitStreamingDetector
) -> TurnMetrics:
    """Feed the session's transcripts and agent text to ``detector`` and write
    its per-turn evidence into each user ``ChatMessage.metrics``."""
    return TurnMetrics(session, detector)
