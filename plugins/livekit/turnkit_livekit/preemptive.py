"""LiveKit's preemptive drafts hold turnkit's commit until their first token.

LiveKit 1.8 drafts a reply from each final (or preflight) transcript before
the turn is confirmed (``preemptive_generation``, on by default) and adopts
it when the committed transcript is the same. A commit before that draft's
first token brings the reply no sooner (its words come when the engine
sends them; with ``preemptive_tts`` its audio when the TTS has rendered
them), while a caller who goes on inside that time is cut off. turnkit's
endpointing holds a commit for a running draft whose drafter it knows
(:meth:`~turnkit.detectors.endpointing.Endpointing._draft_holds`; what
``turnkit replay`` models with its default ``--draft-hold``). LiveKit's
drafts are LiveKit's: turnkit does not start or cancel them.
:class:`PreemptiveMirror` tells the detector stream's
:class:`~turnkit.drafting.drafter.EagerDrafter` about each, on this evidence:

* LiveKit starts a draft: its ``AgentActivity.on_preemptive_generation``
  (what its ``AudioRecognition`` calls at a final or preflight transcript)
  left a new preemptive generation behind; the draft answers that
  generation's transcript and starts at the detector's audio time then;
* LiveKit drops it: ``AgentActivity._cancel_preemptive_generation`` (a
  newer transcript, a preflight gone stale, an interruption);
* the turn is committed: the user's ``ChatMessage`` is added (whoever
  decided: LiveKit adopts or drops the draft there);
* the first token: the LLM's ``metrics_collected`` (``LLMMetrics.ttft``) of
  every request, drafts included, and with ``preemptive_tts`` the TTS's
  (``TTSMetrics.ttfb``): the drafter holds for the lowest of the last ones
  (``learn_first_token`` / ``learn_first_audio``), ``first_token_ms`` /
  ``first_audio_ms`` until one is measured (0: no hold until then).

The drafter only mirrors (``drafts_on_eager=False``, no limits of its own:
LiveKit's ``max_retries`` and ``max_speech_duration`` decide which drafts
start), so turnkit's eager signals start nothing here. The two hooks are
LiveKit internals (livekit-agents 1.8.9, ``agent_activity.py`` 2622, 1906);
where they are missing the mirror logs it once and holds nothing, and
``tests/test_livekit_preemptive.py`` fails.
"""

from __future__ import annotations

import logging
from typing import Any

from livekit.agents import AgentSession
from livekit.agents.metrics import LLMMetrics, TTSMetrics

from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.text.normalize import normalize_text

__all__ = ["PreemptiveMirror"]

log = logging.getLogger(__name__)

_HOOKED = "_turnkit_preemptive_mirror"


class PreemptiveMirror:
    """Mirrors one session's LiveKit preemptive drafts into the detector
    stream's drafter (see the module docstring). Made by
    :func:`turnkit_livekit.attach` (``hold_for_drafts=True``, the default),
    which calls :meth:`hook` on every session event and
    :meth:`on_user_turn` at each committed user turn.

    Decides which of LiveKit's drafts hold a commit: those LiveKit will
    play. Not one made while a reply the caller cut off is still ending
    (LiveKit drops it at the commit: the reply's heard part joins the chat
    context after the draft copied it), and none while LiveKit dropped the
    last draft for the committed words (:attr:`holding`). The counters
    (``started``, ``adopted``, ``dropped``, ``doomed``, ...) say what it saw."""

    def __init__(self, session: AgentSession, streams: Any) -> None:
        self.session = session
        self._streams = streams  # turnkit_livekit.TurnMetrics: its _stream()
        self.started = 0  # drafts LiveKit started that the drafter mirrored
        self.cancelled = 0
        self.first_tokens = 0  # LLM first tokens measured
        self.first_audio = 0  # TTS first audio measured (preemptive_tts)
        self.adopted = 0  # drafts for the committed words that LiveKit then played
        self.dropped = 0  # ... that it dropped (the chat context changed since)
        self.doomed = 0  # drafts made while a cut-off reply was still ending: not held
        self._warned = False
        self._emitters: set[int] = set()
        # LiveKit's generation the drafter mirrors, and the one out at the
        # last commit (whether LiveKit played it is known a moment later).
        self._gen: Any = None
        self._at_commit: Any = None
        self._last_adopted = True

    # -- params -----------------------------------------------------------------------
    @staticmethod
    def params(first_token_ms: float = 0.0, first_audio_ms: float = 0.0) -> DraftParams:
        """The mirror's drafter: learns both latencies, never refuses a
        draft LiveKit started, and starts none on eager signals."""
        return DraftParams(
            max_drafts=1_000_000,
            max_speech_s=1e9,
            first_token_ms=first_token_ms,
            first_audio_ms=first_audio_ms,
            learn_first_token=True,
            learn_first_audio=True,
            drafts_on_eager=False,
        )

    # -- evidence from the session's events ------------------------------------------
    def hook(self) -> None:
        """Hook the session's current activity (idempotent; an agent handoff
        makes a new one: every session event calls this)."""
        activity = getattr(self.session, "_activity", None)
        if activity is None:
            return
        if getattr(activity, _HOOKED, None) is not self:
            start = getattr(activity, "on_preemptive_generation", None)
            cancel = getattr(activity, "_cancel_preemptive_generation", None)
            if (
                start is None
                or cancel is None
                or not hasattr(activity, "_preemptive_generation")
                or not hasattr(activity, "preemptive_generation_opts")
            ):
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "this livekit-agents has no on_preemptive_generation hook: turnkit "
                        "cannot see LiveKit's drafts, and commits are not held for them"
                    )
                return
            setattr(activity, _HOOKED, self)
            activity.on_preemptive_generation = self._wrap_start(activity, start)
            activity._cancel_preemptive_generation = self._wrap_cancel(activity, cancel)
        self._listen(getattr(activity, "llm", None), self._on_llm_metrics)
        if self._preemptive_tts(activity):
            self._listen(getattr(activity, "tts", None), self._on_tts_metrics)

    def on_user_turn(self, text: str) -> None:
        """The user turn was committed (LiveKit adopts or drops its draft
        now): the drafter starts the next turn afresh."""
        self._judge()
        gen, self._gen = self._gen, None
        # Only a draft for the committed words could be played (and only
        # such a draft holds a commit).
        words = getattr(getattr(gen, "info", None), "new_transcript", None)
        if words is not None and normalize_text(words) == normalize_text(text):
            self._at_commit = gen
        drafter = self._drafter()
        if drafter is not None:
            drafter.on_end(text)

    @property
    def holding(self) -> bool:
        """Whether LiveKit plays the drafts it makes. It drops a draft at
        the commit when the chat context changed since (an agent whose
        ``on_user_turn_completed`` edits it, for retrieval, makes every
        draft void) and sends a fresh request: a commit held for that
        draft's first token only delayed the reply. So the drafts hold
        commits unless LiveKit dropped the last one out at a commit."""
        self._judge()
        return self._last_adopted

    def _judge(self) -> None:
        """Whether LiveKit played or dropped the draft out at the last
        commit, once it has done either."""
        gen, handle = self._at_commit, getattr(self._at_commit, "speech_handle", None)
        if gen is None or handle is None:
            return
        if getattr(handle, "scheduled", False):
            self.adopted += 1
            self._last_adopted = True
        elif getattr(handle, "interrupted", False):
            self.dropped += 1
            self._last_adopted = False
        else:
            return  # not yet
        self._at_commit = None

    # -- internals --------------------------------------------------------------------
    def _drafter(self) -> EagerDrafter | None:
        s = self._streams._stream()
        return None if s is None else s.drafter

    @staticmethod
    def _preemptive_tts(activity: Any) -> bool:
        try:
            return bool(activity.preemptive_generation_opts.get("preemptive_tts", False))
        except Exception:  # an activity without an agent yet
            return False

    def _listen(self, emitter: Any, callback: Any) -> None:
        if emitter is None or id(emitter) in self._emitters or not hasattr(emitter, "on"):
            return
        self._emitters.add(id(emitter))
        emitter.on("metrics_collected", callback)

    def _wrap_start(self, activity: Any, start: Any) -> Any:
        def on_preemptive_generation(info: Any) -> None:
            before = activity._preemptive_generation
            start(info)
            after = activity._preemptive_generation
            if after is None or after is before:
                return  # LiveKit started none (disabled, paused, a limit)
            if getattr(activity, "_current_speech", None) is not None:
                # Drafted while a reply the caller cut off is still on its
                # way out: its heard part joins the chat context after this
                # draft copied it, so LiveKit drops the draft at the commit.
                self._gen = None
                self.doomed += 1
                return
            self._gen = after
            s = self._streams._stream()
            if s is None or s.drafter is None or not self.holding:
                return
            # At the detector's audio time, as the replay starts its drafts.
            if s.drafter.on_eager(info.new_transcript, at=s.clock.now()) is not None:
                self.started += 1

        return on_preemptive_generation

    def _wrap_cancel(self, activity: Any, cancel: Any) -> Any:
        def _cancel_preemptive_generation() -> None:
            had = activity._preemptive_generation is not None
            cancel()
            if had:
                self._gen = None
            drafter = self._drafter()
            if had and drafter is not None and drafter.cancel("livekit cancelled") is not None:
                self.cancelled += 1

        return _cancel_preemptive_generation

    def _on_llm_metrics(self, ev: Any) -> None:
        drafter = self._drafter()
        if isinstance(ev, LLMMetrics) and ev.ttft > 0 and drafter is not None:
            drafter.on_first_token(ev.ttft * 1000.0)
            self.first_tokens += 1

    def _on_tts_metrics(self, ev: Any) -> None:
        drafter = self._drafter()
        if isinstance(ev, TTSMetrics) and ev.ttfb > 0 and drafter is not None:
            drafter.on_first_audio(ev.ttfb * 1000.0)
            self.first_audio += 1

