"""Playback cursor (marks, pauses, resume, flush, clock fallback) on a
VirtualClock, and the HistoryTruncator processor in a turnkit Pipeline fed
real espeak-ng word timings.

Tests that need espeak-ng skip without it, unless ``TURNKIT_REQUIRE_TTS=1``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import numpy as np
import pytest
from engine import running_llama_server
from real_tts import require_espeak

from turnkit.audio.vad import VADStep
from turnkit.barge_in.controller import Action, BargeInController
from turnkit.barge_in.cursor import PlaybackCursor, WordTimestampsFrame
from turnkit.barge_in.history_processor import HistoryTruncator
from turnkit.barge_in.processors import BargeInProcessor
from turnkit.barge_in.truncation import TruncationConfig, tokens
from turnkit.clock import RealClock, VirtualClock
from turnkit.drafting.drafter import DraftParams, EagerDrafter
from turnkit.drafting.responder import Responder, ResponderParams, ResponderProcessor
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    AudioInFrame,
    AudioOutFrame,
    DraftTextFrame,
    EndFrame,
    InterruptionFrame,
    LLMTextFrame,
    PlaybackMarkFrame,
    StartFrame,
    TranscriptFrame,
    TurnEndFrame,
    Word,
)
from turnkit.llm.client import ChatClient
from turnkit.pipeline import CollectSink, FrameDirection, Pipeline
from turnkit.tts import EspeakTTS, TTSError, TTSProcessor, WordTimedAudio

TEXT = "Certainly, a table for four on Saturday. What time would you like to come in?"
WORDS = TEXT.split()




@pytest.fixture(scope="module")
def spoken() -> WordTimedAudio:
    require_espeak()
    return asyncio.run(EspeakTTS().synthesize_words(TEXT))


# --- cursor -------------------------------------------------------------------


async def test_marks_are_the_authority_and_never_go_back():
    clock = VirtualClock()
    cur = PlaybackCursor(clock, max_extrapolate_s=0.0)
    cur.on_started(1)
    cur.on_text(1, TEXT)
    cur.on_mark(1, 1.0)
    cur.on_mark(1, 0.4)  # a late, stale report
    await clock.advance(2.0)
    cur.on_stopped(1, "interrupted")
    assert cur.played_s(1) == 1.0


async def test_stop_adds_the_time_since_the_last_moving_mark_capped():
    clock = VirtualClock()
    cur = PlaybackCursor(clock, max_extrapolate_s=0.2)
    cur.on_started(1)
    cur.on_mark(1, 0.5)
    await clock.advance(0.5)
    cur.on_mark(1, 1.0)
    await clock.advance(0.08)
    assert cur.played_s(1) == pytest.approx(1.08)  # still playing
    cur.on_stopped(1, "interrupted")
    assert cur.played_s(1) == pytest.approx(1.08)
    await clock.advance(5.0)
    assert cur.played_s(1) == pytest.approx(1.08)  # stopped: frozen
    # A long gap is capped at one mark interval's worth.
    cur.on_started(2)
    cur.on_mark(2, 0.5)
    await clock.advance(3.0)
    cur.on_stopped(2, "interrupted")
    assert cur.played_s(2) == pytest.approx(0.7)


async def test_a_paused_output_is_not_extrapolated():
    clock = VirtualClock()
    cur = PlaybackCursor(clock, max_extrapolate_s=0.2)
    cur.on_started(1)
    cur.on_mark(1, 0.9)
    await clock.advance(0.1)
    cur.on_mark(1, 0.9)  # paused (ducked, held): position unchanged
    await clock.advance(0.15)
    cur.on_stopped(1, "interrupted")
    assert cur.played_s(1) == pytest.approx(0.9)


async def test_clock_fallback_sums_stretches_across_a_resume():
    clock = VirtualClock()
    cur = PlaybackCursor(clock)
    cur.on_started(3)
    await clock.advance(0.6)
    cur.on_stopped(3, "interrupted")  # a false interruption...
    await clock.advance(1.0)  # ...silence while it is judged...
    cur.on_started(3)  # ...then resumed where it stopped
    await clock.advance(0.4)
    assert cur.played_s(3) == pytest.approx(1.0)
    cur.on_stopped(3, "interrupted")
    await clock.advance(1.0)
    assert cur.played_s(3) == pytest.approx(1.0)


async def test_flush_stops_every_playing_reply_where_it_is():
    clock = VirtualClock()
    cur = PlaybackCursor(clock)
    cur.on_started(1)
    cur.on_text(1, TEXT)
    await clock.advance(0.7)
    cur.on_flush()
    await clock.advance(2.0)
    assert cur.played_s(1) == pytest.approx(0.7)
    assert cur.reply(1).stop_reason == "interrupted"


async def test_duration_caps_played_and_completed_is_whole():
    clock = VirtualClock()
    cur = PlaybackCursor(clock)
    cur.on_text(1, "Sure.")
    cur.on_text(1, "What name is it under?")
    assert cur.reply(1).text == "Sure. What name is it under?"
    cur.on_duration(1, 2.0)
    cur.on_started(1)
    await clock.advance(3.0)
    assert cur.played_s(1) == 2.0
    cur.on_stopped(1, "completed")
    assert cur.heard(1).complete


async def test_cursor_heard_with_real_word_timings(spoken):
    clock = VirtualClock()
    cur = PlaybackCursor(clock, max_extrapolate_s=0.0)
    cur.on_started(1)
    cur.on_text(1, TEXT)
    cur.on_words(1, spoken.words, spoken.duration)
    w = spoken.words[6]  # "Saturday."
    cur.on_mark(1, w.end - 0.02)
    cur.on_stopped(1, "interrupted")
    heard = cur.heard(1)
    assert heard.method == "timestamps"
    assert heard.text == "Certainly, a table for four on"


def test_progress_is_the_heard_cut_after_every_mark():
    """progress() (asked after every played frame, kept while the next
    word's end has not played) answers what heard() does, on seeded random
    replies, timestamps arriving in two parts, lengths and marks."""
    rng = random.Random(1)
    checked = 0
    for _ in range(100):
        vocab = ["word", "and,", "-", "stop.", "o'clock"]
        toks = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        t, stamps = 0.0, []
        for tok in toks[: rng.randint(0, len(toks))]:
            d = rng.choice([0.0, 0.1, 0.25])
            stamps.append(Word(text=tok, start=t, end=t + d))
            t += d + rng.choice([0.0, 0.05])
        cur = PlaybackCursor(VirtualClock())
        cur.on_text(1, " ".join(toks))
        cur.on_started(1)
        cur.on_words(1, stamps[: len(stamps) // 2])
        if rng.random() < 0.3:
            cur.on_duration(1, t * rng.random() + 0.01)
        played = 0.0
        for k in range(120):
            played += rng.choice([0.0, 1e-7, 0.01, 0.02, 0.05, 0.3])
            if k == 60:
                cur.on_words(1, stamps[len(stamps) // 2 :])
            cur.on_mark(1, played)
            assert cur.progress(1) == cur.heard(1).cut, (toks, played)
            checked += 1
    assert checked == 12000


# --- the processor in a pipeline ----------------------------------------------------


async def _run(frames, truncator: HistoryTruncator, clock: VirtualClock) -> CollectSink:
    sink = CollectSink()
    pipe = Pipeline([truncator, sink])
    await pipe.start()
    try:
        for at, frame, direction in frames:
            await clock.advance_to(max(at, clock.now()))
            frame.at = clock.now()
            await truncator.deliver(frame, direction)
            await pipe.wait_idle()
    finally:
        await pipe.stop()
    return sink


D, U = FrameDirection.DOWNSTREAM, FrameDirection.UPSTREAM


def _play(spoken: WordTimedAudio, until: float, step: float = 0.1):
    """Marks an output would send every ``step`` seconds of played audio."""
    t = step
    while t <= until + 1e-9:
        yield (t, PlaybackMarkFrame(reply_id=1, played_s=round(t, 6)), U)
        t += step


async def test_pipeline_cuts_the_reply_to_the_words_heard(spoken):
    clock = VirtualClock()
    system = {"role": "system", "content": "You book tables."}
    cuts = []
    trunc = HistoryTruncator(
        clock, [system], on_truncated=lambda rid, h: cuts.append((rid, h.words_kept))
    )
    stop_at = spoken.words[8].end + 0.05  # "time" finished, "would" not
    half = TEXT.index("What")
    frames = [
        (0.0, TranscriptFrame(text="a table for four on saturday", is_final=True), D),
        (0.0, TurnEndFrame(detector="test"), D),
        (0.0, AgentTextFrame(reply_id=1, text=TEXT[:half].strip()), U),  # streamed
        (0.0, AgentTextFrame(reply_id=1, text=TEXT[half:]), U),
        (0.0, WordTimestampsFrame(reply_id=1, words=list(spoken.words)), U),
        (0.0, AgentAudioStartedFrame(reply_id=1), D),
        *_play(spoken, stop_at, 0.05),
        (stop_at, AgentAudioStoppedFrame(reply_id=1, reason="interrupted"), D),
    ]
    sink = await _run(frames, trunc, clock)
    # Downstream frames are passed on, in order (upstream ones went upstream).
    assert [type(f) for f in sink.frames] == [
        TranscriptFrame,
        TurnEndFrame,
        AgentAudioStartedFrame,
        AgentAudioStoppedFrame,
    ]
    assert trunc.messages == [
        system,
        {"role": "user", "content": "a table for four on saturday"},
        {
            "role": "assistant",
            "content": "Certainly, a table for four on Saturday. What time"
            " [interrupted by the caller]",
        },
    ]
    assert cuts == [(1, 9)]


async def test_pipeline_late_mark_recuts_and_resume_restores(spoken):
    clock = VirtualClock()
    trunc = HistoryTruncator(clock, config=TruncationConfig(note=None))
    w = spoken.words
    frames = [
        (0.0, AgentTextFrame(reply_id=1, text=TEXT), U),
        (0.0, AgentAudioStartedFrame(reply_id=1), D),
        (0.0, WordTimestampsFrame(reply_id=1, words=list(w), audio_s=spoken.duration), U),
        (w[2].end + 0.01, AgentAudioStoppedFrame(reply_id=1, reason="interrupted"), D),
    ]
    await _run(frames, trunc, clock)
    # No marks: the clock says three words.
    assert trunc.messages == [{"role": "assistant", "content": "Certainly, a table"}]
    # The output's final sample position comes after the stop: one more word.
    await _run([(clock.now(), PlaybackMarkFrame(reply_id=1, played_s=w[3].end), U)], trunc, clock)
    assert trunc.messages == [{"role": "assistant", "content": "Certainly, a table for"}]
    # A false interruption: playback resumes, and this time plays to the end.
    await _run(
        [
            (clock.now() + 1.0, AgentAudioStartedFrame(reply_id=1), D),
            (clock.now() + 1.0, PlaybackMarkFrame(reply_id=1, played_s=spoken.duration), U),
            (clock.now() + 5.0, AgentAudioStoppedFrame(reply_id=1, reason="completed"), D),
        ],
        trunc,
        clock,
    )
    assert trunc.messages == [{"role": "assistant", "content": TEXT}]


async def test_pipeline_interruption_before_audio_removes_the_reply():
    clock = VirtualClock()
    trunc = HistoryTruncator(clock)
    frames = [
        (0.0, TranscriptFrame(text="book a table", is_final=True), D),
        (0.0, TurnEndFrame(), D),
        (0.1, AgentTextFrame(reply_id=4, text="Sure, for how many?"), U),
        (0.3, InterruptionFrame(reason="caller spoke"), D),
    ]
    await _run(frames, trunc, clock)
    assert trunc.messages == [{"role": "user", "content": "book a table"}]


async def test_pipeline_estimate_when_the_tts_gives_no_timings(spoken):
    clock = VirtualClock()
    trunc = HistoryTruncator(clock, config=TruncationConfig(note=None), max_extrapolate_s=0.0)
    stop = spoken.words[5].end + 0.02  # "on" has just ended
    frames = [
        (0.0, AgentTextFrame(reply_id=1, text=TEXT), U),
        (0.0, AgentAudioStartedFrame(reply_id=1), D),
        *_play(spoken, stop, 0.02),
        (stop, AgentAudioStoppedFrame(reply_id=1, reason="interrupted"), D),
    ]
    trunc.cursor.on_duration(1, spoken.duration)  # the TTS finished the reply
    await _run(frames, trunc, clock)
    kept = len(tokens(trunc.messages[0]["content"]))
    assert trunc.cuts[-1][1].method == "estimate"
    assert abs(kept - 6) <= 1


async def test_pipeline_host_written_history_with_tool_calls():
    clock = VirtualClock()
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "availability", "arguments": "{}"},
    }
    messages = [
        {"role": "user", "content": "is saturday free"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "free"},
        {"role": "assistant", "content": "Saturday is free. Shall I book it?"},
    ]
    trunc = HistoryTruncator(
        clock, messages, record_user=False, record_replies=False, max_extrapolate_s=0.0
    )
    text = "Let me check. Saturday is free. Shall I book it?"
    stamps = [Word(text=t, start=0.3 * i, end=0.3 * i + 0.25) for i, t in enumerate(text.split())]
    frames = [
        (0.0, AgentTextFrame(reply_id=2, text=text), U),
        (0.0, WordTimestampsFrame(reply_id=2, words=stamps), U),
        (0.0, AgentAudioStartedFrame(reply_id=2), D),
        (1.3, PlaybackMarkFrame(reply_id=2, played_s=1.3), U),
        (1.3, AgentAudioStoppedFrame(reply_id=2, reason="interrupted"), D),
    ]
    await _run(frames, trunc, clock)
    assert trunc.messages is messages  # the host's own list, edited in place
    assert messages == [
        {"role": "user", "content": "is saturday free"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "free"},
        {"role": "assistant", "content": "Saturday [interrupted by the caller]"},
    ]


# --- the producers: TTSProcessor + BargeInProcessor emit the evidence ---------


REPLY = "Your order shipped on Monday, and it should arrive on Friday. Would you like the number?"


def _caller_frame(at: float, started: bool) -> AudioInFrame:
    step = VADStep(prob=0.9, speaking=True, started=started, speech_start=at, speech_end=at)
    return AudioInFrame(at=at, audio=np.zeros(512, np.float32), sample_rate=16000, vad=step)


async def _barge_in_call(tts: TTSProcessor, stop_after: int | None, stop_at: float | None = None):
    """A turn, the reply rendered by ``tts`` and played by a BargeInProcessor
    on a virtual clock, and a caller who says "wait stop" once word
    ``stop_after`` (1-based) has played (or at ``stop_at``). The controller
    decides the stop from those words. Returns (processor, history, sink,
    the time of the stop). ``history`` sits after the output; a second
    one, ``proc.upstream_history``, before the TTS: it sees no playback start
    or stop, only what comes back upstream (text, word timings, marks, the
    interruption), so its cut rests on the marks alone."""
    require_espeak()
    clock = VirtualClock()
    tts.clock = clock
    proc = BargeInProcessor(clock, BargeInController(clock))
    history = HistoryTruncator(clock, [{"role": "system", "content": "You track orders."}])
    upstream = HistoryTruncator(clock, [{"role": "system", "content": "You track orders."}])
    sink = CollectSink()
    pipe = Pipeline([upstream, tts, proc, history, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(StartFrame())
        await pipe.queue_frame(TranscriptFrame(text="where is my order", is_final=True))
        await pipe.queue_frame(TurnEndFrame(detector="test"))
        await pipe.queue_frame(LLMTextFrame(reply_id=1, text=REPLY[:40]))  # streamed
        await pipe.queue_frame(LLMTextFrame(reply_id=1, text=REPLY[40:], final=True))
        await pipe.wait_idle()
        if stop_at is None:
            words = proc.cursor.reply(1).words
            assert words is not None and stop_after is not None
            # Half way between the end of the word and the end of the next.
            stop_at = (words[stop_after - 1].end + words[stop_after].end) / 2
        onset = stop_at - 0.064
        await clock.advance_to(onset)
        await pipe.queue_frame(_caller_frame(onset, True))
        await clock.advance_to(onset + 0.032)
        await pipe.queue_frame(_caller_frame(onset + 0.032, False))
        await clock.advance_to(stop_at)
        await pipe.queue_frame(TranscriptFrame(at=stop_at, text="wait stop"))
        await pipe.wait_idle()
        await clock.advance_to(stop_at + 2.0)
        await pipe.wait_idle()
    finally:
        await pipe.stop()
    return proc, history, upstream, sink, stop_at


async def test_turnkit_pipeline_history_holds_the_words_heard_from_the_marks():
    """Real espeak-ng audio and word timings (TTSProcessor), paced out by
    the BargeInProcessor, which sends playback marks as samples play; the
    controller stops the reply on the caller's words; the history after the
    output is cut to exactly the words whose audio played."""
    require_espeak()
    k = 7  # "Your order shipped on Monday, and it" played; "should" not
    proc, history, upstream, sink, stop_at = await _barge_in_call(TTSProcessor(EspeakTTS()), k)
    assert proc.actions == [Action.STOP] and proc.confirms == 1
    marks = [f for f in sink.frames if isinstance(f, PlaybackMarkFrame)]
    assert len(marks) == proc.marks > 10
    played = [m.played_s for m in marks]
    assert played == sorted(played) and played[-1] <= stop_at + 1e-9
    assert stop_at - played[-1] < 0.02 + 1e-9  # one 20 ms frame
    stamps = [f for f in sink.frames if isinstance(f, WordTimestampsFrame)]
    assert len(stamps) == 2  # one per sentence, in the reply's audio time
    assert stamps[1].words[0].start > stamps[0].words[-1].end
    heard = " ".join(REPLY.split()[:k])
    assert history.messages[1:] == [
        {"role": "user", "content": "where is my order"},
        {"role": "assistant", "content": heard + " [interrupted by the caller]"},
    ]
    assert history.cuts[-1][1].method == "timestamps"
    # Before the TTS, from the upstream marks alone: the same cut.
    assert upstream.messages == history.messages
    assert upstream.cursor.reply(1).marks == len(marks)
    # The marks' text offsets say how far the caller had heard: the
    # controller got the same (on_agent_progress), the last one is the cut.
    assert marks[-1].text_offset == len(heard)
    assert [m.text_offset for m in marks] == sorted(m.text_offset for m in marks)
    assert proc.cursor.heard(1).text == heard


async def test_turnkit_pipeline_without_word_timings_cuts_on_sentence_anchors():
    """A TTS without word timings (espeak-ng's whole-sentence rendering):
    each sentence's audio end anchors the estimate. Stopped in the second
    sentence, the cut lands within one word of the words played."""
    require_espeak()
    tts = TTSProcessor(EspeakTTS(), word_timings=False)
    words = REPLY.split()
    first = len(REPLY[: REPLY.index("Would")].split())
    # 0.6 s into the second sentence.
    one = await EspeakTTS().synthesize(REPLY[: REPLY.index("Would")].strip())
    stop_at = len(one) / EspeakTTS.sample_rate + 0.6
    _, history, upstream, sink, _ = await _barge_in_call(tts, None, stop_at)
    stamps = [f for f in sink.frames if isinstance(f, WordTimestampsFrame)]
    assert [s.words for s in stamps] == [[], []] and stamps[0].anchor_offset == len(
        " ".join(words[:first])
    )
    cut = history.cuts[-1][1]
    assert cut.method == "anchors"
    assert upstream.messages == history.messages
    # The reference: espeak-ng's word timings of the same sentence, scaled
    # to the whole-sentence rendering's length.
    second = await EspeakTTS().synthesize_words(" ".join(words[first:]))
    whole = await EspeakTTS().synthesize(" ".join(words[first:]))
    scale = (len(whole) / EspeakTTS.sample_rate) / second.duration
    truth = sum(1 for w in second.words if w.end * scale <= 0.6)
    assert abs((cut.words_kept - first) - truth) <= 1, (cut.text, truth)


async def test_tts_speaks_each_sentence_once_it_ends_and_nothing_after_an_interruption():
    """TTSProcessor on espeak-ng: a sentence is rendered when its end
    arrives (the rest waits for more text or the reply's end); after an
    interruption comes back upstream, the reply's later text is not spoken;
    the next reply is."""
    require_espeak()
    tts = TTSProcessor(EspeakTTS())
    sink = CollectSink()
    pipe = Pipeline([tts, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(LLMTextFrame(reply_id=1, text="Hello there. How"))
        await pipe.wait_idle()
        said = [f.text for f in sink.frames if isinstance(f, AgentTextFrame)]
        assert said == ["Hello there."]
        await tts.deliver(InterruptionFrame(reason="barge-in"), FrameDirection.UPSTREAM)
        await pipe.queue_frame(LLMTextFrame(reply_id=1, text=" are you?", final=True))
        await pipe.queue_frame(LLMTextFrame(reply_id=2, text="Fine", final=False))
        await pipe.queue_frame(LLMTextFrame(reply_id=2, text=", thanks", final=True))
        await pipe.wait_idle()
    finally:
        await pipe.stop()
    said = [(f.reply_id, f.text) for f in sink.frames if isinstance(f, AgentTextFrame)]
    assert said == [(1, "Hello there."), (2, "Fine, thanks")]
    audio = {f.reply_id for f in sink.frames if isinstance(f, AudioOutFrame)}
    assert audio == {1, 2} and tts.rendered == 2
    stamps = [f for f in sink.frames if isinstance(f, WordTimestampsFrame)]
    assert [[w.text for w in f.words] for f in stamps] == [["Hello", "there."], ["Fine,", "thanks"]]
    # Each reply's words are timed from its own first sample.
    assert all(f.words[0].start < 0.2 for f in stamps)


class CountingEspeak(EspeakTTS):
    """The real espeak-ng TTS, counting what it renders."""

    def __init__(self) -> None:
        super().__init__()
        self.renders: list[str] = []

    async def synthesize_words(self, text: str) -> WordTimedAudio:
        self.renders.append(text)
        return await super().synthesize_words(text)


async def test_a_drafts_first_sentence_is_rendered_ahead_and_heard_only_if_released():
    """Preemptive TTS: a held draft's text (DraftTextFrame) is rendered ahead,
    its first sentence only, and nothing of it is pushed; the released
    reply's first sentence is spoken from that render (no second render),
    its next sentence rendered as it comes; the draft voided before it is
    never heard and its render is dropped."""
    require_espeak()
    engine = CountingEspeak()
    # The drafter learns the TTS's time to a sentence's audio from its renders.
    drafter = EagerDrafter(VirtualClock(), DraftParams(first_token_ms=350, learn_first_audio=True))
    assert drafter.hold_ms == 350.0  # none measured yet
    tts = TTSProcessor(engine, on_render=drafter.on_first_audio)
    sink = CollectSink()
    pipe = Pipeline([tts, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(DraftTextFrame(reply_id=3, text="Sure. Your table"))
        await pipe.queue_frame(DraftTextFrame(reply_id=4, text="No problem"))
        await pipe.queue_frame(DraftTextFrame(reply_id=4, text=". I'll check"))
        await pipe.wait_idle()
        assert not [f for f in sink.frames if isinstance(f, AgentTextFrame | AudioOutFrame)]
        await pipe.queue_frame(LLMTextFrame(reply_id=4, text="No problem. I'll check"))
        await pipe.queue_frame(LLMTextFrame(reply_id=4, text=" now.", final=True))
        await pipe.queue_frame(EndFrame())
        await pipe.wait_idle()
    finally:
        await pipe.stop()
    said = [(f.reply_id, f.text) for f in sink.frames if isinstance(f, AgentTextFrame)]
    assert said == [(4, "No problem."), (4, "I'll check now.")]
    assert {f.reply_id for f in sink.frames if isinstance(f, AudioOutFrame)} == {4}
    assert tts.prerendered == 1 and tts.rendered == 2
    # The first sentence rendered once, ahead; the voided draft's (if its
    # render got that far) never pushed.
    assert engine.renders.count("No problem.") == 1 and "I'll check now." in engine.renders
    assert drafter.first_audio_ms > 0.0 and drafter.hold_ms == 350.0 + drafter.first_audio_ms
    stamps = [f for f in sink.frames if isinstance(f, WordTimestampsFrame)]
    assert [[w.text for w in f.words] for f in stamps] == [
        ["No", "problem."],
        ["I'll", "check", "now."],
    ]


class FakeFailingTTS:
    """A fake TTS whose every render fails, each once ``gate`` is set (a
    render still running when the draft is released)."""

    identity = "fake-failing"
    sample_rate = 16000

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def synthesize(self, text: str) -> np.ndarray:
        self.calls += 1
        await self.gate.wait()
        raise TTSError(f"fake failure for {text!r}")


async def test_fake_tts_a_sentence_that_fails_is_counted_once_for_its_reply():
    """A draft's pre-render is not counted when it fails, also when its
    reply was released while it ran: the reply renders the sentence again,
    and that failure is the one counted."""
    engine = FakeFailingTTS()
    tts = TTSProcessor(engine)
    sink = CollectSink()
    pipe = Pipeline([tts, sink])
    await pipe.start()
    try:
        await pipe.queue_frame(DraftTextFrame(reply_id=5, text="One moment.", final=True))
        await pipe.wait_idle()
        assert engine.calls == 1  # the draft's render, waiting
        # Released while the draft's render still runs: the reply waits for it.
        release = asyncio.create_task(
            pipe.queue_frame(LLMTextFrame(reply_id=5, text="One moment.", final=True))
        )
        async with asyncio.timeout(30):
            while 5 not in tts._replies:
                await asyncio.sleep(0.01)
        engine.gate.set()
        await release
        await pipe.queue_frame(EndFrame())
        await pipe.wait_idle()
    finally:
        await pipe.stop()
    assert engine.calls == 2  # the draft's render, then the reply's own
    assert tts.failed == 1 and tts.rendered == 0
    assert not [f for f in sink.frames if isinstance(f, AudioOutFrame)]


async def test_audio_rendered_after_a_stop_is_not_played():
    """The TTS may finish a sentence of a reply the caller has just stopped
    (it hears of the stop after its render): that audio is dropped, and the
    next reply plays."""
    clock = VirtualClock()
    proc = BargeInProcessor(clock, BargeInController(clock))
    sink = CollectSink()
    pipe = Pipeline([proc, sink])
    await pipe.start()

    def out(rid: int, n: int) -> list[AudioOutFrame]:
        return [
            AudioOutFrame(audio=np.zeros(320, np.float32), sample_rate=16000, reply_id=rid)
            for _ in range(n)
        ]

    try:
        await pipe.queue_frame(AgentTextFrame(reply_id=1, text="Your order shipped on Monday."))
        for f in out(1, 25):
            await pipe.queue_frame(f)
        await pipe.wait_idle()
        await clock.advance_to(0.1)
        await pipe.queue_frame(_caller_frame(0.1, True))
        await pipe.queue_frame(TranscriptFrame(at=0.1, text="wait no"))
        await pipe.wait_idle()
        assert proc.actions == [Action.STOP] and proc.confirms == 1
        played = sum(isinstance(f, AudioOutFrame) for f in sink.frames)
        await pipe.queue_frame(AgentTextFrame(reply_id=1, text="It arrives Friday."))
        for f in out(1, 10):  # the late sentence of the stopped reply
            await pipe.queue_frame(f)
        await pipe.wait_idle()
        await clock.advance_to(1.0)
        await pipe.wait_idle()
        assert sum(isinstance(f, AudioOutFrame) for f in sink.frames) == played
        assert not proc.playing and proc.cursor.reply(1).text == "Your order shipped on Monday."
        await pipe.queue_frame(AgentTextFrame(reply_id=2, text="Sure."))
        for f in out(2, 5):
            await pipe.queue_frame(f)
        await pipe.wait_idle()  # the player starts
        await clock.advance_to(2.0)
        await pipe.wait_idle()
    finally:
        await pipe.stop()
    assert sum(isinstance(f, AudioOutFrame) for f in sink.frames) == played + 5
    started = [f.reply_id for f in sink.frames if isinstance(f, AgentAudioStartedFrame)]
    assert started == [1, 2]


# --- the Responder's history, through the cursor the output feeds ----------------


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server() as base_url:
        yield base_url


async def test_responder_history_holds_the_words_heard_on_the_real_engine(engine: str):
    """turnkit's whole reply path on the real clock: the Responder streams
    the real engine's reply, TTSProcessor renders it with espeak-ng word
    timings, the BargeInProcessor plays it and feeds the cursor it shares
    with the Responder; once three words have played the caller says "wait
    stop", the controller stops the reply, and the Responder's history (what
    the next LLM request sends) holds the words whose audio ended by then."""
    require_espeak()
    clock = RealClock()
    cursor = PlaybackCursor(clock)
    client = ChatClient(engine, first_token_timeout_s=60)
    responder = ResponderProcessor(
        lambda emit: Responder(
            client,
            clock,
            emit=emit,
            cursor=cursor,
            system_prompt="You are a phone agent. Answer in two full spoken sentences.",
            params=ResponderParams(max_tokens=60, temperature=0.0),
        )
    )
    proc = BargeInProcessor(clock, BargeInController(clock), cursor=cursor)
    sink = CollectSink()
    pipe = Pipeline([responder, TTSProcessor(EspeakTTS(), clock), proc, sink])
    await pipe.start()

    async def until(cond, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
        async with asyncio.timeout(timeout):
            while not cond():
                await asyncio.sleep(0.005)

    def stamped() -> list[Word]:
        rid = proc.playing_reply
        return list(cursor.reply(rid).words or []) if proc.playing and rid else []

    try:
        await pipe.queue_frame(TranscriptFrame(text="where is my order", is_final=True))
        await pipe.queue_frame(TurnEndFrame(detector="test"))
        # Three words played (and the reply has more).
        await until(lambda: len(stamped()) > 4 and proc.played_s >= stamped()[2].end + 0.05)
        rid = proc.playing_reply
        now = clock.now()
        await pipe.queue_frame(_caller_frame(now, True))
        await pipe.queue_frame(TranscriptFrame(at=now, text="wait stop"))
        await until(lambda: proc.confirms == 1)
        await until(lambda: responder.responder.history[-1]["role"] == "assistant")
        await pipe.wait_idle()
    finally:
        await pipe.stop()
        await responder.responder.aclose()
        await client.aclose()
    assert proc.actions == [Action.STOP]
    words = cursor.reply(rid).words
    assert words is not None
    played = cursor.played_s(rid)
    # The words whose audio ended by the stop (give or take the 20 ms frame
    # playing at the stop and the time the stop took on a busy machine).
    lo = sum(1 for w in words if w.end <= played - 0.03)
    hi = sum(1 for w in words if w.end <= played + 0.03)
    heard = cursor.heard(rid)
    assert heard.method == "timestamps" and lo <= heard.words_kept <= hi
    assert 3 <= heard.words_kept < heard.words_total
    said = responder.responder.history[-1]["content"]
    assert said == heard.text + " [interrupted by the caller]", (said, heard)
    assert [m["role"] for m in responder.responder.history] == ["system", "user", "assistant"]
