"""How long a written word takes to say, in "syllable units": what places a
text's words in time when only the audio's extent is known.

Two readers, one estimate: the truncation (which words of an interrupted
reply played, :mod:`turnkit.barge_in.truncation`) and the replay's stand-in
recogniser (where a caller's words fall inside the speech of a turn whose
transcript has no word times, :mod:`turnkit.replay.oracle`).

A word costs ``syllables + WORD_UNITS``: syllables are vowel groups (a final
silent "e" dropped, at least one per word; digits count 1.5 each, ``%``,
``$`` and ``&`` two; another script one per two letters), and every word
has a fixed share (its onset and offset consonants, the joins). A token's
punctuation adds a pause after it: ``, ; :`` and a lone dash
``SHORT_PAUSE_UNITS``, ``. ! ?`` and an ellipsis ``LONG_PAUSE_UNITS``; the
replay reads a token with such a pause as a clause's end. The weights
were chosen on the corpus replies rendered by two engines (Piper, espeak-ng)
so that the mean signed error is near zero on both; it ignores stress and
phrase-final lengthening, so it places words to about one either way.
"""

from __future__ import annotations

import re

__all__ = [
    "LONG_PAUSE_UNITS",
    "SHORT_PAUSE_UNITS",
    "WORD_UNITS",
    "is_spoken",
    "pause_units",
    "syllables",
    "word_units",
]

_VOWELS = re.compile(r"[aeiouy]+")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)

WORD_UNITS = 0.6
SHORT_PAUSE_UNITS = 1.0
LONG_PAUSE_UNITS = 1.5


def is_spoken(token: str) -> bool:
    """Whether ``token`` is said at all (a lone dash or bracket is not)."""
    return bool(_LETTER.search(token) or any(c.isdigit() for c in token))


def syllables(token: str) -> float:
    """The syllable units of ``token`` (see the module docstring)."""
    low = token.lower()
    units = 0.0
    letters = re.sub(r"[^a-z']", " ", low)
    for part in letters.split():
        n = len(_VOWELS.findall(part))
        if n > 1 and part.endswith("e") and not part.endswith(("le", "ee")):
            n -= 1  # silent final e ("time", "name")
        units += max(n, 1)
    units += 1.5 * sum(c.isdigit() for c in low)
    units += 2.0 * sum(c in "%$&" for c in low)
    if units == 0 and _LETTER.search(token):
        # Another script: one unit per two letters is closer than one per word.
        units = max(1.0, len(_LETTER.findall(token)) / 2)
    return units


def word_units(token: str) -> float:
    """How long ``token`` takes to say, in units (0 for one not spoken)."""
    return syllables(token) + WORD_UNITS if is_spoken(token) else 0.0


def pause_units(token: str) -> float:
    """The pause ``token``'s punctuation asks for after it, in units (see the
    module docstring; 0 for none)."""
    if not is_spoken(token):
        return SHORT_PAUSE_UNITS if any(c in "-–—" for c in token) else 0.0
    end = token.rstrip("\"')]}»”’")
    if end.endswith(("...", "…")) or end[-1:] in ".!?":
        return LONG_PAUSE_UNITS
    if end[-1:] in ",;:":
        return SHORT_PAUSE_UNITS
    return 0.0
