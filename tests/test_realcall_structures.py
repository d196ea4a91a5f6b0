"""Real call structure in replay: turns back to back with the clerk silent,
a recording that stops right after the caller's last word.

Each call here is a natural demo call's own audio and labels, cut into the
shape real telephone transcripts have (scripts/realcall_variants.py), and
replayed whole through the real pipeline (Silero VAD, the detector, the
Responder on the simulated engine)."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import load_script

from turnkit.barge_in.controller import BargeInParams
from turnkit.detectors.endpointing import Endpointing
from turnkit.frames import TurnEndFrame
from turnkit.replay.agent import SimulatedAgent
from turnkit.replay.metrics import CallScore, aggregate
from turnkit.replay.recording import Recording, load_recording
from turnkit.replay.report.model import Result
from turnkit.replay.simulator import ReplayConfig, replay_call

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = ROOT / "recordings"


rv = load_script("realcall_variants")


def _save(call: object, folder: Path, call_id: str) -> Recording:
    call.meta["id"] = call_id  # type: ignore[attr-defined]
    call.save(folder)  # type: ignore[attr-defined]
    return load_recording(folder)


def _replay(rec: Recording, spec: str) -> CallScore:
    return asyncio.run(replay_call(rec, spec, ReplayConfig(compute="fixed")))


@pytest.fixture(scope="module")
def last_word_then_hangup(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """pharmacy-natural-17 (8 kHz) from just before its fourth caller turn,
    the file ending 50 ms after the last caller turn's end."""
    call = rv.Call.load(RECORDINGS / "pharmacy-natural-17")
    fourth = call.of("caller_turn")[3]
    call = rv.cut(call, 0.0, fourth["start"] - 0.3)
    call = rv.last_turn_tail(call, 0.05)
    return _save(call, tmp_path_factory.mktemp("tail") / "call", "pharmacy-tail0.05")


@pytest.mark.parametrize("spec", ["silence:stop_ms=800", "fused"])
def test_last_turn_answered_when_the_recording_stops_after_it(
    last_word_then_hangup: Recording, spec: str
) -> None:
    """The line stays open after caller.wav ends: the pause after the last
    word runs its wait on silence and the turn is answered. (Before, no
    frame came after the file's end, no pause was ever judged, and the
    last turn was scored missed by every detector.)"""
    rec = last_word_then_hangup
    last = rec.caller_turns[-1]
    assert rec.duration - last.end < 0.06
    score = _replay(rec, spec)
    t = score.turns[-1]
    assert not t.missed, score.replies
    assert t.response_ms is not None
    # Answered after the turn's end, within the timeout.
    assert 0 < t.response_ms < 5000
    assert not t.interrupted


@pytest.fixture(scope="module")
def next_turn_under_the_commit(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """appointment-natural-13 with caller turns 1 and 2 back to back, 0.86 s
    apart (the agent turn between them cut from both channels): an 800 ms
    silence wait on turn 1 commits a few ms after turn 2 has begun, before
    the VAD can have heard it."""
    call = rv.back_to_back(rv.Call.load(RECORDINGS / "appointment-natural-13"), 1, 2, 0.86)
    return _save(call, tmp_path_factory.mktemp("b2b") / "call", "appointment-b2b-0.86")


def test_commit_on_a_pause_answers_the_turn_before_it(
    next_turn_under_the_commit: Recording,
) -> None:
    """A commit judges the pause after the caller's last speech: it answers
    that speech's turn, late, and is no false cutoff of the next turn,
    which had begun 12 ms before (the VAD needs 64 ms to hear an onset).
    Before, the reply went to the turn begun by the decision's time:
    turn 2 was scored interrupted, turn 1 had no decision at all."""
    rec = next_turn_under_the_commit
    second = rec.caller_turns[2]
    score = _replay(rec, "silence:stop_ms=800")
    inside = [r for r in score.replies if second.start <= r["decision_at"] < second.start + 0.064]
    assert inside, "the case under test: a commit in the next turn's first frames"
    assert all(r["turn"] == 1 and not r["cutoff"] for r in inside)
    assert not any(t.interrupted for t in score.turns)  # no hold reaches 800 ms
    assert not score.turns[2].missed


@pytest.fixture(scope="module")
def clerk_silent(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """appointment-natural-13 with caller turns 1 and 2 back to back, 0.3 s
    apart: no reply can be heard before the caller goes on."""
    call = rv.back_to_back(rv.Call.load(RECORDINGS / "appointment-natural-13"), 1, 2, 0.3)
    return _save(call, tmp_path_factory.mktemp("b2b") / "call", "appointment-b2b-0.3")


@pytest.fixture(scope="module")
def unheard_answer(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """order-natural-15 with turn 3 cut to its first word ("Okay"), said
    30 dB quieter: the VAD never hears it; the recorded agent answered it,
    and the caller's next turn comes 3.1 s later."""
    call = rv.quiet_turn(rv.short_answers(rv.Call.load(RECORDINGS / "order-natural-15")), 3, 30.0)
    return _save(call, tmp_path_factory.mktemp("quiet") / "call", "order-quiet-okay")


@pytest.mark.parametrize("spec", ["silence:stop_ms=800", "fused"])
def test_turn_the_caller_went_on_from_is_missed_and_flagged(
    clerk_silent: Recording, unheard_answer: Recording, spec: str
) -> None:
    """A turn followed 0.3 s later by the caller's next one (the clerk said
    nothing) gets no reply before the caller goes on: by the recording
    contract it is missed, and it is flagged ``continued`` so that a report
    can tell such back-to-back misses from a caller left waiting. The next
    turn is answered."""
    rec = clerk_silent
    score = _replay(rec, spec)
    first, second = score.turns[1], score.turns[2]
    assert second.start - first.end == pytest.approx(0.3, abs=0.01)
    assert first.missed and first.continued and first.response_ms is None
    assert not second.missed and not second.continued and second.response_ms is not None
    result = aggregate(spec, [score])
    assert result["missed_rate"] == pytest.approx(1 / len(rec.caller_turns))
    assert result["missed_caller_went_on"] == 1
    view = Result.model_validate(result)
    assert view.judged_turns() == len(rec.caller_turns) == len(view.answered_ms()) + 1
    # The caller heard an answer after their next turn, within the timeout
    # of the first one's end: nobody was stranded.
    assert second.response_ms / 1000 + second.end - first.end < 5.0
    # The other side of the rule: a caller who goes on only after the
    # timeout has run out was left in silence, and that turn is missed.
    short = ReplayConfig(compute="fixed", timeout_s=0.25)  # the gap is 0.3 s
    waited = asyncio.run(replay_call(rec, spec, short)).turns[1]
    assert waited.missed and not waited.continued
    # And a caller who goes on only after the recorded agent had answered
    # them was waiting for that answer: no reply from the replayed agent
    # in between is a miss, however soon they spoke again (the silence
    # timer, which never hears the quiet "Okay"). A model detector opens
    # the turn on its words the VAD did not hear, and answers it.
    okay = _replay(unheard_answer, spec).turns[3]
    nxt = unheard_answer.caller_turns[4].start
    assert nxt - okay.end < 5.0
    if spec.startswith("silence"):
        assert okay.missed and not okay.continued
    else:
        assert not okay.missed and okay.response_ms is not None and okay.response_ms < 1200


def test_agent_turn_cut_into_segments_replays_as_one(tmp_path: Path) -> None:
    """A transcript that writes the clerk's speech as several agent_turn
    events (order-natural-15, each agent turn over 2 s split at its
    quietest point near the middle; the audio unchanged) replays as the
    call with whole agent turns: the reply says all of it and plays until
    the last segment ends. Before, only the first segment played: the
    caller's "uh-huh" in the second met a silent agent and was answered
    (a spurious reply), and fused read "Sure. Can I have" as the agent's
    question and cut turn 1 off."""
    whole = load_recording(RECORDINGS / "order-natural-15")
    split = _save(
        rv.split_agent_turns(rv.Call.load(RECORDINGS / "order-natural-15")),
        tmp_path / "call",
        "order-agentsplit",
    )
    assert len(split.agent_turns) > len(whole.agent_turns)
    a, b = _replay(whole, "fused"), _replay(split, "fused")

    def figures(s: CallScore) -> list[tuple[float | None, bool, bool]]:
        return [(t.response_ms, t.interrupted, t.missed) for t in s.turns]

    assert figures(b) == figures(a)
    assert b.spurious_replies == a.spurious_replies == 0
    assert [r["stopped_at"] for r in b.replies] == [r["stopped_at"] for r in a.replies]


@pytest.mark.parametrize("lead", [0.8, 1.3])
def test_caller_answering_over_the_agents_last_words_gets_a_reply(
    tmp_path: Path, lead: float
) -> None:
    """order-natural-15 with the caller's "Okay" said ``lead`` s before the
    agent's reply ends, then nothing: fused commits while the agent still
    talks (the Responder ignores that end), and when the reply plays to its
    end the caller, who spoke last, is owed an answer
    (``Responder.owed_end(completed=True)``). Before: missed, the caller
    left in silence after the agent finished."""
    call = rv.early_answer(rv.Call.load(RECORDINGS / "order-natural-15"), 3, lead)
    rec = _save(call, tmp_path / "call", f"order-early-okay{lead}")
    score = _replay(rec, "fused")
    okay = score.turns[-1]
    assert rec.caller_turns[-1].text.lower().startswith("okay")
    assert not okay.missed, okay
    assert okay.response_ms is not None


@pytest.mark.parametrize("call_id", ["billing-natural-12", "internet-natural-14"])
def test_a_murmur_mid_reply_is_not_answered_when_the_reply_ends(call_id: str) -> None:
    """The demo calls' "mm-hm [laughter]" said over the agent's reply with
    a phrase of it still to come (1.4-1.7 s before it ends), the caller's
    next turn 0.4 s after it: fused's decision on the murmur came while the
    agent talked, within ``owed_after_reply_s`` of the reply's end, and the
    Responder answered it when the reply ended — a reply no caller turn
    asked for, whose audio began over the caller's next words ("Right so
    that one...", "Oh okay when can they come?"). The window now runs from
    the caller's speech end: no reply nobody asked for."""
    rec = load_recording(RECORDINGS / call_id)
    score = _replay(rec, "fused")
    assert score.spurious_replies == 0, score.replies
    for reply in score.replies:
        if reply["first_audio_at"] is not None:
            assert "answered once it stopped" not in reply["reason"], reply
    assert not any(t.missed for t in score.turns)


@pytest.mark.parametrize("late_ms", [0, 250])
def test_replay_a_bid_stops_before_its_first_word_is_recognised(
    tmp_path: Path, late_ms: int
) -> None:
    """pharmacy-natural-17 with the caller's "Okay and can my wife pick it
    up for me?" begun 1.0 s before the agent's reply ends (the real-call
    variants' overlap1.0), through the whole replay: the bid stops the agent
    (the confirmed pause's time) before "okay" could have been recognised
    (an acknowledgement word, so the bid is only decided by "and"). With
    the words on time, the early hold does it, within 300 ms of its onset.
    With the recogniser 250 ms late, the caller's earlier turns have shown
    their first words coming ~0.5 s after their onsets, too late for the
    early hold to wait for (a backchannel held that long is a gap the
    caller hears): its length past a backchannel's stops it, 0.45 s in.
    (On the demo call itself that turn begins after the reply; the
    barge-in once seen there was the turn meeting a reply owed to the
    "okay" backchannel said 1.46 s before the agent's end — a reply nobody
    asked for, which no longer plays.)"""
    call = rv.caller_overlaps(rv.Call.load(RECORDINGS / "pharmacy-natural-17"), 3, 1.0)
    rec = _save(call, tmp_path / "call", "pharmacy-overlap1.0")
    turn_i = next(i for i, t in enumerate(rec.caller_turns) if t.text.startswith("Okay and"))
    bid = rec.caller_turns[turn_i]
    assert bid.words is not None
    score = asyncio.run(replay_call(rec, "silence", ReplayConfig(stt_delay_ms=late_ms)))
    turn = score.turns[turn_i]
    assert turn.barge_in and turn.barge_in_stopped
    assert turn.stop_latency_ms is not None
    recognised_ms = (bid.words[0].end + late_ms / 1000 - bid.start) * 1000
    assert turn.stop_latency_ms < recognised_ms
    limit_s = 0.3 if late_ms == 0 else BargeInParams().max_backchannel_s + 0.05
    assert turn.stop_latency_ms <= limit_s * 1000


@pytest.mark.parametrize("kind", ["pink", "talk", "crowd"])
def test_background_sits_its_snr_under_the_caller_and_moves_no_label(kind: str) -> None:
    """The noisy-place variant mixes a steady background under the caller's
    line at the asked level below their speech (RMS over their turns) and
    leaves the labels and the agent's track as they were."""
    import numpy as np

    if kind in rv.AMBIENCE:
        pytest.importorskip("livekit.agents", reason="the recorded rooms ship in livekit-agents")
    call = rv.Call.load(RECORDINGS / "billing-natural-12")
    noisy = rv.background(call, kind, 15.0)
    assert noisy.meta["events"] == call.meta["events"]
    assert noisy.agent is not None and call.agent is not None
    assert np.array_equal(noisy.agent, call.agent)
    r = call.caller_rate
    spans = [(round(e["start"] * r), round(e["end"] * r)) for e in call.of("caller_turn")]
    speech = np.concatenate([call.caller[a:b] for a, b in spans])
    added = noisy.caller - call.caller
    snr = 10 * np.log10(
        np.mean(speech.astype(np.float64) ** 2) / np.mean(added.astype(np.float64) ** 2)
    )
    assert abs(snr - 15.0) < 0.2
    # The same edit writes the same audio (a seeded generator).
    assert np.array_equal(rv.background(call, kind, 15.0).caller, noisy.caller)


@pytest.mark.parametrize(
    ("source", "check"), [("order-natural-15", "answered"), ("pharmacy-natural-17", "in 2 s")]
)
def test_other_voices_under_the_caller_strand_no_turn(
    source: str, check: str, tmp_path: Path
) -> None:
    """Three other voices 15 dB under the caller (a television, an office):
    the VAD hears speech after each of the caller's turns and no pause
    lasts. fused left two of order-natural-15's five turns unanswered and
    answered pharmacy-natural-17's third and fifth after 3.9 and 3.8 s; the
    turn now ends once the VAD has heard the ceiling of speech with no new
    word from the (streaming) recogniser."""
    call = rv.background(rv.Call.load(RECORDINGS / source), "talk", 15.0)
    rec = _save(call, tmp_path / "call", f"{source}-talk15")
    score = _replay(rec, "fused")
    assert not [t.turn for t in score.turns if t.missed], score.turns
    if check == "in 2 s":
        assert all(t.response_ms is not None and t.response_ms < 2000 for t in score.turns), [
            t.response_ms for t in score.turns
        ]


def test_a_turn_ended_through_other_voices_is_answered_by_a_draft(tmp_path: Path) -> None:
    """order-natural-15 with three other voices 15 dB under the caller: its
    last three turns end through that sound (no new word in 800 ms of
    speech, words that read finished). The draft for them starts 600 ms
    into the wordless sound, so the end uses it: each answered within 400
    ms of the end's decision. Before, each end found no draft and waited
    for a fresh request (1301-1317 ms against 801-817 ms decisions). No
    draft is voided for it."""
    call = rv.background(rv.Call.load(RECORDINGS / "order-natural-15"), "talk", 15.0)
    rec = _save(call, tmp_path / "call", "order-natural-15-talk15")
    agents: list[SimulatedAgent] = []
    score = asyncio.run(
        replay_call(rec, "fused", ReplayConfig(compute="fixed"), observe=agents.append)
    )
    stalled = [r for r in score.replies if "no new words" in r["reason"]]
    assert len(stalled) >= 3, [r["reason"] for r in score.replies]
    for r in stalled:
        t = score.turns[r["turn"]]
        assert r["drafted"], r
        assert t.response_ms is not None and t.eot_delay_ms is not None
        assert t.response_ms - t.eot_delay_ms < 400, (t.response_ms, t.eot_delay_ms)
    # Every end had its draft (before: 3 fresh requests); the one draft
    # voided is the caller's own going on, as before.
    drafter = agents[0].responder.drafter
    assert drafter is not None, agents
    assert drafter.stats.fresh_requests == 0 and drafter.stats.cancelled <= 1, drafter.stats


@pytest.mark.parametrize(
    ("source", "snr"), [("pharmacy-natural-17", 15.0), ("internet-natural-14", 20.0)]
)
def test_a_voice_behind_the_caller_voids_no_draft(source: str, snr: float, tmp_path: Path) -> None:
    """Other voices under the caller come back inside a draft's wait: the
    VAD hears speech, the recogniser writes no word of it. The draft still
    answers the caller's words, and the end on those words uses it. Voided
    on that sound, internet-natural-14-talk20 lost 3 of its 5 drafts and
    answered its second turn in 1670 ms instead of 936 ms. (A draft the
    caller's own next words void is voided: with the commit held for the
    draft's first audio, pharmacy-natural-17-talk15's third turn has one.)"""
    call = rv.background(rv.Call.load(RECORDINGS / source), "talk", snr)
    rec = _save(call, tmp_path / "call", f"{source}-talk{snr:.0f}")
    agents: list[SimulatedAgent] = []
    score = asyncio.run(
        replay_call(rec, "fused", ReplayConfig(compute="fixed"), observe=agents.append)
    )
    drafter = agents[0].responder.drafter
    assert drafter is not None
    st = drafter.stats
    assert st.used >= 2 and set(st.cancel_reasons) <= {"words changed"}, st
    assert st.cancelled <= 1, st
    assert not [t.turn for t in score.turns if t.missed]


def test_an_acknowledgement_under_a_crowd_is_not_answered_when_the_reply_ends(
    tmp_path: Path,
) -> None:
    """order-natural-15 in a crowded room (LiveKit's recording, 10 dB under
    the caller): the caller's "uh-huh" 1.5 s before the agent's reply ends,
    then the crowd's babble, which the VAD hears as speech. The stalled-words
    rule ended that "turn" 1.2 s later, and its commit gave the sound's end
    as the caller's speech end: inside the reply's last 1.2 s, so the
    Responder answered the "uh-huh" once the reply ended — a reply nobody
    asked for, over the caller's next words. The commit now gives the end
    of the caller's last word."""
    pytest.importorskip("livekit.agents", reason="the recorded rooms ship in livekit-agents")
    call = rv.background(rv.Call.load(RECORDINGS / "order-natural-15"), "crowd", 10.0)
    rec = _save(call, tmp_path / "call", "order-natural-15-crowd10")
    score = _replay(rec, "fused")
    for reply in score.replies:
        assert "answered once it stopped" not in reply["reason"], reply
    assert not any(t.missed for t in score.turns), score.turns


def test_drawn_out_fillers_move_every_label_with_the_audio() -> None:
    """The drawl variant holds each caller filler 0.9 s: the filler's word
    grows, everything after it moves on by what was added, the agent's
    track gets the same silence; the dropped copy has the same audio and
    no filler words."""
    import numpy as np

    call = rv.Call.load(RECORDINGS / "appointment-natural-13")
    fillers = [w for t in call.of("caller_turn") for w in t.get("words") or [] if rv._is_filler(w)]
    assert len(fillers) == 2
    kept = rv.drawn_fillers(call, 0.9, written=True)
    dropped = rv.drawn_fillers(call, 0.9, written=False)
    extra = sum(0.9 - (w["end"] - w["start"]) for w in fillers)
    assert len(kept.caller) / kept.caller_rate == pytest.approx(call.duration + extra, abs=2e-3)
    assert kept.agent is not None and call.agent is not None
    assert len(kept.agent) / kept.agent_rate == pytest.approx(call.duration + extra, abs=2e-3)
    held = [w for t in kept.of("caller_turn") for w in t.get("words") or [] if rv._is_filler(w)]
    assert [round(w["end"] - w["start"], 3) for w in held] == [0.9, 0.9]
    last, last_before = kept.of("caller_turn")[-1], call.of("caller_turn")[-1]
    assert last["start"] - last_before["start"] == pytest.approx(extra, abs=1e-3)
    assert np.array_equal(dropped.caller, kept.caller)
    assert not [
        w for t in dropped.of("caller_turn") for w in t.get("words") or [] if rv._is_filler(w)
    ]


def test_a_drawn_out_filler_the_recogniser_drops_does_not_end_the_turn(tmp_path: Path) -> None:
    """appointment-natural-13 with "maybe thursday or uhhhh friday morning"
    held 0.9 s and the filler not written (most recognisers drop fillers):
    1.2 s of speech passed with no new word, and the stalled-words end cut
    the turn at "maybe thursday or". Unfinished words now keep it open
    (semantic-text)."""
    call = rv.drawn_fillers(rv.Call.load(RECORDINGS / "appointment-natural-13"), 0.9, False)
    rec = _save(call, tmp_path / "call", "appointment-natural-13-drawl-dropped")
    assert rec.caller_turns[1].text.startswith("Um, maybe Thursday or uh Friday")
    score = _replay(rec, "semantic-text")
    assert not score.turns[1].interrupted, score.turns[1]
    assert not [t.turn for t in score.turns if t.missed]


def test_a_turn_opened_by_a_dropped_filler_is_not_ended_on_its_audio(tmp_path: Path) -> None:
    """travel-natural-16 with "Ummm, | an aisle seat please" held 0.9 s and
    the filler not written: at the comma the turn had no words and fused
    ended it on Smart Turn's verdict alone (p_audio 0.94). A new turn with
    no words from a streaming recogniser now waits the ceiling."""
    call = rv.drawn_fillers(rv.Call.load(RECORDINGS / "travel-natural-16"), 0.9, written=False)
    rec = _save(call, tmp_path / "call", "travel-natural-16-drawl-dropped")
    assert rec.caller_turns[3].text.startswith("Um, an aisle seat")
    score = _replay(rec, "fused")
    assert not score.turns[3].interrupted, score.turns[3]
    assert not [t.turn for t in score.turns if t.missed]


def test_a_quiet_callers_short_answer_the_vad_does_not_hear_is_answered(tmp_path: Path) -> None:
    """easy-short-08 through a telephone line with the caller 30 dB down (a
    far handset): Silero hears nothing of the caller's "Correct." (0.24 s),
    so no turn opened and every detector left the caller waiting. The
    recogniser's words now open the turn (model detectors); the plain
    silence timer is left as it is."""
    nb = load_script("narrowband")
    nb.convert_call(RECORDINGS / "easy-short-08", tmp_path / "quiet", caller_gain_db=-30.0)
    rec = load_recording(tmp_path / "quiet")
    assert rec.caller_turns[2].text == "Correct."
    assert _replay(rec, "silence:stop_ms=800").turns[2].missed  # the VAD heard nothing
    for detector in ("fused", "semantic-text"):
        score = _replay(rec, detector)
        assert not [t.turn for t in score.turns if t.missed], (detector, score.turns)
        assert score.turns[2].response_ms is not None and score.turns[2].response_ms < 1000


def test_agent_lines_without_punctuation_are_read_as_punctuated(tmp_path: Path) -> None:
    """internet-natural-14 with the agent's lines as many corpora write them
    ("sorry about that have you restarted the router"): each line reads as
    the same kind of question, and fused answers every turn as it does the
    punctuated call (read as statements, the demo's "Yes." to a check of the
    email waited 2168 ms against 1560)."""
    from turnkit.text.question import read_agent

    source = rv.Call.load(RECORDINGS / "internet-natural-14")
    plain = rv.plain_agent_text(source)
    for a, b in zip(source.of("agent_turn"), plain.of("agent_turn"), strict=True):
        assert not any(c in b["text"] for c in ".?!,")
        assert read_agent(b["text"]).kind == read_agent(a["text"]).kind, b["text"]
    rec = _save(plain, tmp_path / "plain", "internet-natural-14-plain")
    got = _replay(rec, "fused")
    want = _replay(load_recording(RECORDINGS / "internet-natural-14"), "fused")
    for g, w in zip(got.turns, want.turns, strict=True):
        assert g.cutoffs == w.cutoffs and g.missed == w.missed
        assert abs((g.response_ms or 0) - (w.response_ms or 0)) < 150


def test_a_filler_held_in_a_pause_after_finished_words_is_not_a_stall(tmp_path: Path) -> None:
    """travel-natural-16 with the caller holding "uhhhh" 1.2 s in each pause
    after a comma ("From Chicago, uhhhh, and uh I'd like…", "The nine
    thirty, uhhhh, the nine thirty one…"; the filler written at its end):
    the VAD hears the caller's own voice with no new word, and the
    stalled-words rule ended both turns inside the filler (800 ms after
    words that read finished, 1216 ms after a read-out run). The sound is
    as loud as the caller's words, so it is theirs: neither turn is cut."""
    call = rv.filler_in_hold(rv.Call.load(RECORDINGS / "travel-natural-16"), 1.2, True)
    turns = call.of("caller_turn")
    assert any(w["text"] == "uh" and w["end"] - w["start"] > 1.1 for w in turns[1]["words"])
    rec = _save(call, tmp_path / "fillhold", "travel-natural-16-fillhold-kept")
    score = _replay(rec, "fused")
    assert not score.turns[1].interrupted and not score.turns[2].interrupted, score.turns
    assert not [t.turn for t in score.turns if t.missed]


def test_a_hold_shortened_keeps_the_audio_and_labels_together(tmp_path: Path) -> None:
    """``shorten_hold``: refund-mixed-10's first turn, its 0.88 s pause
    between two sentences cut to 0.25 s. The turn's later span, words and
    the call's later events move back by what was cut, the audio with them;
    replayed, ``fused``'s draft on the first sentence is voided by the
    caller's next words (the commit held for its first token), the turn is
    not cut. The original pause is long enough to be cut."""
    call = rv.Call.load(RECORDINGS / "refund-mixed-10")
    turn = call.of("caller_turn")[0]
    hold = turn["holds"][0]
    d = hold["end"] - hold["start"] - 0.25
    short = rv.shorten_hold(call, 0, 0, 0.25)
    t = short.of("caller_turn")[0]
    assert t["holds"][0]["end"] - t["holds"][0]["start"] == pytest.approx(0.25, abs=1e-3)
    assert t["end"] == pytest.approx(turn["end"] - d, abs=1e-3)
    assert t["spans"][1][0] == pytest.approx(hold["start"] + 0.25, abs=1e-3)
    assert [w["text"] for w in t["words"]] == [w["text"] for w in turn["words"]]
    assert len(call.caller) - len(short.caller) == round(d * call.caller_rate)
    later = [e for e in short.events if e["start"] > t["end"]]
    assert later and all(
        e["start"] == pytest.approx(o["start"] - d, abs=1e-3)
        for e, o in zip(later, [e for e in call.events if e["start"] > turn["end"]], strict=True)
    )
    score = _replay(_save(short, tmp_path / "call", "refund-hold0.25"), "fused")
    assert not score.turns[0].interrupted and not score.turns[0].missed
    before = _replay(load_recording(RECORDINGS / "refund-mixed-10"), "fused")
    assert before.turns[0].interrupted
    # The same drafts but the one on the first sentence, voided.
    assert score.drafts["started"] == before.drafts["started"]
    assert score.drafts["cancelled"] == before.drafts["cancelled"] + 1


def _words_to_the_next(src: Path, dst: Path) -> Recording:
    """The call with each word's end run on to the next word's start, within
    its span (as many aligners and recognisers write word times: the word
    "lasts" through the silence after it)."""
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "call.json").read_text())
    for ev in manifest["events"]:
        if ev["type"] != "caller_turn" or not ev.get("words"):
            continue
        words = ev["words"]
        for w, nxt in itertools.pairwise(words):
            w["end"] = max(w["end"], nxt["start"])
        words[-1]["end"] = ev["end"]
    (dst / "call.json").write_text(json.dumps(manifest))
    return load_recording(dst)


@pytest.mark.parametrize("words", ["300 ms late", "450 ms late", "ends run on"])
def test_the_first_turn_is_not_ended_before_any_word_is_written(
    words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """billing-natural-12 opens "Hi, | um, I'm calling about a charge on my
    bill." with a 0.22 s pause after "Hi". A streaming recogniser writes
    each word 0.3-0.5 s after it is said, and where word times run on to
    the next word "hi" is not written until "um" begins: either way at
    that pause the recogniser has written nothing yet in the call, and
    fused ended the turn there on the audio alone (p_audio 0.94, 128 ms
    into the pause), an end with nothing to answer (with the word ends
    run on, a cut-off the replay scores). The first turn waits for its
    words, as a later turn without words does (Endpointing._wordless): its
    one end comes after it, judged on them."""
    ends: list[TurnEndFrame] = []
    commit = Endpointing._commit

    def watched(self: Endpointing, *args: Any, **kwargs: Any) -> TurnEndFrame:
        end = commit(self, *args, **kwargs)
        ends.append(end)
        return end

    monkeypatch.setattr(Endpointing, "_commit", watched)
    source = RECORDINGS / "billing-natural-12"
    if words == "ends run on":
        rec, late_ms = _words_to_the_next(source, tmp_path / "call"), 0.0
    else:
        rec, late_ms = load_recording(source), float(words.split()[0])
    config = ReplayConfig(compute="fixed", stt_delay_ms=late_ms)
    score = asyncio.run(replay_call(rec, "fused", config))
    first = score.turns[0]
    assert not first.interrupted
    early = [(e.at, e.reason) for e in ends if e.at < first.end]
    assert not early, early
    assert "p_text" in score.replies[0]["reason"], score.replies[0]
