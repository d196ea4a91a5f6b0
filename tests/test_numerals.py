"""Numbers written in digits are read as the caller said them.

Recognisers with formatting on, and recorded calls' transcripts, write "for
4 people", "at 9:30", "on the 15th"; the text models learnt numbers spelled
out. These tests hold the spoken readings, that each model reads a numeral
as its words, that digit runs are found however the recogniser groups the
digits, and that a call whose caller transcript writes its numbers in
digits is answered as the spelled call is.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import load_script

from turnkit.detectors.endpointing import in_digit_run, number_complete
from turnkit.frames import AudioInFrame, TranscriptFrame
from turnkit.pipeline import CollectSink, Pipeline
from turnkit.replay.oracle import OracleTranscriber, oracle_words
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call
from turnkit.text.features import trailing_digits
from turnkit.text.numerals import spoken_number, spoken_numbers
from turnkit.text.semantic_model import SemanticTextModel

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("3", "three"),
        ("0", "zero"),
        ("15", "fifteen"),
        ("45", "forty five"),
        ("930", "nine thirty"),
        ("105", "one oh five"),
        ("200", "two hundred"),
        ("1984", "nineteen eighty four"),
        ("1500", "fifteen hundred"),
        ("2005", "two thousand five"),
        ("2000", "two thousand"),
        ("07", "oh seven"),
        ("01223", "oh one two two three"),
        ("4155550132", "four one five five five five oh one three two"),
        ("415-555-0132", "four one five five five five oh one three two"),
        ("15th", "fifteenth"),
        ("21st", "twenty first"),
        ("12th", "twelfth"),
        ("30th", "thirtieth"),
        ("3rd", "third"),
        ("5pm", "five pm"),
        ("7gh2", "seven g h two"),
        ("hello", "hello"),
    ],
)
def test_numerals_are_read_as_they_are_said(token: str, said: str) -> None:
    assert " ".join(spoken_number(token)) == said


def test_a_times_a_m_and_p_m_join_after_a_number_only() -> None:
    assert spoken_numbers(["at", "8", "p", "m"]) == ["at", "eight", "pm"]
    assert spoken_numbers(["plan", "a", "m"]) == ["plan", "a", "m"]


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize(
    ("agent", "written", "spelled"),
    [
        ("What day would you like?", "on the 15th", "on the fifteenth"),
        ("What time works for you?", "at 8 p.m.", "at eight pm"),
        ("How many nights?", "for 2", "for two"),
        (
            "And your phone number?",
            "it's 415-555-0132",
            "it's four one five five five five oh one three two",
        ),
        ("What is your date of birth?", "march 12th 1984", "march twelfth nineteen eighty four"),
    ],
)
def test_the_text_models_read_a_numeral_as_its_words(
    version: str, agent: str, written: str, spelled: str
) -> None:
    """Before, the numeral was its own token (v2: "on the 15th" 0.73 against
    "on the fifteenth" 0.97 after "what day?")."""
    model = SemanticTextModel.load(version)
    assert model.predict(written, agent) == pytest.approx(model.predict(spelled, agent), abs=1e-6)


def test_digit_runs_are_found_however_the_digits_are_grouped() -> None:
    for text in (
        "my number is 4 1 5",
        "my number is 415-555",
        "my number is 4155550132.",
        "S, M, I.",
    ):
        assert in_digit_run(text), text
    for text in ("for 4 people", "at 8 p m", "on the 15th"):
        assert not in_digit_run(text), text
    assert trailing_digits("it's 415-555-0132") == 10


@pytest.mark.parametrize(
    "text",
    [
        "a table for 3 people at 14:15",  # a recogniser's clock time
        "i want to leave after 17:45",
        "after twelve forty five",
        "maybe around seven thirty",
        "by nine oh five",
        "it should leave after 21:00",
        "at twenty one fifteen",
    ],
)
def test_a_time_of_day_is_no_digit_run(text: str) -> None:
    """Said whole after "at", "by", "after" ...: no chunk is to come, so no
    run's floor or longer ceiling (semantic-text answered "Maybe around seven
    thirty?" 288 ms later for it: booking-think-03, 1151 → 863 ms)."""
    assert not in_digit_run(text)


@pytest.mark.parametrize("text", ["at 4 1 5", "around 1 2 4 5", "arrive by one five three zero"])
def test_digits_read_out_after_a_time_word_are_still_a_run(text: str) -> None:
    assert in_digit_run(text)
    assert number_complete("What are the last four digits of the card?", "it's 45-12")


def _written_copy(src: Path, dst: Path):
    load_script("written_numbers").convert_call(src, dst)
    return load_recording(dst)


@pytest.mark.parametrize("call", ["address-to-06", "account-bargein-07"])
def test_a_call_written_in_numerals_is_answered_as_the_spelled_call(
    call: str, tmp_path: Path
) -> None:
    """address-to-06 with "It's 12:40 Main Street. Suite 200." and
    account-bargein-07 with "My account number is 7 7 2 9 1 8 8 4." as a
    formatting recogniser writes them: fused answers every turn as it does
    the spelled call (before, the numerals read as rarer tokens: "Suite 200"
    was answered 1365 ms after its end against 693 spelled, the account
    number 1115 against 955)."""
    rec = _written_copy(ROOT / "recordings" / call, tmp_path / call)
    assert any(any(c.isdigit() for c in t.text) for t in rec.caller_turns)
    cfg = ReplayConfig(compute="fixed")
    got = asyncio.run(replay_call(rec, "fused", cfg))
    want = asyncio.run(replay_call(load_recording(ROOT / "recordings" / call), "fused", cfg))
    for g, w in zip(got.turns, want.turns, strict=True):
        assert (g.response_ms, g.cutoffs, g.missed) == (w.response_ms, w.cutoffs, w.missed), (g, w)


def _merged_number_copy(tmp_path: Path) -> Path:
    """phone-digits-02 with the caller's "four one five five five five zero
    one three two" written as one token, "4155550132", timed from its first
    digit to its last (over 5 s, two pauses inside), as SpokenWOZ's
    transcripts write a number read out."""
    src = ROOT / "recordings" / "phone-digits-02"
    dst = tmp_path / "phone-digits-02"
    shutil.copytree(src, dst)
    manifest = json.loads((src / "call.json").read_text())
    digits = {"zero": "0", "oh": "0", "one": "1", "two": "2", "three": "3", "four": "4",
              "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9"}  # fmt: skip
    for event in manifest["events"]:
        if event["type"] != "caller_turn":
            continue
        words = event["words"]
        keys = [w["text"].lower().strip(".,") for w in words]
        at = [i for i, k in enumerate(keys) if k in digits]
        if len(at) >= 5:
            token = {
                "text": "".join(digits[keys[i]] for i in at),
                "start": words[at[0]]["start"],
                "end": words[at[-1]]["end"],
            }
            event["words"] = [*words[: at[0]], token, *words[at[-1] + 1 :]]
    (dst / "call.json").write_text(json.dumps(manifest))
    return dst


def test_a_number_written_as_one_token_is_revealed_digit_by_digit(tmp_path: Path) -> None:
    rec = load_recording(_merged_number_copy(tmp_path))
    turn = rec.caller_turns[1]
    digits = [w for w in oracle_words(rec) if w.start >= turn.start and w.end <= turn.end + 1e-6]
    said = [w.text for w in digits if w.text.isdigit()]
    assert said == list("4155550132")
    # Spread over the turn's speech, never inside its pauses.
    spans = turn.speech_spans()
    for w in digits:
        assert any(s - 1e-6 <= w.start and w.end <= e + 1e-6 for s, e in spans), w


def test_a_number_written_as_one_token_is_judged_as_the_spelled_number(tmp_path: Path) -> None:
    """Revealed whole at its end, the token left "my number is" as the
    turn's text through the 1.0-1.2 s pauses between its groups: no digit
    run, so fused answered at the 900 ms ceiling inside the number where
    the spelled call waits the run's (DIGIT_RUN_MS). Revealed digit by
    digit, every decision is the spelled call's, to the frame."""
    rec = load_recording(_merged_number_copy(tmp_path))
    cfg = ReplayConfig(compute="fixed")
    want = asyncio.run(
        replay_call(load_recording(ROOT / "recordings" / "phone-digits-02"), "fused", cfg)
    )
    got = asyncio.run(replay_call(rec, "fused", cfg))
    for g, w in zip(got.turns, want.turns, strict=True):
        assert (g.response_ms, g.cutoffs, g.missed) == (w.response_ms, w.cutoffs, w.missed), (g, w)
    decided = [round(r["decision_at"], 3) for r in got.replies]
    assert decided == [round(r["decision_at"], 3) for r in want.replies]


def test_a_number_said_in_several_words_is_written_as_it_grows(tmp_path: Path) -> None:
    """pharmacy-natural-17 with its caller's numbers in digits: the year
    "nineteen eighty | four" is written "1980" (and "4" after the pause); a
    streaming recogniser shows "19" while "eighty" is still being said."""
    rec = _written_copy(ROOT / "recordings" / "pharmacy-natural-17", tmp_path / "p17")
    assert rec.caller_turns[1].text.startswith("It's March March 12th 1980 4")

    async def run() -> list[TranscriptFrame]:
        sink = CollectSink()
        pipe = Pipeline([OracleTranscriber(oracle_words(rec)), sink])
        await pipe.start()
        n, k = 512, 0
        while k * 0.032 < rec.caller_turns[1].end + 0.1:
            await pipe.queue_frame(
                AudioInFrame(at=k * 0.032, audio=np.zeros(n, np.float32), sample_rate=16000)
            )
            await pipe.wait_idle()
            k += 1
        await pipe.stop()
        return [f for f in sink.frames if isinstance(f, TranscriptFrame)]

    sent = asyncio.run(run())
    texts = [f.text for f in sent]
    grown = texts.index("it's march march 12th 1980")
    assert texts[grown - 1] == "it's march march 12th 19"
    assert texts[-1] == "it's march march 12th 1980 4"
    assert [w.text for w in sent[-1].words] == ["it's", "march", "march", "12th", "1980", "4"]


@pytest.mark.parametrize("detector", ["fused", "semantic-text"])
def test_a_date_written_in_digits_is_not_cut_inside(detector: str, tmp_path: Path) -> None:
    """Written whole at its end, "1980" left 0.8 s of speech with no new word
    after "it's march march 12th", which reads finished: the stalled-words
    rule ended the turn inside the year: semantic-text cut it, and fused
    too before numerals were read as they are said."""
    rec = _written_copy(ROOT / "recordings" / "pharmacy-natural-17", tmp_path / "p17")
    # The decisions are compared through the response: without drafts, whose
    # use depends on the words each eager signal saw, not on the decision.
    cfg = ReplayConfig(compute="fixed", eager=False)
    got = asyncio.run(replay_call(rec, detector, cfg))
    want = asyncio.run(
        replay_call(load_recording(ROOT / "recordings" / "pharmacy-natural-17"), detector, cfg)
    )
    assert not got.turns[1].cutoffs
    for g, w in zip(got.turns, want.turns, strict=True):
        assert (g.response_ms, g.cutoffs, g.missed) == (w.response_ms, w.cutoffs, w.missed), (g, w)


def test_the_groups_of_a_number_read_out_are_read_digit_by_digit() -> None:
    said = " ".join(spoken_numbers(["my", "number", "is", "415", "555", "0132"]))
    assert said == "my number is four one five five five five oh one three two"
    assert " ".join(spoken_numbers(["4", "0", "1", "5", "5"])) == "four oh one five five"
    # A time and a house number stay numbers said whole.
    assert " ".join(spoken_numbers(["after", "11", "15"])) == "after eleven fifteen"
    assert " ".join(spoken_numbers(["room", "415"])) == "room four fifteen"


def test_letters_spelled_and_written_hyphenated_are_a_spelling_run() -> None:
    assert spoken_number("s-m-i-t-h") == ["s", "m", "i", "t", "h"]
    assert spoken_number("a-1-2") == ["a", "one", "two"]
    assert spoken_number("wi-fi") == ["wi-fi"]
    assert spoken_number("uh-huh") == ["uh-huh"]
    assert in_digit_run("it's spelled S-M-I")
    assert not in_digit_run("the wi-fi")
