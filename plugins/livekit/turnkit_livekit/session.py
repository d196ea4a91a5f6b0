"""Wire a turnkit detector into a running LiveKit ``AgentSession``.

:func:`attach` subscribes to the session's public events and decides
nothing itself; it carries evidence to the detector and decisions to the
record:

* ``user_input_transcribed`` → the caller's words go to a streaming detector
  that reads them (``fused``);
* ``conversation_item_added`` (assistant) → the agent's text becomes the
  detector's context (``set_agent_text``: "what is your card number?" makes
  "four one" read unfinished); with a :class:`~turnkit_livekit.WordTimesAgent`
  the detector has it earlier, from the first audio of the reply (its text
  from the agent's transcription node), as in ``turnkit replay``;
* ``agent_state_changed`` to ``speaking`` → the detector knows a reply began
  (a caller's sound over it is a new turn);
* ``conversation_item_added`` (user) → turnkit's evidence for the turn that
  just ended goes into that ``ChatMessage.metrics`` (LiveKit's own per-turn
  report, beside ``end_of_turn_delay``): ``turnkit_detector``,
  ``turnkit_end_of_turn_probability``, ``turnkit_compute_ms``,
  ``turnkit_reason``, and for audio detectors ``turnkit_eager`` (an eager
  signal preceded the end) and ``turnkit_silence_ms`` (audio silence when
  the detector decided).

and it executes the streaming detector's turn end as LiveKit's user-turn
commit (:class:`DecisionCommitter`, on by default): when turnkit decides
while LiveKit's own VAD still holds the caller's speech segment, LiveKit is
told to commit now (``AgentSession.commit_user_turn``) instead of after its
VAD's ``min_silence_duration``. ``attach(..., keep_livekit_waits=True)``
keeps LiveKit's waits (the commit then follows its VAD's end of speech).

Example::

    session = AgentSession(vad=..., stt=..., llm=..., tts=...,
                           turn_handling=turn_handling(detector))
    metrics = attach(session, detector)
    ...
    metrics.turns[-1]["turnkit_end_of_turn_probability"]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from livekit.agents import AgentSession, llm
from livekit.agents.voice.events import (
    AgentStateChangedEvent,
    ConversationItemAddedEvent,
    UserInputTranscribedEvent,
)
from livekit.agents.voice.turn import (
    EndpointingOptions,
    InterruptionOptions,
    TurnHandlingOptions,
)

from turnkit.detectors.reply_text import ReplyTextGate
from turnkit.frames import SystemFrame, TurnEagerFrame, TurnEndFrame, TurnResumedFrame
from turnkit_livekit.detectors import (
    TurnkitDetectorStream,
    TurnkitStreamingDetector,
    TurnkitTextDetector,
)
from turnkit_livekit.preemptive import PreemptiveMirror
from turnkit_livekit.word_times import add_reply_listener, register

__all__ = ["Commit", "DecisionCommitter", "TurnMetrics", "attach", "turn_handling"]

log = logging.getLogger(__name__)


# Where LiveKit 1.8.9 waits after turnkit decides, and why the commit below
# is safe (livekit/agents/voice/audio_recognition.py, agent_activity.py):
# with a streaming detector LiveKit starts its end-of-turn task only at its
# own VAD's END_OF_SPEECH (after min_silence_duration, :1500-1522) or at a
# final transcript while its VAD says the caller is silent (:1329), and asks
# predict() only after 200 ms of its VAD's silence (:1493-1498). So a turnkit
# decision made inside LiveKit's VAD segment waited for that segment to end.
# commit_user_turn (agent_session.py:1736) runs the same end-of-turn task at
# once (_commit_user_turn -> _run_eou_detection(trigger="manual")). LiveKit's
# VAD segment then lingers until its own end of speech, and each of its
# INFERENCE_DONE events interrupts the current speech when interruption
# min_words is 0 (agent_activity.py:2507 on_vad_inference_done ->
# _interrupt_by_audio_activity, :2376-2386): with min_words 0 the reply the
# commit starts would be cut by the caller's own past speech (measured: every
# reply of easy-order-status-01 interrupted). With min_words >= 1 LiveKit
# needs a word of new speech (its transcript is cleared at the commit) first.
# LiveKit asks predict() once its VAD counted 7 silent 32 ms windows (224 ms),
# at the 8th window's inference, before that window's END_OF_SPEECH check.
MIN_VAD_SILENCE_S = 0.25


@dataclass(frozen=True, slots=True)
class Commit:
    """One turnkit turn end and what :class:`DecisionCommitter` did with it:
    ``how`` is ``"commit_user_turn"`` (LiveKit told to commit now),
    ``"prediction"`` (LiveKit's VAD had already ended the caller's speech:
    its end-of-turn task commits on the resolved ``predict()``) or
    ``"left to livekit: <why>"`` (an early commit would be unsafe here)."""

    at: float  # the decision, on the detector's audio clock (s)
    how: str
    waited_final: bool = False  # the commit waited for the STT's final words


class DecisionCommitter:
    """Executes a streaming turnkit detector's turn end as LiveKit's user-turn
    commit; it decides nothing.

    On each :class:`~turnkit.frames.TurnEndFrame` of the session's stream:
    if LiveKit's own VAD still holds the caller's speech segment
    (``session.user_state == "speaking"``), LiveKit would wait for that
    segment to end before it even looks at the decision, so the committer
    calls ``session.commit_user_turn(transcript_timeout=0)`` now. If the
    recogniser may still have words to finalise, it first waits for the
    next final transcript, at most ``transcript_timeout`` (the caller's
    words must not be cut in two turns); the caller resuming
    (``TurnResumedFrame``) cancels the wait. Words count as pending (times
    on the detector's audio clock), for an STT with interim results, when an
    interim came after the last final or no transcript came since the
    caller's last speech began; for one without (a ``StreamAdapter`` over a
    batch STT, whose final follows each speech end), when no final came
    since the caller's last speech ended. Once LiveKit's VAD has ended the
    segment, LiveKit's own end-of-turn task is already waiting on the
    resolved ``predict()`` and commits at once; the committer leaves it.

    It commits early only where LiveKit can take it: the session has an STT
    (``commit_user_turn`` commits a transcript) and its interruption options
    need at least one word (``min_words >= 1``, or interruptions off: see
    :func:`turn_handling`); otherwise it logs why once and LiveKit keeps its
    waits.

    Example::

        committer = DecisionCommitter(session, detector)
        ...
        committer.commits[-1].how   # "commit_user_turn"
    """

    def __init__(
        self,
        session: AgentSession,
        detector: TurnkitStreamingDetector,
        *,
        transcript_timeout: float = 2.0,
    ) -> None:
        self.session = session
        self.detector = detector
        self.transcript_timeout = transcript_timeout
        self.commits: list[Commit] = []
        self._interim = False  # the recogniser has words not yet final
        self._final_at = float("-inf")  # the last final transcript, on the detector's clock
        self._heard_at = float("-inf")  # the last transcript, interim or final, ditto
        self._final = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._warned = False
        detector.listeners.append(self._on_signal)
        vad = getattr(session, "vad", None)
        msd = getattr(vad, "min_silence_duration", None)
        if isinstance(msd, int | float) and msd < MIN_VAD_SILENCE_S:
            # LiveKit's VAD would end the segment before asking predict():
            # its end-of-turn task would then commit without turnkit.
            log.warning(
                "LiveKit's VAD min_silence_duration %.2f s < %.2f s: LiveKit ends the caller's "
                "speech before it asks turnkit's detector and commits on its own",
                msd,
                MIN_VAD_SILENCE_S,
            )

    @property
    def waiting_final(self) -> bool:
        """A decision waits for the recogniser's final words before the commit."""
        return self._task is not None and not self._task.done()

    def unsafe(self) -> str | None:
        """Why an early commit would go wrong in this session (None: it is safe)."""
        if self.session.stt is None:
            return "the session has no STT (commit_user_turn commits a transcript)"
        opts = self.session.options.interruption
        if opts.get("enabled", True) and int(opts.get("min_words", 0)) < 1:
            return (
                "interruption min_words is 0: LiveKit's VAD, still in the caller's speech "
                "segment, would interrupt the reply the commit starts (use turn_handling())"
            )
        return None

    def on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        now = self.detector.streams[-1].clock.now() if self.detector.streams else 0.0
        if ev.is_final:
            self._interim = False
            self._final_at = self._heard_at = now
            self._final.set()
        elif ev.transcript.strip():
            self._interim = True
            self._heard_at = now

    def words_pending(self, stream: TurnkitDetectorStream) -> bool:
        """The recogniser may still have words of the caller's last speech to
        finalise (see the class docstring)."""
        stt = self.session.stt
        if stt is not None and stt.capabilities.interim_results:
            return self._interim or self._heard_at < stream.speech_start
        return self._final_at < stream.speech_end

    def _on_signal(self, stream: TurnkitDetectorStream, s: SystemFrame) -> None:
        if not self.detector.streams or stream is not self.detector.streams[-1]:
            return  # another session's stream of a shared detector
        if isinstance(s, TurnResumedFrame):
            self.cancel()
        elif isinstance(s, TurnEndFrame):
            self.cancel()
            if self.words_pending(stream) and self.session.user_state == "speaking":
                self._final.clear()
                self._task = asyncio.get_running_loop().create_task(
                    self._after_final(s), name="turnkit-commit"
                )
            else:
                self._commit(s, waited=False)

    async def _after_final(self, end: TurnEndFrame) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.transcript_timeout):
                await self._final.wait()
        self._commit(end, waited=True)

    def _commit(self, end: TurnEndFrame, *, waited: bool) -> None:
        if self.session.user_state != "speaking":
            # LiveKit's VAD ended the segment: its end-of-turn task waits on
            # the predict() this decision resolved (or re-enters on the final).
            self.commits.append(Commit(end.at, "prediction", waited))
            return
        why = self.unsafe()
        if why is not None:
            if not self._warned:
                self._warned = True
                log.warning("turnkit commits no user turn early: %s", why)
            self.commits.append(Commit(end.at, f"left to livekit: {why}", waited))
            return
        try:
            fut = self.session.commit_user_turn(transcript_timeout=0.0)
        except RuntimeError:  # the session is not running (closing)
            return
        fut.add_done_callback(_retrieve)
        self.commits.append(Commit(end.at, "commit_user_turn", waited))

    def cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()

    def close(self) -> None:
        self.cancel()
        with contextlib.suppress(ValueError):
            self.detector.listeners.remove(self._on_signal)


def _retrieve(fut: asyncio.Future[str]) -> None:
    # LiveKit's future fails when the session closes meanwhile: nothing to do.
    if not fut.cancelled() and fut.exception() is not None:
        log.debug("commit_user_turn: %s", fut.exception())


class TurnMetrics:
    """Per-turn turnkit metrics of one session (see :func:`attach`), and the
    session's :class:`DecisionCommitter` (``committer``; None with
    ``keep_livekit_waits`` or a text detector)."""

    def __init__(
        self,
        session: AgentSession,
        detector: TurnkitTextDetector | TurnkitStreamingDetector,
        *,
        keep_livekit_waits: bool = False,
        transcript_timeout: float = 2.0,
        hold_for_drafts: bool = True,
        first_token_ms: float = 0.0,
    ) -> None:
        self.session = session
        self.detector = detector
        self.turns: list[dict[str, Any]] = []
        self._seen_signals = 0
        self.committer: DecisionCommitter | None = None
        if isinstance(detector, TurnkitStreamingDetector) and not keep_livekit_waits:
            self.committer = DecisionCommitter(
                session, detector, transcript_timeout=transcript_timeout
            )
            session.on("close", lambda _ev: self._close())
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item)
        session.on("agent_state_changed", self._on_agent_state)
        # When a reply's text (from a WordTimesAgent) becomes the detector's
        # context: turnkit's one rule for every host.
        self._reply_text = ReplyTextGate()
        if isinstance(detector, TurnkitStreamingDetector):
            # A WordTimesAgent's STT node notes the word times for it, its
            # transcription node each reply's text.
            register(session, detector)
            add_reply_listener(session, "detector", self._on_reply_text)
        # LiveKit's preemptive drafts hold turnkit's commits for their first
        # token, as EagerDrafter's do in the replay (--draft-hold).
        self.preemptive: PreemptiveMirror | None = None
        if isinstance(detector, TurnkitStreamingDetector) and hold_for_drafts:
            detector.draft_params = PreemptiveMirror.params(first_token_ms)
            for stream in detector.streams:
                stream.hold_for_drafts(detector.draft_params)
            self.preemptive = PreemptiveMirror(session, self)
            self.preemptive.hook()

    def _close(self) -> None:
        if self.committer is not None:
            self.committer.close()

    def _stream(self) -> TurnkitDetectorStream | None:
        d = self.detector
        if isinstance(d, TurnkitStreamingDetector) and d.streams:
            return d.streams[-1]  # one detector per session: its newest stream
        return None

    def _hook(self) -> None:
        if self.preemptive is not None:
            self.preemptive.hook()

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        # LiveKit may start a draft on these words right after this event.
        self._hook()
        if self.committer is not None:
            self.committer.on_transcribed(ev)
        s = self._stream()
        if s is not None:
            s.push_transcript(ev.transcript, ev.is_final)

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        self._hook()
        # LiveKit adds the reply to the chat context once it has played (or
        # was cut): the detector learns its text then, but that the agent
        # spoke now, as the replay's agent tells it at the reply's start (a
        # caller's "uh-huh" over the reply is a new turn, waiting for its
        # words; taken for the last turn going on it was answered at the
        # floor on its audio alone: 2 of 21 decisions of 4 demo calls
        # differed from the replay's).
        if ev.new_state != "speaking":
            # LiveKit runs the transcription node only for a reply it has
            # authorised: one whose text came before its audio ("thinking",
            # or "listening" for session.say()) and that is not "speaking"
            # at the next state change was cut first.
            self._reply_text.stopped()
            return
        text = self._reply_text.started()
        s = self._stream()
        if s is not None:
            s.agent_started()
        if text is not None:
            self._hand(text)

    def _on_reply_text(self, text: str) -> None:
        # A reply's whole text from the agent's transcription node (a
        # WordTimesAgent), long before LiveKit's chat item: the detector's
        # context from the reply's first audio, as in the replay.
        text_now = self._reply_text.text(text)
        if text_now is not None:
            self._hand(text_now)

    def _hand(self, text: str) -> None:
        """The playing reply's whole text to the stream, and to whoever
        keeps it (record_session): LiveKit adds no chat item for a reply
        cut before its synchronized transcript held a word."""
        s = self._stream()
        if s is not None:
            s.set_agent_text(text)
        if isinstance(self.detector, TurnkitStreamingDetector):
            for listener in list(self.detector.reply_listeners):
                listener(text)

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        self._hook()  # an agent handoff: a new activity
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
        if self.preemptive is not None:
            self.preemptive.on_user_turn(item.text_content or "")
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
    session: AgentSession,
    detector: TurnkitTextDetector | TurnkitStreamingDetector,
    *,
    keep_livekit_waits: bool = False,
    transcript_timeout: float = 2.0,
    hold_for_drafts: bool = True,
    first_token_ms: float = 0.0,
) -> TurnMetrics:
    """Feed the session's transcripts and agent text to ``detector``, write
    its per-turn evidence into each user ``ChatMessage.metrics`` and (a
    streaming detector) have LiveKit commit the user turn when turnkit
    decides (:class:`DecisionCommitter`); ``keep_livekit_waits=True``
    leaves the commit to LiveKit's own VAD end of speech, as before.

    ``hold_for_drafts`` (a streaming detector): a turn end with one of
    LiveKit's preemptive drafts out for the same words waits for the
    draft's first token (its first audio with ``preemptive_tts``), as
    ``turnkit replay --draft-hold`` models (:mod:`turnkit_livekit.preemptive`):
    the lowest of the LLM's last measured TTFTs, ``first_token_ms`` until
    one is measured."""
    return TurnMetrics(
        session,
        detector,
        keep_livekit_waits=keep_livekit_waits,
        transcript_timeout=transcript_timeout,
        hold_for_drafts=hold_for_drafts,
        first_token_ms=first_token_ms,
    )


def turn_handling(
    detector: TurnkitTextDetector | TurnkitStreamingDetector,
    *,
    endpointing: EndpointingOptions | None = None,
    interruption: InterruptionOptions | None = None,
    **options: Any,
) -> TurnHandlingOptions:
    """``AgentSession(turn_handling=...)`` for a turnkit detector.

    A streaming detector (the default of :func:`turn_detector`) decides the
    whole wait, so LiveKit adds none: ``endpointing.min_delay`` 0 (LiveKit's
    sleep after its VAD's last speech before it commits) and
    ``interruption.min_words`` 1, which lets :class:`DecisionCommitter`
    commit inside LiveKit's VAD segment (see :meth:`DecisionCommitter.unsafe`).
    ``interruption=interruption_options()`` (turnkit's barge-in) sets more.
    A text detector (``livekit_waits=True``) keeps LiveKit's own delays.
    ``endpointing``, ``interruption`` and ``options`` override these."""
    out: dict[str, Any] = {"turn_detection": detector}
    if isinstance(detector, TurnkitStreamingDetector):
        out["endpointing"] = {"min_delay": 0.0, "max_delay": 3.0, **(endpointing or {})}
        out["interruption"] = {"min_words": 1, **(interruption or {})}
    else:
        if endpointing is not None:
            out["endpointing"] = dict(endpointing)
        if interruption is not None:
            out["interruption"] = dict(interruption)
    out.update(options)
    return TurnHandlingOptions(**out)  # type: ignore[typeddict-item]
