"""Transcripts of real calls as the text evidence sees them: annotations,
recogniser hesitation tokens, cut-off words and filler spellings the text
models never saw in training."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from turnkit.detectors.semantic_text import SemanticTextDetector
from turnkit.replay.oracle import oracle_words
from turnkit.replay.recording import CallerTurn, WordTiming
from turnkit.text.lexicon import is_backchannel
from turnkit.text.normalize import normalize_text


@pytest.mark.parametrize(
    ("said", "seen"),
    [
        ("Hi, I'd like a  table -- for two!", "hi i'd like a table for two"),
        ("I want to book a uhm [noise] fli-", "i want to book a um uh"),
        ("%HESITATION yes", "uh yes"),
        ("<unk> yes (( )) please", "yes please"),
        ("((maybe)) {breath} tuesday", "maybe tuesday"),
        ("yes eh", "yes uh"),
        ("err what", "uh what"),
        ("ummm okay", "um okay"),
        ("I want to book a hmm", "i want to book a um"),
        ("Ah okay, no worries.", "uh okay no worries"),
        # in-word hyphens, dashes and backchannels are left as they were
        ("uh-huh", "uh-huh"),
        ("mm-hmm", "mm-hmm"),
        ("twenty-five, state-of-the-art e-mail", "twenty-five state-of-the-art e-mail"),
        ("Boston - no, Denver", "boston no denver"),
        ("I want to go to the--", "i want to go to the"),
        # a sound named in parentheses or asterisks is dropped; a word there
        # is an uncertain hearing of a word said, and kept
        ("I need a taxi (Laughs)", "i need a taxi"),
        ("yes *cough* please (clears throat)", "yes please"),
        ("i need the (unintelligible) one", "i need the one"),
        ("i need a (taxi)", "i need a taxi"),
        ("the *second* one", "the second one"),
        # CHAT (TalkBank): an event, a filler, a fragment, an unintelligible stretch
        ("&=laughs i need a &-uh &+tax taxi xxx", "i need a uh uh taxi"),
        # non-native fillers as transcribers write them; "'em" is "them"
        ("em I want ahm the ähm aah", "um i want um the um uh"),
        ("tell 'em I said hi", "tell them i said hi"),
        ("I am here, him and Emma", "i am here him and emma"),
    ],
)
def test_real_transcript_conventions(said: str, seen: str) -> None:
    assert normalize_text(said) == seen


def test_normalising_twice_changes_nothing() -> None:
    for said in ("I want to book a uhm [noise] fli-", "%um yes", "uhh eh er", "ok -- so"):
        once = normalize_text(said)
        assert normalize_text(once) == once


def test_per_word_normalisation_matches_the_sentence() -> None:
    """The replay normalises word-timed transcripts word by word."""
    said = "so eh I want the uhm bo- [laughter] boston one"
    by_word = " ".join(w for w in (normalize_text(x) for x in said.split()) if w)
    assert by_word == normalize_text(said)


def test_fillers_spelled_otherwise_read_as_unfinished() -> None:
    """Before: "I want to book a uhm" 0.93, "… a erm" 0.996, "… the bo-"
    0.97 (the model took the spelling for a content word). Now each reads as
    the filler it is: far under the model's threshold (under half of it;
    "… a uh" is 0.12 against a threshold of 0.35)."""
    scorer = SemanticTextDetector.text_scorer()
    bar = 0.5 * scorer.model.threshold
    assert scorer.predict("I want to book a flight to Boston") > 0.9
    for held in (
        "I want to book a uhm",
        "I want to book a erm",
        "I want to book a eh",
        "I want to book a ah",
        "I want to book a hmm",
        "I want to book a em",
        "I want to book a ahm",
        "I want to book a (laughs)",
        "I want to go to the bo-",
        "I want to go to the &+bo",
        "%HESITATION I need the",
    ):
        assert scorer.predict(held) < bar, held


def test_annotations_do_not_move_the_score() -> None:
    scorer = SemanticTextDetector.text_scorer()
    for text in ("yeah i need to uh", "yes please", "my name is john smith"):
        for said in (f"{text} [laughter]", f"<noise> {text}", f"{text} (laughs)", f"*cough* {text}"):
            assert scorer.predict(said) == pytest.approx(scorer.predict(text)), said


def test_backchannels_as_real_transcripts_spell_them() -> None:
    for bc in ("uh-huh [laughter]", "mhmm", "mm-hm okay", "mmhmm", "I know", "<noise> yeah"):
        assert is_backchannel(bc), bc
    for bid in ("no wait", "hold on [noise]", "okay so"):
        assert not is_backchannel(bid), bid


@pytest.mark.parametrize(
    ("text", "timed", "written"),
    [
        (
            "I need the [noise] uhm bo- Boston",
            [
                ("I", 0.0, 0.2),
                ("need", 0.2, 0.5),
                ("the", 0.5, 0.7),
                ("[noise]", 0.7, 0.9),
                ("uhm", 0.9, 1.2),
                ("bo-", 1.2, 1.4),
                ("Boston", 1.5, 2.0),
            ],
            ["i", "need", "the", "um", "uh", "boston"],
        ),
        # a sound named in parentheses, as a word with its own times
        (
            "I need (laughs) em a taxi",
            [
                ("I", 0.0, 0.2),
                ("need", 0.2, 0.5),
                ("(laughs)", 0.5, 0.8),
                ("em", 0.8, 1.0),
                ("a", 1.0, 1.1),
                ("taxi", 1.1, 1.6),
            ],
            ["i", "need", "um", "a", "taxi"],
        ),
    ],
)
def test_oracle_skips_annotation_words_and_keeps_the_hesitation(
    text: str, timed: list[tuple[str, float, float]], written: list[str]
) -> None:
    """A word-timed transcript that holds annotations as words: the
    stand-in recogniser writes no word for them, and a hesitation or a
    filler spelled otherwise as the filler."""
    turn = CallerTurn(
        type="caller_turn",
        start=0.0,
        end=timed[-1][2],
        text=text,
        words=[WordTiming(text=w, start=a, end=b) for w, a, b in timed],
    )
    rec = SimpleNamespace(caller_turns=[turn], backchannels=[])
    words = [w.text for w in oracle_words(rec)]  # type: ignore[arg-type]
    assert words == written
