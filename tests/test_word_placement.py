"""Where the replay's stand-in recogniser puts the words of a turn whose
transcript has no word times: the words said before each pause decide what
the text model reads during it."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

from turnkit.replay.oracle import oracle_words
from turnkit.replay.recording import CallerTurn, load_recording
from turnkit.text.normalize import normalize_text
from turnkit.text.spoken_length import word_units

DEMO = Path(__file__).resolve().parents[1] / "recordings"


def _before_each_pause(turn: CallerTurn) -> list[int]:
    """How many of the turn's words the oracle places before each of its
    pauses, read from its word times stripped away."""
    bare = turn.model_copy(update={"words": None})
    rec = SimpleNamespace(caller_turns=[bare], backchannels=[])
    words = oracle_words(rec)  # type: ignore[arg-type]
    return [sum(w.end <= e + 1e-9 for w in words) for _, e in bare.speech_spans()[:-1]]


def _said_before_each_pause(turn: CallerTurn) -> list[int]:
    assert turn.words is not None
    spans = turn.speech_spans()
    counts = []
    for _, e in spans[:-1]:
        counts.append(
            sum(len(normalize_text(w.text).split()) for w in turn.words if w.start < e + 1e-6)
        )
    return counts


def test_a_clause_said_before_a_pause_is_placed_before_it() -> None:
    """"Let me think about that for a moment. | Maybe around seven thirty?":
    spread evenly over the two runs of speech, "a moment" fell after the
    pause and the text model read "let me think about that for" during it."""
    rec = load_recording(DEMO / "booking-think-03")
    turn = rec.caller_turns[1]
    assert len(turn.speech_spans()) == 2
    assert _said_before_each_pause(turn) == [8]
    assert _before_each_pause(turn) == [8]


def test_words_without_times_are_placed_by_how_long_they_take_to_say() -> None:
    """No punctuation to go by: the long words take the long run."""
    turn = CallerTurn(
        type="caller_turn",
        start=0.0,
        end=3.0,
        text="yes I do unfortunately unavailable",
        spans=[[0.0, 0.6], [1.2, 3.0]],
    )
    rec = SimpleNamespace(caller_turns=[turn], backchannels=[])
    words = oracle_words(rec)  # type: ignore[arg-type]
    assert [w.text for w in words if w.end <= 0.6] == ["yes", "i", "do"]
    # Inside a run each word lasts its spoken length.
    long, short = words[3], words[0]
    assert (long.end - long.start) / (short.end - short.start) > 2
    assert word_units("unfortunately") > 2 * word_units("yes")


def test_more_pauses_than_words_places_each_word_once_in_order() -> None:
    turn = CallerTurn(
        type="caller_turn", start=0.0, end=5.0, text="Yes. Right.",
        spans=[[0.0, 0.4], [1.0, 1.4], [4.0, 5.0]],
    )
    rec = SimpleNamespace(caller_turns=[turn], backchannels=[])
    words = oracle_words(rec)  # type: ignore[arg-type]
    assert [w.text for w in words] == ["yes", "right"]
    assert all(a.end <= b.start for a, b in pairwise(words))


def test_the_demo_corpus_pauses_are_placed_as_they_were_said() -> None:
    """Every demo turn with a pause, its word times hidden: the words said
    before each pause are found exactly at 49 of 60 pauses (40 when the
    words were spread evenly over the speech)."""
    found = total = 0
    for path in sorted(DEMO.glob("*/call.json")):
        for turn in load_recording(path.parent).caller_turns:
            if turn.words is None or len(turn.speech_spans()) < 2:
                continue
            said, placed = _said_before_each_pause(turn), _before_each_pause(turn)
            total += len(said)
            found += sum(a == b for a, b in zip(said, placed, strict=True))
    assert total == 60
    assert found >= 49


def test_a_word_time_that_runs_into_a_pause_ends_with_its_speech() -> None:
    """Word times that last to the next word (as many aligners write them):
    "hi" labelled 0.0-0.9 s over the pause that follows its span (0.0-0.3 s).
    The replay's recogniser writes a word at its end, so "hi" came only as
    the caller went on, and the pause was judged with no words at all. It
    is said by its span's end: written then."""
    turn = CallerTurn(
        type="caller_turn",
        start=0.0,
        end=2.0,
        text="Hi, I'm calling about my bill",
        spans=[[0.0, 0.3], [0.9, 2.0]],
        words=[
            {"text": "Hi,", "start": 0.0, "end": 0.9},
            {"text": "I'm", "start": 0.9, "end": 1.1},
            {"text": "calling", "start": 1.1, "end": 1.4},
            {"text": "about", "start": 1.4, "end": 1.6},
            {"text": "my", "start": 1.6, "end": 1.7},
            {"text": "bill", "start": 1.7, "end": 2.0},
        ],
    )
    rec = SimpleNamespace(caller_turns=[turn], backchannels=[])
    words = oracle_words(rec)  # type: ignore[arg-type]
    assert [(w.text, w.start, w.end) for w in words[:2]] == [("hi", 0.0, 0.3), ("i'm", 0.9, 1.1)]
    assert words[0].last_in_span, "the run's last word closes it"
