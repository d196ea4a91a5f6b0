"""turnkit.drafting.owed.OwedTurn: the one rule every host applies to a caller
turn the agent talked through (the Responder's own tests run it inside the
replay; the Pipecat and LiveKit plugin tests in their hosts)."""

from __future__ import annotations

from turnkit.clock import VirtualClock
from turnkit.drafting.owed import AFTER_REPLY_S, OwedTurn


async def _at(clock: VirtualClock, t: float) -> None:
    await clock.advance_to(t)


async def test_said_over_the_closing_words_it_is_owed_when_the_reply_ends() -> None:
    clock = VirtualClock()
    owed = OwedTurn(clock)
    await _at(clock, 10.0)
    owed.ignored("okay", speech_end=9.8)
    await _at(clock, 9.8 + AFTER_REPLY_S - 0.01)
    assert owed.take(completed=True) == "okay"
    assert owed.take(completed=True) is None  # asked once


async def test_a_murmur_from_earlier_in_the_reply_is_not_owed_when_it_ends() -> None:
    clock = VirtualClock()
    owed = OwedTurn(clock)
    await _at(clock, 5.0)
    owed.ignored("mm-hm", speech_end=4.9)
    await _at(clock, 4.9 + AFTER_REPLY_S + 0.3)
    assert owed.take(completed=True) is None


async def test_after_a_barge_in_stop_it_is_owed_however_long_ago() -> None:
    clock = VirtualClock()
    owed = OwedTurn(clock)
    owed.ignored("can you say that again")  # speech end: now
    await _at(clock, 3.0)
    assert owed.take(completed=False) == "can you say that again"


async def test_caller_speech_after_it_makes_it_theirs_to_go_on_with() -> None:
    clock = VirtualClock()
    owed = OwedTurn(clock)
    owed.ignored("okay")
    owed.caller_spoke()
    assert owed.kept is None
    assert owed.take(completed=True) is None
    assert owed.take(completed=False) is None
