"""Eager drafting: start the reply before the turn is confirmed, keep it only
if the caller really was done.

The drafter decides, on the evidence of turn signals and transcripts, when a
draft reply may start, when it must be thrown away, and whether the
confirmed turn may use it:

* an **eager** signal (``TurnEagerFrame`` from ``fused``/``semantic-text``/
  ``smart-turn``, or Deepgram Flux's EagerEndOfTurn) starts a draft for the
  transcript so far — unless this turn already had ``max_drafts`` drafts, or
  the caller has been speaking for more than ``max_speech_s`` (a long turn
  will likely go on; LiveKit has the same guard);
* new **words** that change the normalised transcript cancel the draft.
  Sound alone does not (the caller's voice again, a breath, a cough, a
  voice behind them): until the recogniser writes other words the draft
  still answers the words said, and the confirmed end decides. LiveKit's
  preemptive generation is dropped the same way, only when the transcript
  it answered changes; a draft dropped on sound makes the turn wait for a
  fresh request after a background voice or a breath (noisy calls:
  p95 1612 -> 1367 ms with this rule, the same figures on clean ones);
* the confirmed **end** of turn *uses* the draft if the normalised
  transcript is unchanged since it started, else cancels it and asks for a
  fresh request;
* a draft's **first token**: with ``first_token_ms`` (the engine's time to a
  first token, its low end) the drafter says when the running draft will
  have one (:meth:`EagerDrafter.ready_at`). With ``learn_first_token`` the
  host reports each request's measured time to its first token
  (:meth:`EagerDrafter.on_first_token`: the Responder does, and the
  Pipecat plugin's ``FirstTokenObserver`` from the LLM service's TTFB
  metric) and the drafter uses the lowest of the last
  ``FIRST_TOKEN_WINDOW``: the low end of what this engine, under its
  current load, really does. The detector it is attached to
  (``detector.attach_drafter``) commits a pause with a draft out no sooner —
  a commit before then brings the reply no sooner, while a caller who goes
  on inside it is cut off — and sends an eager signal whenever its wait
  would end within that time of now (the draft then only speeds the reply);
* a draft's **first audio**: where the host also renders the draft's speech
  before the commit (preemptive TTS: turnkit's ``TTSProcessor`` renders a
  held draft's first sentence, LiveKit's ``preemptive_tts``),
  ``first_audio_ms`` (the TTS's time from the text to its first audio) is
  added to the hold: the reply's audio is ready then whenever the commit
  comes, so a commit before it brings the reply no sooner either.

The drafter holds no tokens and plays nothing: hosts do (the replay's agent,
a Pipecat or LiveKit plugin); by default a draft's tokens are held, not
spoken. Tool calls made inside a draft go through
:class:`turnkit.drafting.tools.ToolGate`, which runs only read-only tools
there.

Example::

    drafter = EagerDrafter(clock)
    action = drafter.on_eager("i'd like a table for two")   # -> Draft(id=1, ...)
    drafter.on_end("i'd like a table for two")              # -> ("use", draft)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from turnkit.clock import Clock
from turnkit.text.normalize import normalize_text

__all__ = ["FIRST_TOKEN_WINDOW", "Draft", "DraftParams", "DraftStats", "EagerDrafter"]

# Measured first tokens a learning drafter keeps: the lowest of the last 20
# requests is the engine's low end at its current load (a cold first
# request or a burst of load falls out of it within 20 requests).
FIRST_TOKEN_WINDOW = 20


class DraftParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Four: a caller who pauses twice before their end (real callers do in
    # long turns) still has a draft to hold that end for its first token,
    # also where one pause ran so long that a commit came due inside it and
    # drafted first (docs/endpointing.md, *Four drafts per turn*).
    max_drafts: int = Field(4, ge=1, description="drafts per caller turn at most")
    max_speech_s: float = Field(
        12.0, gt=0, description="no draft once the caller has spoken this long in the turn"
    )
    first_token_ms: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="how long the engine takes to a draft's first token (its TTFT, the low "
        "end): the attached detector commits no sooner after a draft starts; 0: it does not wait",
    )
    first_audio_ms: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="with preemptive TTS (the host renders a held draft's first sentence "
        "before the commit): the TTS's time from the text to its first audio, added to the "
        "first token's: the commit waits for the draft's first audio; 0: the TTS starts at "
        "the commit (Pipecat), the commit waits for the first token only",
    )
    learn_first_audio: bool = Field(
        False,
        description="use the lowest of the TTS's last measured times to a sentence's audio "
        "(the host reports them: on_first_audio; turnkit's TTSProcessor does with "
        "on_render) instead of first_audio_ms, once one is measured",
    )
    learn_first_token: bool = Field(
        False,
        description="use the lowest of the engine's last measured first tokens (the host "
        "reports them: on_first_token) instead of first_token_ms, once one is measured",
    )
    drafts_on_eager: bool = Field(
        True,
        description="the host starts a draft on the detector's eager signal (turnkit's "
        "Responder, Pipecat); False: its framework starts drafts on evidence of its own "
        "(LiveKit's preemptive generation, on final transcripts) and the drafter only "
        "mirrors them, so the detector sends no eager signal to start one",
    )


@dataclass(slots=True)
class Draft:
    id: int
    text: str  # normalised transcript the draft answers
    started_at: float
    state: Literal["running", "used", "cancelled"] = "running"
    cancel_reason: str = ""


@dataclass(slots=True)
class DraftStats:
    started: int = 0
    used: int = 0
    cancelled: int = 0
    fresh_requests: int = 0  # confirmed turns with no usable draft
    cancel_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.started + self.fresh_requests


class _LowEnd:
    """The low end of a latency the host measures: the lowest of the last
    ``FIRST_TOKEN_WINDOW`` measurements (what this engine or TTS, under its
    current load, can do), for a learning drafter's hold."""

    def __init__(self) -> None:
        self._ms: deque[float] = deque(maxlen=FIRST_TOKEN_WINDOW)

    def add(self, ms: float) -> None:
        if ms >= 0.0 and ms != float("inf"):
            self._ms.append(ms)

    def or_else(self, learn: bool, fixed: float) -> float:
        """The lowest measured when learning and one is measured, else ``fixed``."""
        return min(self._ms) if learn and self._ms else fixed


class EagerDrafter:
    """The drafting policy for one call (see the module docstring)."""

    def __init__(self, clock: Clock, params: DraftParams | None = None) -> None:
        self.clock = clock
        self.params = params or DraftParams()
        self.stats = DraftStats()
        self.current: Draft | None = None
        self._ids = 0
        self._turn_drafts = 0
        self._turn_started_at: float | None = None
        self._first_tokens = _LowEnd()
        self._first_audio = _LowEnd()

    @property
    def first_token_ms(self) -> float:
        """The engine's time to a draft's first token the commit waits for:
        the lowest measured of late with ``learn_first_token``, else (and
        until one is measured) ``params.first_token_ms``; 0: none."""
        return self._first_tokens.or_else(self.params.learn_first_token, self.params.first_token_ms)

    @property
    def first_audio_ms(self) -> float:
        """The TTS's time from a sentence to its audio, added to the hold
        where the host renders a draft's speech ahead: the lowest measured
        of late with ``learn_first_audio``, else (and until one is measured)
        ``params.first_audio_ms``."""
        return self._first_audio.or_else(self.params.learn_first_audio, self.params.first_audio_ms)

    @property
    def hold_ms(self) -> float:
        """How long after a draft starts its reply could first be heard: its
        first token, plus ``first_audio_ms`` where the host renders the
        draft's speech before the commit; 0 without ``first_token_ms``."""
        lead = self.first_token_ms
        return lead + self.first_audio_ms if lead > 0.0 else 0.0

    def on_first_audio(self, ms: float) -> None:
        """The TTS's measured time to render a sentence (what a
        ``learn_first_audio`` drafter adds to its hold)."""
        self._first_audio.add(ms)

    def on_first_token(self, ms: float) -> None:
        """A request's measured time from its start to its first token (what
        a ``learn_first_token`` drafter holds commits for)."""
        self._first_tokens.add(ms)

    # -- evidence -------------------------------------------------------------
    def on_speech(self) -> None:
        """The caller is heard (again): the turn's speaking time starts. A
        running draft stays: sound is no new words (see the module
        docstring); :meth:`on_transcript` voids it when words come."""
        if self._turn_started_at is None:
            self._turn_started_at = self.clock.now()

    def on_transcript(self, text: str) -> Draft | None:
        """New words: a draft for different words is void. Returns it (cancelled)."""
        if self.current is not None and normalize_text(text) != self.current.text:
            return self._cancel("words changed")
        return None

    def on_eager(self, text: str, at: float | None = None) -> Draft | None:
        """The caller is probably done: a new draft, or None when not allowed.
        ``at``: when its request leaves (default now), which its hold counts
        from (:meth:`ready_at`)."""
        norm = normalize_text(text)
        if not norm:
            return None
        if self.current is not None:
            if self.current.text == norm:
                return None  # already drafting exactly this
            self._cancel("superseded")
        if self._turn_drafts >= self.params.max_drafts:
            return None
        spoken = 0.0 if self._turn_started_at is None else self.clock.now() - self._turn_started_at
        if spoken > self.params.max_speech_s:
            return None
        self._ids += 1
        self._turn_drafts += 1
        self.stats.started += 1
        started = self.clock.now() if at is None else at
        self.current = Draft(id=self._ids, text=norm, started_at=started)
        return self.current

    def ready_at(self, text: str | None = None) -> float | None:
        """When the running draft will have its first token (clock time;
        its first audio with ``first_audio_ms``: preemptive TTS); None
        without a running draft or ``first_token_ms``, or when the
        draft does not answer ``text`` (the words a commit now would end the
        turn on: a draft for other words is void, whether or not the host
        has told the drafter yet)."""
        d, lead = self.current, self.hold_ms
        if d is None or d.state != "running" or lead <= 0.0:
            return None
        if text is not None and normalize_text(text) != d.text:
            return None
        return d.started_at + lead / 1000.0

    def on_end(self, text: str) -> tuple[Literal["use", "fresh"], Draft | None]:
        """The turn is confirmed: use the draft if it answers these words."""
        draft, self.current = self.current, None
        self._turn_drafts = 0
        self._turn_started_at = None
        if draft is not None and draft.text == normalize_text(text):
            draft.state = "used"
            self.stats.used += 1
            return "use", draft
        if draft is not None:
            self.current = draft
            self._cancel("transcript changed")
        self.stats.fresh_requests += 1
        return "fresh", None

    def cancel(self, reason: str) -> Draft | None:
        """The host dropped the running draft on evidence of its own (LiveKit
        cancels its preemptive generation). Returns it (cancelled)."""
        return self._cancel(reason)

    def on_ignored(self) -> Draft | None:
        """The caller's speech was not a turn (an acknowledgement or echo the
        agent talked through): void any draft and start the next turn afresh."""
        draft = self._cancel("not a turn")
        self._turn_drafts = 0
        self._turn_started_at = None
        return draft

    def _cancel(self, reason: str) -> Draft | None:
        draft = self.current
        if draft is None:
            return None
        self.current = None
        draft.state = "cancelled"
        draft.cancel_reason = reason
        self.stats.cancelled += 1
        self.stats.cancel_reasons[reason] = self.stats.cancel_reasons.get(reason, 0) + 1
        return draft
