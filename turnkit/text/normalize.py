"""Text as a streaming recogniser emits it: lower case, no punctuation except
apostrophes and hyphens inside words, single spaces.

Same semantics as :func:`turnkit.replay.oracle.normalize_text` (the replay's
stand-in recogniser), so a model trained on normalised text sees at run time
what it saw in training.

Transcripts of real calls carry more than words: annotations
(``[laughter]``, ``<noise>``, ``{breath}``; a sound named in parentheses or
asterisks, ``(laughs)``, ``*cough*``; CHAT's ``&=laughs`` and ``xxx``),
recogniser hesitation tokens (``%HESITATION``, ``%uh``), cut-off words
(``bo-``, CHAT's ``&+bo``) and fillers spelled many ways (``uhm``, ``erm``,
``ehm``, ``em``, ``ahm``, ``hmm``, ``ah``, CHAT's ``&-uh``: non-native
speakers' fillers vary). The text models learnt fillers as ``uh`` and
``um`` only: spelled any other way they read as a content word, and "I want
to book a uhm" scored as finished (0.93), "… a ah" 0.98, "… a em" 0.91. A
lone "hmm" or "ah" as a whole answer then reads as unfinished too: it waits
for the ceiling, the cheaper mistake. So annotations are dropped, and
hesitations, other filler spellings and cut-off words become ``uh`` / ``um``
(a word broken off is a hesitation: the caller is restarting).

Example::

    >>> normalize_text("Hi, I'd like a  table -- for two!")
    "hi i'd like a table for two"
    >>> normalize_text("I want to book a uhm [noise] fli-")
    "i want to book a um uh"
"""

from __future__ import annotations

import re

__all__ = ["normalize_text", "strip_annotations"]

# Sounds transcribers name instead of writing words, in parentheses or
# asterisks ("(laughs)", "*cough*"). Only these labels: a parenthesised word
# may be an uncertain hearing of a word said ("((maybe))", "(taxi)"), kept.
_SOUNDS = (
    r"laugh(?:s|ing|ter)?|chuckles?|giggles?|noise|noises|static|music|beeps?|clicks?|"
    r"cough(?:s|ing)?|sneez(?:e|es|ing)|sigh(?:s|ing)?|breath(?:s|es|ing)?|inhales?|exhales?|"
    r"sniff(?:s|ing)?|lip ?smack|clears? (?:his |her |their )?throat|throat clear(?:ing)?|"
    r"inaudible|unintelligible|indistinct|crosstalk|overlap(?:ping)?|silence|pause|long pause|"
    r"background(?: \w+)?|typing|ringing|hangs? up|unk"
)
_ANNOTATION = re.compile(
    r"\[[^\]]*\]|<[^>]*>|\{[^}]*\}|\(\(\s*\)\)"
    rf"|\((?:{_SOUNDS})\)|\*(?:{_SOUNDS})\*"
    # CHAT (TalkBank, CABank's phone calls): "&=laughs" an event, "xxx" a
    # stretch nobody could make out.
    r"|&=[\w:]+|(?<![\w'])(?:xxx|yyy)(?![\w'])",
    re.IGNORECASE,
)
# CHAT writes a filler "&-uh" and a fragment "&+bo" (a word broken off).
_CHAT_FILLER = re.compile(r"&-(?=[a-z])")
_CHAT_FRAGMENT = re.compile(r"&\+[a-z']+")
# "'em" is "them" said short, not the filler "em".
_THEM = re.compile(r"(?<![\w'])'em(?![\w'])")
_HESITATION = re.compile(r"%\s*(?:hesitation|uh+|eh+|er+|ah+)\b")
_HESITATION_M = re.compile(r"%\s*(?:um+|uhm+|erm+|ehm+|mm+)\b")
# A word broken off: letters glued to one trailing hyphen ("bo-"), not a
# dash ("--") and not an in-word hyphen ("uh-huh").
_CUT_OFF = re.compile(r"(?<![\w'-])[a-z']+-(?=\s|$)")
_DROP = re.compile(r"[^\w\s'-]+")
_EDGE = re.compile(r"(?<!\w)['-]+|['-]+(?!\w)")
_FILLER_UH = re.compile(r"^(?:uh+|u+hh+|er+|e+h+|a+h+|ä+h*|ö+h*)$")
# "em", "ahm", "ähm": how non-native callers' fillers are often written.
_FILLER_UM = re.compile(
    r"^(?:u+m+|uhm+|u+hm+|erm+|e+h*m+|a+hm+|ä+h*m+|ö+h*m+|umm+|h+m+|m{2,})$"
)


def strip_annotations(text: str) -> str:
    """``text`` without transcriber annotations (``[laughter]``, ``<noise>``,
    ``{breath}``, ``(( ))``): sounds, not words, in any language."""
    return _ANNOTATION.sub(" ", text)


def _filler(word: str) -> str:
    if _FILLER_UM.match(word):
        return "um"
    if _FILLER_UH.match(word):
        return "uh"
    return word


def normalize_text(text: str) -> str:
    """Lower case; punctuation dropped except in-word ``'`` and ``-``;
    annotations dropped; hesitations and fillers as ``uh`` / ``um``."""
    t = text.lower().replace("’", "'")
    t = _THEM.sub("them", t)
    t = strip_annotations(t)
    t = _CHAT_FILLER.sub("", t)
    t = _CHAT_FRAGMENT.sub(" uh ", t)
    t = _HESITATION_M.sub(" um ", t)
    t = _HESITATION.sub(" uh ", t)
    t = _CUT_OFF.sub(" uh ", t)
    t = _DROP.sub(" ", t)
    t = _EDGE.sub(" ", t)
    # Word by word, so that a recogniser's per-word text (the replay's
    # word-timed transcripts) normalises as the whole sentence does.
    return " ".join(_filler(w) for w in t.split())
