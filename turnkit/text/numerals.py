"""Numbers as a caller says them: what the text models read in place of a
recogniser's numerals.

Recognisers write numbers in digits ("for 3 people", "at 8 p m", "on the
15th", "it's 3 4", a phone number as one token "01223247942"): Deepgram and
most cloud recognisers with formatting on, and the transcripts of recorded
calls (SpokenWOZ's are written so). The text models learnt numbers spelled
out, as they are spoken (their training values are written in words:
"ten thirty", "two people", "march twelfth"), and read a numeral as a rarer
token: "on the 15th" after "what day?" P(end) 0.73 against "on the
fifteenth" 0.97, "at 8 p m" 0.85 against "at eight pm" 1.00, "for 2" 0.85
against "for two" 0.99 (semantic-text v2). Each reading below is how the
number is said in a call: a digit alone or a string with a leading zero or
of five digits or more is read digit by digit (a code, a phone number); two
digits as a cardinal ("45": forty five); three and four in pairs as times,
years and house numbers are ("930": nine thirty, "151": one fifty one,
"1984": nineteen eighty four, "1500": fifteen hundred, "2005": two thousand
five); an ordinal suffix as an ordinal ("21st": twenty first); digits and
letters mixed as a code read out ("7gh2": seven g h two); and the groups
of a number read out ("415 555 0132": five digits or more in a row of digit
tokens) digit by digit, each. Letters spelled out and written hyphenated
("s-m-i-t-h") are read as the letters they are.

What the models read and whether the words end in a digit run
(:func:`spoken_numbers`) use these readings; how many digits were read out
(against the length the field wants) is counted from the transcript as
written.

Example::

    >>> " ".join(spoken_numbers("on the 15th at 8 p m".split()))
    'on the fifteenth at eight pm'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["DIGIT_WORDS", "READ_OUT_DIGITS", "spoken_number", "spoken_numbers"]

# A number of this many digits or more is read out digit by digit (a phone,
# account or card number), not said as a whole ("1984").
READ_OUT_DIGITS = 5

# Each digit as said alone, by its value.
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = [
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    "seventeen", "eighteen", "nineteen",
]  # fmt: skip
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINAL = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
_ORDINAL_TOKEN = re.compile(r"^(\d+)(st|nd|rd|th)$")
_HAS_DIGIT = re.compile(r"\d")
_PIECES = re.compile(r"\d+|[^\W\d_]+")
_UNITS = frozenset({"am", "pm"})


def _digits(s: str, oh: bool | None = None) -> list[str]:
    # Read digit by digit, a zero is said "oh" ("oh one two two three");
    # a lone "0" is "zero" unless it is one group of a number read out.
    oh = len(s) > 1 if oh is None else oh
    return ["oh" if c == "0" and oh else DIGIT_WORDS[int(c)] for c in s]


def _pair(s: str) -> list[str]:
    """Two digits, 10-99, as a cardinal."""
    n = int(s)
    if n < 10:
        return [DIGIT_WORDS[n]]
    if n < 20:
        return [_TEENS[n - 10]]
    return [_TENS[n // 10]] + ([DIGIT_WORDS[n % 10]] if n % 10 else [])


def _cardinal_said(s: str) -> list[str]:
    """Digits without a leading zero as a number is said in a call."""
    if len(s) == 1:
        return [DIGIT_WORDS[int(s)]]
    if len(s) == 2:
        return _pair(s)
    if len(s) == 3:
        # A time, a house or room number: "nine thirty", "one oh five",
        # "one hundred".
        head, tail = [DIGIT_WORDS[int(s[0])]], s[1:]
    else:
        head, tail = _pair(s[:2]), s[2:]
        if s[:2] in ("10", "20") and s[2] == "0":
            # "2005": two thousand five, "2000": two thousand.
            rest = int(tail)
            return [DIGIT_WORDS[int(s[0])], "thousand"] + (
                _cardinal_said(str(rest)) if rest else []
            )
    if tail == "00":
        return [*head, "hundred"]
    if tail[0] == "0":
        return [*head, "oh", DIGIT_WORDS[int(tail[1])]]
    return head + _pair(tail)


def spoken_number(token: str) -> list[str]:
    """One recogniser token as the words a caller says for it (the token
    itself when it holds no digit and is no spelling)."""
    if not _HAS_DIGIT.search(token):
        parts = token.split("-")
        if len(parts) >= 2 and all(len(p) == 1 and p.isalpha() for p in parts):
            # Letters spelled out, written hyphenated ("s-m-i-t-h").
            return parts
        return [token]
    m = _ORDINAL_TOKEN.match(token)
    if m and not m.group(1).startswith("0") and len(m.group(1)) <= 4:
        words = _cardinal_said(m.group(1))
        last = words[-1]
        if last in _ORDINAL:
            last = _ORDINAL[last]
        elif last.endswith("y"):
            last = last[:-1] + "ieth"
        else:
            last = last + "th"
        return [*words[:-1], last]
    if token.isdigit():
        if len(token) >= READ_OUT_DIGITS or (len(token) > 1 and token[0] == "0"):
            return _digits(token)
        return _cardinal_said(token)
    pieces = _PIECES.findall(token)
    if len(pieces) == 2 and pieces[0].isdigit() and pieces[1] in _UNITS:
        # A number and its unit written together ("5pm", "10am").
        return [*spoken_number(pieces[0]), pieces[1]]
    # Digits and letters mixed: a code, read out one character at a time
    # ("7gh2": seven g h two).
    out: list[str] = []
    for piece in pieces:
        out += _digits(piece) if piece.isdigit() else list(piece)
    return out


def _read_out(src: list[str]) -> set[int]:
    """Indices of numeral tokens in a group read out digit by digit: a run
    of digit tokens holding five digits or more ("415 555 0132": a phone
    number's groups), where "415" alone would be said "four fifteen"."""
    out: set[int] = set()
    i = 0
    while i < len(src):
        j = i
        while j < len(src) and src[j].replace("-", "").isdigit():
            j += 1
        if j - i >= 2 and sum(len(t.replace("-", "")) for t in src[i:j]) >= READ_OUT_DIGITS:
            out.update(range(i, j))
        i = max(j, i + 1)
    return out


def spoken_numbers(words: Iterable[str]) -> list[str]:
    """Normalised words with every numeral token said in words; a time's
    "a m" / "p m" (a recogniser's "p.m." normalised) joined after one."""
    src = list(words)
    grouped = _read_out(src)
    out: list[str] = []
    i = 0
    while i < len(src):
        w = src[i]
        said = _digits(w.replace("-", ""), oh=True) if i in grouped else spoken_number(w)
        out += said
        i += 1
        if said != [w] and i + 1 < len(src) and src[i] in ("a", "p") and src[i + 1] == "m":
            out.append(src[i] + "m")
            i += 2
    return out
