"""A recogniser's word times, put on the host's audio clock.

turnkit's detectors use word times for three rules a transcript alone cannot
drive (docs/endpointing.md): the words a recogniser still owes at a pause,
words the VAD did not hear opening a turn, and the caller's own voice level
behind the stalled-words rule. Hosts get the times from their STT's results
(Deepgram's, Deepgram Flux's, LiveKit's ``SpeechData.words``), which count
seconds of the audio sent on the recogniser's connection (LiveKit: of the
session's audio input). That is the host's audio clock when the recogniser
hears the same audio from its first frame; a reconnect starts it at zero
again, and a recogniser connected after audio began runs behind it.

:class:`WordClock` keeps the offset between the two. A result that ends in
the clock's future (``AHEAD_S``) or far behind it (``MAX_LAG_S``: no
streaming recogniser is that late) is on another base: the offset is set so
that it ends now, and logged. That result may have come late itself, which
would make every word read late by its lag — and a word that reads later
than the VAD's end of the caller's speech opens a new turn after a commit.
So later results on that base pull the offset back to the least lagged
one's (lag only ever makes a result's words read later than they were said).
On the first base (offset 0) nothing is estimated: a host whose recogniser
starts with the audio is exact.

:func:`timed_words` reads ``(text, start, end)`` from the usual shapes: tuples,
dicts or objects with ``word``/``start``/``end``, LiveKit's ``TimedString``
(``start_time``/``end_time``). Words without both times, and tuples that are
not ``(text, start, end)``, are skipped (a host's stream task must not die
on one bad item).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from turnkit.frames import Word

__all__ = ["AHEAD_S", "MAX_LAG_S", "WordClock", "field_of", "number", "timed_words"]

log = logging.getLogger(__name__)

# A result that ends this far behind the audio clock, or this far ahead of
# it, is not on the clock's base: a streaming recogniser answers within
# ~0.1-1 s of the audio it covers.
MAX_LAG_S = 2.0
AHEAD_S = 0.5


def number(x: Any) -> float | None:
    """``x`` as a finite float, else None."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def field_of(obj: Any, name: str) -> Any:
    """A dict's key or an object's attribute (None when absent)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def timed_words(items: Any) -> list[tuple[str, float, float]]:
    """(text, start, end) of the words that have both times (see the module
    docstring for the shapes read)."""
    out = []
    for w in items or []:
        if isinstance(w, list | tuple):
            if len(w) != 3:
                continue
            text, s, e = w
        elif isinstance(w, str) and hasattr(w, "start_time"):  # LiveKit's TimedString
            text, s, e = str(w), field_of(w, "start_time"), field_of(w, "end_time")
        else:
            text, s, e = field_of(w, "word"), field_of(w, "start"), field_of(w, "end")
        s, e = number(s), number(e)
        if text is not None and s is not None and e is not None:
            out.append((str(text), s, e))
    return out


class WordClock:
    """Puts a recogniser's stream times on the host's audio clock (see the
    module docstring)."""

    def __init__(self) -> None:
        self.offset = 0.0  # audio clock - recogniser stream time
        self.reanchors = 0

    def place(
        self, timed: list[tuple[str, float, float]], covered: float | None, now: float
    ) -> list[Word]:
        """The words on the audio clock. ``covered``: the stream time up to
        which the recogniser had the audio when it wrote this result (None:
        its last word's end stands in)."""
        reach = covered if covered is not None else max((e for _, _, e in timed), default=None)
        if reach is not None:
            est = now - reach  # the offset, plus this result's lag (>= 0)
            if est < self.offset - AHEAD_S or est > self.offset + MAX_LAG_S:
                log.info(
                    "recogniser word times re-anchored to the audio clock "
                    "(result ended %.2f s %s it)",
                    abs(est - self.offset),
                    "behind" if est > self.offset else "ahead of",
                )
                self.offset = est
                self.reanchors += 1
            elif self.reanchors:
                self.offset = min(self.offset, est)
        return [Word(text=t, start=s + self.offset, end=e + self.offset) for t, s, e in timed]
