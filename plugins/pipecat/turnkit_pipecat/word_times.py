"""When the caller said each word, read from a Pipecat STT frame's ``result``.

Pipecat's STT services put their provider's message in
``TranscriptionFrame.result``; :class:`WordTimes` reads the word times from
the forms that carry them and puts them on the engine's audio clock
(:class:`turnkit.text.word_clock.WordClock`: why the detector needs them,
and how a provider's stream times are kept on the clock):

* turnkit's own dict (``turnkit_pipecat.replay``, or an STT wrapper that
  knows the times): ``{"spoken_until": s, "words": [(text, start, end)],
  "segment": id}``, already on the audio clock;
* Deepgram's streaming result (``DeepgramSTTService``: the SDK's
  ``ListenV1Results``, ``channel.alternatives[0].words`` with ``word``,
  ``start``, ``end``; ``start + duration`` is the audio it covers);
* Deepgram Flux's ``TurnInfo`` message as JSON (``DeepgramFluxSTTService``:
  ``{"turn_index", "words": [{"word", "start", "end", ...}],
  "audio_window_end", ...}``; words without times are skipped, and the turn
  index is the utterance id);
* Deepgram's JSON as a dict (the SageMaker service), and any other dict with
  ``"words": [{"word", "start", "end"}]`` in seconds of the provider's stream.

The engine's audio clock counts the frames the pipeline heard from the first
one, as a provider counts the audio its service sent it. Any other result
(another provider's object, a malformed dict) gives no times: the detector
then works from the transcript's arrival, as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from turnkit.frames import Word
from turnkit.text.word_clock import WordClock, field_of, number, timed_words

__all__ = ["SttWords", "WordTimes"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SttWords:
    """Word times of one STT result, on the engine's audio clock."""

    words: list[Word] = field(default_factory=list)
    spoken_until: float | None = None  # how far the words reach (None: unknown)
    segment: object = None  # the STT's utterance id, when it gives one


class WordTimes:
    """Reads word times from Pipecat STT results, on the engine's audio
    clock (see the module docstring)."""

    def __init__(self) -> None:
        self.clock = WordClock()

    @property
    def reanchors(self) -> int:
        return self.clock.reanchors

    @property
    def offset(self) -> float:
        return self.clock.offset

    def read(self, result: Any, now: float) -> SttWords:
        """The words of ``result`` with their times (empty when it has none)."""
        try:
            if isinstance(result, dict):
                if "spoken_until" in result or "segment" in result or _tuples(result.get("words")):
                    return self._turnkit(result)
                if "turn_index" in result:
                    covered = number(result.get("audio_window_end"))
                    words = self.clock.place(timed_words(result.get("words")), covered, now)
                    return SttWords(words, _last_end(words), ("flux", result.get("turn_index")))
                if "channel" in result:  # Deepgram's JSON (the SageMaker service)
                    return self._deepgram(result, result["channel"], now)
                # Another provider's words with times: seconds of its stream.
                words = self.clock.place(timed_words(result.get("words")), None, now)
                return SttWords(words, _last_end(words))
            channel = field_of(result, "channel")
            if channel is not None:
                return self._deepgram(result, channel, now)
        except (TypeError, ValueError, IndexError, AttributeError, KeyError) as exc:
            log.debug("word times unreadable in %s: %s", type(result).__name__, exc)
        return SttWords()

    def _turnkit(self, result: dict[str, Any]) -> SttWords:
        words = [Word(text=t, start=s, end=e) for t, s, e in timed_words(result.get("words"))]
        until = number(result.get("spoken_until"))
        return SttWords(
            words, until if until is not None else _last_end(words), result.get("segment")
        )

    def _deepgram(self, result: Any, channel: Any, now: float) -> SttWords:
        alts = field_of(channel, "alternatives") or []
        if not alts:
            return SttWords()
        start, dur = number(field_of(result, "start")), number(field_of(result, "duration"))
        covered = start + dur if start is not None and dur is not None else None
        words = self.clock.place(timed_words(field_of(alts[0], "words")), covered, now)
        return SttWords(words, _last_end(words))


def _tuples(items: Any) -> bool:
    """turnkit's own form: words as ``(text, start, end)``."""
    return isinstance(items, list) and bool(items) and isinstance(items[0], list | tuple)


def _last_end(words: list[Word]) -> float | None:
    return words[-1].end if words else None
