"""The LLM side of a reply (turnkit.drafting.responder): drafts held and
released, voided drafts closed on the engine, tool calls through the gate,
engine failures ending in a fresh request or an apology, nothing leaked.

Against the real local engine (llama-server + SmolLM2-135M): held/released
drafts, cancellation proven by the engine's own counters, the pipeline
processor. Against :class:`FakeEngine` (named fake: it fails on demand):
5xx, stalls, mid-stream disconnects, tool round trips; and an in-process
endless fake for 10,000 cancelled drafts.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine import engine_metrics, running_llama_server
from fake_engine import FakeEngine, mock_transport
from real_tts import require_espeak

from turnkit.clock import RealClock
from turnkit.drafting import DraftParams, EagerDrafter, ToolGate, tool
from turnkit.drafting.responder import Responder, ResponderParams, ResponderProcessor
from turnkit.fillers import FillerBank, FillerScheduler
from turnkit.frames import (
    REPLY_CANCELLED,
    AgentAudioStartedFrame,
    AgentTextFrame,
    AudioOutFrame,
    DraftTextFrame,
    EndFrame,
    InterruptionFrame,
    LLMTextFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    VADSpeechStartedFrame,
)
from turnkit.llm.client import ChatClient
from turnkit.pipeline import CollectSink, Pipeline
from turnkit.tts import EspeakTTS, TTSProcessor
from turnkit.tts.processor import _SENTENCE_END

ASK = "can i book a table for two at eight tonight"


class Out:
    """Collects what a responder emits."""

    def __init__(self) -> None:
        self.frames: list[LLMTextFrame] = []
        self.final = asyncio.Event()

    def __call__(self, frame: LLMTextFrame) -> None:
        self.frames.append(frame)
        if frame.final:
            self.final.set()

    @property
    def text(self) -> str:
        return "".join(f.text for f in self.frames)


async def until(cond, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


# --------------------------------------------------------------------------
# The real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server(metrics=True) as base_url:
        yield base_url


def responder(url: str, out: Out, **kw) -> Responder:  # type: ignore[no-untyped-def]
    clock = RealClock()
    return Responder(
        ChatClient(url, first_token_timeout_s=30),
        clock,
        emit=out,
        drafter=EagerDrafter(clock, kw.pop("draft_params", None)),
        params=kw.pop("params", ResponderParams(max_tokens=24, temperature=0.0)),
        **kw,
    )


async def test_draft_tokens_are_held_then_released_without_a_new_request(engine: str) -> None:
    out = Out()
    r = responder(engine, out)
    await r.on_eager(ASK)
    await until(lambda: r.stats.ttft_ms or any(q.produced for q in r._drafts.values()))
    assert out.frames == []  # held: nothing reaches the caller before the turn is confirmed
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 60)
    assert out.text.strip()
    assert r.stats.requests == 1 and r.stats.drafts_used == 1
    assert r.history[-2] == {"role": "user", "content": ASK}
    assert r.history[-1] == {"role": "assistant", "content": out.text}
    await r.aclose()
    await r.client.aclose()


async def test_a_learning_drafter_holds_for_the_engines_measured_first_token(
    engine: str,
) -> None:
    """Each request's measured time to its first token (the draft's
    included) reaches the drafter: with ``learn_first_token`` its hold is
    the lowest of them, on the real engine."""
    out = Out()
    r = responder(engine, out, draft_params=DraftParams(learn_first_token=True))
    assert r.drafter is not None and r.drafter.first_token_ms == 0.0  # none measured yet
    await r.on_eager(ASK)
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 60)
    assert r.stats.drafts_used == 1 and list(r.stats.ttft_ms)
    assert r.drafter.first_token_ms == min(r.stats.ttft_ms) > 0.0
    await r.aclose()
    await r.client.aclose()


async def test_voided_draft_is_aborted_on_the_engine(engine: str) -> None:
    out = Out()
    params = ResponderParams(max_tokens=2000, temperature=0.8)
    r = responder(engine, out, params=params)
    await r.on_eager("tell me a very long story about a dragon")
    await until(lambda: engine_metrics(engine).get("requests_processing", 0) >= 1)
    r.on_transcript("tell me a very long story about a dragon and a knight")  # went on
    await until(lambda: engine_metrics(engine).get("requests_processing", 1) == 0)
    assert r.stats.drafts_cancelled == 1 and out.frames == []
    await r.idle()
    # The confirmed turn has other words: a fresh request answers it.
    r2 = responder(engine, out)
    await r2.on_end("what time do you open")
    await asyncio.wait_for(out.final.wait(), 60)
    assert out.text.strip() and r2.stats.requests == 1
    for x in (r, r2):
        await x.aclose()
        await x.client.aclose()


async def test_changed_words_at_confirmation_mean_a_fresh_request(engine: str) -> None:
    out = Out()
    r = responder(engine, out)
    await r.on_eager("a table for two")
    await until(lambda: r.stats.requests == 1)  # the draft is in flight
    await r.on_end("a table for two at eight")
    await asyncio.wait_for(out.final.wait(), 60)
    assert r.stats.requests == 2
    assert r.stats.drafts_started == 1 and r.stats.drafts_cancelled == 1
    assert r.stats.drafts_used == 0
    await r.aclose()
    await r.client.aclose()


def _drafting_processor(client: ChatClient, clock: RealClock, max_tokens: int) -> ResponderProcessor:
    """A greedy Responder with an eager drafter, hosted in the pipeline."""
    return ResponderProcessor(
        lambda emit: Responder(
            client,
            clock,
            emit=emit,
            drafter=EagerDrafter(clock),
            params=ResponderParams(max_tokens=max_tokens, temperature=0.0),
        )
    )


async def test_responder_processor_in_a_pipeline(engine: str) -> None:
    clock = RealClock()
    client = ChatClient(engine, first_token_timeout_s=30)
    proc = _drafting_processor(client, clock, max_tokens=16)
    sink = CollectSink()
    pipe = Pipeline([proc, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(TranscriptFrame(text=ASK, is_final=True))
        await pipe.queue_frame(TurnEagerFrame())
        await pipe.queue_frame(TurnEndFrame())
        await until(lambda: any(isinstance(f, LLMTextFrame) and f.final for f in sink.frames))
        await pipe.queue_frame(EndFrame())
        await pipe.wait_idle()
    finally:
        await pipe.stop()
        await client.aclose()
    texts = [f for f in sink.frames if isinstance(f, LLMTextFrame)]
    assert "".join(f.text for f in texts).strip()
    assert texts[-1].final and sum(f.final for f in texts) == 1
    assert proc.responder.stats.requests == 1 and proc.responder.stats.drafts_used == 1
    assert proc.responder.pending_tasks == 0


async def test_a_held_drafts_speech_is_rendered_before_the_turn_is_confirmed(engine: str) -> None:
    """Preemptive TTS through turnkit's pipeline on the real engine and
    espeak-ng: the Responder's held draft goes to the TTS as DraftTextFrames
    (none after its release), the TTS renders its first sentence while the
    turn is unconfirmed and pushes nothing, and the released reply's first
    sentence is spoken from that render."""
    require_espeak()
    clock = RealClock()
    client = ChatClient(engine, first_token_timeout_s=30)
    proc = _drafting_processor(client, clock, max_tokens=24)
    seen: list[DraftTextFrame | LLMTextFrame] = []

    class Tap(TTSProcessor):
        async def process_frame(self, frame, direction):  # type: ignore[no-untyped-def]
            if isinstance(frame, DraftTextFrame | LLMTextFrame):
                seen.append(frame)
            await super().process_frame(frame, direction)

    tts = Tap(EspeakTTS())
    sink = CollectSink()
    pipe = Pipeline([proc, tts, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(TranscriptFrame(text=ASK, is_final=True))
        await pipe.queue_frame(TurnEagerFrame())
        # The draft's first sentence is rendered (or its whole text, if it
        # has no sentence end) while the turn is still unconfirmed.
        await until(
            lambda: any(d.render is not None and d.render.done() for d in tts._drafts.values())
        )
        assert not [f for f in sink.frames if isinstance(f, AgentTextFrame | AudioOutFrame)]
        await pipe.queue_frame(TurnEndFrame())
        await until(lambda: any(isinstance(f, LLMTextFrame) and f.final for f in seen))
        await pipe.queue_frame(EndFrame())
        await pipe.wait_idle()
    finally:
        await pipe.stop()
        await client.aclose()
    drafts = [f for f in seen if isinstance(f, DraftTextFrame)]
    texts = [f for f in seen if isinstance(f, LLMTextFrame)]
    assert drafts and {f.reply_id for f in drafts} == {texts[0].reply_id}
    # Held text only: every draft frame came before the reply's text did.
    assert seen.index(texts[0]) > seen.index(drafts[-1])
    reply = "".join(f.text for f in texts)
    held = "".join(f.text for f in drafts)
    assert held and reply.startswith(held)  # the same tokens, held then released
    assert proc.responder.stats.drafts_used == 1 and tts.prerendered == 1
    said = [f.text for f in sink.frames if isinstance(f, AgentTextFrame)]
    m = _SENTENCE_END.search(reply)
    assert said and said[0] == " ".join((reply[: m.end()] if m else reply).split())


async def _finish_on_reply(pipe: Pipeline, sink: CollectSink, reply_id: int | None = None) -> None:
    """Wait for reply ``reply_id``'s (any reply's) last text, then end the pipeline."""
    await until(
        lambda: any(
            isinstance(f, LLMTextFrame) and f.final and reply_id in (None, f.reply_id)
            for f in sink.frames
        )
    )
    await pipe.queue_frame(EndFrame())
    await pipe.wait_idle()


async def _plain_responder_pipeline(
    engine: str,
) -> tuple[ChatClient, ResponderProcessor, CollectSink, Pipeline]:
    """A started pipeline: a greedy, no-drafts Responder host, then a sink."""
    clock = RealClock()
    client = ChatClient(engine, first_token_timeout_s=30)
    proc = ResponderProcessor(
        lambda emit: Responder(
            client, clock, emit=emit, params=ResponderParams(max_tokens=16, temperature=0.0)
        )
    )
    sink = CollectSink()
    pipe = Pipeline([proc, sink])
    await pipe.start()
    return client, proc, sink, pipe


async def test_responder_processor_answers_a_turn_that_ended_while_the_agent_talked(
    engine: str,
) -> None:
    """In the pipeline host: a turn end while the agent talks is ignored; the
    barge-in that then stops the agent (the words came late) gets that turn
    answered, without a second end from the detector."""
    client, proc, sink, pipe = await _plain_responder_pipeline(engine)
    try:
        await pipe.queue_frame(AgentAudioStartedFrame())
        await pipe.queue_frame(TurnEndFrame())
        await pipe.queue_frame(TranscriptFrame(text=ASK, is_final=True))
        await pipe.wait_idle()
        assert proc.responder.stats.ignored_ends == 1 and proc.responder.stats.requests == 0
        await pipe.queue_frame(InterruptionFrame())
        await _finish_on_reply(pipe, sink)
    finally:
        await pipe.stop()
        await client.aclose()
    assert proc.responder.stats.requests == 1
    assert proc.responder.history[-2] == {"role": "user", "content": ASK}


async def test_responder_processor_answers_words_that_came_after_the_end(engine: str) -> None:
    """A segmented STT slower than the detector waited: the turn ended with
    no words, and its words came after. The Responder waits for them (no
    reply to nothing) and answers them as they come (reply 1). The detector
    then ends the turn again on them (a resume, then an end with
    ``late_words``), back to back, before the barge-in controller's cancel
    of reply 1 (``BargeInProcessor.cancel_pending``, sent on the resume)
    comes back up the pipeline: the turn continues (reply 2, one user
    message: none of reply 1 played), and the cancel, naming reply 1, does
    not stop reply 2; the caller is answered."""
    client, proc, sink, pipe = await _plain_responder_pipeline(engine)
    try:
        await pipe.queue_frame(TurnEndFrame())  # the wait ran out: no words yet
        await pipe.queue_frame(TranscriptFrame(text=ASK, is_final=True))
        await pipe.queue_frame(TurnResumedFrame())
        await pipe.queue_frame(TurnEndFrame(late_words=True))
        await pipe.queue_frame(InterruptionFrame(reason=REPLY_CANCELLED, reply_id=1))
        await _finish_on_reply(pipe, sink, reply_id=2)
    finally:
        await pipe.stop()
        await client.aclose()
    r = proc.responder
    assert r.stats.interrupted == 0 and r.stats.turns == 1 and r.stats.wordless_ends == 1
    assert [m for m in r.history if m["role"] == "user"] == [{"role": "user", "content": ASK}]
    assert r.history[-1]["role"] == "assistant" and r.history[-1]["content"].strip()


@pytest.mark.parametrize("caller_went_on", [False, True])
async def test_responder_processor_waits_for_the_words_of_an_end_that_had_none(
    engine: str, caller_went_on: bool
) -> None:
    """A turn end before any words came (a recogniser slower than the
    detector's ceiling, or a cough it writes nothing for) is not answered
    with an empty user message: the Responder waits, and the words that
    come next end that turn. If the caller speaks again first, the words
    are the next end's (the detector ends the turn again)."""
    client, proc, sink, pipe = await _plain_responder_pipeline(engine)
    r = proc.responder
    try:
        await pipe.queue_frame(TurnEndFrame())
        await pipe.wait_idle()
        assert r.stats.wordless_ends == 1 and r.stats.requests == 0
        assert not any(isinstance(f, LLMTextFrame) for f in sink.frames)
        if caller_went_on:
            await pipe.queue_frame(VADSpeechStartedFrame(confirmed_at=0.0))
        await pipe.queue_frame(TranscriptFrame(text=ASK, is_final=True))
        await pipe.wait_idle()
        if caller_went_on:
            assert r.stats.requests == 0  # the next end carries the words
            await pipe.queue_frame(TurnEndFrame())
        await _finish_on_reply(pipe, sink)
    finally:
        await pipe.stop()
        await client.aclose()
    assert r.stats.requests == 1 and r.stats.turns == 1
    assert [m for m in r.history if m["role"] == "user"] == [{"role": "user", "content": ASK}]
    assert r.history[-1]["role"] == "assistant" and r.history[-1]["content"].strip()


@pytest.mark.parametrize("cancel_first", [True, False])
async def test_responder_processor_cancel_pending_continues_the_turn(
    engine: str, cancel_first: bool
) -> None:
    """The barge-in controller's cancel-pending (the caller went on before
    any of the reply played) reaches turnkit's pipeline as an
    ``InterruptionFrame`` with ``REPLY_CANCELLED``: the Responder drops the
    reply and the turn's words, and the next end continues the same turn
    with all of them (one user message), as the replay's agent does; not a
    barge-in that keeps a cut reply in the history. The same when the
    cancel comes back up the pipeline only after that end (the caller's
    words going on from the turn's, none of its reply played)."""
    client, proc, sink, pipe = await _plain_responder_pipeline(engine)
    first, whole = "I'd like to book", "I'd like to book a table for two at eight"
    cancel = InterruptionFrame(reason=REPLY_CANCELLED, reply_id=1)
    try:
        await pipe.queue_frame(TranscriptFrame(text=first, is_final=True))
        await pipe.queue_frame(TurnEndFrame())
        await until(lambda: proc.responder.stats.requests == 1)
        await pipe.queue_frame(TurnResumedFrame())
        if cancel_first:
            await pipe.queue_frame(cancel)
        await pipe.queue_frame(TranscriptFrame(text=whole, is_final=True))
        await pipe.queue_frame(TurnEndFrame())
        if not cancel_first:
            await pipe.queue_frame(cancel)
        await _finish_on_reply(pipe, sink, reply_id=2)
    finally:
        await pipe.stop()
        await client.aclose()
    r = proc.responder
    assert r.stats.cancelled_pending == 1 and r.stats.interrupted == 0
    assert r.stats.turns == 1
    users = [m for m in r.history if m["role"] == "user"]
    assert users == [{"role": "user", "content": whole}], r.history
    assert r.history[-1]["role"] == "assistant" and r.history[-1]["content"].strip()


# --------------------------------------------------------------------------
# Fake engine: failures on demand, tool round trips


@pytest.fixture
def fake() -> Iterator[FakeEngine]:
    eng = FakeEngine()
    yield eng
    eng.close()


def fake_responder(url: str, out: Out, **kw) -> Responder:  # type: ignore[no-untyped-def]
    clock = RealClock()
    client = ChatClient(url, first_token_timeout_s=kw.pop("first_token_timeout_s", 5.0))
    return Responder(client, clock, emit=out, drafter=EagerDrafter(clock), **kw)


async def test_fake_an_end_with_words_ends_the_wait_for_words(fake: FakeEngine) -> None:
    """A wordless end waits for words; an end that comes with words (the
    detector ending the turn again on them) answers that turn, and the wait
    is over: the same words written again are no second end."""
    out = Out()
    r = fake_responder(fake.url("ok"), out)
    assert await r.on_end("") is None and r.awaits_words
    assert await r.on_end(ASK) is not None and not r.awaits_words
    assert r.on_transcript(ASK) is None
    await asyncio.wait_for(out.final.wait(), 10)
    assert r.stats.requests == 1 and r.stats.wordless_ends == 1
    await r.client.aclose()


async def test_fake_5xx_on_the_confirmed_reply_is_retried_fresh(fake: FakeEngine) -> None:
    out = Out()
    r = fake_responder(fake.url("fail1"), out)
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 10)
    assert out.text == "Hello!" and r.stats.engine_errors == 1 and r.stats.requests == 2
    assert not any(f.apology for f in out.frames)
    await r.client.aclose()


async def test_fake_engine_down_ends_in_the_apology_line(fake: FakeEngine) -> None:
    out = Out()
    r = fake_responder(fake.url("fail100"), out, params=ResponderParams(retries=2))
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 10)
    assert out.text == ResponderParams().apology and out.frames[0].apology
    assert r.stats.requests == 3 and r.stats.apologies == 1
    await r.client.aclose()


async def test_fake_stall_times_out_into_the_apology(fake: FakeEngine) -> None:
    out = Out()
    r = fake_responder(
        fake.url("stall"), out, first_token_timeout_s=0.3, params=ResponderParams(retries=0)
    )
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 10)  # nothing hangs
    assert out.frames[-2].apology and r.stats.engine_errors == 1
    await r.client.aclose()


async def test_fake_mid_stream_disconnect_keeps_what_was_said_then_apologises(
    fake: FakeEngine,
) -> None:
    out = Out()
    r = fake_responder(fake.url("cut"), out)
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 10)
    # Text already out is never re-asked (it may have been spoken): apology.
    assert out.text.startswith("ab") and out.frames[-2].apology
    assert r.stats.requests == 1
    await r.client.aclose()


async def test_fake_failed_draft_means_a_fresh_request_at_confirmation(fake: FakeEngine) -> None:
    out = Out()
    r = fake_responder(fake.url("fail1"), out)
    await r.on_eager(ASK)
    await until(lambda: fake.requests == 1 and r.stats.engine_errors == 1)
    await r.on_end(ASK)  # same words, but the draft failed
    await asyncio.wait_for(out.final.wait(), 10)
    assert out.text == "Hello!" and r.stats.requests == 2 and r.stats.drafts_used == 0
    await r.client.aclose()


def booking_gate(executed: list[dict]) -> ToolGate:
    @tool(effect="write", timeout_s=2)
    async def book(party: int) -> str:
        executed.append({"party": party})
        return f"booked for {party}"

    return ToolGate([book], RealClock(), session_id="call-1")


async def test_fake_write_in_a_draft_waits_for_the_confirmed_turn(fake: FakeEngine) -> None:
    executed: list[dict] = []
    out = Out()
    r = fake_responder(fake.url("agent"), out, gate=booking_gate(executed))
    await r.on_eager(ASK)
    # The draft asked for the booking and got "not done yet"; it runs nothing.
    await until(lambda: fake.requests >= 2)
    assert executed == []
    tool_msgs = [m for m in fake.bodies[1]["messages"] if m["role"] == "tool"]
    assert "Not done yet" in tool_msgs[0]["content"]
    await r.on_end(ASK)
    await asyncio.wait_for(out.final.wait(), 10)
    await r.gate.wait_writes(r.gate.current_turn)  # type: ignore[union-attr, arg-type]
    assert executed == [{"party": 2}]  # exactly once, after confirmation
    assert fake.bodies[0]["tools"][0]["function"]["name"] == "book"
    await r.client.aclose()


async def test_fake_write_of_a_voided_draft_never_runs(fake: FakeEngine) -> None:
    executed: list[dict] = []
    out = Out()
    r = fake_responder(fake.url("agent"), out, gate=booking_gate(executed))
    await r.on_eager(ASK)
    await until(lambda: fake.requests >= 2)
    r.on_transcript("actually make it four people")
    await r.idle()
    await r.on_end("actually make it four people")  # the real turn: fresh request
    await asyncio.wait_for(out.final.wait(), 10)
    await r.gate.wait_writes(r.gate.current_turn)  # type: ignore[union-attr, arg-type]
    # The voided draft's booking never ran; the confirmed turn's ran once.
    assert executed == [{"party": 2}]
    assert r.gate.ledger and len(r.gate.ledger) == 1  # type: ignore[union-attr]
    await r.client.aclose()


async def test_ten_thousand_cancelled_drafts_leak_no_tasks() -> None:
    stats = {"opened": 0, "closed": 0}
    client = ChatClient("http://fake.invalid/v1", transport=mock_transport(stats))
    clock = RealClock()
    r = Responder(
        client,
        clock,
        emit=lambda f: None,
        drafter=EagerDrafter(clock, DraftParams(max_drafts=10**6, max_speech_s=1e9)),
    )
    before = len(asyncio.all_tasks())
    for i in range(10_000):
        await r.on_eager(f"draft number {i}")
        opened = i + 1
        while stats["opened"] < opened:  # the request really went out
            await asyncio.sleep(0)
        r.on_transcript(f"draft number {i} and more")
    await r.idle()
    await client.aclose()
    assert r.stats.drafts_started == r.stats.drafts_cancelled == 10_000
    assert stats["opened"] == stats["closed"] == 10_000
    assert r.pending_tasks == 0
    assert len(asyncio.all_tasks()) == before


async def _filler_responder(
    fake: FakeEngine, tmp_path: Path, find_table: Any, threshold_s: float
) -> tuple[Responder, FillerScheduler, list[AudioOutFrame], Out]:
    """A drafting Responder on the fake engine's tool-calling agent, with
    real pre-rendered filler lines (espeak-ng): (responder, fillers, the
    filler audio played, its text output)."""
    require_espeak()
    clock = RealClock()
    line = ("One moment, let me check that.", "Let me look that up.")
    bank = FillerBank(line, EspeakTTS("en-us"), 16000, cache_dir=tmp_path)
    await bank.prerender()
    audio: list[AudioOutFrame] = []
    fillers = FillerScheduler(bank, clock, sink=audio.append, threshold_s=threshold_s)
    out = Out()
    r = Responder(
        ChatClient(fake.url("agent"), first_token_timeout_s=5),
        clock,
        emit=out,
        drafter=EagerDrafter(clock),
        gate=ToolGate([find_table], clock),
        fillers=fillers,
    )
    return r, fillers, audio, out


async def test_fake_slow_read_in_a_confirmed_reply_gets_a_filler(
    fake: FakeEngine, tmp_path: Path
) -> None:

    @tool(effect="read", timeout_s=5)
    async def find_table(party: int) -> str:
        await asyncio.sleep(0.8)
        return f"a table for {party} at 20:00"

    r, fillers, audio, out = await _filler_responder(fake, tmp_path, find_table, 0.3)
    # In a draft the read runs silently: no filler for a reply nobody hears yet.
    await r.on_eager("a table for two")
    await until(lambda: fake.requests >= 2)
    assert audio == [] and not fillers.records
    r.on_transcript("a table for two please")
    await r.idle()
    # Confirmed: the slow read gets a filler at its threshold, then the answer.
    await r.on_end("a table for two please")
    await asyncio.wait_for(out.final.wait(), 10)
    await fillers.idle()
    (rec,) = fillers.records
    assert rec.tool == "find_table"
    assert rec.ack_latency_s is not None and rec.ack_latency_s < rec.answer_latency_s  # type: ignore[operator]
    assert audio and out.text == "Hello!"
    await r.client.aclose()


async def test_fake_slow_read_begun_in_a_draft_gets_a_filler_once_released(
    fake: FakeEngine, tmp_path: Path
) -> None:
    """A draft's read still running when the turn is confirmed: the caller
    now waits on it, so its filler is scheduled at the release, its
    threshold counted from the read's start (the replay's demo call: a
    1.8 s order lookup begun in a draft just before the caller's "Yes." was
    confirmed was answered 2.3 s after the decision, with no filler)."""
    began = asyncio.Event()
    result = asyncio.Event()

    @tool(effect="read", timeout_s=10)
    async def find_table(party: int) -> str:
        began.set()
        await result.wait()  # the test says when the lookup answers
        return f"a table for {party} at 20:00"

    r, fillers, audio, out = await _filler_responder(fake, tmp_path, find_table, 0.2)
    await r.on_eager("a table for two")
    await asyncio.wait_for(began.wait(), 10)
    assert not fillers.records  # a draft: nobody hears it yet
    await r.on_end("a table for two")  # the same words: the draft is released
    assert r.stats.drafts_used == 1
    await until(lambda: bool(audio))  # the filler plays while the read runs
    (rec,) = fillers.records
    assert rec.result_at is None and rec.first_audio_at is not None
    result.set()
    await asyncio.wait_for(out.final.wait(), 10)
    await fillers.idle()
    assert out.text == "Hello!"
    await r.client.aclose()


async def test_fake_speech_the_agent_talked_through_is_not_a_turn(fake: FakeEngine) -> None:
    out = Out()
    r = fake_responder(fake.url("ok"), out)
    r.on_agent_audio(True)  # the agent is talking; "uh huh" did not stop it
    await r.on_eager("uh huh")
    assert await r.on_end("uh huh") is None
    assert r.stats.ignored_ends == 1 and r.stats.drafts_started == 0 and fake.requests == 0
    r.on_agent_audio(False)
    assert await r.on_end(ASK) is not None  # a real turn after the agent finished
    await asyncio.wait_for(out.final.wait(), 10)
    assert out.text == "Hello!" and fake.requests == 1
    await r.client.aclose()


# --------------------------------------------------------------------------
# History policy (an in-process fake engine that answers "Okay." and records
# what each request sent)


def fake_reply_transport(sent: list[list[dict]]) -> object:  # type: ignore[type-arg]
    import json as _json

    import httpx

    async def handler(request: httpx.Request) -> httpx.Response:
        sent.append(_json.loads(request.content)["messages"])
        chunk = {"choices": [{"index": 0, "delta": {"content": "Okay."}, "finish_reason": "stop"}]}
        body = f"data: {_json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body)

    return httpx.MockTransport(handler)


async def _talk(r: Responder, out: Out, turns: int) -> None:
    for i in range(turns):
        out.final.clear()
        await r.on_end(f"caller turn {i}")
        await asyncio.wait_for(out.final.wait(), 30)
    await r.idle()


async def test_fake_history_keeps_the_prefix_and_the_last_turns_cut_in_quarters() -> None:
    sent: list[list[dict]] = []  # type: ignore[type-arg]
    out = Out()
    client = ChatClient("http://fake.invalid/v1", transport=fake_reply_transport(sent))  # type: ignore[arg-type]
    r = Responder(client, RealClock(), emit=out, params=ResponderParams(history_turns=8))
    r.history.append({"role": "assistant", "content": "Clinic, front desk."})  # greeting: prefix
    await _talk(r, out, 30)
    await client.aclose()
    assert r.history[:2] == [
        {"role": "system", "content": r.history[0]["content"]},
        {"role": "assistant", "content": "Clinic, front desk."},
    ]
    users = [m["content"] for m in r.history if m["role"] == "user"]
    assert users[-1] == "caller turn 29" and 6 <= len(users) <= 8
    assert users == [f"caller turn {i}" for i in range(30 - len(users), 30)]  # the newest, in order
    assert all(len(msgs) <= 2 + 2 * 8 for msgs in sent)  # never resent more than 8 turns
    # Cut to 6 turns at the 9th, then every 3rd turn: the prompt's start
    # changes only at a cut (the engine's prefix cache serves it in between).
    assert r.stats.history_trims == 1 + (30 - 9) // 3
    firsts = [next(m["content"] for m in msgs if m["role"] == "user") for msgs in sent]
    assert sum(a != b for a, b in itertools.pairwise(firsts)) == r.stats.history_trims


async def test_fake_history_token_budget_keeps_the_newest_turn() -> None:
    sent: list[list[dict]] = []  # type: ignore[type-arg]
    out = Out()
    client = ChatClient("http://fake.invalid/v1", transport=fake_reply_transport(sent))  # type: ignore[arg-type]
    params = ResponderParams(history_turns=None, history_tokens=200)
    r = Responder(client, RealClock(), emit=out, params=params)
    for i in range(12):
        out.final.clear()
        await r.on_end(f"turn {i} " + "words " * 60)  # ~95 tokens each
        await asyncio.wait_for(out.final.wait(), 30)
    await r.idle()
    await client.aclose()
    users = [m["content"] for m in r.history if m["role"] == "user"]
    assert users[-1].startswith("turn 11 ") and 1 <= len(users) <= 2
    assert r.history[0]["role"] == "system"
    assert max(len(msgs) for msgs in sent) <= 1 + 2 * 2


async def test_fake_stats_lists_are_bounded() -> None:
    from turnkit.drafting.responder import STATS_KEEP

    sent: list[list[dict]] = []  # type: ignore[type-arg]
    out = Out()
    client = ChatClient("http://fake.invalid/v1", transport=fake_reply_transport(sent))  # type: ignore[arg-type]
    r = Responder(client, RealClock(), emit=out)
    r.stats.ttft_ms.extend(float(i) for i in range(STATS_KEEP + 500))
    await _talk(r, out, 3)
    await client.aclose()
    assert len(r.stats.ttft_ms) == STATS_KEEP and r.stats.turns == 3


async def test_an_end_ignored_while_talking_is_owed_once_the_agent_stops(engine: str) -> None:
    """A turn end that came while the agent talked is ignored (it looked like
    a backchannel); if the agent then stops for that speech (its words came
    late and were a bid) with no caller speech since, the turn is owed an
    answer — asked once. Caller speech in between voids it, and nothing is
    owed while the agent still talks."""
    r = responder(engine, Out())
    r.on_agent_audio(True)
    assert await r.on_end("portland oregon") is None
    assert r.stats.ignored_ends == 1
    assert r.owed_end() is None  # still talking: nothing owed yet
    r.on_interrupted()
    assert r.owed_end() == "portland oregon"
    assert r.owed_end() is None  # asked once
    r.on_agent_audio(True)
    assert await r.on_end("uh-huh") is None
    r.on_speech()  # the caller went on: that end is void
    r.on_interrupted()
    assert r.owed_end() is None
    await r.aclose()
    await r.client.aclose()


async def test_fake_an_end_over_a_replys_last_words_is_owed_when_it_completes() -> None:
    """A reply that plays to its end owes an answer only to a caller turn
    that ended in its last ``owed_after_reply_s`` (the caller spoke last,
    over the closing words); a murmur earlier in the reply is not a turn.
    (Fake transport: the rule is the Responder's bookkeeping, on a virtual
    clock.)"""
    from turnkit.clock import VirtualClock

    sent: list[list[dict]] = []  # type: ignore[type-arg]
    client = ChatClient("http://fake.invalid/v1", transport=fake_reply_transport(sent))  # type: ignore[arg-type]
    clock = VirtualClock()
    r = Responder(client, clock, emit=Out(), params=ResponderParams(owed_after_reply_s=1.5))
    r.on_agent_audio(True)
    assert await r.on_end("uh-huh") is None  # early in the reply
    await clock.advance_to(4.0)
    r.on_agent_audio(False)
    assert r.owed_end(completed=True) is None  # 4 s before the reply ended
    r.on_agent_audio(True)
    assert await r.on_end("okay") is None
    await clock.advance_to(5.0)
    r.on_agent_audio(False)
    assert r.owed_end(completed=True) == "okay"  # 1 s before it ended
    assert r.owed_end(completed=True) is None  # asked once
    # The window runs from the caller's speech end, not from the decision: a
    # "mm-hm" decided late (a patient wait) is still a murmur mid-reply.
    r.on_agent_audio(True)
    spoke = clock.now()
    await clock.advance_to(spoke + 0.6)
    assert await r.on_end("mm-hm", speech_end=spoke) is None  # decided 0.6 s after
    await clock.advance_to(spoke + 1.6)
    r.on_agent_audio(False)
    assert r.owed_end(completed=True) is None  # decided 1.0 s before the end, said 1.6 s
    await r.aclose()
    await client.aclose()
