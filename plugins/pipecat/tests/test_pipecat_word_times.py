"""Word times from the STT results Pipecat's Deepgram services emit (real
``deepgram-sdk`` result objects, real Pipecat transcription frames): the
engine puts them on its audio clock, so the detector's word-time rules run
in Pipecat as in ``turnkit replay``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepgram.listen.v1.types import ListenV1Results
from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
)
from turnkit.frames import TranscriptFrame
from turnkit.replay.recording import load_recording
from turnkit.text.word_clock import MAX_LAG_S

from turnkit_pipecat import TurnkitTurnEngine
from turnkit_pipecat.replay import recording_frames
from turnkit_pipecat.word_times import WordTimes

CORPUS = Path(__file__).resolve().parents[3] / "recordings"
DELAY_S = 0.25


def deepgram_result(
    words: list[tuple[str, float, float]], covered: float, *, is_final: bool, shift: float = 0.0
) -> ListenV1Results:
    """A Deepgram streaming result as DeepgramSTTService receives it: its
    words' times and its window in seconds of the audio sent on the
    connection (``shift``: that connection began ``shift`` s into the call)."""
    start = (words[0][1] if words else covered) - shift
    return ListenV1Results.model_validate(
        {
            "type": "Results",
            "channel_index": [0, 1],
            "start": start,
            "duration": covered - shift - start,
            "is_final": is_final,
            "speech_final": is_final,
            "channel": {
                "alternatives": [
                    {
                        "transcript": " ".join(w for w, _, _ in words),
                        "confidence": 0.95,
                        "words": [
                            {"word": w, "start": s - shift, "end": e - shift, "confidence": 0.95}
                            for w, s, e in words
                        ],
                    }
                ]
            },
            "metadata": {
                "request_id": "r",
                "model_info": {"name": "nova-3", "version": "1", "arch": "nova-3"},
                "model_uuid": "u",
            },
        }
    )


def as_stt(frames: list[Frame], form: str, shift_after: float | None = None) -> list[Frame]:
    """The corpus replay's transcripts with ``result`` as an STT gives it:
    ``turnkit`` (word times, no utterance id), ``deepgram`` (ListenV1Results;
    with ``shift_after``, the connection restarts there and its times start
    at zero again) or ``none`` (no times)."""
    out: list[Frame] = []
    for f in frames:
        if not isinstance(f, InterimTranscriptionFrame | TranscriptionFrame):
            out.append(f)
            continue
        r = f.result
        assert isinstance(r, dict)
        words = [tuple(w) for w in r["words"]]
        if form == "turnkit":
            result: Any = {"spoken_until": r["spoken_until"], "words": words}
        elif form == "deepgram":
            # The result reaches the agent DELAY_S after its last word; its
            # window ends 50 ms past that word.
            covered = r["spoken_until"] + 0.05
            shift = shift_after if shift_after is not None and covered > shift_after + 1 else 0.0
            result = deepgram_result(
                words, covered, is_final=isinstance(f, TranscriptionFrame), shift=shift
            )
        else:
            result = None
        kind = type(f)
        out.append(kind(text=f.text, user_id=f.user_id, timestamp="", result=result))
    return out


async def _run(frames: list[Frame]) -> tuple[TurnkitTurnEngine, list[TranscriptFrame]]:
    engine = TurnkitTurnEngine("fused")
    engine.detector.set_compute("fixed")
    seen: list[TranscriptFrame] = []
    engine.on_signal(lambda x: seen.append(x) if isinstance(x, TranscriptFrame) else None)
    for f in frames:
        if isinstance(f, InputAudioRawFrame | InterimTranscriptionFrame | TranscriptionFrame):
            await engine.feed(f)
    return engine, seen


def _decisions(engine: TurnkitTurnEngine) -> list[tuple[float, str]]:
    return [(round(d.at, 4), d.reason) for d in engine.decisions]


@pytest.mark.parametrize("name", ["address-to-06", "billing-natural-12"])
async def test_deepgram_results_drive_the_detector_as_turnkit_word_times_do(name: str) -> None:
    """The same call, the recogniser 250 ms late: Deepgram's result objects
    give the engine the same words at the same times as turnkit's own
    dict, so fused decides at the same instants for the same reasons."""
    rec = load_recording(CORPUS / name)
    frames = recording_frames(rec, stt_delay_s=DELAY_S)
    ref, ref_seen = await _run(as_stt(frames, "turnkit"))
    dg, dg_seen = await _run(as_stt(frames, "deepgram"))
    assert dg.word_times.reanchors == 0
    assert [(t.text, t.words) for t in dg_seen] == [(t.text, t.words) for t in ref_seen]
    assert all(t.words for t in dg_seen)
    assert _decisions(dg) == _decisions(ref)
    assert len(dg.decisions) >= len(rec.caller_turns)
    # Without times, the transcripts carry no words: the word-time rules
    # cannot run (what the engine did with Deepgram before).
    _, plain_seen = await _run(as_stt(frames, "none"))
    assert not any(t.words for t in plain_seen)


async def test_a_reconnect_that_restarts_deepgram_times_is_reanchored() -> None:
    """Deepgram's times restart at zero on a new connection: the first
    result after it is seen to lie far behind the audio clock and the
    times are moved onto it, so the words still fall where they were said."""
    rec = load_recording(CORPUS / "billing-natural-12")
    frames = recording_frames(rec, stt_delay_s=DELAY_S)
    restart = rec.caller_turns[2].start - 0.5
    assert restart > MAX_LAG_S
    _, ref_seen = await _run(as_stt(frames, "turnkit"))
    dg, dg_seen = await _run(as_stt(frames, "deepgram", shift_after=restart))
    assert dg.word_times.reanchors == 1
    assert len(dg_seen) == len(ref_seen)
    for got, want in zip(dg_seen, ref_seen, strict=True):
        assert got.text == want.text
        for g, w in zip(got.words, want.words, strict=True):
            # Re-anchored on the result's arrival: late by at most the
            # recogniser's delay, never early.
            assert w.end - 1e-6 <= g.end <= w.end + DELAY_S + 0.1


async def test_flux_turn_info_words_with_and_without_times() -> None:
    """Pipecat's Deepgram Flux service passes Flux's TurnInfo JSON: its words
    may lack times (skipped, no error: the transcript still reaches the
    detector); with times they are on the audio clock, and the turn index is
    the utterance id."""
    engine = TurnkitTurnEngine("fused")
    rec = load_recording(CORPUS / "easy-order-status-01")
    for f in recording_frames(rec)[:40]:  # 1.3 s of audio
        if isinstance(f, InputAudioRawFrame):
            await engine.feed(f)
    untimed = {
        "type": "TurnInfo",
        "event": "Update",
        "turn_index": 0,
        "transcript": "hi there",
        "words": [{"word": "hi", "confidence": 0.9}, {"word": "there", "confidence": 0.8}],
        "audio_window_start": 0.0,
        "audio_window_end": 1.2,
    }
    step = await engine.feed(InterimTranscriptionFrame("hi there", "caller", "", result=untimed))
    assert step.transcript is not None and step.transcript.text == "hi there"
    assert step.transcript.words == []
    timed = dict(
        untimed,
        words=[
            {"word": "hi", "confidence": 0.9, "start": 0.5, "end": 0.7},
            {"word": "there", "confidence": 0.8, "start": 0.75, "end": 1.1},
        ],
    )
    step = await engine.feed(InterimTranscriptionFrame("hi there", "caller", "", result=timed))
    assert step.transcript is not None
    assert [(w.text, w.start, w.end) for w in step.transcript.words] == [
        ("hi", 0.5, 0.7),
        ("there", 0.75, 1.1),
    ]
    assert step.transcript.spoken_until == 1.1
    assert engine._segment == ("flux", 0)


def test_results_without_word_times_give_none() -> None:
    wt = WordTimes()
    for result in (None, "text", {"words": "garbage"}, {"words": [("a", "x", 1.0)]}, object()):
        heard = wt.read(result, 5.0)
        assert heard.words == [] and heard.spoken_until is None
    assert wt.reanchors == 0


def test_reanchored_times_settle_on_the_least_lagged_result() -> None:
    """After a reconnect the first result anchors the times as if it had
    no lag; a later result that came sooner after its audio pulls them back
    (a result's lag can only make its words read late). Deepgram's JSON as
    a dict (the SageMaker service) and another provider's dict of timed
    words are read the same way."""
    wt = WordTimes()

    def dg(start: float, end: float, covered: float) -> dict[str, Any]:
        return {
            "start": start,
            "duration": covered - start,
            "channel": {"alternatives": [{"words": [{"word": "yes", "start": start, "end": end}]}]},
        }

    # On the clock's own base: kept as they are.
    heard = wt.read(dg(10.0, 10.3, 10.35), now=10.6)
    assert (heard.words[0].start, heard.words[0].end) == (10.0, 10.3)
    # A reconnect at 60 s of audio: the provider's times start again at 0.
    heard = wt.read(dg(1.0, 1.3, 1.35), now=61.65)  # 300 ms late
    assert wt.reanchors == 1 and heard.words[0].end == pytest.approx(61.6)
    heard = wt.read(dg(2.0, 2.2, 2.25), now=62.35)  # 100 ms late: the offset drops
    assert wt.offset == pytest.approx(60.1)
    assert heard.words[0].end == pytest.approx(62.3)
    heard = wt.read(dg(3.0, 3.2, 3.25), now=63.65)  # later again: the offset stays
    assert wt.offset == pytest.approx(60.1)
    other = wt.read({"words": [{"word": "no", "start": 4.0, "end": 4.2}]}, now=64.5)
    assert other.words[0].end == pytest.approx(64.3) and other.segment is None
    assert wt.reanchors == 1
