"""Backchannels per language: what a listener says to keep the speaker
going ("uh-huh", "vale", "d'accord", "genau", "tá"), not to take the floor.

A transcript is a backchannel when its words split entirely into lexicon
phrases (so "okay okay" and "oh okay" are, "okay so" is not). Hesitations
("um", "uh") are listed too: alone they do not bid for the floor.
"""

from __future__ import annotations

import re
from functools import cache

from turnkit.text.normalize import strip_annotations

__all__ = [
    "ANSWERS",
    "BACKCHANNELS",
    "backchannel_phrases",
    "backchannel_words",
    "is_answer",
    "is_backchannel",
    "is_backchannel_prefix",
    "tokens",
]

BACKCHANNELS: dict[str, tuple[str, ...]] = {
    "en": (
        "uh-huh", "uh huh", "mm-hmm", "mm hmm", "mhm", "hmm", "hm", "mm", "uh", "um", "huh",
        "yeah", "yes", "yep", "yup", "ya", "okay", "ok", "right", "alright", "all right",
        "sure", "i see", "got it", "gotcha", "cool", "great", "good", "exactly", "true",
        "wow", "oh", "ah", "nice", "indeed", "of course", "makes sense", "totally",
        # The same sounds as transcribers of real calls spell them.
        "mhmm", "mmhm", "mmhmm", "mm-hm", "m-hm", "mmm", "hmmm", "hm-hmm", "uh-hum", "uh-hm",
        "uhm", "umm", "er", "erm", "eh", "aha", "ah-ha", "ahh", "ohh", "ooh", "really",
        "perfect", "i know", "that's right", "sounds good",
        # LDC's spelling of "mm-hmm" (Switchboard, Fisher, CallHome), and
        # "O.K." as transcripts write it.
        "um-hum", "um-hm", "um-hmm", "o k", "okey",
        # Assessments and receipts said under the speaker, not to take over.
        "absolutely", "definitely", "certainly", "correct", "understood", "i understand",
        "fair enough",
        # Thanks and receipts said under a clerk giving details (a service
        # call: "thank you" while a reference number is read out, "lovely"),
        # as listeners on such calls say them; "thank you, but..." and
        # "thanks, bye" go on past the lexicon and bid. "very much" alone:
        # after a pause ("thank you | very much") the barge-in controller
        # judges the second stretch of speech by its own words. ("so much"
        # is left out: "so" would then wait as a prefix, and "so" opens bids.)
        "thank you", "thanks", "thanks a lot", "many thanks", "thank you very much",
        "thank you so much", "very much",
        "much appreciated", "appreciate it", "lovely", "brilliant", "awesome", "excellent",
        "fantastic", "wonderful", "cheers", "sure thing", "that's great", "that's good",
        "that's fine", "that's perfect", "very good", "yea", "yeh", "yah",
        # Receipts and reactions of real service calls beside the above
        # (Switchboard's backchannel inventory; a US clerk's "yes ma'am").
        # None starts with a word that opens bids ("no problem" would make
        # every "no ..." wait for its second word).
        "that's true", "that's correct",
        "yes sir", "yes ma'am", "interesting", "oh my god", "oh my gosh",
        "oh my goodness", "oh goodness", "oh dear",
    ),
    "es": (
        "sí", "si", "vale", "claro", "ajá", "aja", "ya", "bueno", "exacto", "entiendo",
        "mhm", "mm", "ok", "okay", "de acuerdo", "ah", "oh", "eh", "vale vale", "perfecto",
        "ya veo", "cierto", "órale",
    ),
    "fr": (
        "oui", "ouais", "d'accord", "ok", "okay", "mhm", "hum", "hm", "ah", "oh", "bon",
        "voilà", "exactement", "je vois", "bien sûr", "c'est ça", "ah bon", "tout à fait",
        "bien", "euh", "parfait", "entendu",
    ),
    "de": (
        "ja", "jaja", "genau", "okay", "ok", "mhm", "hm", "hmm", "aha", "ah", "oh", "stimmt",
        "richtig", "klar", "gut", "ach so", "alles klar", "verstehe", "natürlich", "na ja",
        "äh", "ähm", "super", "prima",
    ),
    "pt": (
        "sim", "é", "tá", "ok", "okay", "certo", "claro", "aham", "uhum", "hum", "ah", "oh",
        "entendi", "pois", "pois é", "beleza", "exato", "isso", "tá bom", "com certeza",
        "ahn", "perfeito",
    ),
}

# Backchannel words that also answer a yes/no question: after the agent
# asks one, "okay" or "sí" is the caller's turn, not a murmur.
ANSWERS: dict[str, frozenset[str]] = {
    "en": frozenset({"yeah", "yes", "yep", "yup", "okay", "ok", "right", "sure", "alright",
                     "all right", "uh-huh", "uh huh", "mm-hmm", "mhm", "exactly", "true",
                     "of course", "correct", "absolutely", "definitely", "certainly",
                     "that's right", "perfect", "great", "sounds good", "sure thing",
                     "that's fine", "that's good", "that's great", "that's perfect",
                     "that's true", "that's correct",
                     "yes sir", "yes ma'am"}),
    "es": frozenset({"sí", "si", "vale", "claro", "ok", "okay", "de acuerdo", "exacto", "ajá"}),
    "fr": frozenset({"oui", "ouais", "d'accord", "ok", "okay", "exactement", "bien sûr",
                     "tout à fait", "c'est ça"}),
    "de": frozenset({"ja", "genau", "okay", "ok", "stimmt", "richtig", "klar", "natürlich",
                     "alles klar"}),
    "pt": frozenset({"sim", "é", "tá", "ok", "okay", "certo", "claro", "isso", "tá bom",
                     "exato", "com certeza"}),
}

_TOKEN = re.compile(r"[\w'’-]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-case words, punctuation and transcriber annotations
    (``[laughter]``) dropped, in-word apostrophes and hyphens kept, as
    streaming recognisers write them."""
    words = _TOKEN.findall(strip_annotations(text.lower()))
    return [t.replace("’", "'").strip("-'") for t in words if t.strip("-'")]


def _lang(language: str) -> str:
    base = language.lower().split("-")[0].split("_")[0]
    return base if base in BACKCHANNELS else "en"


@cache
def _phrases(language: str) -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(tokens(p)) for p in BACKCHANNELS[_lang(language)])


@cache
def _longest(phrases: frozenset[tuple[str, ...]]) -> int:
    return max(map(len, phrases))


@cache
def _prefixes(phrases: frozenset[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    """Every phrase cut short ("i" of "i see", "thank you very" of "thank
    you very much"): built once per lexicon, as the transcript grows word
    by word."""
    return frozenset(p[:k] for p in phrases for k in range(1, len(p)))


def backchannel_words(language: str) -> frozenset[str]:
    return frozenset(w for p in _phrases(language) for w in p)


def _split(words: list[str], phrases: frozenset[tuple[str, ...]]) -> list[tuple[str, ...]] | None:
    """Words as a sequence of lexicon phrases, or None."""
    best: list[list[tuple[str, ...]] | None] = [None] * (len(words) + 1)
    best[0] = []
    for i in range(len(words)):
        if best[i] is None:
            continue
        for j in range(i + 1, min(len(words), i + _longest(phrases)) + 1):
            ph = tuple(words[i:j])
            if ph in phrases and best[j] is None:
                best[j] = [*best[i], ph]  # type: ignore[misc]
    return best[len(words)]


def backchannel_phrases(text: str, language: str = "en") -> int | None:
    """How many lexicon phrases ``text`` is ("okay thank you very much": 2,
    "okay" and "thank you very much"), or None when it is not a backchannel."""
    split = _split(tokens(text), _phrases(language))
    return None if not split else len(split)


def is_backchannel(text: str, language: str = "en") -> bool:
    """Every word of ``text`` belongs to a backchannel phrase of the language."""
    return backchannel_phrases(text, language) is not None


def is_backchannel_prefix(text: str, language: str = "en") -> bool:
    """``text`` may still become a backchannel: its words split into lexicon
    phrases with the last one cut short ("i" of "i see", "got" of "got it",
    "oh" then "oh okay" is a backchannel already). A streaming recogniser
    sends "i" before "i see": that first word is not yet a bid."""
    words = tokens(text)
    if not words:
        return False
    phrases = _phrases(language)
    prefixes = _prefixes(phrases)
    for cut in range(max(0, len(words) - _longest(phrases) + 1), len(words)):
        head, tail = words[:cut], tuple(words[cut:])
        if tail in prefixes and (not head or _split(head, phrases) is not None):
            return True
    return False


def is_answer(text: str, language: str = "en") -> bool:
    """The backchannel holds a word that answers a yes/no question."""
    parts = _split(tokens(text), _phrases(language)) or []
    answers = ANSWERS[_lang(language)]
    return any(" ".join(p) in answers for p in parts)
