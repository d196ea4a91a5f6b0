"""LiveKit commits the user turn when turnkit decides, not after its own VAD.

Real: ``AgentSession``, LiveKit's Silero VAD, turnkit's streaming detector
(``fused``), ``turn_handling`` and ``attach`` (its ``DecisionCommitter``);
fakes (named so in :mod:`lk_harness`): the oracle STT, the LLM, the TTS.
The call plays in real time, but what is asserted is an event order: the
caller audio is held at each turnkit decision until LiveKit commits
(:mod:`lk_commit`), so a commit that needs no more audio lands on the very
frame turnkit decided on, whatever the machine's speed, and LiveKit's own
path (a quarter second more of its VAD's silence) never commits while held.
"""

from __future__ import annotations

import sys
from pathlib import Path

from livekit.agents import AgentSession
from livekit.plugins import silero

sys.path.insert(0, str(Path(__file__).parent))
from lk_commit import FRAME_S, run_commits
from lk_harness import FakeLLM, FakeOracleSTT, FakeTTS, WavAudioInput, load_call

from turnkit_livekit import DecisionCommitter, attach, turn_detector, turn_handling
from turnkit_livekit.barge_in import HANDED_OVER, interruption_options

CALL = "easy-order-status-01"  # three caller turns, clean audio


async def test_livekit_commits_on_the_frame_turnkit_decides() -> None:
    run = await run_commits(CALL, "fused", hold=True)
    _, manifest = load_call(CALL)
    turns = [e for e in manifest["events"] if e["type"] == "caller_turn"]
    # LiveKit committed every turn while the caller audio stood still at
    # turnkit's decision (with its own waits it commits none of them then).
    assert not run.held_out, f"LiveKit did not commit while held at {run.held_out}"
    assert len(run.commits) == len(turns), run.commits
    # Each decision is executed: LiveKit told to commit now, or, where its
    # VAD had already ended the speech (a decision after more than its
    # quarter second of silence: "Yes." to a question naming an email
    # address gets the patient profile), its own end-of-turn task committing
    # on the predict() the decision resolved; never left to LiveKit's waits.
    assert set(run.how) <= {"commit_user_turn", "prediction"}, run.how
    assert "commit_user_turn" in run.how, run.how
    for c, words in run.commits:
        d = max((d for d in run.decisions if d.handed <= c + 1e-9), key=lambda d: d.handed)
        # no audio after the decision, except for the recogniser's final words
        # (the committer waits for them) and the frame that brought them
        finals = [f for f in run.finals if d.handed <= f <= c + 1e-9]
        need = max([d.handed, *finals])
        assert c - need <= FRAME_S + 1e-9, (c, d, finals)
        assert words, "LiveKit committed an empty turn"
    # the replies the early commits started were not cut by LiveKit's VAD,
    # whose speech segment outlives the commit (interruption min_words 1)
    assert run.replies_interrupted == 0


async def test_a_turn_is_committed_whole_when_its_words_come_late() -> None:
    """An STT without interim results (a StreamAdapter-wrapped one) whose
    final comes after turnkit decided: the committer waits for it, so
    LiveKit commits each caller turn once, with all of its words (committed
    at the decision, the last words would open a turn of their own)."""
    run = await run_commits(CALL, "fused", hold=True, interims=False, final_after_s=0.35)
    _, manifest = load_call(CALL)
    turns = [e for e in manifest["events"] if e["type"] == "caller_turn"]
    assert not run.held_out, f"LiveKit did not commit while held at {run.held_out}"
    said = [" ".join(w["text"] for w in t["words"]) for t in turns]
    assert [words for _, words in run.commits] == said
    assert any(run.waited_final), run.how


async def test_words_slower_than_the_stts_p99_are_committed_with_their_turn() -> None:
    """A segmented STT (finals only) slower than it said: 1.6 s after each
    run of speech against a 0.8 s p99. turnkit's ends at the wait's end
    come without the last run's words (the first turn's "I'd like to check
    on my order" after "Hi", the second's "Yes"), and LiveKit commits no
    empty turn. A final after a commit, the caller silent, LiveKit commits
    as a turn of its own ("transcript arrives after turn has been
    committed"); the detector stream leaves those words to it (they must
    not prefix the caller's next turn), so no host rule is needed: every
    word is committed, none held for the next turn. (turnkit's own
    ``late_words`` end is for hosts that do not: Pipecat, the replay.)"""
    run = await run_commits(
        CALL,
        "fused",
        interims=False,
        final_after_s=1.6,
        detector_options={"recogniser": "segmented", "final_p99_s": 0.8},
    )
    _, manifest = load_call(CALL)
    turns = [e for e in manifest["events"] if e["type"] == "caller_turn"]
    said = [" ".join(w["text"] for w in t["words"]) for t in turns]
    assert len(run.decisions) < len(run.commits), (run.decisions, run.commits)
    assert " ".join(words for _, words in run.commits) == " ".join(said), run.commits
    assert all(words.strip() for _, words in run.commits), run.commits


async def test_an_early_commit_only_where_livekit_can_take_it() -> None:
    audio, manifest = load_call(CALL)
    det = turn_detector("fused")

    def session(**turn: object) -> AgentSession:
        src = WavAudioInput(audio)
        return AgentSession(
            vad=silero.VAD.load(min_silence_duration=0.3),
            stt=FakeOracleSTT(manifest, src),
            llm=FakeLLM(),
            tts=FakeTTS(),
            turn_handling=turn,  # type: ignore[arg-type]
        )

    assert DecisionCommitter(session(**turn_handling(det)), det).unsafe() is None
    barge_in = session(**turn_handling(det, interruption=interruption_options()))
    assert barge_in.options.interruption["min_words"] == HANDED_OVER
    assert DecisionCommitter(barge_in, det).unsafe() is None
    # LiveKit's default (min_words 0): its VAD, still inside the caller's
    # segment, would interrupt the reply the commit starts: LiveKit keeps its waits
    why = DecisionCommitter(session(turn_detection=det), det).unsafe()
    assert why is not None and "min_words" in why
    no_stt = AgentSession(vad=silero.VAD.load(), turn_handling=turn_handling(det))
    assert "STT" in (DecisionCommitter(no_stt, det).unsafe() or "")


def test_turn_handling_leaves_the_wait_to_turnkit() -> None:
    det = turn_detector("fused")
    th = turn_handling(det, preemptive_generation={"enabled": False})
    assert th["turn_detection"] is det
    assert th["endpointing"]["min_delay"] == 0.0
    assert th["interruption"]["min_words"] == 1
    assert th["preemptive_generation"] == {"enabled": False}
    assert turn_handling(det, endpointing={"min_delay": 0.1})["endpointing"]["min_delay"] == 0.1
    # LiveKit owns the waits with the text protocol: its delays are kept
    text = turn_detector("semantic-text", livekit_waits=True)
    assert set(turn_handling(text)) == {"turn_detection"}


async def test_keep_livekit_waits_has_no_committer() -> None:
    audio, manifest = load_call(CALL)
    det = turn_detector("fused")
    s = AgentSession(
        vad=silero.VAD.load(min_silence_duration=0.3),
        stt=FakeOracleSTT(manifest, WavAudioInput(audio)),
        turn_handling=turn_handling(det),
    )
    assert attach(s, det, keep_livekit_waits=True).committer is None
    assert attach(s, det).committer is not None
