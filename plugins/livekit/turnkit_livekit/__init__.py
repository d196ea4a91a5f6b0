"""turnkit inside LiveKit Agents.

* :func:`turn_detector` — a turnkit end-of-turn detector as LiveKit's turn
  detector: the streaming protocol for every spec, so turnkit's endpointing
  decides (LiveKit's text protocol, where LiveKit owns the waits, only with
  ``livekit_waits=True``);
* :func:`attach` — per-turn turnkit metrics into the user ``ChatMessage.metrics``,
  caller transcripts and agent text fed to streaming detectors that read them,
  and LiveKit's user-turn commit at turnkit's decision
  (:class:`DecisionCommitter`; ``keep_livekit_waits=True`` keeps LiveKit's),
  held for the first token of LiveKit's preemptive draft for the same words
  (:class:`PreemptiveMirror`; ``hold_for_drafts=False`` holds none);
* :func:`turn_handling` — ``AgentSession(turn_handling=...)`` for a turnkit
  detector (no LiveKit delay on top of turnkit's; what the early commit needs);
* :func:`gated_tools` — turnkit ``@tool`` functions as LiveKit function tools
  behind a :class:`turnkit.drafting.ToolGate`;
* :func:`filter_barge_in` — turnkit's echo and acknowledgement filters decide
  LiveKit's interruptions (with :func:`interruption_options`), and an
  interrupted reply is stored as the words the caller heard;
* :func:`record_session` — the call as ``turnkit.recording/v1`` for ``turnkit replay``;
* :class:`WordTimesAgent` (or :func:`stt_words` in an agent's own ``stt_node``) —
  the STT's word times to the detector, which LiveKit's transcript events lack;
  and each reply's text as it plays (:func:`reply_text` in an agent's own
  ``transcription_node``), which LiveKit's chat context has only once it played.

Example::

    from turnkit_livekit import attach, turn_detector
    detector = turn_detector("semantic-text")
    session = AgentSession(vad=..., stt=..., llm=..., tts=...,
                           turn_handling=turn_handling(detector))
    attach(session, detector)
"""

from turnkit_livekit.barge_in import BargeInFilter, filter_barge_in, interruption_options
from turnkit_livekit.detectors import (
    TurnkitDetectorStream,
    TurnkitStreamingDetector,
    TurnkitTextDetector,
    turn_detector,
)
from turnkit_livekit.preemptive import PreemptiveMirror
from turnkit_livekit.recorder import record_session
from turnkit_livekit.session import Commit, DecisionCommitter, TurnMetrics, attach, turn_handling
from turnkit_livekit.tools import GatedTools, gated_tools
from turnkit_livekit.word_times import WordTimesAgent, reply_text, stt_words

__all__ = [
    "BargeInFilter",
    "Commit",
    "DecisionCommitter",
    "GatedTools",
    "PreemptiveMirror",
    "TurnMetrics",
    "TurnkitDetectorStream",
    "TurnkitStreamingDetector",
    "TurnkitTextDetector",
    "WordTimesAgent",
    "attach",
    "filter_barge_in",
    "gated_tools",
    "interruption_options",
    "record_session",
    "reply_text",
    "stt_words",
    "turn_detector",
    "turn_handling",
]
