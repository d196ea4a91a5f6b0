"""Eager drafting and tool gating with real pipecat-ai objects: the stop
strategy's speculation path on corpus audio (Pipecat's LLMUserAggregator),
Pipecat's OpenAILLMService against the real llama-server (tests/engine.py),
and function calls through turnkit's ToolGate."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from bot_frames import with_bot
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    EagerEndOfTurnCancelFrame,
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from turnkit.clock import VirtualClock
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.drafting.tools import tool
from turnkit.replay.recording import load_recording
from turnkit.text.normalize import normalize_text

from turnkit_pipecat import (
    FirstTokenObserver,
    TurnkitTurnEngine,
    TurnkitUserTurnStartStrategy,
    TurnMetrics,
    TurnMetricsObserver,
)
from turnkit_pipecat.replay import recording_frames, replay_user_aggregator, run_frames
from turnkit_pipecat.strategies import TurnkitUserTurnStopStrategy
from turnkit_pipecat.tools import GatedFunctions
from turnkit_pipecat.tts import EspeakTTSService

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[2] / "recordings"
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from conftest import load_script  # noqa: E402  (the committed scripts, as the core tests load them)

rv = load_script("realcall_variants")


class Tap(FrameProcessor):
    """Keeps every frame that passes, either way."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[tuple[Frame, FrameDirection]] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.frames.append((frame, direction))
        await self.push_frame(frame, direction)

    def of(self, kind: type) -> list[Any]:
        return [f for f, _ in self.frames if isinstance(f, kind)]


def _user(engine: TurnkitTurnEngine, stop: TurnkitUserTurnStopStrategy, ctx: LLMContext):
    return replay_user_aggregator(ctx, TurnkitUserTurnStartStrategy(engine), stop)


async def _run_answered(
    processors: list[FrameProcessor],
    engine: TurnkitTurnEngine,
    frames: list[Frame],
    tap: Tap,
    observers: list[BaseObserver] | None = None,
) -> None:
    """Like :func:`_run`, but the caller waits for the agent as a person on
    a phone would: after each confirmed end (a ``UserStoppedSpeakingFrame``
    at the tap) no more of the call is fed until the engine's reply to it
    has ended. Fed as fast as possible, the caller's next words arrived
    before a real engine's first token whenever the engine was slower than
    the feed, and interrupted it: the figures depended on machine speed."""
    engine.keep_audio_steps = True
    task = PipelineTask(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=16000, enable_metrics=bool(observers)),
        observers=observers or [],
        cancel_on_idle_timeout=False,
    )

    def kinds() -> list[str]:
        return [type(f).__name__ for f, _ in tap.frames]

    async def answered() -> None:
        deadline = asyncio.get_running_loop().time() + 120
        while asyncio.get_running_loop().time() < deadline:
            k = kinds()
            if "UserStoppedSpeakingFrame" not in k:
                return
            last_stop = len(k) - 1 - k[::-1].index("UserStoppedSpeakingFrame")
            if "LLMFullResponseEndFrame" in k[last_stop:]:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no reply from the engine within 120 s of a confirmed end")

    async def feed() -> None:
        stops = 0
        for f in frames:
            await task.queue_frame(f)
            if isinstance(f, TranscriptionFrame | InterimTranscriptionFrame):
                await engine.wait_fed(f)
            elif isinstance(f, InputAudioRawFrame):
                await engine.audio_of(f)
                await asyncio.sleep(0)  # the strategies' frames reach the tap
            if kinds().count("UserStoppedSpeakingFrame") > stops:
                stops = kinds().count("UserStoppedSpeakingFrame")
                await answered()
        await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    await asyncio.gather(runner.run(), feed())


class AskedTap(FrameProcessor):
    """The caller words each inference asks about, as it passes (the
    context's last user message then; a speculation's is its own copy)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, bool]] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            users = [m for m in frame.context.messages if m.get("role") == "user"]
            self.asked.append((str(users[-1]["content"]) if users else "", frame.speculation))
        await self.push_frame(frame, direction)


async def test_a_turn_begun_under_the_bots_reply_is_answered_with_a_drafter() -> None:
    """`turnkit dial` of the example agent (a drafter held for the LLM's
    first token, Whisper behind a VAD): "Is Friday open?" began under the
    last second of a long reply, which played on to its end before the
    caller's did, and no user turn was on when the detector's eager signal
    came. The speculation it started was never run (Pipecat runs no
    inference outside a user turn), the end confirmed it, and the caller
    waited 14 s, until they spoke again. Now no speculation starts without
    a user turn, and the start strategy starts that turn at the eager signal
    (the bot silent by then), so the speculation runs inside it and the end
    keeps it: the turn keeps the draft's head start."""
    rec = load_recording(CORPUS / "easy-short-08")
    turn = rec.caller_turns[3]
    spans = [(a.start, a.end) for a in rec.agent_turns]
    k = max(i for i, (start, _) in enumerate(spans) if start < turn.start)
    spans[k] = (spans[k][0], turn.end - 0.25)  # the reply runs on over most of the turn
    engine = TurnkitTurnEngine("fused", recogniser="segmented")
    drafter = EagerDrafter(engine.clock, DraftParams(first_token_ms=150))
    ctx = LLMContext()
    stop = TurnkitUserTurnStopStrategy(engine, drafter=drafter, context=ctx)
    tap = AskedTap()
    frames = recording_frames(
        rec, until_s=rec.duration + 3.0, segmented=True, stt_delay_s=0.6, close_s=0.1
    )
    start = TurnkitUserTurnStartStrategy(engine)
    user = replay_user_aggregator(ctx, start, stop)
    await run_frames([user, tap], engine, with_bot(frames, spans))
    asked = [text for text, _ in tap.asked]
    assert asked == [normalize_text(t.text) for t in rec.caller_turns], tap.asked
    assert stop.speculations >= 1 and stop.kept == stop.speculations  # the others still drafted
    # The turn begun under the reply was asked as a speculation, begun at
    # the eager signal, and its end kept it (no second inference).
    assert (normalize_text(turn.text), True) in tap.asked, tap.asked
    assert start.eager_started == 1


@pytest.mark.parametrize("name", ["easy-order-status-01", "support-and-um-04"])
async def test_eager_speculation_kept_when_words_unchanged_else_withdrawn(name: str) -> None:
    """fused's eager signals start speculative inferences in Pipecat; the
    confirmed end releases one whose words did not change, and every other
    one is withdrawn with Pipecat's EagerEndOfTurnCancelFrame."""
    rec = load_recording(CORPUS / name)
    engine = TurnkitTurnEngine("fused")
    drafter = EagerDrafter(engine.clock)
    ctx = LLMContext()
    stop = TurnkitUserTurnStopStrategy(engine, drafter=drafter, context=ctx)
    tap = Tap()
    await run_frames([_user(engine, stop, ctx), tap], engine, recording_frames(rec))

    spec = [f for f in tap.of(LLMContextFrame) if f.speculation]
    assert stop.speculations == len(spec) == drafter.stats.started >= 1
    # A caller who stops after the eager signal (each call here has such
    # turns) gets the held response: at least one is kept.
    assert stop.kept >= 1, (stop.kept, stop.withdrawn)
    assert stop.kept == drafter.stats.used
    assert stop.kept + stop.withdrawn == stop.speculations
    assert len(tap.of(EagerEndOfTurnCancelFrame)) >= stop.withdrawn
    # A confirmed speculation's answer is the response: no second inference
    # (a turn still open at the end is flushed after the EndFrame: not counted).
    end = next(i for i, (f, _) in enumerate(tap.frames) if isinstance(f, EndFrame))
    fresh = [f for f, _ in tap.frames[:end] if isinstance(f, LLMContextFrame) and not f.speculation]
    assert len(fresh) == len(tap.of(UserStoppedSpeakingFrame)) - stop.kept
    # Each speculation asked about the caller's words at that moment, and the
    # kept ones are exactly the words the turn was written to the context with.
    user_msgs = [m["content"] for m in ctx.get_messages() if m.get("role") == "user"]
    for f in spec:
        assert f.context.get_messages()[-1]["content"].strip()
    if stop.kept:
        kept_texts = {f.context.get_messages()[-1]["content"] for f in spec}
        assert any(m in kept_texts for m in user_msgs)


async def test_withdrawn_when_the_caller_goes_on(tmp_path: Path) -> None:
    """A caller who says a whole sentence, pauses 0.25 s and goes on
    (refund-mixed-10's first turn, its 0.88 s pause between "I was charged
    twice for my last order." and "Can you refund one of them?" cut to 0.25
    s: the real-call median is 0.20 s). The finished sentence sends the
    eager signal on its first quiet frame; the caller's next words void the
    draft, and its speculation is withdrawn, never released; the others are
    kept. Built, not found: a demo call's own hold drew an eager signal or
    not by a model's reading of it (billing-natural-12's until semantic-text
    v2's stage 10, then easy-order-status-01's)."""
    call = rv.Call.load(CORPUS / "refund-mixed-10")
    call = rv.shorten_hold(call, 0, 0, 0.25)
    call.meta["id"] = "refund-mixed-10-hold0.25"
    rec = load_recording(call.save(tmp_path / "call"))
    engine = TurnkitTurnEngine("fused")
    # As the README sets a Pipecat agent up: the end is held for a draft's
    # first token (the replay's default engine, 350 ms), so a caller who
    # goes on inside that time is not cut off but voids the draft.
    drafter = EagerDrafter(engine.clock, DraftParams(first_token_ms=350))
    ctx = LLMContext()
    stop = TurnkitUserTurnStopStrategy(engine, drafter=drafter, context=ctx)
    tap = Tap()
    await run_frames([_user(engine, stop, ctx), tap], engine, recording_frames(rec))
    assert drafter.stats.cancel_reasons.get("words changed", 0) >= 1, drafter.stats
    assert stop.withdrawn >= 1
    assert tap.of(EagerEndOfTurnCancelFrame)
    assert stop.kept >= 1 and stop.kept + stop.withdrawn == stop.speculations
    # The withdrawn speculation asked about the first sentence alone; the
    # turn went to the context whole.
    spec = [f.context.get_messages()[-1]["content"] for f in tap.of(LLMContextFrame) if f.speculation]
    first = normalize_text("I was charged twice for my last order")
    assert any(normalize_text(str(t)) == first for t in spec), spec
    user_msgs = [normalize_text(str(m["content"])) for m in ctx.get_messages() if m.get("role") == "user"]
    assert user_msgs[0].startswith(first) and user_msgs[0] != first, user_msgs


# -- tools through the gate ------------------------------------------------------

CALLS: list[tuple[str, dict[str, Any]]] = []


@tool(effect="read", timeout_s=2)
async def order_status(order: str) -> dict[str, str]:
    """Where an order is."""
    CALLS.append(("order_status", {"order": order}))
    await asyncio.sleep(0.05)
    return {"order": order, "status": "shipped"}


@tool(effect="write", timeout_s=2)
async def cancel_order(order: str, idempotency_key: str = "") -> str:
    """Cancel an order."""
    CALLS.append(("cancel_order", {"order": order, "key": idempotency_key}))
    return f"cancelled {order}"


async def test_gate_draft_reads_prefetched_writes_only_in_confirmed_turn() -> None:
    """GatedFunctions on a real OpenAILLMService (no request is made): in a
    speculation Pipecat withdraws the tool call, the gate prefetches only the
    read; the confirmed turn's identical read comes from the draft's cache,
    the write runs once (a repeat is answered from the ledger)."""
    CALLS.clear()
    clock = VirtualClock()
    # The write runs as it is asked for (no hold after the commit: this test
    # is about the prefetch and the ledger; the hold is the gate's, tested
    # in tests/test_tools.py, and its VAD edges in the next test).
    functions = GatedFunctions([order_status, cancel_order], clock, session_id="t", write_hold_s=0.0)
    llm = OpenAILLMService(
        api_key="none",
        base_url="http://127.0.0.1:9/v1",
        settings=OpenAILLMService.Settings(model="x"),
    )
    functions.register(llm)
    tap = Tap()
    task = PipelineTask(Pipeline([llm, tap]), cancel_on_idle_timeout=False)
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    run = asyncio.ensure_future(runner.run())
    await asyncio.sleep(0.3)
    try:
        ctx = LLMContext(tools=functions.tools_schema())
        calls = [
            FunctionCallFromLLM("order_status", "c1", {"order": "A7"}, ctx),
            FunctionCallFromLLM("cancel_order", "c2", {"order": "A7"}, ctx),
        ]
        # An eager draft is open and the service is speculating.
        functions.start_draft(draft_id=1)
        llm._speculation_gate.begin_speculation(True)
        await llm.run_function_calls(calls)
        await asyncio.sleep(0.2)
        assert functions.prefetched == 1
        assert CALLS == [("order_status", {"order": "A7"})]  # the write never ran
        assert tap.of(EagerEndOfTurnCancelFrame)  # Pipecat withdrew the speculation
        # The turn is confirmed with the draft's words; the fresh inference calls again.
        llm._speculation_gate.process(UserStoppedSpeakingFrame(), FrameDirection.DOWNSTREAM)
        functions.confirm_draft()
        await llm.run_function_calls(calls)
        await asyncio.sleep(0.3)
        results = tap.of(FunctionCallResultFrame)
        assert [r.function_name for r in results] == ["order_status", "cancel_order"]
        assert results[0].result == {"order": "A7", "status": "shipped"}
        assert functions.results[0].from_draft_cache
        assert [c[0] for c in CALLS] == ["order_status", "cancel_order"]
        key = CALLS[1][1]["key"]
        assert key
        # The same write again in the same turn: the ledger answers, nothing runs.
        await llm.run_function_calls(
            [FunctionCallFromLLM("cancel_order", "c3", {"order": "A7"}, ctx)]
        )
        await asyncio.sleep(0.2)
        assert len(CALLS) == 2
        assert functions.results[-1].idempotency_key == key
    finally:
        await task.cancel()
        await asyncio.wait_for(run, 10)


async def test_gate_discarded_draft_runs_nothing_and_write_deferred_in_draft() -> None:
    CALLS.clear()
    clock = VirtualClock()
    functions = GatedFunctions([order_status, cancel_order], clock)
    draft = functions.start_draft(draft_id=1)
    r = await functions.gate.call(draft, "cancel_order", {"order": "B2"})
    assert r.deferred and CALLS == []
    functions.discard_draft()  # the caller went on
    turn = functions.begin_turn()
    assert await functions.gate.wait_writes(turn) == []
    assert CALLS == []


@pytest.fixture(scope="module")
def llama_url() -> Any:
    from engine import running_llama_server  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1

    with running_llama_server() as url:
        yield url


SHOP_CALL = load_recording(CORPUS / "easy-order-status-01")


def _shop_agent(
    llama_url: str, params: DraftParams
) -> tuple[TurnkitTurnEngine, EagerDrafter, TurnkitUserTurnStopStrategy, list[FrameProcessor]]:
    """fused with a drafter, and Pipecat's OpenAILLMService on the real
    llama-server: the engine, the drafter, the stop strategy and the
    processors before the output."""
    engine = TurnkitTurnEngine("fused")
    drafter = EagerDrafter(engine.clock, params)
    ctx = LLMContext([{"role": "system", "content": "You are a helpful shop assistant."}])
    stop = TurnkitUserTurnStopStrategy(engine, drafter=drafter, context=ctx)
    llm = OpenAILLMService(
        api_key="none",
        base_url=llama_url,
        settings=OpenAILLMService.Settings(model="smollm2", max_tokens=12, temperature=0.0),
    )
    return engine, drafter, stop, [_user(engine, stop, ctx), llm]


async def test_speculation_through_openai_llm_service_on_llama_server(llama_url: str) -> None:
    """The whole eager path with Pipecat's real OpenAILLMService on a real
    llama-server: speculative inferences run, a kept one's tokens reach the
    output only after the turn is confirmed, withdrawn ones never do."""
    engine, _drafter, stop, processors = _shop_agent(llama_url, DraftParams())
    tap = Tap()
    await _run_answered([*processors, tap], engine, recording_frames(SHOP_CALL), tap)
    assert stop.speculations >= 1
    texts = tap.of(LLMTextFrame)
    assert texts, "no reply text came out of the real engine"
    # One reply with text per confirmed turn (kept speculations included),
    # none for withdrawn ones, and no text before the first confirmed end.
    kinds = [type(f).__name__ for f, _ in tap.frames]
    replies, has_text = 0, False
    for k in kinds:
        if k == "LLMFullResponseStartFrame":
            has_text = False
        elif k == "LLMTextFrame":
            has_text = True
        elif k == "LLMFullResponseEndFrame":
            replies += has_text
    assert stop.withdrawn >= 1 or stop.kept >= 1
    assert replies == kinds.count("UserStoppedSpeakingFrame")
    assert kinds.index("UserStoppedSpeakingFrame") < kinds.index("LLMTextFrame")


async def test_first_token_observer_teaches_the_drafter_the_llm_services_ttfb(
    llama_url: str,
) -> None:
    """With ``enable_metrics`` the real OpenAILLMService reports each
    completion's time to first byte (speculative ones too: a system frame
    the speculation gate does not hold); ``FirstTokenObserver`` hands it to
    a ``learn_first_token`` drafter, whose ends then hold for the lowest."""
    engine, drafter, _stop, processors = _shop_agent(llama_url, DraftParams(learn_first_token=True))
    tap, seen = Tap(), FirstTokenObserver(drafter)
    await _run_answered([*processors, tap], engine, recording_frames(SHOP_CALL), tap, [seen])
    ttfbs = [
        d.value * 1000
        for f in tap.of(MetricsFrame)
        for d in f.data
        if isinstance(d, TTFBMetricsData) and d.value > 0
    ]
    assert seen.measured >= 1 and seen.measured == len(ttfbs)
    assert drafter.first_token_ms == pytest.approx(min(ttfbs)) and drafter.first_token_ms > 0
    assert tap.of(LLMTextFrame), "no reply text came out of the real engine"


async def test_first_token_observer_reads_only_the_llm_services_ttfb() -> None:
    """A TTS service's time to first byte is not the engine's first token,
    and a frame's later hops are not new measurements."""
    drafter = EagerDrafter(VirtualClock(), DraftParams(learn_first_token=True))
    seen = FirstTokenObserver(drafter)
    llm = OpenAILLMService(api_key="none", base_url="http://127.0.0.1:9/v1")
    tts, tap = EspeakTTSService("en-us"), Tap()

    def pushed(src: FrameProcessor, value: float, first: bool = True) -> FramePushed:
        frame = MetricsFrame(data=[TTFBMetricsData(processor=str(src), value=value)])
        return FramePushed(
            source=src,
            destination=tap,
            frame=frame,
            direction=FrameDirection.DOWNSTREAM,
            timestamp=0,
            first_push=first,
        )

    await seen.on_push_frame(pushed(tts, 0.05))
    await seen.on_push_frame(pushed(llm, 0.3, first=False))
    assert seen.measured == 0 and drafter.first_token_ms == 0.0
    await seen.on_push_frame(pushed(llm, 0.42))
    await seen.on_push_frame(pushed(llm, 0.31))
    assert seen.measured == 2 and drafter.first_token_ms == pytest.approx(310.0)


async def test_turn_metrics_read_a_kept_speculations_ttft_from_the_llm_service() -> None:
    """A kept speculation's response frames are held by Pipecat's
    speculation gate and released together once the turn ends: from its
    response start to its first text reads ~0. ``TurnMetricsObserver``
    reads the LLM service's TTFB metric instead (the speculation's,
    reported before the turn ended); without metrics it cannot know the
    engine's time: None, not the ~0 the released frames read (a response
    whose first text comes later is still read from the pipeline)."""
    llm, tap = OpenAILLMService(api_key="none", base_url="http://127.0.0.1:9/v1"), Tap()
    seq = [
        (llm, MetricsFrame(data=[TTFBMetricsData(processor="llm", value=0.21)]), 1.00),
        (tap, UserStoppedSpeakingFrame(), 1.30),
        (llm, LLMFullResponseStartFrame(), 1.31),  # released by the gate
        (llm, LLMTextFrame(text="Sure."), 1.31),
        (tap, BotStartedSpeakingFrame(), 1.50),
    ]

    async def run(observer: TurnMetricsObserver, frames: list[Any]) -> TurnMetrics:
        for src, frame, t in frames:
            pushed = FramePushed(
                source=src,
                destination=tap,
                frame=frame,
                direction=FrameDirection.DOWNSTREAM,
                timestamp=int(t * 1e9),
            )
            await observer.on_push_frame(pushed)
        (turn,) = observer.turns
        return turn

    assert (await run(TurnMetricsObserver(), seq)).llm_ttft_ms == pytest.approx(210.0)
    without = await run(TurnMetricsObserver(), seq[1:])
    assert without.llm_ttft_ms is None
    generated = [*seq[1:3], (llm, LLMTextFrame(text="Sure."), 1.45), seq[4]]
    assert (await run(TurnMetricsObserver(), generated)).llm_ttft_ms == pytest.approx(140.0)


async def test_the_stop_strategy_tells_the_gate_the_callers_speech() -> None:
    """A write held after a commit waits while the caller speaks: the stop
    strategy hands the gate every VAD edge of the caller's (the real Silero
    VAD on refund-mixed-10), in order, ending silent; the gate's hold reads
    them (tests/test_tools.py::test_a_write_waits_while_the_caller_speaks)."""
    rec = load_recording(CORPUS / "refund-mixed-10")
    engine = TurnkitTurnEngine("fused")
    functions = GatedFunctions([order_status, cancel_order], engine.clock)
    edges: list[tuple[bool, float]] = []
    tell = functions.caller_speech

    def spy(speaking: bool) -> None:
        edges.append((speaking, engine.clock.now()))
        tell(speaking)

    functions.caller_speech = spy  # type: ignore[method-assign]
    ctx = LLMContext()
    stop = TurnkitUserTurnStopStrategy(engine, drafter=EagerDrafter(engine.clock), context=ctx, functions=functions)
    await run_frames([_user(engine, stop, ctx), Tap()], engine, recording_frames(rec))
    said = [s for t in rec.caller_turns for s in t.spans]
    assert [e for e, _ in edges] == [True, False] * (len(edges) // 2) and edges
    assert len(edges) // 2 >= len(rec.caller_turns)
    # every caller speech span is heard starting (within the VAD's start window)
    starts = [at for e, at in edges if e]
    for a, _b in said:
        if _b - a > 0.3:
            assert any(a <= at <= a + 0.4 for at in starts), (a, starts)
    assert edges[-1][0] is False  # the call ends with the caller silent
