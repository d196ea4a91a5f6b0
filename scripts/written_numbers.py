#!/usr/bin/env python3
"""Write a copy of a corpus whose caller transcripts write numbers in digits.

    python scripts/written_numbers.py SRC_DIR DST_DIR

Recognisers with formatting on (Deepgram's ``smart_format``/``numerals``,
most cloud recognisers) and the transcripts of recorded calls (SpokenWOZ's)
write the numbers a caller says in digits: "for 4 people", "at 9:30", "on
the 15th", a code read out as "7 2 5". The demo corpus spells them out, as
the text models learnt them. This copy rewrites the caller's words (and the
turn's text) the way such a recogniser would, so a replay can show what
numerals cost the text evidence; audio, times and labels are unchanged (a
number said in two words and written as one keeps the first word's start
and the last word's end; words either side of a pause are not joined).

The rewriting, per run of number words: single digits read out stay one
token each ("four one five" -> "4 1 5", as SpokenWOZ writes them); a tens
word and its unit join ("forty five" -> "45"); "two hundred" -> "200"; two
numbers in a row read as a time when the first is an hour ("nine thirty" ->
"9:30") and as a year otherwise ("nineteen eighty four" -> "1984"); an
ordinal from "fourth" on becomes digits ("fifteenth" -> "15th"); "one",
"first", "second" and "third" alone stay words (a recogniser keeps "that
one", "the first flight"). Calls are copied with the tag ``numerals``
added; a call that cannot be read is named in one line and skipped, the
others are still written (exit 1).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

TAG = "numerals"
UNITS = {
    "zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9,
}  # fmt: skip
TEENS = {
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
ORDINALS = {
    "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
    "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
    "twentieth": 20, "thirtieth": 30,
}  # fmt: skip
# A gap between words this long is a pause (the corpus labels holds from 0.15 s).
PAUSE_S = 0.15
SMALL_ORDINALS = {"first": 1, "second": 2, "third": 3}
_SUFFIX = {1: "st", 2: "nd", 3: "rd"}


def _key(word: str) -> str:
    return re.sub(r"[^a-z]", "", word.lower())


def _number_word(word: str) -> bool:
    k = _key(word)
    return k in UNITS or k in TEENS or k in TENS or k == "hundred"


def _ordinal(n: int) -> str:
    return f"{n}{_SUFFIX.get(n % 10, 'th') if n % 100 not in (11, 12, 13) else 'th'}"


def _groups(keys: list[str]) -> list[tuple[int, int, int]]:
    """(value, first index, last index) of each number in a run of number words."""
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(keys):
        k = keys[i]
        if k in TENS:
            if i + 1 < len(keys) and keys[i + 1] in UNITS and UNITS[keys[i + 1]]:
                out.append((TENS[k] + UNITS[keys[i + 1]], i, i + 1))
                i += 2
                continue
            out.append((TENS[k], i, i))
        elif k in UNITS and i + 1 < len(keys) and keys[i + 1] == "hundred":
            value, last = UNITS[k] * 100, i + 1
            rest = _groups(keys[i + 2 : i + 4])
            if rest and rest[0][0] < 100:
                value += rest[0][0]
                last = i + 2 + rest[0][2]
            out.append((value, i, last))
            i = last + 1
            continue
        elif k in UNITS:
            out.append((UNITS[k], i, i))
        elif k in TEENS:
            out.append((TEENS[k], i, i))
        i += 1
    return out


def _rewrite_run(words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = [_key(w["text"]) for w in words]
    groups = _groups(keys)
    if len(words) == 1 and keys[0] == "one":
        return words
    if len(groups) == 2 and groups[1][0] >= 10 and groups[1][0] < 100 and groups[0][0] <= 99:
        # Two numbers in a row: a time after an hour, else a year.
        first, second = groups
        sep = ":" if 1 <= first[0] <= 12 else ""
        text = f"{first[0]}{sep}{second[0]:02d}"
        return [{"text": text, "start": words[0]["start"], "end": words[-1]["end"]}]
    out = []
    for value, a, b in groups:
        out.append({"text": str(value), "start": words[a]["start"], "end": words[b]["end"]})
    return out


def rewrite_words(words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A caller turn's timed words with its numbers written in digits."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(words):
        k = _key(words[i]["text"])
        if k in ORDINALS or (k in SMALL_ORDINALS and out and _key(out[-1]["text"]) in TENS):
            if k in SMALL_ORDINALS:  # "twenty first"
                prev = out.pop()
                n = TENS[_key(prev["text"])] + SMALL_ORDINALS[k]
                out.append({"text": _ordinal(n), "start": prev["start"], "end": words[i]["end"]})
            else:
                out.append({**words[i], "text": _ordinal(ORDINALS[k])})
            i += 1
            continue
        if not _number_word(words[i]["text"]) or k == "hundred":
            out.append(words[i])
            i += 1
            continue
        j = i + 1
        # A run does not cross a pause: a streaming recogniser has written
        # the words before it ("nineteen | eighty four": "19 | 84").
        while (
            j < len(words)
            and _number_word(words[j]["text"])
            and words[j]["start"] - words[j - 1]["end"] < PAUSE_S
        ):
            j += 1
        # "oh" alone is a word ("oh okay"): digits only inside a run.
        if j - i == 1 and k == "oh":
            out.append(words[i])
        else:
            out += _rewrite_run(words[i:j])
        i = j
    return out


def convert_call(src: Path, dst: Path) -> None:
    manifest_path = src / "call.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        events = manifest["events"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{manifest_path}: not a readable call manifest ({exc})") from None
    for event in events:
        if event.get("type") != "caller_turn" or not event.get("words"):
            continue
        words = rewrite_words(event["words"])
        if words != event["words"]:
            end = event["text"].rstrip()[-1:]
            event["words"] = words
            event["text"] = " ".join(w["text"] for w in words) + (end if end in ".?!" else "")
    tags = manifest.setdefault("tags", [])
    if TAG not in tags:
        tags.append(TAG)
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("call.json"))
    (dst / "call.json").write_text(json.dumps(manifest, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    args = ap.parse_args(argv)
    failed = 0
    calls = sorted(p.parent for p in args.src.rglob("call.json"))
    for folder in calls:
        try:
            convert_call(folder, args.dst / folder.relative_to(args.src))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            failed += 1
    print(f"{len(calls) - failed} calls written to {args.dst}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
