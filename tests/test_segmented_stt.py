"""The replay's segmented recogniser (``--stt segmented``): Whisper behind a
VAD, as the example Pipecat agent runs it, writes each run of the caller's
speech whole once the VAD has closed it, with no word times."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from turnkit.frames import AudioInFrame, TranscriptFrame
from turnkit.pipeline import CollectSink, Pipeline
from turnkit.replay.oracle import (
    VAD_TRAIL_S,
    OracleTranscriber,
    SpeechRun,
    TimedWord,
    oracle_words,
    schedule,
    vad_runs,
)
from turnkit.replay.recording import load_recording
from turnkit.replay.simulator import ReplayConfig, recogniser_runs, replay_call

ROOT = Path(__file__).resolve().parent.parent
CALL = ROOT / "recordings" / "travel-natural-16"


def _sent(segmented: bool, delay_s: float, close_s: float = 0.096) -> list[TranscriptFrame]:
    rec = load_recording(CALL)

    async def run() -> list[TranscriptFrame]:
        sink = CollectSink()
        oracle = OracleTranscriber(
            oracle_words(rec),
            delay_s,
            segmented=segmented,
            close_s=close_s,
            runs=vad_runs(rec) if segmented else None,
        )
        pipe = Pipeline([oracle, sink])
        await pipe.start()
        k = 0
        while k * 0.032 < rec.caller_turns[1].end + 2.0:
            await pipe.queue_frame(
                AudioInFrame(at=k * 0.032, audio=np.zeros(512, np.float32), sample_rate=16000)
            )
            await pipe.wait_idle()
            k += 1
        await pipe.stop()
        return [f for f in sink.frames if isinstance(f, TranscriptFrame)]

    return asyncio.run(run())


def test_each_run_of_speech_is_written_whole_once_the_vad_closed_it() -> None:
    """travel-natural-16's second turn, "From Chicago, | and uh | I'd like
    to leave in the morning.", three runs of speech: a streaming recogniser
    writes it word by word with times; a segmented one writes each run in
    one final once the VAD heard it end and closed it, plus the model's
    delay, stamped with that arrival and carrying no word times."""
    rec = load_recording(CALL)
    turn = rec.caller_turns[1]
    spans = turn.speech_spans()
    assert len(spans) == 3
    runs = [r for r in vad_runs(rec) if turn.start - 0.1 < r.end < turn.end + 0.5]
    assert len(runs) == 3
    streamed = [f for f in _sent(False, 0.0) if f.at > turn.start]
    segmented = [f for f in _sent(True, 0.5) if f.at > turn.start]
    assert len(streamed) > len(segmented) == 3
    assert [f.text for f in segmented] == [
        "from chicago",
        "from chicago and uh",
        "from chicago and uh i'd like to leave in the morning",
    ]
    for frame, (_, end), run in zip(segmented, spans, runs, strict=True):
        assert frame.is_final and not frame.words
        assert frame.at == frame.spoken_until
        assert abs(frame.at - (run.closed + 0.5)) < 1e-9
        # The VAD hears the run end past its last word (a fading end) and
        # closes it its stop time (96 ms, three frames) after that.
        assert end - 0.032 < run.end < end + 0.2
        assert abs(run.closed - run.end - 0.096) < 1e-6
    assert streamed[-1].text == segmented[-1].text
    assert all(f.words for f in streamed)


def test_a_run_the_vad_splits_is_written_in_its_parts() -> None:
    """One labelled run of speech ("i'd like to | book a table", no pause
    marked) that the VAD hears as two runs (a short pause, as telephone
    audio often gives it): a recogniser behind that VAD writes "i'd like
    to" once the first is closed, not with the rest once the whole labelled
    run has ended (the detector would judge the pause on no words at all).
    A word no VAD run holds (a murmur under its threshold) goes out with
    its labelled run: as heard past the label, closed, and the delay."""
    said = [("i'd", 1.0), ("like", 1.25), ("to", 1.5), ("book", 2.0), ("a", 2.25), ("table", 2.5)]
    words = [TimedWord(w, at, at + 0.25, 0, w == "table") for w, at in said]
    words.append(TimedWord("mm", 5.0, 5.3, 1, True))
    runs = [SpeechRun(0.96, 1.8, 1.896), SpeechRun(2.02, 2.82, 2.916)]
    ordered, due = schedule(words, 0.2, segmented=True, close_s=0.096, runs=runs)
    got = {w.text: round(d, 3) for w, d in zip(ordered, due, strict=True)}
    assert got == {
        "i'd": 2.096,
        "like": 2.096,
        "to": 2.096,
        "book": 3.116,
        "a": 3.116,
        "table": 3.116,
        "mm": round(5.3 + VAD_TRAIL_S + 0.096 + 0.2, 3),
    }
    # Without the VAD's runs, the labelled run goes out whole.
    _, whole = schedule(words, 0.2, segmented=True, close_s=0.096)
    assert len(set(whole[:6])) == 1


def test_runs_are_the_ones_the_vad_hears_behind_the_echo_filter() -> None:
    """bargein-friday-05: the caller's "Sorry, | actually make that Friday."
    begins under the agent's reply, whose echo is in the caller's track. A
    VAD on the raw track hears echo and caller as one run from 5.5 s to
    10.2 s; the session's VAD, behind the echo filter, hears "sorry" end at
    8.6 s, and a recogniser fed its segments writes it then."""
    rec = load_recording(ROOT / "recordings" / "bargein-friday-05")
    turn = rec.caller_turns[1]
    raw = [r for r in vad_runs(rec) if r.start < turn.start < r.end]
    assert raw and raw[0].start < turn.start - 2.0 and raw[0].end > turn.end
    heard = recogniser_runs(rec, ReplayConfig())
    runs = [r for r in heard if r.end > turn.start]
    (s0, e0), _ = turn.speech_spans()
    assert abs(runs[0].start - s0) < 0.15 and abs(runs[0].end - e0) < 0.15
    ordered, due = schedule(oracle_words(rec), 0.3, segmented=True, close_s=0.096, runs=heard)
    sorry = next(d for w, d in zip(ordered, due, strict=True) if w.text == "sorry")
    assert sorry == runs[0].closed + 0.3


def test_a_segmented_replay_waits_for_what_the_recogniser_has_not_written() -> None:
    """The same call replayed with each recogniser. With a streaming one
    writing on time, fused judges the pause after "from chicago" on those
    words and ends the turn there (the caller's "and uh" follows: a cut).
    With the segmented one and a Whisper-like 500 ms delay, that run's words
    do not exist at the pause: the decision waits for them, and the caller
    goes on first; the turn is ended once, after its last run's words came,
    on them. ReplayConfig records which recogniser it was."""
    rec = load_recording(CALL)
    got: dict[str, list] = {}
    for mode, delay in (("streaming", 0), ("segmented", 500)):
        # No drafts: a draft out would hold that commit past the caller's "and".
        cfg = ReplayConfig(compute="fixed", stt=mode, stt_delay_ms=delay, eager=False)
        asyncio.run(
            replay_call(rec, "fused", cfg, observe=lambda a, m=mode: got.setdefault(m, a.decisions))
        )
    turn = rec.caller_turns[1]
    hold = turn.speech_spans()[0][1]  # the pause after "from chicago"
    at_hold = [d for d in got["streaming"] if 0 < d.at - hold < 0.5]
    assert len(at_hold) == 1 and "p_text" in at_hold[0].reason, got["streaming"]
    in_turn = [d for d in got["segmented"] if hold < d.at < turn.end + 2.0]
    assert len(in_turn) == 1, got["segmented"]
    # The last run's words: its end, the VAD's stop time, the delay.
    assert in_turn[0].at >= turn.end + 0.096 + 0.5 - 0.032, in_turn[0]
    assert "p_text" in in_turn[0].reason, in_turn[0].reason
    assert ReplayConfig(stt="segmented").model_dump()["stt"] == "segmented"


def test_a_caller_reading_the_number_the_reply_will_read_back_is_heard() -> None:
    """phone-digits-02, a segmented recogniser 300 ms slow: the detector
    ends "my number is four one five five five five" at the digit run's
    ceiling, and the reply ("Thanks. I have four one five, five five five,
    zero one three two. Is that right?") begins as the caller goes on with
    "zero one three two". Those words were taken for the reply's echo (its
    text holds them, though 0.2 s of it had played) and the agent talked
    over the caller, who got no answer; now the agent stops for them and
    answers the whole number."""
    rec = load_recording(ROOT / "recordings" / "phone-digits-02")
    cfg = ReplayConfig(compute="fixed", stt="segmented", stt_delay_ms=300)
    score = asyncio.run(replay_call(rec, "fused", cfg))
    turn = next(t for t in score.turns if t.turn == 1)
    assert not turn.missed and turn.response_ms is not None, turn


def test_a_fast_segmented_recogniser_leaves_no_turn_unanswered() -> None:
    """appointment-natural-13, Whisper behind a VAD with no model time
    (``--stt-delay-ms 0``): "Hello I need to move my appointment to another
    day." was written as the replay's VAD still heard its fading end, taken
    for the runs before, and the turn's commit, due at the segment's
    ceiling, waited for a draft first that no eager signal asks for while
    words are owed: no reply at all (fused and smart-turn: 17 and 18 of the
    demo's 66 turns). Every turn is answered now, the first on its words."""
    rec = load_recording(ROOT / "recordings" / "appointment-natural-13")
    got: list = []
    cfg = ReplayConfig(compute="fixed", stt="segmented")
    score = asyncio.run(replay_call(rec, "fused", cfg, observe=lambda a: got.extend(a.decisions)))
    assert [t.turn for t in score.turns if t.missed] == []
    first = rec.caller_turns[0]
    ends = [d for d in got if first.end < d.at < first.end + 1.0]
    assert len(ends) == 1 and "p_text" in ends[0].reason, ends


def test_cli_stt_option(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cmd = [
        sys.executable,
        "-m",
        "turnkit.cli",
        "replay",
        str(ROOT / "recordings" / "easy-short-08"),
    ]
    res = subprocess.run(
        [*cmd, "-d", "silence", "--stt", "segmented", "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["config"]["stt"] == "segmented"
    res = subprocess.run([*cmd, "--stt", "whisper"], capture_output=True, text=True)
    assert res.returncode == 2
    err = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "--stt" in err[0] and "Traceback" not in res.stderr
