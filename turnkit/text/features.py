"""Hashed features for the semantic end-of-turn model.

What decides whether a transcript is a finished turn is mostly its tail (the
last words: "... for" is unfinished, "... for two" is not), a little of its
head and length, digits and spelled letters in progress, and what the agent
last asked: after "is that right?" a lone "yes" is done; after "what is your
card number?" four digits are not. Every feature is a short string hashed
(CRC-32, stable across processes) into ``2**bits`` slots; the model is one
weight per slot plus a bias (logistic regression), so scoring is a handful
of dictionary-free additions.

Example::

    idx = feature_indices("my number is four one five", "What's your phone number?")
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from turnkit.text.normalize import normalize_text
from turnkit.text.numerals import DIGIT_WORDS, spoken_numbers
from turnkit.text.question import read_agent

__all__ = [
    "DEFAULT_BITS",
    "FEATURE_VERSION",
    "agent_context",
    "feature_indices",
    "text_features",
]

FEATURE_VERSION = 6  # 3: A:req; "same … as before?" is A:yn. 4: one field table (question.FIELDS). 5: question clauses read past discourse words and by word order. 6: a when/why/who/how question names no number field
DEFAULT_BITS = 18
_TAIL = 40  # words looked at (the head's first two words are kept apart)

DIGITS = {
    "zero": 1,
    "oh": 1,
    "o": 1,
    "one": 1,
    "two": 1,
    "three": 1,
    "four": 1,
    "five": 1,
    "six": 1,
    "seven": 1,
    "eight": 1,
    "nine": 1,
    "double": 1,  # "double five": two digits, the second word counts the other
    "triple": 2,
}
NUMBERS = {
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty",
    "sixty", "seventy", "eighty", "ninety", "hundred", "thousand",
}  # fmt: skip
FILLERS = {"um", "uh", "er", "erm", "uhm", "hmm", "mm", "ah", "eh"}
_CALLER_TOPICS = (
    ("last4", ("last four",)),
    ("card", ("card",)),
    ("phone", ("phone", "cell", "mobile")),
    ("zip", ("zip", "postal")),
    ("pin", ("pin", "code", "cvv")),
    ("account", ("account",)),
    ("order", ("order", "confirmation", "tracking", "reference")),
)


def _canon(word: str) -> str:
    # Recognisers disagree on apostrophes ("i'm" / "im"): one form for both.
    return word.replace("'", "")


def _digit_count(tok: str) -> int:
    # "415-555-0132": a recogniser's grouping of the digits said.
    bare = tok.replace("-", "")
    if bare.isdigit():
        return len(bare)
    return DIGITS.get(tok, 0)


# Fields whose answer has one length wherever the caller is: the last four
# digits, a US ZIP code, a 16-digit card. A phone number's length depends on
# the country, a PIN's and an account number's on the business: not listed.
_FIELD_DIGITS = {"last4": 4, "zip": 5, "card": 16}


def expected_digits(agent_text: str) -> int | None:
    """How many digits the field the agent just asked for has, where that
    is the same everywhere (:data:`_FIELD_DIGITS`); None otherwise."""
    return next(
        (_FIELD_DIGITS[f] for f in read_agent(agent_text).fields if f in _FIELD_DIGITS), None
    )


def _trailing_run(text: str) -> list[str] | None:
    """The digit words (or numerals) read out at the end of ``text``, in
    order; None when the run holds a number word ("forty two")."""
    words = [_canon(w) for w in normalize_text(text).split()]
    run: list[str] = []
    for w in reversed(words):
        if w in NUMBERS:
            return None
        if not _digit_count(w):
            break
        run.append(w)
    return run[::-1]


def trailing_digits(text: str) -> int | None:
    """Digits read out at the end of ``text``, one word per digit ("four
    one five", "double five": 2); None when the run holds a number word
    whose digit count is not its own ("forty two", "fifteen hundred")."""
    run = _trailing_run(text)
    return None if run is None else sum(_digit_count(w) for w in run)


_DIGIT_VALUE = {w: str(i) for i, w in enumerate(DIGIT_WORDS)} | {"oh": "0", "o": "0"}


def phone_complete(text: str) -> bool:
    """``text`` ends with a whole telephone number, in the national formats
    whose length is fixed: 11 digits opening with 0 (a UK number, "oh one
    two two three …") or with 1 (a North American one with its country
    code), 10 opening with 2–9 (a North American one). Other countries'
    numbers (10 digits opening with 0 in France, 10–12 in Germany) are not
    told whole: their run waits as any other."""
    run = _trailing_run(text)
    if not run:
        return False
    first = next((w for w in run if w not in ("double", "triple")), "")
    lead = first[0] if first[:1].isdigit() else _DIGIT_VALUE.get(first, "")
    n = sum(_digit_count(w) for w in run)
    return (lead in ("0", "1") and n == 11) or (lead in tuple("23456789") and n == 10)


def agent_context(agent_text: str) -> tuple[str, ...]:
    """Context features from the agent's last message (raw text): its form
    (:func:`~turnkit.text.question.read_agent`), the field it is about, and
    whether it requests that field (``A:req``: "can I have your email?" is
    answered "yes, it's …"; "is it under your email …?" by "yes")."""
    ask = read_agent(agent_text)
    if ask.kind == "none":
        return ("A:none",)
    feats: list[str] = []
    if ask.kind == "statement":
        feats.append("A:stmt")
    else:
        feats.append("A:q")
        if ask.kind == "wh":
            feats += ["A:wh", "A:wh=" + ask.wh]
        elif ask.kind == "yes-no":
            feats.append("A:yn")
            if ask.alternative:
                feats.append("A:or")
        else:
            feats.append("A:qother")
    feats += ["A:t=" + name for name in ask.fields]
    field = any(name != "else" for name in ask.fields)
    if field and ask.request:
        feats.append("A:req")
    return tuple(feats)


def text_features(text: str, agent_feats: Sequence[str]) -> list[str]:
    """Feature strings for a normalised transcript and its agent context
    (numerals said in words, :mod:`~turnkit.text.numerals`)."""
    words = [_canon(w) for w in spoken_numbers(normalize_text(text).split())]
    words = [w for w in words if w]
    n = len(words)
    if n == 0:
        return ["T:empty", *agent_feats]
    tail = words[-_TAIL:]
    w1 = tail[-1]
    w2 = tail[-2] if len(tail) > 1 else "<s>"
    w3 = tail[-3] if len(tail) > 2 else "<s>"
    lb = str(n) if n <= 6 else "7-9" if n < 10 else "10-15" if n <= 15 else "16+"
    f = [
        "w1=" + w1,
        "w2=" + w2,
        "w3=" + w3,
        "b1=" + w2 + "_" + w1,
        "b2=" + w3 + "_" + w2,
        "t1=" + w3 + "_" + w2 + "_" + w1,
        "s3=" + w1[-3:],
        "s2=" + w1[-2:],
        "p3=" + w1[:3],
        "h1=" + words[0],
        "h2=" + words[0] + "_" + (words[1] if n > 1 else "</s>"),
        "len=" + lb,
        "len|w1=" + lb + "|" + w1,
    ]
    f += ["u=" + w for w in set(tail)]
    f += ["ub=" + a + "_" + b for a, b in zip(tail[-6:], tail[-5:], strict=False)]
    if w1 in FILLERS:
        f.append("w1:filler")
        nonfill = [w for w in words if w not in FILLERS]
        f.append("nf1=" + (nonfill[-1] if nonfill else "<none>"))
    # digits read out, and letters spelled, at the end of the transcript
    nd = 0
    k = n - 1
    while k >= 0 and (_digit_count(words[k]) or words[k] in NUMBERS):
        nd += max(1, _digit_count(words[k]))
        k -= 1
    nl = 0
    j = n - 1
    while j >= 0 and len(words[j]) == 1 and words[j].isalpha():
        nl += 1
        j -= 1
    ndb = str(min(nd, 20))
    if nd:
        f += ["nd=" + ndb, "nd|lead=" + (words[k] if k >= 0 else "<s>")]
        head = " " + " ".join(words[: max(k + 1, 0)]) + " "
        for topic, keys in _CALLER_TOPICS:
            if any(f" {key} " in head for key in keys):
                f.append(f"C:t={topic}|nd={ndb}")
                break
    if nl >= 2:
        f.append("nl=" + str(min(nl, 12)))
    # the agent's context, alone and crossed with the caller's tail
    for a in agent_feats:
        f += [a, a + "|w1=" + w1, a + "|len=" + lb]
        if n <= 3:
            f.append(a + "|all=" + "_".join(words))
        if nd:
            f.append(a + "|nd=" + ndb)
        if nl >= 2:
            f.append(a + "|nl")
    return f


def feature_indices(text: str, agent_text: str = "", bits: int = DEFAULT_BITS) -> list[int]:
    """Hashed slots of the features of ``text`` after ``agent_text``."""
    mask = (1 << bits) - 1
    feats = text_features(text, agent_context(agent_text))
    return [zlib.crc32(s.encode()) & mask for s in dict.fromkeys(feats)]
