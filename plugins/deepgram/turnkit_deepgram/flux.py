"""Deepgram Flux turn events as turnkit turn frames.

Flux (Deepgram's ``listen`` v2 API) decides turns on the server and reports
them as ``TurnInfo`` messages (:class:`deepgram.listen.v2.types.ListenV2TurnInfo`):
``StartOfTurn``, ``Update``, ``EagerEndOfTurn``, ``TurnResumed`` and
``EndOfTurn``, each with the turn's transcript so far and the model's
``end_of_turn_confidence``. :class:`FluxTurnMapper` decides which turnkit
frames each message means, so turnkit's :class:`~turnkit.drafting.EagerDrafter`
and :class:`~turnkit.drafting.ToolGate` run behind Flux exactly as behind a
turnkit detector:

====================  ==========================================================
Flux event            turnkit frames
====================  ==========================================================
``StartOfTurn``       ``VADSpeechStartedFrame`` (at the first word) + transcript
``Update``            ``TranscriptFrame`` when the words changed
``EagerEndOfTurn``    transcript + ``TurnEagerFrame`` (probability = confidence)
``TurnResumed``       ``TurnResumedFrame`` (only after an eager that went out)
``EndOfTurn``         final ``TranscriptFrame`` + ``TurnEndFrame``
====================  ==========================================================

Evidence: the message's event, transcript (normalised as turnkit's text is:
lower case, no punctuation), words and ``end_of_turn_confidence``.

With :class:`FluxThresholds` given, the mapper also applies the thresholds on
the client, from every message's confidence (``Update`` included): an eager
goes out at the first message at or above ``eager_eot_threshold`` in a
stretch of speech, and the turn ends at the first one at or above
``eot_threshold`` (or at Flux's own ``EndOfTurn``, whichever comes first).
That is how a stream recorded at one setting is replayed at another. A
stricter setting is exact; a looser one is as fine as Flux's ``Update``
messages (about every 240 ms), and cannot see past a turn the recording
already ended. Without thresholds, the server's events are taken as they are.

Example::

    mapper = FluxTurnMapper(clock)
    for frame in mapper.map(message):          # a ListenV2TurnInfo from the SDK
        await host.handle(frame)
"""

from __future__ import annotations

from typing import Any

from deepgram.listen.v2.types import ListenV2TurnInfo
from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnkit.clock import Clock
from turnkit.frames import (
    Frame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    VADSpeechStartedFrame,
)
from turnkit.text.normalize import normalize_text
from turnkit.text.word_clock import WordClock, number, timed_words

__all__ = ["DETECTOR", "FluxThresholds", "FluxTurnMapper"]

DETECTOR = "deepgram-flux"


class FluxThresholds(BaseModel):
    """Flux's turn thresholds, validated against the ranges Deepgram accepts.

    ``eot_threshold`` (0.5–1.0, Flux's default 0.7): confidence that ends a
    turn. ``eager_eot_threshold`` (0.3–0.9, off by default): confidence that
    sends ``EagerEndOfTurn`` (and enables ``TurnResumed``); it must not
    exceed ``eot_threshold``. ``eot_timeout_ms``: silence that ends a turn
    whatever the confidence.

    Example::

        th = FluxThresholds(eot_threshold=0.8, eager_eot_threshold=0.5)
        socket = client.listen.v2.connect(model="flux-general-en", **th.connect_params())
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    eot_threshold: float = Field(0.7, ge=0.5, le=1.0)
    eager_eot_threshold: float | None = Field(None, ge=0.3, le=0.9)
    eot_timeout_ms: int | None = Field(None, ge=500, le=10_000)

    @model_validator(mode="after")
    def _order(self) -> FluxThresholds:
        if self.eager_eot_threshold is not None and self.eager_eot_threshold > self.eot_threshold:
            raise ValueError(
                f"eager_eot_threshold ({self.eager_eot_threshold:g}) is above "
                f"eot_threshold ({self.eot_threshold:g})"
            )
        return self

    def connect_params(self) -> dict[str, str]:
        """Keyword arguments for the SDK's ``listen.v2.connect(...)`` (query strings)."""
        out = {"eot_threshold": f"{self.eot_threshold:g}"}
        if self.eager_eot_threshold is not None:
            out["eager_eot_threshold"] = f"{self.eager_eot_threshold:g}"
        if self.eot_timeout_ms is not None:
            out["eot_timeout_ms"] = str(self.eot_timeout_ms)
        return out


class FluxTurnMapper:
    """Maps one Flux stream's ``TurnInfo`` messages onto turnkit frames.

    Decides, per message, whether the caller started, went on, is probably
    done (eager) or is done (end), on the evidence described in the module
    docstring. Frames are stamped with ``clock.now()`` (when the message
    arrived); ``VADSpeechStartedFrame.at`` and ``TranscriptFrame.spoken_until``
    come from Flux's word times, put on the clock by a
    :class:`~turnkit.text.word_clock.WordClock` starting at ``audio_offset``
    (the clock time of the stream's first audio sample): the same time base
    as turnkit's other hosts, so a mapper kept across a reconnect (Flux's
    times start at zero again) or given no offset on a clock that started
    before the stream is re-anchored instead of reading every word seconds
    early.
    """

    def __init__(
        self,
        clock: Clock,
        thresholds: FluxThresholds | None = None,
        *,
        audio_offset: float = 0.0,
    ) -> None:
        self.clock = clock
        self.thresholds = thresholds
        self.word_clock = WordClock()
        self.word_clock.offset = audio_offset
        self.reset()

    def reset(self) -> None:
        self.turn_index: int | None = None
        self.text = ""  # normalised transcript of the current turn
        self.eager_out = False  # an eager went out for the current stretch
        self.ended = False  # a TurnEndFrame went out for the current turn

    # -- the mapping -----------------------------------------------------------
    def map(self, msg: Any) -> list[Frame]:
        """The turnkit frames one SDK message means (none for non-TurnInfo)."""
        if not isinstance(msg, ListenV2TurnInfo):
            return []
        now = self.clock.now()
        out: list[Frame] = []
        event = str(msg.event)
        conf = float(msg.end_of_turn_confidence)
        if msg.turn_index != self.turn_index:
            # A new turn: Flux numbers turns, so a missed StartOfTurn still
            # opens one.
            self.reset()
            self.turn_index = msg.turn_index
        # audio_window_end: how far into the stream Flux had heard when it
        # wrote this message (its words end at or before it).
        words = self.word_clock.place(timed_words(msg.words), number(msg.audio_window_end), now)
        spoken_until = words[-1].end if words else self._t(msg.audio_window_end)
        text = normalize_text(msg.transcript)
        changed = text != self.text
        self.text = text

        if event == "StartOfTurn":
            onset = words[0].start if words else self._t(msg.audio_window_start)
            out.append(VADSpeechStartedFrame(at=onset, confirmed_at=now))
        elif (
            self.thresholds is not None
            and changed
            and text
            and (self.eager_out or self.ended)
            and event != "TurnResumed"
        ):
            # New words after our own (client-side) eager or end: the caller
            # went on, which Flux reports only for eagers it sent itself.
            out.append(TurnResumedFrame(at=now, detector=DETECTOR))
            self.eager_out = self.ended = False

        final = event == "EndOfTurn"
        if changed or final:
            out.append(
                TranscriptFrame(
                    at=now, text=text, is_final=final, spoken_until=spoken_until, words=words
                )
            )

        if event == "TurnResumed":
            if self.eager_out or self.ended:
                out.append(TurnResumedFrame(at=now, detector=DETECTOR))
            self.eager_out = self.ended = False
            return out

        if final:
            if not self.ended:
                out.append(self._end(now, conf, f"flux {msg.trigger or 'EndOfTurn'}"))
            self.eager_out = False
            return out

        th = self.thresholds
        if th is None:
            if event == "EagerEndOfTurn" and not self.eager_out:
                out.append(self._eager(now, conf))
            return out
        if not self.ended and conf >= th.eot_threshold:
            out.append(self._end(now, conf, f"confidence {conf:.2f} ≥ {th.eot_threshold:g}"))
        elif (
            not self.eager_out
            and not self.ended
            and th.eager_eot_threshold is not None
            and conf >= th.eager_eot_threshold
        ):
            out.append(self._eager(now, conf))
        return out

    # -- helpers ---------------------------------------------------------------
    @property
    def audio_offset(self) -> float:
        """The clock time of the stream's first audio sample, as it stands."""
        return self.word_clock.offset

    @audio_offset.setter
    def audio_offset(self, value: float) -> None:
        # A host that opens a new stream on the same mapper says where it began.
        self.word_clock.offset = float(value)

    def _t(self, audio_s: float | None) -> float:
        return self.word_clock.offset + float(audio_s or 0.0)

    def _eager(self, now: float, conf: float) -> TurnEagerFrame:
        self.eager_out = True
        return TurnEagerFrame(at=now, detector=DETECTOR, probability=conf)

    def _end(self, now: float, conf: float, reason: str) -> TurnEndFrame:
        self.ended = True
        self.eager_out = False
        return TurnEndFrame(at=now, detector=DETECTOR, probability=conf, reason=reason)
