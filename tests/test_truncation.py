"""History truncation: heard words from real espeak-ng audio (exact with its
word timings, ±1 word with the estimate), the chat-history shapes, the
OpenAI Realtime truncate event.

Tests that need espeak-ng skip without it, unless ``TURNKIT_REQUIRE_TTS=1``
(CI), where they fail. Install: ``apt-get install -y espeak-ng``.
"""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from pydantic import ValidationError
from real_tts import require_espeak

from turnkit.barge_in.truncation import (
    Heard,
    ReplyProgress,
    TruncationConfig,
    align_timestamps,
    char_proportional_words,
    estimate_word_timings,
    heard_prefix,
    realtime_truncate_event,
    reply_span,
    tokens,
    truncate_history,
)
from turnkit.frames import Word
from turnkit.tts import EspeakTTS, WordTimedAudio, WordTimedTTS

REPLIES = (
    "Thank you. I found an account ending in eight eight four, registered to a John "
    "Carter at forty two Elm Road, with a balance due of sixty dollars.",
    "Certainly, a table for four on Saturday. What time would you like to come in?",
    "Okay. I'm going to run a line test now. This will take about a minute.",
)




@pytest.fixture(scope="module")
def rendered() -> list[WordTimedAudio]:
    require_espeak()
    tts = EspeakTTS()

    async def render() -> list[WordTimedAudio]:
        return [await tts.synthesize_words(t) for t in REPLIES]

    return asyncio.run(render())


def _truth(words: list[Word], played: float) -> int:
    return next((i for i, w in enumerate(words) if w.end > played), len(words))


# --- real TTS word timings ----------------------------------------------------


def test_espeak_word_timings_match_the_audio(rendered):
    tts = EspeakTTS()
    assert isinstance(tts, WordTimedTTS)
    for text, r in zip(REPLIES, rendered, strict=True):
        assert [w.text for w in r.words] == text.split()
        assert r.sample_rate == tts.sample_rate
        a = np.abs(r.audio)
        rate = r.sample_rate
        prev_end = 0.0
        for w in r.words:
            assert w.start >= prev_end - 1e-9 and w.end > w.start
            s, e = round(w.start * rate), round(w.end * rate)
            # The word's first and last samples are sound, the gap before it silence.
            assert a[s] > 1e-3 and a[e - 1] > 1e-3
            assert a[round(prev_end * rate) + 1 : s - 1].max(initial=0.0) == 0.0
            prev_end = w.end
        assert r.duration >= r.words[-1].end


def test_timestamps_cut_exactly_at_every_word_boundary(rendered):
    for text, r in zip(REPLIES, rendered, strict=True):
        words = list(r.words)
        for k, w in enumerate(words):
            for played, expect in ((w.end - 0.01, k), (w.end, k + 1), (w.end + 0.01, k + 1)):
                h = heard_prefix(text, played, timestamps=words, duration_s=r.duration)
                assert h.method == "timestamps"
                assert h.words_kept == expect, (text, played)
                assert h.text == " ".join(text.split()[:expect])


def test_half_spoken_word_policy(rendered):
    text, r = REPLIES[1], rendered[1]
    w = r.words[3]  # "four"
    mid = w.start + 0.6 * (w.end - w.start)
    kept = {
        f: heard_prefix(
            text, mid, timestamps=r.words, config=TruncationConfig(min_word_fraction=f)
        ).words_kept
        for f in (1.0, 0.5, 0.0)
    }
    assert kept == {1.0: 3, 0.5: 4, 0.0: 4}
    just_started = w.start + 0.001
    assert (
        heard_prefix(
            text, just_started, timestamps=r.words, config=TruncationConfig(min_word_fraction=0.0)
        ).words_kept
        == 4
    )
    assert heard_prefix(text, just_started, timestamps=r.words).words_kept == 3


def test_estimate_is_within_one_word_on_real_audio(rendered):
    rng = random.Random(7)
    est_err, base_err = [], []
    for text, r in zip(REPLIES, rendered, strict=True):
        base = char_proportional_words(text, r.duration)
        for _ in range(300):
            played = rng.uniform(0.0, r.duration)
            true = _truth(list(r.words), played)
            h = heard_prefix(text, played, duration_s=r.duration)
            assert h.method == "estimate"
            est_err.append(h.words_kept - true)
            base_err.append(_truth(base, played) - true)
    est = np.abs(np.asarray(est_err))
    assert np.mean(est <= 1) >= 0.97
    assert est.max() <= 2
    # Better than spreading characters evenly, on the same cuts.
    assert est.mean() < np.abs(np.asarray(base_err)).mean()


def test_estimate_passes_through_anchors(rendered):
    text, r = REPLIES[2], rendered[2]
    toks = tokens(text)
    # Where the second sentence starts in the audio: known, as a TTS
    # rendering sentence by sentence would know it.
    i = next(k for k, (s, e) in enumerate(toks) if text[s:e] == "Okay.")
    anchor_t = r.words[i + 1].start
    anchor_c = toks[i + 1][0]
    est = estimate_word_timings(text, duration_s=r.duration, anchors=[(anchor_t, anchor_c)])
    assert est[i].end <= anchor_t <= est[i + 1].start
    assert est[-1].end <= r.duration
    # Played exactly to the anchor: the first sentence is heard, nothing more.
    h = heard_prefix(text, anchor_t, anchors=[(anchor_t, anchor_c)], duration_s=r.duration)
    assert h.method == "anchors" and h.text == "Okay."


def test_estimate_without_duration_uses_the_rate_measured_so_far():
    text = "One two three. Four five six seven eight nine ten."
    toks = tokens(text)
    # A slow speaker: the first sentence took 3 s.
    slow = estimate_word_timings(text, anchors=[(3.0, toks[3][0])])
    nominal = estimate_word_timings(text)
    assert slow[-1].end - slow[3].start > 2 * (nominal[-1].end - nominal[3].start)


def test_align_timestamps_from_another_tokenisation():
    text = "Sure, seven o'clock — for two."
    words = [
        Word(text="Sure", start=0.0, end=0.3),
        Word(text=",", start=0.3, end=0.3),
        Word(text="seven", start=0.4, end=0.8),
        Word(text="o", start=0.8, end=0.9),
        Word(text="clock", start=0.9, end=1.2),
        Word(text="for", start=1.4, end=1.6),
        Word(text="two", start=1.6, end=1.9),
    ]
    out = align_timestamps(text, words)
    assert [(w.start, w.end) for w in out if w] == [
        (0.0, 0.3),
        (0.4, 0.8),
        (0.8, 1.2),
        (1.2, 1.2),
        (1.4, 1.6),
        (1.6, 1.9),
    ]
    assert heard_prefix(text, 1.25, timestamps=words).text == "Sure, seven o'clock —"
    # A word the TTS never timed is not counted as heard.
    assert heard_prefix(text, 5.0, timestamps=words[:4]).text == "Sure, seven"


def test_played_to_the_end_is_heard_whole():
    text = "Sure. What name is it under?"
    h = heard_prefix(text, 2.0, duration_s=2.0)
    assert h.complete and h.text == text


# --- chat history -------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You book tables."}
USER = {"role": "user", "content": "a table for four on saturday"}


def _heard(n: int, total: int) -> Heard:
    return Heard("x", 0, n, total, 0.0, 0.0, "test")


def test_cut_one_message_with_note():
    msgs = [SYSTEM, USER, {"role": "assistant", "content": "Certainly, a table for four."}]
    out = truncate_history(msgs, 3)
    assert out[:2] == msgs[:2]
    assert out[2] == {
        "role": "assistant",
        "content": "Certainly, a table [interrupted by the caller]",
    }
    assert msgs[2]["content"] == "Certainly, a table for four."  # input untouched
    quiet = truncate_history(msgs, 3, TruncationConfig(note=None, mark_key="turnkit"))
    assert quiet[2] == {
        "role": "assistant",
        "content": "Certainly, a table",
        "turnkit": {"interrupted": True, "heard_words": 3, "words": 5},
    }


def test_heard_whole_is_unchanged():
    msgs = [SYSTEM, USER, {"role": "assistant", "content": "Certainly, a table for four."}]
    assert truncate_history(msgs, 5) == msgs
    assert truncate_history(msgs, 9) == msgs


def test_never_heard_removed_or_marked():
    msgs = [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "Certainly."},
        {"role": "assistant", "content": "What time?"},
    ]
    assert truncate_history(msgs, 0) == [SYSTEM, USER]
    marked = truncate_history(msgs, 0, TruncationConfig(unheard="mark"))
    assert marked == [
        SYSTEM,
        USER,
        {
            "role": "assistant",
            "content": "[not heard by the caller, interrupted before it played] "
            "Certainly. What time?",
        },
    ]


def test_streamed_chunks_cut_across_messages():
    msgs = [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "Certainly, a table for four on Saturday."},
        {"role": "assistant", "content": "What time would you like"},
        {"role": "assistant", "content": " to come in?"},
    ]
    out = truncate_history(msgs, 9)
    assert out == [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "Certainly, a table for four on Saturday."},
        {"role": "assistant", "content": "What time [interrupted by the caller]"},
    ]
    # Cut right at a message boundary: the note goes on the last heard message.
    out = truncate_history(msgs, 7)
    assert out[-1] == {
        "role": "assistant",
        "content": "Certainly, a table for four on Saturday. [interrupted by the caller]",
    }
    assert len(out) == 3


def test_tool_calls_survive_and_results_stay():
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "check_availability", "arguments": '{"day": "saturday"}'},
    }
    msgs = [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "Let me check that.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"free": ["19:30"]}'},
        {"role": "assistant", "content": "Seven thirty is available. Shall I book it?"},
    ]
    assert reply_span(msgs) == [2, 4]
    out = truncate_history(msgs, 2)
    assert out == [
        SYSTEM,
        USER,
        {
            "role": "assistant",
            "content": "Let me [interrupted by the caller]",
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"free": ["19:30"]}'},
    ]
    nothing = truncate_history(msgs, 0)
    assert nothing == [
        SYSTEM,
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"free": ["19:30"]}'},
    ]
    later = truncate_history(msgs, 6)
    assert later[-1] == {"role": "assistant", "content": "Seven thirty [interrupted by the caller]"}


def test_list_content_parts():
    msgs = [
        USER,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Seven thirty is available."},
                {"type": "text", "text": " Shall I book it?"},
            ],
        },
    ]
    out = truncate_history(msgs, _heard(3, 7))
    assert out[1]["content"] == [
        {"type": "text", "text": "Seven thirty is [interrupted by the caller]"}
    ]


def test_no_reply_to_cut_is_a_copy():
    msgs = [SYSTEM, USER]
    out = truncate_history(msgs, 0)
    assert out == msgs and out[1] is not msgs[1]


def test_bad_config_names_the_field():
    with pytest.raises(ValidationError, match="min_word_fraction"):
        TruncationConfig(min_word_fraction=1.5)
    with pytest.raises(ValidationError, match="unheard"):
        TruncationConfig(unheard="drop")  # type: ignore[arg-type]


# --- OpenAI Realtime --------------------------------------------------------------


def test_realtime_truncate_event_shape(rendered):
    text, r = REPLIES[1], rendered[1]
    played = r.words[4].start + 0.5 * (r.words[4].end - r.words[4].start)
    heard = heard_prefix(text, played, timestamps=r.words, duration_s=r.duration)
    ev = realtime_truncate_event("item_abc", heard)
    assert ev == {
        "type": "conversation.item.truncate",
        "item_id": "item_abc",
        "content_index": 0,
        "audio_end_ms": int(played * 1000),
    }
    assert all(isinstance(ev[k], int) for k in ("content_index", "audio_end_ms"))
    snapped = realtime_truncate_event("item_abc", heard, snap_to_word=True, event_id="ev1")
    assert snapped["audio_end_ms"] == int(r.words[3].end * 1000)
    assert snapped["event_id"] == "ev1"
    # Never past the item's audio (the server rejects that).
    over = realtime_truncate_event("item_abc", r.duration + 1.0, audio_duration_s=r.duration)
    assert over["audio_end_ms"] == int(r.duration * 1000)
    assert realtime_truncate_event("i", -0.5)["audio_end_ms"] == 0


def test_reply_progress_answers_as_heard_prefix_as_the_reply_grows() -> None:
    # A host asks on every frame while the reply's text, word times and
    # anchors arrive: the cached timings must follow each change.
    cfg = TruncationConfig()
    progress = ReplyProgress(cfg)
    first = "Sure, your order ships Friday."
    whole = first + " It should arrive by Tuesday, is that okay?"
    words = [Word(text=w, start=0.3 * i, end=0.3 * i + 0.25) for i, w in enumerate(whole.split())]
    steps: list[dict] = [
        {"text": first},
        {"text": first, "anchors": [(1.6, len(first))]},
        {"text": whole, "anchors": [(1.6, len(first))]},
        {"text": whole, "anchors": [(1.6, len(first))], "duration_s": 3.9},
        {"text": whole, "timestamps": words[:5]},
        {"text": whole, "timestamps": words},
    ]
    for kw in steps:
        text = kw.pop("text")
        for k in range(0, 45):
            played = k * 0.1
            assert progress.heard(text, played, **kw) == heard_prefix(
                text, played, config=cfg, **kw
            ), (kw, played)
