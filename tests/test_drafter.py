"""Eager drafting policy and its effect in replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkit.clock import VirtualClock
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.replay.metrics import aggregate
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

CORPUS = Path(__file__).resolve().parent.parent / "recordings"


async def test_draft_is_used_when_the_words_did_not_change() -> None:
    clock = VirtualClock()
    d = EagerDrafter(clock)
    d.on_speech()
    draft = d.on_eager("I'd like a table for two.")
    assert draft is not None and draft.state == "running"
    action, used = d.on_end("i'd like a table for two")  # same after normalisation
    assert action == "use" and used is draft and draft.state == "used"
    assert (d.stats.started, d.stats.used, d.stats.cancelled, d.stats.requests) == (1, 1, 0, 1)


async def test_caller_going_on_cancels_the_draft_when_their_words_come() -> None:
    d = EagerDrafter(VirtualClock())
    draft = d.on_eager("my number is four one five")
    d.on_speech()  # sound: the words the draft answers still stand
    assert d.current is draft and draft.state == "running"
    assert d.on_transcript("my number is four one five five") is draft
    assert draft.state == "cancelled" and draft.cancel_reason == "words changed"
    action, used = d.on_end("my number is four one five five five five")
    assert action == "fresh" and used is None
    assert d.stats.requests == 2 and d.stats.cancelled == 1


async def test_a_sound_without_new_words_keeps_the_draft() -> None:
    """A breath, a cough or a voice behind the caller after the eager signal
    writes no new words: the confirmed end on the same words uses the draft
    (no second request), as LiveKit's preemptive generation does."""
    d = EagerDrafter(VirtualClock())
    draft = d.on_eager("a table for two please")
    d.on_speech()
    assert d.on_transcript("A table for two, please.") is None  # same words
    action, used = d.on_end("a table for two please")
    assert action == "use" and used is draft
    assert d.stats.requests == 1 and d.stats.cancelled == 0


async def test_new_words_cancel_a_stale_draft() -> None:
    d = EagerDrafter(VirtualClock())
    draft = d.on_eager("yes")
    assert d.on_transcript("yes") is None  # same words: keep it
    assert d.on_transcript("yes please") is draft
    assert d.current is None


async def test_transcript_changed_at_confirmation_means_a_fresh_request() -> None:
    d = EagerDrafter(VirtualClock())
    draft = d.on_eager("book it for friday")
    action, used = d.on_end("book it for friday at noon")
    assert action == "fresh" and used is None and draft.state == "cancelled"
    assert draft.cancel_reason == "transcript changed"


async def test_limits_per_turn_and_long_speech() -> None:
    clock = VirtualClock()
    d = EagerDrafter(clock, DraftParams(max_drafts=2, max_speech_s=5.0))
    d.on_speech()
    assert d.on_eager("one") is not None
    d.on_speech()
    assert d.on_eager("one two") is not None
    d.on_speech()
    assert d.on_eager("one two three") is None  # third draft this turn
    d.on_end("one two three four")
    d.on_speech()
    await clock.advance_to(clock.now() + 6.0)
    assert d.on_eager("a very long story") is None  # spoke for > 5 s


@pytest.mark.parametrize("spec", ["fused:audio=off", "semantic-text"])
async def test_eager_replay_answers_sooner_and_counts_requests(spec: str) -> None:
    rec = load_recording(CORPUS / "easy-short-08")
    plain = aggregate(spec, [await replay_call(rec, spec, ReplayConfig(eager=False))])
    eager = aggregate(spec, [await replay_call(rec, spec, ReplayConfig())])
    assert plain["drafts"] == {"started": 0, "used": 0, "cancelled": 0}
    assert eager["drafts"]["used"] > 0
    assert eager["response_ms"]["p50"] < plain["response_ms"]["p50"]
    # A used draft costs no extra request; only cancelled drafts add any.
    extra = eager["llm_requests_per_turn"] - plain["llm_requests_per_turn"]
    assert extra * eager["turns"] == pytest.approx(eager["drafts"]["cancelled"], abs=1.0)
    # Drafting never judges a turn over sooner (a draft out may hold a
    # commit until its first token, never bring one forward).
    assert eager["interruption_rate"] <= plain["interruption_rate"]


async def test_speech_that_was_not_a_turn_voids_the_draft_and_resets_the_turn() -> None:
    d = EagerDrafter(VirtualClock(), DraftParams(max_drafts=1))
    d.on_speech()
    draft = d.on_eager("uh huh")
    assert draft is not None
    assert d.on_ignored() is draft and draft.cancel_reason == "not a turn"
    # The next turn starts afresh: its draft is allowed again.
    d.on_speech()
    assert d.on_eager("what time do you open") is not None


async def test_a_draft_says_when_its_first_token_comes() -> None:
    clock = VirtualClock()
    assert EagerDrafter(clock).ready_at() is None  # no first_token_ms: nothing to wait for
    d = EagerDrafter(clock, DraftParams(first_token_ms=350))
    assert d.ready_at() is None  # no draft out
    await clock.advance_to(2.0)
    assert d.on_eager("a table for two please") is not None
    assert d.ready_at() == pytest.approx(2.35)
    d.on_speech()  # a sound: the draft still answers the words said
    assert d.ready_at("a table for two please") == pytest.approx(2.35)
    d.on_transcript("a table for two please at")  # the caller went on: void
    assert d.ready_at() is None
    assert d.on_eager("a table for two please at eight") is not None
    d.on_end("a table for two please at eight")
    assert d.ready_at() is None  # used: the commit has happened
    with pytest.raises(ValueError):
        DraftParams(first_token_ms=float("inf"))
