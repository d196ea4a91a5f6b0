"""What the agent's last message asks of the caller — one reading, shared by
the text models' context features (:func:`turnkit.text.features.agent_context`)
and ``fused``'s patience profile (:func:`turnkit.detectors.fused.choose_profile`).

Decides, from the agent's raw text alone:

* whether it asks at all, and in which form: a wh-question ("what's your
  card number?"), a yes/no question ("is that right?", "do you…?", a tag
  "…, correct?", an elliptical "same address as before?"), another
  question, or a statement;
* whether it *requests data*: a request in a yes/no question's form ("can I
  have your email?", "could you spell it?") or an imperative ("please read
  me the number", "I'll need your date of birth"). A bare "yes" answers a
  check of the data ("Is the order under the email ending in gmail dot
  com?") and is the whole turn; after a request it only starts it ("yes,
  it's …"). Both read as the same yes/no question by form, so the reading
  keeps them apart.

Evidence: the sentence punctuation (the question is the last of the last
two sentences ending in "?") and the words; a line with no punctuation at
all is read from its words alone (:func:`_clause_start`), and a question
is read from where its clause starts: past discourse words ("Okay, and
what day …?"), or where word order opens one inside the sentence ("To
narrow it down, could I have the date?").

The fields it names come from one table (:data:`FIELDS`), read by the
context features and by the profile alike.

And, from the agent's text and the caller's words together, whether the
words are a bare affirmation (:func:`affirms`) and whether they announce a
request rather than answer (:func:`announces_more`: "yes" to "Is there
anything else I can help you with?"), read by ``fused``'s profile and the
threshold detectors' floor alike.

Two readings that could disagree (the profile once called "Same address as
before?" a yes/no question while the features called it "other") are one
here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from turnkit.text.normalize import normalize_text

__all__ = ["FIELDS", "AgentAsk", "affirms", "announces_more", "fields_named", "read_agent"]

_SENT = re.compile(r"[^.!?]+[.!?]*")
_AUX = {
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "would",
    "will", "shall", "should", "may", "have", "has", "had", "isn't", "aren't",
    "don't", "doesn't", "didn't", "won't", "wouldn't", "can't", "couldn't", "shouldn't",
}  # fmt: skip
WH_WORDS = frozenset({"what", "which", "where", "when", "who", "whom", "whose", "why", "how"})
# A tag that makes a statement a yes/no question: "…, right?", "…, okay?"
_TAGS = {"right", "correct", "okay", "ok"}
# The agent asks for the data it names (not whether it is right): a request
# in a yes/no question's form ("can I have the order number?", "could you
# spell it?"), or "please …", "I (just) need your …", "go ahead".
_REQUEST = re.compile(
    r"\b(can|could|may|might|would|will)\s+(i|we|you)\b[^.!?]*\b(have|get|take|grab|give|tell|"
    r"spell|read|repeat|provide|confirm|verify|share|send|say|type|enter)\b"
    r"|\b(please|i need|i'll need|we need|just need|go ahead|let me have|tell me)\b"
)
# An elliptical yes/no question: "Same address as before?", "The usual card?"
_SAME = re.compile(r"^(and\s+)?(the\s+)?(same|usual)\b[^.!?]*\?\s*$|\bas before\?\s*$")

Kind = Literal["none", "statement", "wh", "yes-no", "other"]

# The fields an agent asks about, the phrases (regular expressions, on
# normalised words) that name them, and whether callers give the field in
# chunks with pauses between (digits in groups, a spelling, an address, a
# date of birth): ``fused`` waits more patiently for those. The text models
# read the fields as context (``A:t=…``); the profile reads the chunked ones.
# A card, a phone number, an account are named the same way for both, so
# one table. "number" asks for digits unless it is "the number of"
# something (a count, answered at once).
FIELDS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("last4", ("last four", "last 4", "final four"), True),
    ("card", ("card",), True),
    ("phone", ("phone", "callback number", "mobile number", "cell number"), True),
    ("zip", ("zip", "postal code", "post ?code"), True),
    ("pin", ("pin", "security code", "cvv", "verification code", "passcode"), True),
    ("account", ("account", "member number", "policy number", "customer number"), True),
    (
        "order",
        (
            "order number",
            "order id",
            "confirmation (?:number|code)",
            "reference",
            "tracking number",
            "booking code",
        ),
        True,
    ),
    ("digits", ("digits?", "number(?! of\\b)"), True),
    ("spell", ("spell", "spelling", "letter by letter"), True),
    ("name", ("your name", "full name", "first name", "last name", "surname"), False),
    ("email", ("email", "e-mail"), True),
    ("address", ("address", "street"), True),
    ("birth", ("date of birth", "birth date"), True),
    ("date", ("date", "day", "birthday", "when"), False),
    ("time", ("what time", "which time", "time works", "o'clock"), False),
    ("count", ("how many", "party size", "people"), False),
    ("else", ("anything else", "something else", "else i can"), False),
)
# A number asked for is one field: the most specific one named.
_NUMBER_FIELDS = {"card", "last4", "phone", "zip", "pin", "account", "order"}
_FIELD_RE = tuple(
    (name, re.compile(r"(?<![\w'-])(?:" + "|".join(keys) + r")(?![\w'-])"), chunked)
    for name, keys, chunked in FIELDS
)
_CHUNKED = {name for name, _, chunked in FIELDS if chunked}


# A question that asks when, why, who or how asks for a time, a reason, a
# person, a way or an amount, whatever number-bearing thing it names: "When
# did you last use the card?" is answered "this morning", not with the
# card's sixteen digits; "How would you like to pay for the order?" with "by
# card"; "How much is left on the card?" with a sum. Its reading names no
# number field ("which card" and "what number" still do).
_NOT_NUMBER_WH = frozenset({"when", "why", "who", "how"})


def fields_named(text: str, numbers: bool = True) -> tuple[str, ...]:
    """The fields (:data:`FIELDS`) that ``text`` names, in table order,
    with the most specific number field only (``numbers`` False: none of
    the number fields, nor "digits")."""
    norm = " ".join(normalize_text(text).split())
    found: list[str] = []
    for name, pattern, _ in _FIELD_RE:
        if not numbers and (name in _NUMBER_FIELDS or name == "digits"):
            continue
        if pattern.search(norm):
            found.append(name)
            if name in _NUMBER_FIELDS:
                break
    return tuple(found)


def _named(recent: str, last: str, numbers: bool = True) -> dict[str, object]:
    """An agent line's fields (named in its last two sentences) and whether
    its last sentence names one given in chunks: :class:`AgentAsk`'s
    ``fields`` and ``chunked``."""
    return {
        "fields": fields_named(recent, numbers),
        "chunked": any(f in _CHUNKED for f in fields_named(last, numbers)),
    }


# A transcript with no sentence punctuation at all (many corpora write the
# agent's side so, and so do recognisers without punctuation): where its last
# question clause starts is read from the words, the question's form from
# there. A clause opens at the start or after a discourse word ("okay",
# "sure", "thank you", "and"). An auxiliary before a personal pronoun starts
# a question wherever it is ("... on thursday do you want", "sorry about that
# have you restarted it", "... for you do you have") unless a subordinator,
# a subject, a preposition or an adverb comes first ("if you can", "i have
# you down for thursday"); before a determiner or "there" / "that" / "it"
# only where a clause opens ("sure is the order under ...": "the total is the
# forty dollars" is a statement; "have a nice day" is a wish), or as a short
# tag on what was just said ("... is there anything else", "... at nine will
# that work"; not "i can do that"); "is there" anywhere. A wh-word starts one
# where a clause opens and a verb follows ("thanks what's your order
# number", "so how does it work", "how many people will be …"), or anywhere
# before an auxiliary put before its subject ("… with that where will you be
# departing from", "… what area will you"); "let me know what you need"
# stays a statement with a request in it. Measured on MultiWOZ's 22,191
# clerk lines (ConvLab-3's templates; scripts/probe_question_reading.py),
# the reading of each line stripped of punctuation agrees with the reading
# of it punctuated 93.2 % of the time (74.8 % before the word-order rules and the discourse
# words skipped in punctuated questions); most of the rest are elliptical
# questions ("Anything else I can help with?", "And free wifi, interested?")
# that no word order marks. Of the training corpora's 56,890 chat lines
# without sentence punctuation, 2,493 read as questions; a sample of the 255
# these rules added is nearly all real ones ("hey how are you", "but where
# do you think i would fit in"; not "haha yeah i'll do that").
_PRONOUNS = {"i", "you", "we", "they", "he", "she"}
_DEICTIC = {"there", "that", "this", "it"}
_DETERMINERS = {"the", "your", "my", "our", "a", "an", "any"}
_SUBORDINATE = {"if", "when", "as", "because", "what", "where", "how", "why", "who", "which",
                "whether", "than", "until", "unless", "once", "while"}  # fmt: skip
_DISCOURSE = {"okay", "ok", "sure", "thanks", "alright", "great", "perfect", "so", "and",
              "now", "also", "right", "yes", "no", "well", "oh", "good", "fine", "then", "um",
              "uh", "next", "first", "finally", "anyway", "excellent", "wonderful", "lovely"}  # fmt: skip
_PREPOSITIONS = {"to", "of", "in", "for", "on", "at", "with", "by", "from", "about", "into"}
_ADVERBS = {"not", "never", "just", "also", "really", "still", "don't", "didn't", "only"}
_NOT_OPENING = _SUBORDINATE | _PRONOUNS | _PREPOSITIONS | _ADVERBS | {"it"}
# "have a nice day" is a wish, "have you …" a question: "have" asks only
# before its subject.
_HAVE = {"have", "has", "had"}
# An auxiliary before "that" / "it" near the end asks about what was just
# said: "… at nine will that do", "does that work for you".
_TAG_AUX = {"is", "are", "was", "will", "would", "does", "did", "can", "could"}
_OBJECTS = {"you", "me", "us", "them"}
_RELATIVE = {"which", "who", "whom", "whose"}
_NOT_NOUN = (
    _PRONOUNS | _DEICTIC | _PREPOSITIONS | _OBJECTS | {"those", "these", "him", "her", "not"}
)


def _opens(words: list[str], i: int) -> bool:
    """A clause can open at ``i``: the start, or after a discourse word
    ("okay", "sure", "thank you")."""
    if i == 0:
        return True
    prev = words[i - 1]
    return prev in _DISCOURSE or (prev == "you" and i > 1 and words[i - 2] == "thank")


def _inverted(words: list[str], k: int) -> bool:
    """An auxiliary at ``k`` before its subject (a pronoun, a determiner,
    "there"): the word order of a question, not of a statement."""
    return (
        k + 1 < len(words)
        and words[k] in _AUX
        and words[k] not in _HAVE
        and words[k + 1] in _PRONOUNS | _DETERMINERS | {"there"}
    ) or (k + 1 < len(words) and words[k] in _HAVE and words[k + 1] in _PRONOUNS)


def _clause_start(words: list[str], contracted: set[int]) -> int | None:
    """Where the last question clause of an unpunctuated transcript starts
    (``contracted``: positions of a wh-word said with "'s" / "'re" / "'d")."""
    n = len(words)
    for i in range(n - 2, -1, -1):
        w, nxt, prev = words[i], words[i + 1], words[i - 1] if i else ""
        opens = _opens(words, i)
        if w in WH_WORDS:
            # "what is", "what's", "how much is" (not "when i did": a clause);
            # anywhere when the auxiliary comes before its subject ("… with
            # that where will you be departing from", "what area will you").
            # (not a relative "which is a …", "who is the …"; the word
            # between is the wh-word's noun, "what area", not a subject,
            # "when those are", or "how to do a …")
            inverted = (
                (_inverted(words, i + 1) and (w not in _RELATIVE or words[i + 2] in _PRONOUNS))
                or (i + 2 < n and nxt not in _NOT_NOUN and _inverted(words, i + 2))
                or (i in contracted and nxt in _DETERMINERS | {"there"})  # "what's the name"
            )
            verb = (
                i in contracted
                or nxt in _AUX
                or (i + 2 < n and nxt not in _PRONOUNS and words[i + 2] in _AUX)
                or (w == "how" and nxt in {"many", "much"} and _AUX & set(words[i + 2 : i + 4]))
                or (w in {"how", "what"} and nxt == "about")  # an offer
            )
            if inverted or (opens and verb):
                return i
            continue
        if w not in _AUX:
            continue
        not_relative = prev not in _NOT_OPENING | {"that", "which"}
        # after an object that ends a clause: "… for you do you have", "…
        # help you can you tell me" (not "i have you down", "if you can")
        after_object = prev in _OBJECTS and w not in _HAVE
        subject = nxt in _PRONOUNS and (opens or after_object or prev not in _NOT_OPENING)
        determiner = nxt in _DEICTIC | _DETERMINERS and opens and w not in _HAVE
        there = w in {"is", "are", "was", "were"} and nxt == "there" and not_relative
        tag = w in _TAG_AUX and nxt in {"that", "it", "this", "there"} and n - i <= 5
        if subject or determiner or there or (tag and not_relative and prev not in _AUX):
            # ... unless a wh-word opened it a few words before: "how much do
            # you", "what kind of room would you like", "when is that",
            # "from which day will you"
            for j in range(i - 1, max(-1, i - 7), -1):
                if words[j] in WH_WORDS:
                    return j
            return i
    return None


@dataclass(frozen=True)
class AgentAsk:
    """The reading of one agent message.

    ``sentence`` is the sentence read (lower case, punctuation kept): the
    question if one of the last two sentences is one, else the last;
    ``last`` the last sentence; ``recent`` the last two (where topics are
    looked for)."""

    kind: Kind
    wh: str = ""  # the question word of a wh-question
    alternative: bool = False  # "window or aisle?"
    request: bool = False
    sentence: str = ""
    last: str = ""
    recent: str = ""
    fields: tuple[str, ...] = ()  # the fields the last two sentences name
    chunked: bool = False  # the last sentence names a field given in chunks


_PUNCTUATED = re.compile(r"[.?!]")


def _wh_words(text: str) -> tuple[list[str], list[str], set[int]]:
    """The normalised words of ``text`` as said, the same with "what's" /
    "how's" read as their question word, and where such a contraction was."""
    said = normalize_text(text).split()
    words = [w.split("'")[0] if w.split("'")[0] in WH_WORDS else w for w in said]
    return said, words, {k for k, (a, b) in enumerate(zip(said, words, strict=True)) if a != b}


# Pure in its text, and read on every pause and transcript update that
# follows one agent line (by the profile and the text models' context): read
# once per line. A few hundred lines cover any live call and a replay batch.
@lru_cache(maxsize=512)
def read_agent(agent_text: str) -> AgentAsk:
    """Read what the agent's last message (raw text) asks of the caller."""
    raw = agent_text.strip()
    if not raw:
        return AgentAsk("none")
    sents = [s.strip() for s in _SENT.findall(raw) if s.strip()] or [raw]
    last = sents[-1].lower()
    recent = " ".join(sents[-2:]).lower()
    # The question, if any, is usually the last sentence with a "?".
    question = next((s for s in reversed(sents[-2:]) if s.endswith("?")), "").lower()
    if not _PUNCTUATED.search(raw):
        said, words, contracted = _wh_words(raw)
        start = _clause_start(words, contracted)
        if start is not None:
            question = " ".join(said[start:])
    sentence = question or last
    request = bool(_REQUEST.search(sentence))
    common = {
        "sentence": sentence,
        "last": last,
        "recent": recent,
        "request": request,
        **_named(recent, last),
    }
    if not question:
        return AgentAsk("statement", **common)
    _, words, contracted = _wh_words(question)
    # Read from where the question's clause starts: past its discourse
    # words ("Okay, and what day …?", "Sure, do you have …?"), or where a
    # question opens inside the sentence ("To narrow it down, could I have
    # the date?").
    lead = 0
    while lead < len(words) - 1:
        if words[lead] in _DISCOURSE:
            lead += 1
        elif words[lead : lead + 2] == ["thank", "you"] and lead + 2 < len(words):
            lead += 2
        else:
            break
    words = words[lead:]
    first = words[0] if words else ""
    if first not in WH_WORDS | _AUX and not (len(words) > 1 and words[1] in WH_WORDS):
        inner = _clause_start(words, {k - lead for k in contracted if k >= lead})
        if inner is not None:
            words = words[inner:]
            first = words[0]
    if first in WH_WORDS or (len(words) > 1 and words[1] in WH_WORDS):
        wh = first if first in WH_WORDS else words[1]
        if wh in _NOT_NUMBER_WH:
            common.update(_named(recent, last, numbers=False))
        return AgentAsk("wh", wh=wh, **common)
    if (
        first in _AUX
        or "right" in words[-2:]
        or "correct" in words[-2:]
        or (words and words[-1] in _TAGS)
        or _SAME.search(question)
    ):
        return AgentAsk("yes-no", alternative=" or " in f" {' '.join(words)} ", **common)
    return AgentAsk("other", **common)


# A bare affirmation, the whole answer to a yes/no question: "yes", "yeah it
# is", "uh yes that's correct", "yes yes thanks".
_AFFIRM_WORDS = frozenset(
    {"yes", "yeah", "yep", "yup", "correct", "right", "exactly", "mhm", "uh-huh", "sure",
     "it", "is", "that", "that's", "indeed"}
)  # fmt: skip
_AFFIRM_LAST = frozenset(
    {"yes", "yeah", "yep", "yup", "correct", "right", "exactly", "mhm", "uh-huh", "sure", "is"}
)
_AFFIRM_LEADS = frozenset({"uh", "um", "oh", "ah", "mm", "okay", "ok"})
_THANKS = ("thank you", "thanks")


def affirms(text: str) -> bool:
    """The caller's words are a bare affirmation ("yes", "uh yeah it is",
    "yes thanks"), with nothing after it."""
    words = normalize_text(text).replace("uh huh", "uh-huh").split()
    while words and words[0] in _AFFIRM_LEADS:
        words = words[1:]
    for tail in _THANKS:
        if words[-len(tail.split()) :] == tail.split():
            words = words[: -len(tail.split())]
    return bool(words) and words[-1] in _AFFIRM_LAST and all(w in _AFFIRM_WORDS for w in words)


def announces_more(agent_text: str, text: str) -> bool:
    """The agent offered more ("Is there anything else I can help you
    with?", "Anything else?": the ``else`` field) and the caller's words so
    far are a bare affirmation: not the answer but its announcement, the
    request follows after a hold ("yes, | um, I also need a taxi"). The text
    models read the bare "yes" there as finished (semantic-text v2 0.96),
    the reverse of what it means; "no", "no thanks" are the answer."""
    return "else" in read_agent(agent_text).fields and affirms(text)
