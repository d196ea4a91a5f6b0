"""The event vocabulary every turnkit component speaks.

Frames are small slotted dataclasses (an audio frame flows every 32 ms, so
they must be cheap to create). Two families, as in Pipecat:

* :class:`DataFrame` — ordered content (audio, transcripts, agent text). A
  processor handles them in arrival order, and an :class:`InterruptionFrame`
  throws away any that are still queued.
* :class:`SystemFrame` — control and events (VAD edges, turn decisions,
  playback start/stop, interruptions). They overtake queued data frames and
  survive an interruption.

All times are seconds on the pipeline's :class:`~turnkit.clock.Clock`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from turnkit.audio.vad import VADStep

__all__ = [
    "AgentAudioStartedFrame",
    "AgentAudioStoppedFrame",
    "AgentTextFrame",
    "AudioInFrame",
    "AudioOutFrame",
    "CancelFrame",
    "DataFrame",
    "DraftTextFrame",
    "EndFrame",
    "Frame",
    "InterruptionFrame",
    "LLMTextFrame",
    "PlaybackMarkFrame",
    "StartFrame",
    "SystemFrame",
    "TranscriptFrame",
    "TurnEagerFrame",
    "TurnEndFrame",
    "TurnResumedFrame",
    "VADSpeechStartedFrame",
    "VADSpeechStoppedFrame",
    "Word",
]


@dataclass(slots=True, kw_only=True)
class Frame:
    """Base of all frames. ``at`` is the clock time the frame describes."""

    at: float = 0.0


@dataclass(slots=True, kw_only=True)
class SystemFrame(Frame):
    """Control/event frame: overtakes queued data, survives interruptions."""


@dataclass(slots=True, kw_only=True)
class DataFrame(Frame):
    """Ordered content frame: flushed from queues by an interruption."""


# --- lifecycle ---------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class StartFrame(SystemFrame):
    """First frame through a pipeline: processors set themselves up."""

    sample_rate: int = 16000


@dataclass(slots=True, kw_only=True)
class EndFrame(DataFrame):
    """Graceful end: queued data ahead of it is processed first."""


@dataclass(slots=True, kw_only=True)
class CancelFrame(SystemFrame):
    """Immediate stop of the pipeline: a system frame, so it overtakes every
    queued data frame (nothing after it is processed)."""


# --- audio -------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class AudioInFrame(DataFrame):
    """Caller-side microphone audio, mono float32 in [-1, 1].

    ``at`` is the time of the first sample. The VAD processor attaches its
    verdict (``vad``: probability, speaking state, edges, speech start/end
    times) on the way through, so downstream policies see audio and VAD
    evidence together.
    """

    audio: np.ndarray
    sample_rate: int
    vad: VADStep | None = None

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate

    @property
    def end(self) -> float:
        return self.at + len(self.audio) / self.sample_rate


@dataclass(slots=True, kw_only=True)
class AudioOutFrame(DataFrame):
    """Agent audio on its way to the speaker. ``reply_id`` names the reply
    it belongs to (0: not known, e.g. a filler line), so the output can
    report how much of each reply played (:class:`PlaybackMarkFrame`)."""

    audio: np.ndarray
    sample_rate: int
    reply_id: int = 0


# --- VAD edges ---------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class VADSpeechStartedFrame(SystemFrame):
    """The VAD confirmed caller speech. ``at`` is the onset (first speech
    frame); ``confirmed_at`` is when the VAD was sure (onset + its start
    window)."""

    confirmed_at: float


@dataclass(slots=True, kw_only=True)
class VADSpeechStoppedFrame(SystemFrame):
    """The VAD confirmed the caller stopped. ``at`` is the end of the last
    speech frame; ``confirmed_at`` is when the VAD was sure."""

    confirmed_at: float


# --- transcripts -------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Word:
    """One recognised word and when it was spoken (seconds, caller timeline),
    as a recogniser's word timestamps give it."""

    text: str
    start: float
    end: float


@dataclass(slots=True, kw_only=True)
class TranscriptFrame(DataFrame):
    """Recognised caller words. ``text`` is the whole transcript of the
    current caller turn so far (lower case, no punctuation, as a streaming
    recogniser emits it); ``is_final`` marks a finalised segment. ``at`` is
    when the transcript became available; ``spoken_until`` is the end of the
    last word in it."""

    text: str
    is_final: bool = False
    spoken_until: float = 0.0
    words: list[Word] = field(default_factory=list)


# --- turn decisions ----------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TurnEagerFrame(SystemFrame):
    """The caller is probably done: a draft may start, nothing is committed."""

    detector: str = ""
    probability: float | None = None
    compute_ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class TurnEndFrame(SystemFrame):
    """The caller is done: the agent commits to replying.

    ``at`` is the decision time; ``compute_ms`` is the wall-clock model cost
    behind the decision (0 for a timer), which a host may add to latency;
    ``speech_end`` is where the caller speech the decision follows ended
    (None: not known; the VAD's last speech end then), which is later than
    the VAD's where words it did not hear opened the turn. ``through_sound``:
    the detector ended the turn while a sound went on that it takes for not
    the caller's (words stopped under a television): that sound going on is
    no sign the caller did; their words will be (a ``TurnResumedFrame``),
    and ``speech_end`` is where those words stopped (their last one's end).
    ``late_words``: the end of a turn already ended, on words of its speech
    that came after that end (a recogniser that writes runs whole, slower
    than the detector waited); a ``TurnResumedFrame`` comes just before it,
    so a reply on its way for the first end is dropped."""

    detector: str = ""
    probability: float | None = None
    compute_ms: float = 0.0
    reason: str = ""
    speech_end: float | None = None
    through_sound: bool = False
    late_words: bool = False


@dataclass(slots=True, kw_only=True)
class TurnResumedFrame(SystemFrame):
    """The caller went on after an eager or end signal: drop any draft."""

    detector: str = ""


# --- agent playback ----------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class AgentAudioStartedFrame(SystemFrame):
    """The agent's first audio for a reply reached the speaker."""

    reply_id: int = 0


@dataclass(slots=True, kw_only=True)
class AgentAudioStoppedFrame(SystemFrame):
    """The agent stopped speaking: ``reason`` is "completed" or "interrupted"."""

    reply_id: int = 0
    reason: str = "completed"


@dataclass(slots=True, kw_only=True)
class AgentTextFrame(SystemFrame):
    """The text of the agent's reply that started playing (sent upstream so
    end-of-turn detectors can judge the caller's answer in its context)."""

    reply_id: int = 0
    text: str = ""


@dataclass(slots=True, kw_only=True)
class LLMTextFrame(DataFrame):
    """Reply text released to be spoken, in order. Only text of a confirmed
    turn is ever released (a draft's tokens are held until then); ``final``
    marks the end of the reply (its ``text`` may be empty). ``apology`` says
    the engine failed and this is the fallback line."""

    reply_id: int = 0
    text: str = ""
    final: bool = False
    apology: bool = False


@dataclass(slots=True, kw_only=True)
class DraftTextFrame(DataFrame):
    """A held draft's text, as the engine writes it, before its turn is
    confirmed: for a TTS to render ahead (preemptive TTS), never to play.
    The same text comes again as :class:`LLMTextFrame` if the draft is
    released; a draft voided never comes (``final``: the draft's text is
    all here)."""

    reply_id: int = 0
    text: str = ""
    final: bool = False


@dataclass(slots=True, kw_only=True)
class PlaybackMarkFrame(SystemFrame):
    """How much of a reply has actually been played: ``played_s`` seconds of
    audio, covering the first ``text_offset`` characters of its text."""

    reply_id: int = 0
    played_s: float = 0.0
    text_offset: int = 0


REPLY_CANCELLED = "reply cancelled"


@dataclass(slots=True, kw_only=True)
class InterruptionFrame(SystemFrame):
    """The caller took the floor: flush queued data, stop agent output.
    ``reply_id``: the reply it stops, where the sender names one (a pending
    reply cancelled); 0: whatever is playing. ``reason`` ``REPLY_CANCELLED``:
    the caller went on before any of that reply played (the barge-in
    controller's cancel-pending), not a barge-in over it."""

    reason: str = ""
    reply_id: int = 0

    @property
    def cancels_pending(self) -> bool:
        return self.reason == REPLY_CANCELLED
