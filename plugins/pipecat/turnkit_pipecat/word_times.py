"""When the caller said each word, read from a Pipecat STT frame's ``result``.

turnkit's detectors use word times for three rules that a transcript alone
cannot drive (docs/endpointing.md): the words a recogniser still owes at a
pause, words the VAD did not hear opening a turn, and the caller's own
voice level behind the stalled-words rule. Pipecat's STT services put their
provider's message in ``TranscriptionFrame.result``; :class:`WordTimes`
reads the times from the forms that carry them:

* turnkit's own dict (``turnkit_pipecat.replay``, or an STT wrapper that
  knows the times): ``{"spoken_until": s, "words": [(text, start, end)],
  "segment": id}``, already on the audio clock;
* Deepgram's streaming result (``DeepgramSTTService``: the SDK's
  ``ListenV1Results``, ``channel.alternatives[0].words`` with ``word``,
  ``start``, ``end``);
* Deepgram Flux's ``TurnInfo`` message as JSON (``DeepgramFluxSTTService``:
  ``{"turn_index", "words": [{"word", "start", "end", ...}],
  "audio_window_end", ...}``; words without times are skipped, and the turn
  index is the utterance id);
* Deepgram's JSON as a dict (the SageMaker service), and any other dict with
  ``"words": [{"word", "start", "end"}]`` in seconds of the provider's stream.

Providers' times count seconds of audio sent on the connection. The service
sends the same frames the engine hears, from the first one, so they are
the engine's audio clock; a reconnect starts them at zero again. A result
that ends in the engine's future, or far behind it (``MAX_LAG_S``: no
streaming recogniser is that late), is on another base: the times are
re-anchored so that the result ends now (``offset``), and that is logged;
later results on that base pull the offset back to the least lagged one's
(a result's lag only makes its words read later than they were said).

Any other result (another provider's object, a malformed dict) gives no
times: the detector then works from the transcript's arrival, as before.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from turnkit.frames import Word

__all__ = ["MAX_LAG_S", "SttWords", "WordTimes"]

log = logging.getLogger(__name__)

# A result that ends this far behind the audio clock, or this far ahead of
# it, is not on the clock's base: a streaming recogniser answers within
# ~0.1-1 s of the audio it covers.
MAX_LAG_S = 2.0
AHEAD_S = 0.5


@dataclass(slots=True)
class SttWords:
    """Word times of one STT result, on the engine's audio clock."""

    words: list[Word] = field(default_factory=list)
    spoken_until: float | None = None  # how far the words reach (None: unknown)
    segment: object = None  # the STT's utterance id, when it gives one


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


class WordTimes:
    """Reads word times from STT results and keeps a provider's stream
    times on the engine's audio clock (see the module docstring)."""

    def __init__(self) -> None:
        self.offset = 0.0  # audio clock - provider stream time
        self.reanchors = 0

    def read(self, result: Any, now: float) -> SttWords:
        """The words of ``result`` with their times (empty when it has none)."""
        try:
            if isinstance(result, dict):
                if "spoken_until" in result or "segment" in result or _tuples(result.get("words")):
                    return self._turnkit(result)
                if "turn_index" in result:
                    return self._flux(result, now)
                if "channel" in result:  # Deepgram's JSON (the SageMaker service)
                    return self._deepgram(result, result["channel"], now)
                # Another provider's words with times: seconds of its stream.
                words = self._on_clock(_timed(result.get("words")), None, now)
                return SttWords(words, _last_end(words))
            channel = _field(result, "channel")
            if channel is not None:
                return self._deepgram(result, channel, now)
        except (TypeError, ValueError, IndexError, AttributeError, KeyError) as exc:
            log.debug("word times unreadable in %s: %s", type(result).__name__, exc)
        return SttWords()

    # -- the forms ------------------------------------------------------------------
    def _turnkit(self, result: dict[str, Any]) -> SttWords:
        words = [Word(text=t, start=s, end=e) for t, s, e in _timed(result.get("words"))]
        until = _num(result.get("spoken_until"))
        return SttWords(
            words, until if until is not None else _last_end(words), result.get("segment")
        )

    def _flux(self, result: dict[str, Any], now: float) -> SttWords:
        words = self._on_clock(
            _timed(result.get("words")), _num(result.get("audio_window_end")), now
        )
        return SttWords(words, _last_end(words), ("flux", result.get("turn_index")))

    def _deepgram(self, result: Any, channel: Any, now: float) -> SttWords:
        alts = _field(channel, "alternatives") or []
        if not alts:
            return SttWords()
        start, dur = _num(_field(result, "start")), _num(_field(result, "duration"))
        covered = start + dur if start is not None and dur is not None else None
        words = self._on_clock(_timed(_field(alts[0], "words")), covered, now)
        return SttWords(words, _last_end(words))

    # -- the time base ----------------------------------------------------------------
    def _on_clock(
        self, timed: list[tuple[str, float, float]], covered: float | None, now: float
    ) -> list[Word]:
        """Stream times to the audio clock; ``covered``: the stream time up to
        which the provider had the audio when it wrote this result."""
        reach = covered if covered is not None else max((e for _, _, e in timed), default=None)
        if reach is not None:
            est = now - reach  # the offset, plus this result's lag (>= 0)
            if est < self.offset - AHEAD_S or est > self.offset + MAX_LAG_S:
                # Another base (a reconnect restarts the provider's times at
                # zero, or audio flowed before it connected): this result
                # ends now.
                log.info(
                    "STT word times re-anchored to the audio clock (result ended %.2f s %s it)",
                    abs(est - self.offset),
                    "behind" if est > self.offset else "ahead of",
                )
                self.offset = est
                self.reanchors += 1
            elif self.reanchors:
                # Anchored on a result that came with some lag: the words
                # would read late by it, and a late final would seem to be
                # speech the VAD missed after the turn's commit. The least
                # lagged result since comes closest to the true offset.
                self.offset = min(self.offset, est)
        return [Word(text=t, start=s + self.offset, end=e + self.offset) for t, s, e in timed]


def _timed(items: Any) -> list[tuple[str, float, float]]:
    """(text, start, end) of the words that have both times: items given as
    ``(text, start, end)`` or with ``word``, ``start`` and ``end`` (a dict or
    an SDK object)."""
    out = []
    for w in items or []:
        if isinstance(w, list | tuple):
            text, s, e = w
        else:
            text, s, e = _field(w, "word"), _num(_field(w, "start")), _num(_field(w, "end"))
        s, e = _num(s), _num(e)
        if text is not None and s is not None and e is not None:
            out.append((str(text), s, e))
    return out


def _tuples(items: Any) -> bool:
    """turnkit's own form: words as ``(text, start, end)``."""
    return isinstance(items, list) and bool(items) and isinstance(items[0], list | tuple)


def _last_end(words: list[Word]) -> float | None:
    return words[-1].end if words else None
