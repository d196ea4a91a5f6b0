"""turnkit-pipecat with real pipecat-ai 1.x objects, offline: Pipecat's own
run_test and pipelines fed InputAudioRawFrames from the corpus WAVs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test
from turnkit.detectors.endpointing import Endpointing
from turnkit.replay.oracle import oracle_words, vad_runs
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call, segmented_p99_ms

from turnkit_pipecat import (
    ReplyTextTap,
    TurnkitRecorder,
    TurnkitTurnEngine,
    TurnkitUserTurnStartStrategy,
    TurnkitUserTurnStopStrategy,
    TurnMetricsObserver,
)
from turnkit_pipecat.replay import (
    recording_frames,
    replay_in_pipecat,
    replay_user_aggregator,
    run_frames,
)

CORPUS = Path(__file__).resolve().parents[3] / "recordings"


def _aggregator(engine: TurnkitTurnEngine, context: LLMContext) -> LLMUserAggregator:
    return replay_user_aggregator(
        context,
        TurnkitUserTurnStartStrategy(engine),
        TurnkitUserTurnStopStrategy(engine, context=context),
    )


async def test_run_test_turns_from_corpus_audio_match_turnkit_replay() -> None:
    """Audio only (no STT): the silence detector ends each caller turn in
    Pipecat at the same audio instants as turnkit replay decides."""
    rec = load_recording(CORPUS / "easy-order-status-01")
    frames = [f for f in recording_frames(rec) if isinstance(f, InputAudioRawFrame)]
    engine = TurnkitTurnEngine("silence")
    down, _ = await run_test(_aggregator(engine, LLMContext()), frames_to_send=frames)
    kinds = [type(f) for f in down if not isinstance(f, InputAudioRawFrame)]
    assert kinds.count(UserStartedSpeakingFrame) == len(rec.caller_turns)
    assert kinds.count(UserStoppedSpeakingFrame) == len(rec.caller_turns)
    assert kinds.count(InterruptionFrame) == len(rec.caller_turns)
    score = await replay_call(rec, "silence", ReplayConfig())
    assert [round(d.at, 4) for d in engine.decisions] == [r["decision_at"] for r in score.replies]
    # Each decision closes one labelled turn, after its end.
    for d, t in zip(engine.decisions, rec.caller_turns, strict=True):
        assert t.end < d.at < t.end + 1.5


def test_segmented_frames_write_each_run_whole_once_the_vad_closed_it() -> None:
    """``recording_frames(segmented=True)``: one final transcript per run of
    speech a VAD hears (its words only, no word times, the utterance id), after the chunk in which the VAD closed the run plus the
    delay falls, as ``turnkit replay --stt segmented``'s oracle (the same
    schedule); no interim transcripts."""
    rec = load_recording(CORPUS / "order-natural-15")
    frames = recording_frames(rec, stt_delay_s=0.3, segmented=True, close_s=0.2)
    assert not any(isinstance(f, InterimTranscriptionFrame) for f in frames)
    written = []
    t = 0.0
    for f in frames:
        if isinstance(f, InputAudioRawFrame):
            t += len(f.audio) / 2 / f.sample_rate
        elif isinstance(f, TranscriptionFrame):
            assert set(f.result) == {"segment"}
            written.append((t, f.result["segment"], f.text))
    closes = [r.closed + 0.3 for r in vad_runs(rec)]
    for at, _, _ in written:
        assert any(due <= at < due + 0.032 + 1e-9 for due in closes), at
    said: dict[int, list[str]] = {}
    for w in sorted(oracle_words(rec), key=lambda w: (w.segment, w.start)):
        said.setdefault(w.segment, []).append(w.text)
    joined: dict[int, list[str]] = {}  # the engine joins a turn's finals
    for _, seg, text in written:
        joined.setdefault(seg, []).append(text)
    assert {seg: " ".join(x) for seg, x in joined.items()} == {
        seg: " ".join(ws) for seg, ws in said.items()
    }
    # The VAD hears "it's | uh | b as in boy seven" (pauses of 0.15 s, under
    # its stop time and a word's fading end) as one run: fewer finals than
    # the labels' spans.
    spans = sum(len(t.speech_spans()) for t in rec.caller_turns) + len(rec.backchannels)
    assert len(said) < len(written) < spans


async def test_the_pipecat_replay_host_is_told_the_segmented_stts_p99(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``replay_in_pipecat`` with a segmented recogniser sends the engine
    the STT's ``STTMetadataFrame`` (as Pipecat's Whisper service does) with
    the p99 ``turnkit replay`` tells its detector: both wait as long for a
    run's words. Without it the engine waited its 1 s default against the
    replay's 160 ms (words on time) and the hosts parted where a run got no
    words (a word the VAD split, under the reply: 47 of 53 turns alike on
    the held-out telephone barge-in set, 53 of 53 with it)."""
    told: list[tuple[str, float | None]] = []
    original = Endpointing.set_recogniser

    def spy(self: Endpointing, kind: Any, final_p99_ms: float | None = None) -> None:
        told.append((kind, final_p99_ms))
        original(self, kind, final_p99_ms)

    monkeypatch.setattr(Endpointing, "set_recogniser", spy)
    config = ReplayConfig(compute="fixed", stt="segmented", stt_delay_ms=300.0)
    await replay_in_pipecat(load_recording(CORPUS / "easy-short-08"), "fused", config)
    assert ("segmented", segmented_p99_ms(config)) in told
    assert segmented_p99_ms(config) == pytest.approx(96.0 + 300.0 + 64.0)


async def test_a_phone_line_resampled_by_the_transport_is_weighed_as_narrowband() -> None:
    """Twilio's serializer hands Pipecat 16 kHz frames of an 8 kHz line:
    with ``line_rate=8000`` fused keeps weighing the audio as telephone
    band (without it, the frames' 16 kHz is all it knows)."""
    rec = load_recording(CORPUS / "easy-order-status-01")
    frames = [f for f in recording_frames(rec) if isinstance(f, InputAudioRawFrame)][:50]
    told = TurnkitTurnEngine("fused", line_rate=8000)
    plain = TurnkitTurnEngine("fused")
    for engine in (told, plain):
        for f in frames:
            await engine.feed(f)
    assert frames[0].sample_rate == 16000
    assert told.timeline.source_rate == 8000 and told.detector.scorer.audio_factor < 1.0
    assert plain.timeline.source_rate == 16000 and plain.detector.scorer.audio_factor == 1.0


async def test_an_engine_told_its_stt_is_segmented_judges_each_pause_on_what_is_written() -> None:
    """Whisper behind a VAD writes a segment only once it has closed:
    ``recogniser="segmented"`` tells the detector so from the first turn, and
    a transcript of the segment before (landing while the caller speaks the
    next, stamped with its arrival as Pipecat's Whisper services are) is not
    what the next pause is judged on. Frames from a real call."""
    rec = load_recording(CORPUS / "easy-order-status-01")
    frames = [f for f in recording_frames(rec) if isinstance(f, InputAudioRawFrame)]
    # "Hi, | I'd like to check on my order.": the second run under way.
    start = rec.caller_turns[0].speech_spans()[1][0]
    for kind, judged in (("segmented", ""), ("streaming", "hi")):
        engine = TurnkitTurnEngine("fused", recogniser=kind)  # type: ignore[arg-type]
        heard = 0.0
        for f in frames:  # into the turn's speech
            await engine.feed(f)
            heard += len(f.audio) / 2 / f.sample_rate
            if heard > start + 0.5:
                break
        await engine.feed(TranscriptionFrame("hi", "caller", "t"))
        assert engine.detector.endpointing.judged_text() == judged, kind


async def test_metrics_observer_end_of_turn_delay_from_the_audio_clock() -> None:
    """With the engine, each turn's end-of-turn delay is the silence
    detector's wait after the VAD's speech end, as turnkit replay scores it."""
    rec = load_recording(CORPUS / "easy-order-status-01")
    frames = [f for f in recording_frames(rec) if isinstance(f, InputAudioRawFrame)]
    engine = TurnkitTurnEngine("silence")
    observer = TurnMetricsObserver(engine=engine)
    await run_test(_aggregator(engine, LLMContext()), frames_to_send=frames, observers=[observer])
    seen = observer.eot_delays_ms
    assert len(seen) == len(rec.caller_turns)
    want = [(d.at - e) * 1000 for d, e in zip(engine.decisions, engine.speech_ends, strict=True)]
    assert seen == pytest.approx(want, abs=1e-6)
    # silence's wait after the speech end (its stop_ms, whole 32 ms frames)
    stop_ms = engine.detector.params.stop_ms  # type: ignore[attr-defined]
    assert all(stop_ms - 1 <= ms <= stop_ms + 32 + 1 for ms in seen), (seen, stop_ms)


async def test_barge_in_policy_decides_interruptions_while_the_bot_speaks() -> None:
    rec = load_recording(CORPUS / "easy-order-status-01")
    audio = [f for f in recording_frames(rec) if isinstance(f, InputAudioRawFrame)]
    engine = TurnkitTurnEngine("silence")
    start = TurnkitUserTurnStartStrategy(engine)
    agg = replay_user_aggregator(LLMContext(), start, TurnkitUserTurnStopStrategy(engine))
    # The bot is talking from the start: the caller's first words barge in.
    await run_test(agg, frames_to_send=[BotStartedSpeakingFrame(), *audio])
    assert engine.bot_speaking
    assert start.interruptions >= 1


async def test_replay_in_pipecat_agrees_with_turnkit_replay() -> None:
    for name in ("easy-order-status-01", "phone-digits-02"):
        rec = load_recording(CORPUS / name)
        got = await replay_in_pipecat(rec, "silence", ReplayConfig())
        want = await replay_call(rec, "silence", ReplayConfig())
        assert [t.row() for t in got.turns] == [t.row() for t in want.turns]
        assert all(t.response_ms is not None for t in got.turns)


async def test_replay_in_pipecat_agrees_on_barge_in_calls_with_filters() -> None:
    """Calls with echo, backchannels and barge-ins, with turnkit replay's
    echo + acknowledgement filters and the fused detector (model cost left
    out: it is wall time, different in any two runs): the same turns."""
    config = ReplayConfig(count_compute=False, preemptive_tts=False)
    for name in ("account-bargein-07", "travel-hard-09"):
        rec = load_recording(CORPUS / name)
        got = await replay_in_pipecat(rec, "fused", config)
        want = await replay_call(rec, "fused", config)
        assert got.echo_reference == want.echo_reference == "agent.wav"
        assert [t.row() for t in got.turns] == [t.row() for t in want.turns]
        assert all(t.response_ms is not None for t in got.turns)


async def test_recorder_processor_round_trip(tmp_path: Path) -> None:
    """A call recorded by TurnkitRecorder inside a Pipecat pipeline loads,
    has the source's caller turns and text, and replays."""
    src = load_recording(CORPUS / "easy-order-status-01")
    engine = TurnkitTurnEngine("silence")
    context = LLMContext()
    recorder = TurnkitRecorder(tmp_path / "call", engine=engine, call_id="pipecat-rec")
    await run_frames([_aggregator(engine, context), recorder], engine, recording_frames(src))
    assert recorder.written is not None
    got = load_recording(recorder.written, check_audio=True)
    assert abs(got.duration - src.duration) < 0.04
    # No bot audio went out, so nothing split the caller's speech into turns
    # (a recorder only splits where the agent took the floor): one turn,
    # whose spans are the source's turns, with every word in order.
    (turn,) = got.caller_turns
    assert abs(turn.start - src.caller_turns[0].start) < 0.12
    assert abs(turn.end - src.caller_turns[-1].end) < 0.12
    spans = turn.speech_spans()
    for s in src.caller_turns:
        assert any(a < s.end and b > s.start for a, b in spans), (s.start, s.end)
    want = [w.text.lower().strip(",.?!") for s in src.caller_turns for w in s.words or []]
    assert [w.text for w in turn.words or []] == want
    assert turn.text.split() == want
    score = await replay_call(got, "silence", ReplayConfig())
    assert len(score.turns) == 1 and not score.turns[0].missed
    # The live decisions are in the recording; the replay takes each again,
    # on the same frame (the same policy on the same audio).
    live = score.live_agreement
    assert live is not None and live.live == len(engine.decisions) >= 3
    assert live.matched == live.live == live.replayed
    assert all(abs(d) <= 32.0 for d in live.deltas_ms), live.deltas_ms
    other = await replay_call(got, "silence:stop_ms=300", ReplayConfig())
    assert other.live_agreement is None  # another detector's replay: nothing to compare
    # Each user turn Pipecat's aggregator ended is a host commit, one per decision.
    events = json.loads((recorder.written / "call.json").read_text())["live"]["turn_events"]
    commits = [e["at"] for e in events if e["kind"] == "user_turn_end"]
    ends = [e["at"] for e in events if e["kind"] == "end"]
    assert len(commits) == len(ends) >= 3
    assert all(c >= e for c, e in zip(commits, ends, strict=True))


def test_the_recorder_keeps_each_reply_text_a_tap_hands_the_detector(tmp_path: Path) -> None:
    """With a ReplyTextTap each reply's text reaches the detector as the bot
    starts speaking it; the recorder keeps it for an agent turn whose
    sentence text the TTS never sent (a reply cut short). Without a tap the
    strategy hands the context's last reply at a user turn's start, which
    is no reply's start: not kept."""
    for tapped in (True, False):
        engine = TurnkitTurnEngine("silence")
        if tapped:
            ReplyTextTap(engine)
        recorder = TurnkitRecorder(tmp_path / f"call-{tapped}", engine=engine)
        engine.set_agent_text("Where will you be flying from?")
        assert [t for _, t in recorder.recorder._reply_texts] == (
            ["Where will you be flying from?"] if tapped else []
        )


async def test_the_bot_starting_to_speak_tells_the_detector_a_reply_began() -> None:
    """Pipecat puts the bot's reply into the context once it has played (or
    been cut); the engine tells the detector on ``BotStartedSpeakingFrame``
    that the agent spoke, so the caller's sound over the reply is a new turn
    (as in turnkit replay), not the last one going on."""
    engine = TurnkitTurnEngine("fused")
    ep = engine.detector.endpointing
    ep._agent_since_commit = False  # as after a committed turn
    await engine.feed(BotStartedSpeakingFrame())
    assert ep._agent_since_commit and engine.bot_speaking


class _FakeBotOutput(FrameProcessor):
    """Fake, named so: stands in for the transport output. On a marker
    ``_marker("<play>")`` it starts "speaking" (``BotStartedSpeakingFrame``
    upstream, as Pipecat's output transport sends it); on ``"<stop>"`` it
    stops. It notes the detector's agent text as each response ends."""

    def __init__(self, engine: TurnkitTurnEngine) -> None:
        super().__init__()
        self.engine = engine
        self.at_end: list[str] = []  # the detector's agent text as each response ended
        self.markers = 0
        self.interruptions = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSSpeakFrame) and frame.text in ("<play>", "<stop>"):
            up = BotStartedSpeakingFrame() if frame.text == "<play>" else BotStoppedSpeakingFrame()
            await self.push_frame(up, FrameDirection.UPSTREAM)
            self.markers += 1
            return
        if isinstance(frame, LLMFullResponseEndFrame):
            self.at_end.append(self.engine.detector.agent_text)
        elif isinstance(frame, InterruptionFrame):
            self.interruptions += 1
        await self.push_frame(frame, direction)


def _marker(what: str) -> TTSSpeakFrame:
    return TTSSpeakFrame(what, append_to_context=False)


def _response(text: str) -> list[Frame]:
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(w) for w in text.split("|")],
        LLMFullResponseEndFrame(),
    ]


async def test_reply_text_tap_hands_each_reply_once_the_bot_speaks_it() -> None:
    """Pipecat's context has a reply once it has played; the tap after the
    LLM hands its whole text to the detector when the bot starts speaking
    it (or at the response's end when it already speaks), never a reply
    cut before its audio; the stop strategy then leaves the context to it."""
    engine = TurnkitTurnEngine("fused")
    tap = ReplyTextTap(engine)
    out = _FakeBotOutput(engine)
    task = PipelineTask(Pipeline([tap, out]), cancel_on_idle_timeout=False)
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))

    async def step(frames: list[Frame], done: Any) -> None:
        await task.queue_frames(frames)
        async with asyncio.timeout(60):  # a hang guard: each step waits for its event
            while not done():
                await asyncio.sleep(0.01)

    try:
        first, second, third = "Can I have the order number?", "Let me check.", "It ships Friday."
        await step(_response("Can I have| the order| number?"), lambda: len(out.at_end) == 1)
        assert out.at_end == [""]  # authorised, not yet heard
        await step([_marker("<play>")], lambda: tap.handed)
        assert engine.detector.agent_text == first, (engine.detector.agent_text, tap.handed)
        await step([_marker("<stop>")], lambda: out.markers == 2)
        # the caller cut in before the next reply's audio
        await step(_response("Let me| check."), lambda: len(out.at_end) == 2)
        await step([InterruptionFrame()], lambda: out.interruptions == 1)
        await step([_marker("<play>")], lambda: out.markers == 3)
        await step(_response("It ships| Friday."), lambda: len(out.at_end) == 3)
    finally:
        if not runner.done():  # a failed step leaves the pipeline running
            await task.queue_frame(EndFrame())
            await asyncio.wait_for(runner, 60)
    assert tap.handed == [first, third], tap.handed  # the cut reply never was
    assert second not in [m["content"] for m in engine.detector.endpointing.history]
    assert engine.detector.agent_text == third
    assert engine.reply_text_tapped


async def test_with_a_reply_text_tap_the_context_does_not_hand_the_reply_before() -> None:
    """A caller turn started over a reply: Pipecat's context still ends on
    the reply before, which the stop strategy handed at each user turn
    start; with a ReplyTextTap the detector keeps the playing reply."""
    for tapped in (False, True):
        engine = TurnkitTurnEngine("fused")
        context = LLMContext([{"role": "assistant", "content": "How can I help?"}])
        stop = TurnkitUserTurnStopStrategy(engine, context=context)
        if tapped:
            ReplyTextTap(engine)
        engine.set_agent_text("Can I have the order number?")  # the reply playing
        await stop.handle_user_turn_started()
        expected = "Can I have the order number?" if tapped else "How can I help?"
        assert engine.detector.agent_text == expected
