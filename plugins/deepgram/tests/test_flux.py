"""turnkit-deepgram: Flux events -> turnkit frames -> EagerDrafter + ToolGate.

The streams are built from the demo corpus's measured word times and holds
(tests/flux_corpus.py) and parsed with the deepgram SDK's own models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from deepgram.listen.v2.types import ListenV2TurnInfo
from pydantic import ValidationError

from turnkit.clock import VirtualClock
from turnkit.drafting import DraftParams, ToolGate, tool
from turnkit.frames import (
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    VADSpeechStartedFrame,
)
from turnkit_deepgram import (
    FluxThresholds,
    FluxTurnMapper,
    StandInEngine,
    load_flux_jsonl,
    replay_flux,
)
from turnkit_deepgram.replay import main

sys.path.insert(0, str(Path(__file__).parent))
from flux_corpus import KIND_CONF, all_call_ids, flux_stream, write_stream

MAX_DRAFTS = DraftParams().max_drafts


def expected_counts(eager_kinds_per_turn: list[list[str]]) -> tuple[int, int, int]:
    """Drafts (started, used, cancelled) the drafter's rules give for turns
    whose holds sent the eager signals listed (plus one at each turn's end)."""
    started = used = cancelled = 0
    for kinds in eager_kinds_per_turn:
        n = len(kinds)
        started += min(MAX_DRAFTS, n + 1)
        cancelled += min(MAX_DRAFTS, n)
        used += 1 if n < MAX_DRAFTS else 0
    return started, used, cancelled


def test_mapper_frames_for_each_event() -> None:
    clock = VirtualClock()
    mapper = FluxTurnMapper(clock)
    msgs, _ = flux_stream("booking-think-03")
    by_event: dict[str, list[type]] = {}
    for m in msgs[1:]:
        info = ListenV2TurnInfo.model_validate({k: v for k, v in m.items() if k != "received_at"})
        kinds = [type(f) for f in mapper.map(info)]
        by_event.setdefault(str(info.event), []).extend(kinds)
    assert VADSpeechStartedFrame in by_event["StartOfTurn"]
    assert by_event["EagerEndOfTurn"].count(TurnEagerFrame) == 2 + 3  # 2 holds + 3 turn ends
    assert by_event["TurnResumed"] == [TurnResumedFrame, TurnResumedFrame]
    assert by_event["EndOfTurn"].count(TurnEndFrame) == 3
    assert TurnEagerFrame not in by_event["Update"]


def _turn_info(start: float, words: list[tuple[str, float, float]]) -> ListenV2TurnInfo:
    return ListenV2TurnInfo(
        request_id="r",
        sequence_id=1,
        event="Update",
        turn_index=0,
        audio_window_start=start,
        audio_window_end=words[-1][2] + 0.1,
        transcript=" ".join(w for w, _, _ in words),
        words=[{"word": w, "confidence": 0.9, "start": a, "end": b} for w, a, b in words],
        end_of_turn_confidence=0.1,
    )


async def test_mapper_puts_word_times_on_the_clock_across_a_reconnect() -> None:
    """Flux's times count seconds of one connection's audio. A mapper on a
    clock that started 20 s before the stream (no ``audio_offset`` given),
    and the same mapper after a reconnect (times from zero again), read its
    words where they were said, not 20 or 40 s early: the offset is re-anchored
    on the first result far behind the clock (turnkit.text.word_clock)."""
    clock = VirtualClock()
    mapper = FluxTurnMapper(clock)
    await clock.advance_to(21.6)  # the stream started at 20.0 on this clock
    tr = next(
        f
        for f in mapper.map(_turn_info(0.2, [("hello", 0.3, 1.4)]))
        if isinstance(f, TranscriptFrame)
    )
    # anchored on its arrival: its own lag (0.1 s) reads late, not 20 s early
    assert tr.words[0].end == pytest.approx(21.5) and tr.spoken_until == tr.words[0].end
    await clock.advance_to(23.57)  # a result with less lag settles the offset
    tr = next(
        f
        for f in mapper.map(_turn_info(0.2, [("hello", 0.3, 1.4), ("there", 1.5, 3.45)]))
        if isinstance(f, TranscriptFrame)
    )
    assert tr.words[-1].end == pytest.approx(23.47)  # said at 23.45
    await clock.advance_to(41.0)  # reconnected at 40.0: times start at zero again
    tr = next(
        f
        for f in mapper.map(_turn_info(0.0, [("yes", 0.2, 0.9)]))
        if isinstance(f, TranscriptFrame)
    )
    assert tr.words[0].start == pytest.approx(40.2)


async def test_mapper_normalises_and_times_transcripts() -> None:
    clock = VirtualClock()
    mapper = FluxTurnMapper(clock, audio_offset=10.0)
    await clock.advance_to(11.6)  # the message arrives after the audio it covers
    msg = ListenV2TurnInfo(
        request_id="r",
        sequence_id=3,
        event="EndOfTurn",
        turn_index=0,
        audio_window_start=0.0,
        audio_window_end=1.5,
        transcript="Sure, it's under Miller.",
        words=[
            {"word": "Sure,", "confidence": 0.9, "start": 0.1, "end": 0.4},
            {"word": "Miller.", "confidence": 0.9, "start": 0.9, "end": 1.2},
        ],
        end_of_turn_confidence=0.9,
        trigger="model",
    )
    frames = mapper.map(msg)
    tr = next(f for f in frames if isinstance(f, TranscriptFrame))
    assert tr.text == "sure it's under miller"
    assert tr.is_final and tr.spoken_until == pytest.approx(11.2)
    end = next(f for f in frames if isinstance(f, TurnEndFrame))
    assert end.probability == pytest.approx(0.9) and end.reason == "flux model"
    assert end.detector == "deepgram-flux"


@pytest.mark.parametrize("call_id", all_call_ids())
async def test_replay_corpus_stream_drives_drafter(call_id: str, tmp_path: Path) -> None:
    path = tmp_path / f"{call_id}.jsonl"
    plans = write_stream(call_id, path)
    result = await replay_flux(path)
    assert result.errors == []
    assert len(result.turns) == len(plans)
    started, used, cancelled = expected_counts([p.eager_holds for p in plans])
    s = result.stats
    assert (s.started, s.used, s.cancelled) == (started, used, cancelled)
    # a draft dies when the caller goes on with new words (Flux's
    # TurnResumed alone only says speech came back: the draft waits for
    # the words, and words that change nothing keep it)
    assert set(s.cancel_reasons) <= {"words changed"}
    assert sum(s.cancel_reasons.values()) == cancelled
    for turn, plan in zip(result.turns, plans, strict=True):
        # Flux's EndOfTurn comes 0.5 s after the labelled end.
        assert turn.decided_at == pytest.approx(plan.end + 0.5, abs=1e-6)
        assert turn.drafted == (len(plan.eager_holds) < MAX_DRAFTS)
        if turn.drafted:
            # the draft started at the end-of-turn eager, 250 ms before the end
            assert turn.decided_at - turn.draft_started_at == pytest.approx(0.25, abs=1e-6)
    assert len(result.replies) == len(plans)


async def test_stricter_eager_threshold_drops_low_confidence_eagers(tmp_path: Path) -> None:
    plans_all: list[list[str]] = []
    paths = []
    for call_id in all_call_ids():
        p = tmp_path / f"{call_id}.jsonl"
        plans_all.extend(h.eager_holds for h in write_stream(call_id, p))
        paths.append(p)
    th = FluxThresholds(eot_threshold=0.8, eager_eot_threshold=0.5)
    started = used = cancelled = 0
    for p in paths:
        r = await replay_flux(p, th)
        started, used, cancelled = (
            started + r.stats.started,
            used + r.stats.used,
            cancelled + r.stats.cancelled,
        )
    # Only between-sentence holds (0.62) clear 0.5; mid-sentence (0.40) and
    # comma (0.45) holds no longer start drafts.
    kept = [[k for k in kinds if KIND_CONF[k] >= 0.5] for kinds in plans_all]
    assert (started, used, cancelled) == expected_counts(kept)
    assert cancelled < sum(len(k) for k in plans_all)


async def test_looser_eot_threshold_ends_at_confident_holds(tmp_path: Path) -> None:
    """eot_threshold 0.6 on the client: a between-sentences hold (0.62) ends
    the turn early (a false cutoff), the caller resumes, Flux ends it later."""
    path = tmp_path / "b.jsonl"
    plans = write_stream("booking-think-03", path)
    msgs, _ = load_flux_jsonl(path)
    clock = VirtualClock()
    mapper = FluxTurnMapper(clock, FluxThresholds(eot_threshold=0.6, eager_eot_threshold=0.5))
    frames = []
    for m in msgs:
        await clock.advance_to(m.at)
        frames.extend(mapper.map(m.message))
    ends = [f for f in frames if isinstance(f, TurnEndFrame)]
    hold = next(p for p in plans if "between-sentences" in p.eager_holds)
    early = [e for e in ends if hold.start < e.at < hold.end]
    assert len(early) == 1 and early[0].reason.startswith("confidence 0.62")
    resumed = [f for f in frames if isinstance(f, TurnResumedFrame) and f.at > early[0].at]
    assert resumed and resumed[0].at < hold.end + 0.5
    assert len(ends) == len(plans) + 1


async def test_tool_gate_behind_flux(tmp_path: Path) -> None:
    """The Responder behind Flux, on an engine that asks for a read and a
    write every turn: reads run inside drafts; writes wait for the confirmed
    turn and run once per turn; discarded drafts' writes never run."""
    path = tmp_path / "s.jsonl"
    plans = write_stream("support-and-um-04", path)
    clock = VirtualClock()
    booked: list[str] = []

    @tool(effect="read", timeout_s=1)
    async def lookup(q: str) -> str:
        await clock.sleep(0.05)
        return "found " + q

    @tool(effect="write", timeout_s=1)
    async def file_ticket(text: str) -> str:
        await clock.sleep(0.05)
        booked.append(text)
        return "ticket"

    gate = ToolGate([lookup, file_ticket], clock, session_id="flux-test")
    # A fast engine (first token 100 ms after the request): a draft started
    # at Flux's EagerEndOfTurn (250 ms before EndOfTurn) makes its tool calls
    # while it is still a draft.
    engine = StandInEngine(
        clock,
        0.1,
        tools_for=lambda words: [("lookup", {"q": words}), ("file_ticket", {"text": words})],
    )
    result = await replay_flux(path, engine=engine, gate=gate, clock=clock)
    for t in gate.ledger:
        assert t.status == "ok"
    started, used, cancelled = expected_counts([p.eager_holds for p in plans])
    assert result.stats.started == started and result.stats.used == used
    assert gate.executed_writes == len(plans)
    assert sorted(booked) == sorted(t.text for t in result.turns)
    assert gate.draft_reads >= used  # every used draft looked up inside the draft
    assert gate.deferred_writes >= used  # ... and held its write back
    assert 1 <= gate.discarded_writes <= cancelled
    # none of the writes the discarded drafts asked for ran
    assert not gate.discarded_write_keys & {rec.key for rec in gate.ledger}
    assert len(result.replies) == len(plans)


async def _caller_under_the_agent(tmp_path: Path) -> tuple[Any, VirtualClock]:
    """A DraftingHost fed a whole Flux stream while the agent's audio plays
    (it started before the caller's first word and has not stopped)."""
    from turnkit.frames import AgentAudioStartedFrame
    from turnkit_deepgram import DraftingHost

    msgs, _plans = load_flux_jsonl(_stream(tmp_path))
    clock = VirtualClock()
    mapper = FluxTurnMapper(clock)
    host = DraftingHost(clock, StandInEngine(clock))
    await host.handle(AgentAudioStartedFrame(at=0.0, reply_id=99))
    for m in msgs:
        await clock.advance_to(max(clock.now(), m.at))
        for frame in mapper.map(m.message):
            await host.handle(frame)
    return host, clock


async def test_agent_talking_rule_behind_flux(tmp_path: Path) -> None:
    """While the agent's audio plays, Flux's EndOfTurn for speech it talked
    through is not a turn (the rule the old host dropped)."""
    from turnkit.frames import AgentAudioStoppedFrame

    host, clock = await _caller_under_the_agent(tmp_path)
    assert host.turns == [] and host.responder.stats.ignored_ends >= 1
    # The agent talks on for 3 s after the caller's last end: that end was
    # not over its closing words, so nothing is owed when it stops.
    await clock.advance_to(clock.now() + 3.0)
    await host.handle(AgentAudioStoppedFrame(at=clock.now(), reply_id=99))
    assert host.turns == []
    await host.handle(TurnEndFrame(at=clock.now()))
    assert len(host.turns) == 1
    await host.aclose()


async def test_an_end_over_the_agents_last_words_is_answered_when_it_stops(
    tmp_path: Path,
) -> None:
    """The caller's turn ended over the agent's closing words (the agent's
    audio stops right after Flux's last EndOfTurn, reason completed): the
    host answers it then (``Responder.owed_end(completed=True)``), or the
    caller, who spoke last, would get no reply."""
    from turnkit.frames import AgentAudioStoppedFrame

    host, clock = await _caller_under_the_agent(tmp_path)
    assert host.turns == []
    await host.handle(AgentAudioStoppedFrame(at=clock.now(), reply_id=99))
    assert len(host.turns) == 1
    await host.aclose()


def _stream(tmp_path: Path) -> Path:
    path = tmp_path / "talk.jsonl"
    write_stream("easy-short-08", path)
    return path


def test_bad_lines_are_one_clear_error_each(tmp_path: Path) -> None:
    msgs, _ = flux_stream("easy-short-08")
    lines = [json.dumps(m) for m in msgs]
    bad = dict(msgs[3])
    del bad["transcript"]
    neg = dict(msgs[4])
    neg["received_at"] = -1
    lines[1:1] = [
        "{not json",
        json.dumps({"type": "Results", "x": 1}),
        json.dumps(bad),
        json.dumps(neg),
        "[1, 2]",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    good, errors = load_flux_jsonl(path)
    assert len(errors) == 5
    assert errors[0].startswith(f"{path}:2: not JSON")
    assert errors[1].startswith(f"{path}:3: type: unknown message type 'Results'")
    assert errors[2] == f"{path}:4: transcript: Field required"
    assert errors[3].startswith(f"{path}:5: received_at: expected seconds >= 0")
    assert errors[4].startswith(f"{path}:6: expected a JSON object")
    assert all("\n" not in e and "Traceback" not in e for e in errors)
    assert len(good) == len(msgs)


async def test_bad_lines_do_not_stop_the_replay(tmp_path: Path) -> None:
    msgs, plans = flux_stream("easy-short-08")
    lines = [json.dumps(m) for m in msgs]
    lines.insert(5, '{"type": "TurnInfo", "event": "Update"}')
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines))
    r = await replay_flux(path)
    assert len(r.errors) == 1 and ":6: " in r.errors[0]
    assert len(r.turns) == len(plans)


def test_thresholds_validate_and_build_connect_params() -> None:
    th = FluxThresholds(eot_threshold=0.8, eager_eot_threshold=0.5, eot_timeout_ms=3000)
    assert th.connect_params() == {
        "eot_threshold": "0.8",
        "eager_eot_threshold": "0.5",
        "eot_timeout_ms": "3000",
    }
    with pytest.raises(ValidationError, match="above eot_threshold"):
        FluxThresholds(eot_threshold=0.6, eager_eot_threshold=0.7)
    with pytest.raises(ValidationError):
        FluxThresholds(eot_threshold=0.3)
    # The SDK's connect() takes exactly these keyword names.
    import inspect

    from deepgram.listen.v2.client import AsyncV2Client

    params = inspect.signature(AsyncV2Client.connect).parameters
    assert set(th.connect_params()) <= set(params)


def test_cli_prints_turns_and_reports_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    write_stream("easy-short-08", good)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "{oops\n")
    missing = tmp_path / "missing.jsonl"
    rc = main([str(good), str(bad), str(missing), "--eager-eot-threshold", "0.5"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "bad.jsonl:" in err and "not JSON" in err
    assert "missing.jsonl: cannot read" in err
    assert "Traceback" not in err
    assert "is friday open" in out.replace("\n", " ") or "friday" in out
    assert main([str(good)]) == 0
