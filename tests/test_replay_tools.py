"""Replay with tool calls: the recorded calls' ``tool_call`` events run through
the real Responder, ToolGate and FillerScheduler on the virtual clock.

On the demo calls that carry tools (a slow read, a write that needs the
caller's yes, a slow write): no write from a discarded draft, each write
exactly once (and a confirmed write only after the spoken yes), every filler
within one 32 ms frame of its threshold."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.clock import VirtualClock, settle
from turnkit.drafting.drafter import EagerDrafter
from turnkit.drafting.responder import Responder, spoken_yes
from turnkit.drafting.tools import WRITE_HOLD_S, ToolGate
from turnkit.frames import LLMTextFrame
from turnkit.replay.agent import SimulatedAgent
from turnkit.replay.engine import SimulatedEngine, ToolLog, replay_tools
from turnkit.replay.latency import LatencyModel
from turnkit.replay.llm_source import ModelTTFT
from turnkit.replay.metrics import aggregate
from turnkit.replay.recording import RecordingError, load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

CORPUS = Path(__file__).resolve().parents[1] / "recordings"
FRAME_S = 0.032
TOOL_CALLS = ["easy-order-status-01", "appointment-natural-13", "refund-mixed-10"]
# The writes each call's recorded agent made: each must run exactly once.
EXPECTED_WRITES = {
    "easy-order-status-01": [],
    "appointment-natural-13": ["book_appointment"],
    "refund-mixed-10": ["refund_charge"],
}


def _check_tools(rec_id: str, tools: dict) -> None:
    assert tools["writes_from_discarded_drafts"] == 0
    assert tools["writes_repeated"] == 0
    names = sorted(w["name"] for w in tools["executed_writes"])
    assert names == EXPECTED_WRITES[rec_id], (rec_id, tools)
    for late in tools["filler_late_ms"]:
        assert 0 <= late <= FRAME_S * 1000, (rec_id, tools)


@pytest.mark.parametrize(("detector", "eager"), [("silence", False), ("fused", True)])
async def test_replay_with_tool_calls_on_the_recorded_calls(detector: str, eager: bool) -> None:
    config = ReplayConfig(compute="fixed", eager=eager)
    scores = []
    for rec_id in TOOL_CALLS:
        rec = load_recording(CORPUS / rec_id)
        assert rec.tool_calls
        score = await replay_call(rec, detector, config)
        assert score.tools is not None
        _check_tools(rec_id, score.tools)
        # A confirm write runs only after the caller's yes (the next turn).
        if rec_id == "appointment-natural-13":
            [w] = score.tools["executed_writes"]
            yes_turn = rec.caller_turns[2]
            assert w["at"] >= yes_turn.start
            assert spoken_yes(yes_turn.text)
        scores.append(score)
    result = aggregate(detector, scores)
    t = result["tools"]
    assert t["calls_with_tools"] == 3
    assert t["writes"] == 2 and t["writes_from_discarded_drafts"] == 0
    assert set(t["filler_ack_ms"]) == {"p50", "p95"}
    if detector == "silence":
        # The slow read (1.8 s) and the slow write (1.4 s) run in confirmed
        # turns: a filler covers each, exactly at the 1 s threshold.
        assert t["fillers"] == 2
        assert t["filler_ack_ms"]["p50"] == pytest.approx(1000.0, abs=FRAME_S * 1000)
        order = next(s for s in scores if s.call == "easy-order-status-01")
        [slow] = [r for r in order.replies if r["turn"] == 1 and r["first_audio_at"]]
        assert slow["filler"]  # the caller first heard the filler line


async def test_a_discarded_draft_never_runs_its_write(tmp_path: Path) -> None:
    """A detector that drafts at the caller's holds but waits long before
    ending the turn, and a fast engine: a draft for "That's right. The
    second one is the..." asks for the refund, the caller goes on, the draft
    is thrown away. The refund runs once, for the confirmed turn."""
    rec = load_recording(CORPUS / "refund-mixed-10")
    config = ReplayConfig(compute="fixed", eager=True, llm_ttft_ms="60")
    score = await replay_call(rec, "semantic-text:min_wait_ms=1200,max_wait_ms=2500", config)
    t = score.tools
    assert t is not None
    assert t["draft_writes_discarded"] >= 1  # the case this test is about happened
    assert score.drafts["cancelled"] >= 1
    _check_tools(rec.id, t)
    [w] = t["executed_writes"]
    turn = rec.caller_turns[1]
    assert w["at"] >= turn.end  # only once the turn was confirmed


async def test_reads_run_inside_drafts_and_the_confirmed_write_waits_for_yes() -> None:
    rec = load_recording(CORPUS / "appointment-natural-13")
    config = ReplayConfig(compute="fixed", eager=True, llm_ttft_ms="60")
    score = await replay_call(rec, "semantic-text", config)
    t = score.tools
    assert t is not None
    assert t["reads_in_drafts"] >= 1
    _check_tools(rec.id, t)
    [w] = t["executed_writes"]
    assert w["at"] >= rec.caller_turns[2].start


def test_tools_json_through_replay_many() -> None:
    from turnkit.replay.simulator import replay_many

    out = list(
        replay_many(
            [CORPUS / "easy-order-status-01", CORPUS / "easy-short-08"],
            ["silence"],
            ReplayConfig(compute="fixed"),
            workers=1,
        )
    )
    scores = {p: s for p, s in out}
    assert all(isinstance(s, list) for s in scores.values())
    by_call = {s[0].call: s[0] for s in scores.values()}  # type: ignore[index]
    assert by_call["easy-short-08"].tools is None  # no tool events: none reported
    result = aggregate("silence", list(by_call.values()))
    json.dumps(result)
    assert result["tools"]["calls"] == 1 and result["tools"]["calls_with_tools"] == 1


# -- the recording format ------------------------------------------------------


def _copy_with(tmp_path: Path, edit) -> Path:
    d = tmp_path / "call"
    shutil.copytree(CORPUS / "refund-mixed-10", d)
    m = json.loads((d / "call.json").read_text())
    edit(m)
    (d / "call.json").write_text(json.dumps(m))
    return d


def _tool_event(m: dict) -> dict:
    return next(e for e in m["events"] if e["type"] == "tool_call")


def test_tool_call_confirm_only_on_writes(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, lambda m: _tool_event(m).update(effect="read", confirm=True))
    with pytest.raises(RecordingError, match=r"events\[\d+\].*confirm"):
        load_recording(d)


def test_tool_call_turn_must_exist(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, lambda m: _tool_event(m).update(turn=9))
    with pytest.raises(RecordingError, match=r"events\[\d+\]\.turn: 9 but the call has 3"):
        load_recording(d)


def test_tool_call_effect_is_checked(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, lambda m: _tool_event(m).update(effect="delete"))
    with pytest.raises(RecordingError, match=r"effect"):
        load_recording(d)


def test_calls_without_tool_events_load_as_before() -> None:
    rec = load_recording(CORPUS / "easy-short-08")
    assert rec.tool_calls == [] and not rec.warnings


# -- Responder on the simulated engine: history = what was heard ----------------


class _Script:
    text = "Sure, a table for two at seven on Friday evening, under the name Miller."

    def turn_for(self, decision_at: float) -> int | None:
        return 0

    def reply_text(self, turn: int | None, at: float | None = None) -> str:
        return self.text


def _responder(
    clock: VirtualClock, out: list[LLMTextFrame], **kw
) -> tuple[Responder, PlaybackCursor]:
    engine = SimulatedEngine(
        clock, _Script(), ModelTTFT(LatencyModel.parse("100"), random.Random(0))
    )
    cursor = PlaybackCursor(clock)
    return Responder(engine, clock, emit=out.append, cursor=cursor, **kw), cursor


def _refund_responder(
    clock: VirtualClock, out: list[LLMTextFrame], *, hold_s: float = WRITE_HOLD_S, **kw: Any
) -> tuple[Responder, ToolGate, ToolLog]:
    """A Responder on the simulated engine (100 ms first tokens) whose every
    reply asks for refund-mixed-10's recorded refund (a 1.4 s write), its
    tools through a real ToolGate (``hold_s`` after a commit)."""
    rec = load_recording(CORPUS / "refund-mixed-10")
    log = ToolLog()
    gate = ToolGate(replay_tools(rec, clock, log), clock, session_id="t", write_hold_s=hold_s)
    refund = [e.model_copy(update={"turn": 0}) for e in rec.tool_calls]
    engine = SimulatedEngine(
        clock, _Script(), ModelTTFT(LatencyModel.parse("100"), random.Random(0)), refund
    )
    return Responder(engine, clock, emit=out.append, gate=gate, **kw), gate, log


async def _cut_in(
    clock: VirtualClock, cursor: PlaybackCursor, r: Responder, rid: int, *, lasts: float, at: float
) -> None:
    """Reply ``rid`` starts playing now (``lasts`` seconds of audio) and the
    caller barges in at ``at``: the playback and the Responder are told."""
    cursor.on_started(rid)
    cursor.on_duration(rid, lasts)
    r.on_agent_audio(True)
    await clock.advance_to(at)
    cursor.on_stopped(rid, "interrupted")
    r.on_interrupted()


async def test_interrupted_reply_history_keeps_the_words_heard() -> None:
    clock = VirtualClock()
    out: list[LLMTextFrame] = []
    r, cursor = _responder(clock, out)
    rid = await r.on_end("a table for two")
    assert rid is not None
    await settle()
    await clock.advance_to(0.1)  # first token
    assert "".join(f.text for f in out) == _Script.text
    await _cut_in(clock, cursor, r, rid, lasts=5.0, at=1.6)  # 1.5 s of 5 s played
    heard = cursor.heard(rid)
    assert 0 < heard.words_kept < heard.words_total
    last = r.history[-1]
    assert last["role"] == "assistant"
    assert last["content"].startswith(heard.text) and "interrupted" in last["content"]
    assert len(last["content"].split()) < len(_Script.text.split())


async def test_completed_reply_history_is_whole() -> None:
    clock = VirtualClock()
    out: list[LLMTextFrame] = []
    r, cursor = _responder(clock, out)
    rid = await r.on_end("a table for two")
    await settle()
    await clock.advance_to(0.1)
    assert rid is not None
    cursor.on_started(rid)
    await clock.advance_to(3.0)
    cursor.on_stopped(rid, "completed")
    r.on_agent_audio(False)
    assert r.history[-1] == {"role": "assistant", "content": _Script.text}


async def test_cancel_pending_continues_the_turn_and_its_ledger() -> None:
    """The caller went on before any of the reply played: the next end is
    the same turn (same gate turn: a write already started is not run again)."""
    clock = VirtualClock()
    out: list[LLMTextFrame] = []
    # no hold after the commit: the refund starts as it is asked for (the
    # hold's own test is test_a_write_held_after_a_premature_end_is_withdrawn)
    r, gate, log = _refund_responder(clock, out, hold_s=0.0, cursor=PlaybackCursor(clock))
    await r.on_end("that's right the second one is the")
    await settle()
    await clock.advance_to(0.15)  # tool call out, the refund starts (1.4 s)
    assert [x.name for x in log.writes] == ["refund_charge"]
    turn = gate.current_turn
    r.on_cancel_pending()
    assert r.history[-1]["role"] == "system"  # the turn's words and reply forgotten
    await r.on_end("that's right the second one is the duplicate")
    assert gate.current_turn is turn and turn.state == "live"
    assert r.history[-1] == {
        "role": "user",
        "content": "that's right the second one is the duplicate",
    }
    await settle()
    await clock.advance_to(5.0)
    await r.idle()
    assert [x.name for x in log.writes] == ["refund_charge"]  # once
    assert r.stats.turns == 1 and r.stats.cancelled_pending == 1


@pytest.mark.parametrize(
    ("text", "yes"),
    [
        ("Yes.", True),
        ("Yeah Friday at nine is perfect for me.", True),
        ("Sure, go ahead.", True),
        ("Correct.", True),
        ("No.", False),
        ("Yes, but actually make it ten.", False),
        ("Wait, not Friday.", False),
        ("Hmm, what other times are there?", False),
        ("", False),
    ],
)
def test_spoken_yes(text: str, yes: bool) -> None:
    assert spoken_yes(text) is yes


async def test_replay_answers_an_end_with_no_words_once_they_come() -> None:
    """A streaming recogniser 2.5 s behind the caller: the detector's
    ceiling ends easy-short-08's first turn before any of its words came.
    The replay's agent runs the same Responder as the live hosts: no
    request answers nothing (every user message holds words), and the turn
    is answered once its words come, as the reply to them, not missed."""
    rec = load_recording(CORPUS / "easy-short-08")
    got: dict[str, SimulatedAgent] = {}
    score = await replay_call(
        rec,
        "fused",
        ReplayConfig(compute="fixed", stt="streaming", stt_delay_ms=2500),
        observe=lambda a: got.setdefault("a", a),
    )
    agent = got["a"]
    r = agent.responder
    assert r is not None and r.stats.wordless_ends >= 1
    users = [m["content"] for m in r.history if m["role"] == "user"]
    assert users and all(u.strip() for u in users), users
    first = next(t for t in score.turns if t.turn == 0)
    assert not first.missed and first.response_ms is not None
    reply = next(x for x in agent.replies if x.turn == 0)
    assert reply.asked_at is not None and reply.asked_at > reply.decision_at


@pytest.mark.parametrize("detector", ["fused", "semantic-text", "smart-turn"])
async def test_the_refund_waits_for_the_caller_to_say_which_charge(detector: str) -> None:
    """refund-mixed-10: "That's right. | The second one is | the duplicate."
    Every model detector ends the turn in its 0.72 s pause after "That's
    right." (a between-sentences hold), and the drafted reply's refund
    (a write) used to start at that commit, 2.8 s before the caller had
    said which charge. Held after the commit, it is withdrawn when the caller
    goes on, and runs once, after the turn's real end."""
    rec = load_recording(CORPUS / "refund-mixed-10")
    score = await replay_call(rec, detector, ReplayConfig(compute="fixed"))
    assert score.tools is not None
    [w] = score.tools["executed_writes"]
    assert w["name"] == "refund_charge" and w["turn"] == 1
    assert w["at"] >= rec.caller_turns[1].end + WRITE_HOLD_S / 2
    assert score.tools["writes_early"] == 0 and score.tools["writes_withdrawn"] >= 1
    assert score.turns[1].cutoffs >= 1  # the premature end is still scored


async def test_a_write_held_after_a_premature_end_is_withdrawn() -> None:
    """A draft released whole (its text all out before its audio began)
    whose caller goes on before any of it plays: its turn's held write is
    withdrawn, the history forgets the turn's words and reply, and the next
    end continues the same turn; the write runs once, a hold after that."""
    clock = VirtualClock()
    cursor = PlaybackCursor(clock)
    out: list[LLMTextFrame] = []
    r, gate, log = _refund_responder(clock, out, cursor=cursor, drafter=EagerDrafter(clock))
    said = "that's right"
    await r.on_eager(said)
    await settle()
    await clock.advance_to(0.5)  # the draft's tool round and text are in
    rid = await r.on_end(said)  # the commit, at 0.5: released whole
    await settle()
    assert rid is not None and any(f.final for f in out)
    await clock.advance_to(0.7)
    assert log.writes == []  # held
    r.on_cancel_pending()  # the caller went on at 0.7, before any audio
    assert r.stats.cancelled_pending == 1 and gate.withdrawn_writes == 1
    assert [m["role"] for m in r.history] == ["system"]
    await clock.advance_to(3.0)
    assert log.writes == []
    whole = "that's right the second one is the duplicate"
    await r.on_end(whole)
    assert r.stats.turns == 1  # the same turn, continued
    assert [m["content"] for m in r.history if m["role"] == "user"] == [whole]
    await settle()
    await clock.advance_to(6.0)
    await r.idle()
    assert [(x.name, x.started_at) for x in log.writes] == [("refund_charge", 3.0 + WRITE_HOLD_S)]


async def test_a_turn_the_caller_went_on_with_after_a_barge_in_is_in_the_history_once() -> None:
    """The reply to "a table for two" is cut after 1.5 s of its 5 s; the
    caller's next words run on from the turn's (the detector's turn
    resumed): the history holds the turn, the reply as heard, and only the
    new words (before: the turn's words twice, "a table for two" then "a
    table for two at seven")."""
    clock = VirtualClock()
    out: list[LLMTextFrame] = []
    r, cursor = _responder(clock, out)
    rid = await r.on_end("a table for two")
    assert rid is not None
    await settle()
    await clock.advance_to(0.1)
    await _cut_in(clock, cursor, r, rid, lasts=5.0, at=1.6)
    await r.on_end("A table for two, at seven.")
    users = [m["content"] for m in r.history if m["role"] == "user"]
    assert users == ["a table for two", "at seven."]
    assert [m["role"] for m in r.history] == ["system", "user", "assistant", "user"]
    # Words that do not run on from the turn's are a new message whole.
    await r.on_end("and one more thing")
    assert r.history[-1] == {"role": "user", "content": "and one more thing"}


@pytest.mark.parametrize("call", ["phone-digits-02", "support-and-um-04", "travel-hard-09"])
async def test_the_replayed_history_holds_each_caller_turn_once(call: str) -> None:
    """Demo calls where `fused` ends a turn in a hold and the caller goes
    on over the drafted reply: no user message repeats the one before it
    (before: "yes" then "yes what time does the first flight leave"), and
    every caller turn's last word is in the history."""
    rec = load_recording(CORPUS / call)
    box: dict[str, SimulatedAgent] = {}
    score = await replay_call(
        rec, "fused", ReplayConfig(compute="fixed"), observe=lambda a: box.update(a=a)
    )
    assert sum(t.cutoffs for t in score.turns) >= 1
    history = box["a"].responder.history
    users = [str(m["content"]).lower().split() for m in history if m["role"] == "user"]
    for a, b in itertools.pairwise(users):
        assert b[: len(a)] != a, (a, b)
    said = [w for u in users for w in u]
    for t in rec.caller_turns:
        last = t.text.lower().split()[-1].strip(".,?!")
        assert any(w.strip(".,?!") == last for w in said), (t.text, said)


async def test_a_barge_in_on_a_draft_released_whole_withdraws_its_write_and_says_so() -> None:
    """The drafted reply (its refund deferred, its text all out) starts
    playing at the commit and the caller barges in 0.2 s later: the held
    refund is withdrawn, the history's tool message says it was not carried
    out (it said it would be, once the turn was confirmed), and the engine,
    reading that, asks again in the caller's next turn, where it runs once."""
    clock = VirtualClock()
    cursor = PlaybackCursor(clock)
    out: list[LLMTextFrame] = []
    r, gate, log = _refund_responder(clock, out, cursor=cursor, drafter=EagerDrafter(clock))
    await r.on_eager("that's right")
    await settle()
    await clock.advance_to(0.5)
    rid = await r.on_end("that's right")
    await settle()
    assert rid is not None and any(f.final for f in out)
    await _cut_in(clock, cursor, r, rid, lasts=4.0, at=0.7)
    assert gate.withdrawn_writes == 1 and log.writes == []
    [told] = [m for m in r.history if m["role"] == "tool"]
    assert "was not carried out" in told["content"]
    await clock.advance_to(3.0)
    await r.on_end("that's right the second one is the duplicate")
    assert r.history[-1] == {"role": "user", "content": "the second one is the duplicate"}
    await settle()
    await clock.advance_to(6.0)
    await r.idle()
    [w] = log.writes
    assert w.name == "refund_charge" and w.started_at >= 3.0 + WRITE_HOLD_S


async def test_an_end_ends_the_speech_that_holds_a_write_for_a_host_without_vad_stops() -> None:
    """Deepgram Flux gives a speech start (StartOfTurn) and then an end
    (EndOfTurn), never a VAD stop: an acknowledgement over the agent ("uh
    huh", its end ignored) holds a write while it lasts, and its end lets
    it run the hold after; before, the caller counted as speaking until the
    next commit, and the write waited for it."""
    clock = VirtualClock()
    r, _gate, log = _refund_responder(clock, [])
    await r.on_end("the second one please")  # the commit, at 0.0
    await settle()
    await clock.advance_to(0.2)  # the refund is asked for at 0.1: held
    r.on_agent_audio(True)  # a filler line plays
    r.on_speech()  # "uh huh" begins
    await settle()
    await clock.advance_to(1.0)
    assert log.writes == []
    assert await r.on_end("uh huh") is None  # ignored: the agent is talking
    await settle()
    await clock.advance_to(3.0)
    assert [(w.name, w.started_at) for w in log.writes] == [("refund_charge", 1.0 + WRITE_HOLD_S)]
