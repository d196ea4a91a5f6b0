"""turnkit.text.word_clock: a recogniser's stream times on the audio clock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from turnkit.text.word_clock import AHEAD_S, MAX_LAG_S, WordClock, timed_words


def test_timed_words_reads_tuples_dicts_and_objects_and_skips_untimed() -> None:
    items = [
        ("one", 0.1, 0.3),
        {"word": "two", "start": 0.4, "end": 0.6, "confidence": 0.9},
        SimpleNamespace(word="three", start=0.7, end=0.9),
        {"word": "four", "confidence": 0.9},  # Flux may send words without times
        {"word": "five", "start": float("nan"), "end": 1.2},
        {"word": "six", "start": True, "end": 1.4},
        ("seven", 1.5),  # not (text, start, end)
    ]
    assert timed_words(items) == [("one", 0.1, 0.3), ("two", 0.4, 0.6), ("three", 0.7, 0.9)]
    assert timed_words(None) == []


def test_first_base_is_trusted_as_it_is() -> None:
    clock = WordClock()
    for now, lag in ((3.0, 0.2), (5.0, 1.9), (7.0, 0.0)):  # within MAX_LAG_S
        words = clock.place([("hi", now - lag - 0.3, now - lag)], now - lag, now)
        assert words[0].end == pytest.approx(now - lag)
    assert clock.offset == 0.0 and clock.reanchors == 0


def test_a_restart_reanchors_and_then_settles_on_the_least_lag() -> None:
    clock = WordClock()
    clock.place([("a", 9.0, 9.2)], 9.25, now=9.5)
    # The recogniser restarted at 60 s: its times begin at zero again.
    w = clock.place([("b", 1.0, 1.3)], 1.35, now=61.65)  # this result came 300 ms late
    assert clock.reanchors == 1 and w[0].end == pytest.approx(61.6)
    clock.place([("c", 2.0, 2.2)], 2.25, now=62.35)  # 100 ms late
    assert clock.offset == pytest.approx(60.1)
    clock.place([("d", 3.0, 3.2)], 3.25, now=63.75)  # 500 ms late: no change
    assert clock.offset == pytest.approx(60.1) and clock.reanchors == 1


@pytest.mark.parametrize("lead", [AHEAD_S + 0.1, -(MAX_LAG_S + 0.1)])
def test_a_result_far_off_the_clock_reanchors(lead: float) -> None:
    clock = WordClock()
    now = 30.0
    w = clock.place([("x", now + lead - 0.3, now + lead)], None, now)
    assert clock.reanchors == 1 and w[0].end == pytest.approx(now)
