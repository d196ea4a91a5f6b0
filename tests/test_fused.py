"""The fused detector: its wait curve, patience profiles, and decisions
driven by the real semantic-text model (and, where installed, the real
Smart Turn model) on a virtual clock and through the replay."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from conftest import DetectorDriver

from turnkit.clock import VirtualClock
from turnkit.detectors import create_detector
from turnkit.detectors.fused import PROFILES, FusedDetector, FusedParams, choose_profile, wait_ms
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.frames import (
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    Word,
)
from turnkit.replay.metrics import aggregate
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call
from turnkit.text.features import agent_context
from turnkit.text.question import FIELDS

CORPUS = Path(__file__).resolve().parent.parent / "recordings"
FRAME_S = 512 / 16000


@pytest.mark.parametrize("name", list(PROFILES))
def test_wait_shrinks_as_the_turn_looks_finished(name: str) -> None:
    prof = PROFILES[name]
    waits = [wait_ms(p, prof) for p in np.linspace(0.01, 0.99, 50)]
    assert all(a >= b for a, b in itertools.pairwise(waits))
    assert waits[0] == prof.max_wait_ms
    assert waits[-1] == prof.min_wait_ms
    # continuous, not LiveKit's two values
    assert len({round(w) for w in waits}) > 10


def test_patient_waits_longer_than_default_longer_than_snappy() -> None:
    for p in (0.3, 0.6, 0.85):
        assert (
            wait_ms(p, PROFILES["patient"])
            > wait_ms(p, PROFILES["default"])
            > wait_ms(p, PROFILES["snappy"])
        )


@pytest.mark.parametrize(
    ("agent", "profile"),
    [
        ("Thanks. What is the card number?", "patient"),
        ("Could you spell your last name for me?", "patient"),
        ("Can I get the address for the delivery?", "patient"),
        ("Your table is for seven. Is that right?", "snappy"),
        ("Do you want the window seat?", "snappy"),
        ("How can I help you today?", "default"),
        ("And what's the number of guests?", "default"),  # a count, not digits
        ("And what's the number on the card?", "patient"),
        ("What's your PIN?", "patient"),
        ("And the security code on the back?", "patient"),
        ("Sure. What's your date of birth?", "patient"),
        ("What day works for you?", "default"),
        ("Do you live on campus?", "snappy"),  # not an address being read out
        # When / why / who / how ask for a time, a reason, a person, a way:
        # the card or account they name is not being read out.
        ("When did you last use the card?", "default"),
        ("I see a charge on your card. When did you notice it?", "default"),
        ("Why was the account closed?", "default"),
        ("How would you like to pay for the order?", "default"),
        ("Which card did you use?", "patient"),  # "the one ending in four two"
        ("", "default"),
    ],
)
def test_profile_is_chosen_by_what_the_agent_asked(agent: str, profile: str) -> None:
    assert choose_profile(agent) == profile


@pytest.mark.parametrize(
    "agent",
    [
        "What's your PIN?",
        "Can I have the account number?",
        "What's the booking code?",
        "And your zip code?",
        "What's your date of birth?",
        "Where do you live?",
        "What is the number of guests?",
        "Which day works for you?",
        "Could you spell that for me?",
        "What's a good callback number?",
        "When did you last use the card?",
        "Who is the account holder?",
    ],
)
def test_profile_and_text_model_read_the_same_field(agent: str) -> None:
    """One table of fields (question.FIELDS): the field the text models see
    as context is the one that makes the profile patient, and no other."""
    chunked = {name for name, _, c in FIELDS if c}
    named = {f[4:] for f in agent_context(agent) if f.startswith("A:t=")}
    assert (choose_profile(agent) == "patient") == bool(named & chunked)


EMAIL_CHECK = "Sure. Is the order under the email address ending in gmail dot com?"


@pytest.mark.parametrize(
    ("agent", "said", "profile"),
    [
        # A yes/no question that names a field: patient until the words are
        # a bare "yes", which is the whole answer.
        (EMAIL_CHECK, "", "patient"),
        (EMAIL_CHECK, "Yes.", "snappy"),
        (EMAIL_CHECK, "uh yeah it is thank you", "snappy"),
        (EMAIL_CHECK, "No,", "patient"),  # the right address comes next
        (EMAIL_CHECK, "yes it's", "patient"),
        ("Okay, Wednesday afternoon. Same address as before?", "yes that's right", "snappy"),
        ("Okay, Wednesday afternoon. Same address as before?", "No, send it to", "patient"),
        # A request in a yes/no form: "yes" is followed by the data.
        ("Sure. Can I have the order number, please?", "Yes.", "patient"),
        # A statement of the data: a caller who answers corrects it, or not.
        ("I found an account ending in eight eight four.", "Yes.", "patient"),
        # An offer of more: "yes" announces the request, "no" is the answer.
        ("Is there anything else I can help you with?", "Yes.", "patient"),
        ("Is there anything else I can help you with?", "", "snappy"),
        ("Is there anything else I can help you with?", "No.", "snappy"),
        ("Anything else?", "uh yeah", "patient"),
        ("Anything else?", "no thanks", "default"),
        ("Is there anything else I can help you with?", "yes i also need a taxi", "snappy"),
    ],
)
def test_a_bare_yes_to_a_check_of_the_data_is_answered_at_once(
    agent: str, said: str, profile: str
) -> None:
    assert choose_profile(agent, said) == profile
    det = FusedDetector(VirtualClock(), FusedParams(audio="off"))
    assert det.wait_policy(agent, said).min_wait_ms == PROFILES[profile].min_wait_ms


class Drive(DetectorDriver):
    """The shared driver, with a turn said then left in silence."""

    async def frames(self, prob: float, seconds: float) -> list:  # type: ignore[override]
        return [s for _, s in await super().frames(prob, seconds)]

    async def end_after(
        self, text: str, speech_s: float = 1.0, silence_s: float = 4.0
    ) -> float | None:
        start_silence = self.t + speech_s
        await self.frames(0.95, speech_s - 0.3)
        await self.say(text)
        await self.frames(0.95, 0.3)
        out = await self.frames(0.02, silence_s)
        ends = [f for f in out if isinstance(f, TurnEndFrame)]
        return None if not ends else ends[0].at - start_silence


async def test_finished_text_is_answered_sooner_than_unfinished() -> None:
    fast = await Drive("fused:audio=off").end_after("i'd like to book a table for two please")
    slow = await Drive("fused:audio=off").end_after("i'd like to book a table for")
    assert fast is not None and slow is not None
    assert fast < 0.6 and slow > fast + 0.5


async def test_digits_after_a_card_number_question_get_patience() -> None:
    d = Drive("fused:audio=off")
    d.det.set_agent_text("Sure. What is the card number?")
    waited = await d.end_after("four one five five")
    d2 = Drive("fused:audio=off,profile=default")
    d2.det.set_agent_text("Sure. What is the card number?")
    waited_default = await d2.end_after("four one five five")
    assert waited is not None and waited_default is not None
    assert waited > waited_default


async def test_a_yes_to_anything_else_waits_for_the_request() -> None:
    """"Is there anything else I can help you with?" — "Yes, | I also need
    a taxi": the text model reads the bare "yes" finished (0.96) and the
    yes/no question chose ``snappy``, so a 0.2 s hold after it was answered
    at 128 ms. A bare affirmation to an offer of more announces the
    request: it waits as ``patient``; "No." is still answered at once."""
    offer = "You're all set. Is there anything else I can help you with?"
    yes = Drive("fused:audio=off")
    yes.det.set_agent_text(offer)
    await yes.frames(0.95, 0.3)
    await yes.say("yes")
    held = await yes.frames(0.02, 0.22)  # the hold before the request
    assert not [f for f in held if isinstance(f, TurnEndFrame)], held
    await yes.frames(0.95, 0.8)
    await yes.say("yes i also need a taxi")
    await yes.frames(0.95, 0.3)
    out = await yes.frames(0.02, 1.0)
    assert [f for f in out if isinstance(f, TurnEndFrame)]
    no = Drive("fused:audio=off")
    no.det.set_agent_text(offer)
    waited = await no.end_after("no", speech_s=0.4)
    assert waited is not None and waited < 0.2


async def test_eager_signal_before_the_commit() -> None:
    d = Drive("fused:audio=off,eager=0.5")
    await d.frames(0.95, 0.7)
    await d.say("yes that's right thank you")
    await d.frames(0.95, 0.3)
    out = await d.frames(0.02, 3.0)
    kinds = [type(f) for f in out]
    assert TurnEagerFrame in kinds and TurnEndFrame in kinds
    assert kinds.index(TurnEagerFrame) < kinds.index(TurnEndFrame)
    (end,) = [f for f in out if isinstance(f, TurnEndFrame)]
    assert "p_text" in end.reason and end.probability is not None


async def test_speech_during_the_wait_cancels_the_pause() -> None:
    d = Drive("fused:audio=off")
    await d.frames(0.95, 1.0)
    await d.say("my number is four one five")
    out = await d.frames(0.02, 0.5)  # shorter than its wait
    assert not any(isinstance(f, TurnEndFrame) for f in out)
    await d.frames(0.95, 0.8)
    await d.say("my number is four one five five five five one two one two")
    out = await d.frames(0.02, 4.0)
    assert sum(isinstance(f, TurnEndFrame) for f in out) == 1


def test_fused_params_are_checked() -> None:
    from turnkit.detectors import DetectorSpecError

    with pytest.raises(DetectorSpecError, match="profile"):
        create_detector("fused:profile=lazy", VirtualClock())


async def test_fused_replay_on_a_corpus_call_text_only() -> None:
    rec = load_recording(CORPUS / "phone-digits-02")
    spec = "fused:audio=off"
    res = aggregate(spec, [await replay_call(rec, spec, ReplayConfig())])
    assert res["turns"] == len(rec.caller_turns)
    assert res["missed_rate"] == 0.0
    assert res["decisions"] >= res["turns"]


async def test_fused_with_smart_turn_hears_the_audio() -> None:
    # Only a missing [smart-turn] extra skips; a model that fails to load fails.
    pytest.importorskip("pipecat")
    rec = load_recording(CORPUS / "easy-short-08")
    score = await replay_call(rec, "fused", ReplayConfig())
    reasons = [r["reason"] for r in score.replies]
    assert reasons and all("p_audio" in r and "p_text" in r for r in reasons)
    det = create_detector("fused", VirtualClock())
    assert isinstance(det, FusedDetector) and det.scorer.audio is not None


async def test_early_eager_goes_out_at_the_first_quiet_frame() -> None:
    d = Drive("fused:audio=off")
    await d.frames(0.95, 0.7)
    await d.say("i'd like to book a table for two please")
    await d.frames(0.95, 0.3)
    speech_end = d.t
    out = await d.frames(0.02, 3.0)
    eager = [f for f in out if isinstance(f, TurnEagerFrame)]
    assert len(eager) == 1  # not again when the VAD confirms the pause
    # On the first quiet frame, before the VAD's stop hysteresis (96 ms).
    assert eager[0].at <= speech_end + FRAME_S + 1e-6
    assert sum(isinstance(f, TurnEndFrame) for f in out) == 1


async def test_early_eager_off_waits_for_the_confirmed_pause() -> None:
    d = Drive("fused:audio=off,early_eager=off")
    await d.frames(0.95, 0.7)
    await d.say("i'd like to book a table for two please")
    await d.frames(0.95, 0.3)
    speech_end = d.t
    out = await d.frames(0.02, 3.0)
    (eager,) = [f for f in out if isinstance(f, TurnEagerFrame)]
    assert eager.at >= speech_end + 0.09


async def test_early_eager_is_voided_when_the_caller_goes_on() -> None:
    d = Drive("fused:audio=off")
    await d.frames(0.95, 0.7)
    await d.say("i'd like to book a table for two please")
    await d.frames(0.95, 0.3)
    out = await d.frames(0.02, FRAME_S)  # one quiet frame: the VAD still says speaking
    assert any(isinstance(f, TurnEagerFrame) for f in out)
    back = await d.frames(0.95, 0.3)
    assert sum(isinstance(f, TurnResumedFrame) for f in back) == 1
    assert not any(isinstance(f, TurnEagerFrame | TurnEndFrame) for f in back)


@pytest.mark.parametrize(("start_after_end", "eagers"), [(-0.25, 2), (0.1, 1)])
async def test_a_last_word_written_in_the_pause_sends_a_new_eager(
    start_after_end: float, eagers: int
) -> None:
    """A drafting host (its drafter holds the commit for a 350 ms first
    token): the early eager goes out on "i'd like to book a table for two"
    at the first quiet frame and its draft starts; the recogniser writes
    the speech's last word, "please", 0.2 s into the pause, which voids
    that draft. The pause sends its eager signal again and the turn's end
    uses the new draft (before: one signal per pause, so none went out, the
    commit found no draft and waited for a fresh request: +500 ms on the
    held-out turn-taking set's turn ending on a spelled "O K A F O | R").
    A word begun after the pause started is the caller going on, not a late
    word: no new signal (it would spend one of the turn's three drafts on
    words the VAD is about to hear go on)."""
    d = Drive("fused:audio=off")
    drafter = EagerDrafter(d.clock, DraftParams(first_token_ms=350))
    d.det.attach_drafter(drafter)
    text = ""

    async def tell(said: list[tuple[str, float, float]]) -> None:
        nonlocal text
        text = " ".join(w for w, _, _ in said)
        drafter.on_transcript(text)
        frame = TranscriptFrame(
            at=d.clock.now(),
            text=text,
            is_final=True,
            spoken_until=said[-1][2],
            words=[Word(text=w, start=s, end=e) for w, s, e in said],
        )
        out = await d.det.on_transcript(frame)
        for f in out:
            if isinstance(f, TurnEagerFrame):
                drafter.on_eager(text)

    async def quiet(seconds: float) -> list:
        out = []
        for _ in range(round(seconds / FRAME_S)):
            step = await d.frames(0.02, FRAME_S)
            for f in step:
                if isinstance(f, TurnEagerFrame):
                    drafter.on_eager(text)
                elif isinstance(f, TurnEndFrame):
                    out.append(drafter.on_end(text)[0])
            out += step
        return out

    await d.frames(0.95, 1.0)
    words = [("i'd", 0.05, 0.2), ("like", 0.2, 0.4), ("to", 0.4, 0.5), ("book", 0.5, 0.7)]
    words += [("a", 0.7, 0.75), ("table", 0.75, 0.9), ("for", 0.9, 0.95), ("two", 0.95, 1.0)]
    await tell(words)
    await d.frames(0.95, 0.3)
    speech_end = d.t
    out = await quiet(0.2)
    assert drafter.stats.started == 1, "the early eager's draft"
    start = speech_end + start_after_end
    await tell([*words, ("please", start, start + 0.2)])
    assert drafter.stats.cancel_reasons == {"words changed": 1}
    out += await quiet(3.0)
    assert sum(isinstance(f, TurnEagerFrame) for f in out) == eagers
    assert sum(isinstance(f, TurnEndFrame) for f in out) == 1
    assert ("use" in out) == (eagers == 2)


async def test_unfinished_text_sends_no_early_eager() -> None:
    d = Drive("fused:audio=off")
    await d.frames(0.95, 0.7)
    await d.say("i'd like to book a table for")
    await d.frames(0.95, 0.3)
    out = await d.frames(0.02, 0.2)
    assert not any(isinstance(f, TurnEagerFrame) for f in out)


@pytest.mark.parametrize("call", ["easy-order-status-01", "phone-digits-02"])
async def test_fused_does_not_answer_a_greeting_before_the_request(call: str) -> None:
    """The caller opens with "Hi," and a quarter-second pause before saying
    why they called: a greeting is not the turn, so ``fused`` (text, and
    Smart Turn where installed) waits through that pause — the agent answered
    "Hi" over the request before the semantic-text model learnt greetings."""
    rec = load_recording(CORPUS / call)
    first = rec.caller_turns[0]
    assert first.text.lower().startswith("hi,") and first.holds
    score = await replay_call(rec, "fused", ReplayConfig(compute="fixed"))
    assert score.turns[0].cutoffs == 0 and not score.turns[0].missed
