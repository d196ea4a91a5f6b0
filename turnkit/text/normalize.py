"""Text as a streaming recogniser emits it: lower case, no punctuation except
apostrophes and hyphens inside words, single spaces.

Same semantics as :func:`turnkit.replay.oracle.normalize_text` (the replay's
stand-in recogniser), so a model trained on normalised text sees at run time
what it saw in training.

Example::

    >>> normalize_text("Hi, I'd like a  table -- for two!")
    "hi i'd like a table for two"
"""

from __future__ import annotations

import re

__all__ = ["normalize_text"]

_DROP = re.compile(r"[^\w\s'-]+")
_EDGE = re.compile(r"(?<!\w)['-]+|['-]+(?!\w)")


def normalize_text(text: str) -> str:
    """Lower case; punctuation dropped except in-word ``'`` and ``-``."""
    t = _DROP.sub(" ", text.lower().replace("’", "'"))
    t = _EDGE.sub(" ", t)
    return " ".join(t.split())
