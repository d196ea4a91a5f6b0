"""The live-call recorder core: a call played through it chunk by chunk, as
a live host would feed it, comes back as a turnkit.recording/v1 folder that
loads, replays, and gives back the corpus labels it was played from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from turnkit.audio.wav import read_wav
from turnkit.clock import VirtualClock
from turnkit.replay.recorder import CallRecorder, RecorderError
from turnkit.replay.recording import Recording, load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call

SR = 16000
CORPUS = Path(__file__).resolve().parent.parent / "recordings"
# The clock of a live host does not start at the call: the recorder must
# map its times onto the recording's own timeline.
T0 = 100.0
# Derived speech edges (Silero, 32 ms frames) against energy-envelope labels.
EDGE_SLACK_S = 0.12


@dataclass(order=True)
class _Ev:
    at: float
    order: int
    kind: str
    data: Any = None


async def play_call(
    src: Recording,
    folder: Path,
    *,
    chunk_ms: float = 20.0,
    host_vad: bool = False,
    caller_rate: int = SR,
    overrun_s: float = 2.0,
    onset_late_s: float = 0.0,
) -> Path | None:
    """Feed ``src`` to a CallRecorder the way a live host would: mic chunks
    as they arrive, each agent reply's audio queued when it starts (with
    ``overrun_s`` more than was played, dropped by the interruption where
    the caller barged in), finals 300 ms after each turn, agent text just
    before its audio. ``onset_late_s``: the host's VAD reports each speech
    start that much after it began (an edge given when the VAD is sure)."""
    clock = VirtualClock(T0)
    rec = CallRecorder(folder, clock=clock, call_id=src.id + "-rec", tags=["test"])
    caller = read_wav(src.caller_path, caller_rate)
    assert src.agent_path is not None
    agent = read_wav(src.agent_path, SR)
    evs: list[_Ev] = []
    n = round(chunk_ms / 1000 * caller_rate)
    for i in range(0, len(caller), n):
        chunk = caller[i : i + n]
        evs.append(_Ev(T0 + (i + len(chunk)) / caller_rate, 0, "mic", chunk))
    turns = src.caller_turns
    for a in src.agent_turns:
        barged = any(a.start < t.start < a.end for t in turns)
        end = a.end + overrun_s if barged else a.end
        audio = agent[round(a.start * SR) : round(end * SR)]
        evs.append(_Ev(T0 + a.start - 0.2, 1, "agent_text", a.text))
        evs.append(_Ev(T0 + a.start, 2, "agent_audio", audio))
        if barged:
            evs.append(_Ev(T0 + a.end, 3, "interrupt"))
    for t in turns:
        words = [(w.text, T0 + w.start, T0 + w.end) for w in t.words or []]
        evs.append(_Ev(T0 + t.end + 0.3, 4, "final", (t.text, words)))
        if host_vad:
            for s, e in t.speech_spans():
                evs.append(_Ev(T0 + s + 0.064, 5, "vad_start", T0 + s + onset_late_s))
                evs.append(_Ev(T0 + e + 0.2, 6, "vad_stop", T0 + e))
    for ev in sorted(evs):
        await clock.advance_to(max(clock.now(), ev.at))
        if ev.kind == "mic":
            rec.caller_audio(ev.data, caller_rate)
        elif ev.kind == "agent_text":
            rec.agent_text(ev.data)
        elif ev.kind == "agent_audio":
            rec.agent_audio(ev.data, SR)
        elif ev.kind == "interrupt":
            rec.agent_interrupted()
        elif ev.kind == "final":
            rec.transcript(ev.data[0], words=ev.data[1])
        elif ev.kind == "vad_start":
            rec.caller_speech_started(ev.data)
        elif ev.kind == "vad_stop":
            rec.caller_speech_stopped(ev.data)
    rec.turn_event("user_turn_end", detector="test")
    return rec.finish()


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


async def test_round_trip_derived_speech_replays_like_the_source(tmp_path: Path) -> None:
    src = load_recording(CORPUS / "easy-order-status-01")
    out = await play_call(src, tmp_path / "call")
    assert out is not None
    got = load_recording(out, check_audio=True)
    manifest = json.loads((out / "call.json").read_text())
    assert manifest["live"]["speech_from"] == "turnkit-vad"
    assert got.id == "easy-order-status-01-rec"
    assert _close(got.duration, src.duration, 0.001)
    # Same audio on the same timeline.
    np.testing.assert_allclose(got.caller_audio(), src.caller_audio(), atol=2 / 32768)
    assert len(got.caller_turns) == len(src.caller_turns)
    for g, s in zip(got.caller_turns, src.caller_turns, strict=True):
        assert _close(g.start, s.start, EDGE_SLACK_S), (g.start, s.start)
        assert _close(g.end, s.end, EDGE_SLACK_S), (g.end, s.end)
        assert g.text == s.text
        assert [w.text for w in g.words or []] == [w.text for w in s.words or []]
        assert all(_close(a.start, b.start, 0.001) for a, b in zip(g.words, s.words, strict=True))
    assert len(got.agent_turns) == len(src.agent_turns)
    for g, s in zip(got.agent_turns, src.agent_turns, strict=True):
        assert _close(g.start, s.start, 0.001) and _close(g.end, s.end, 0.001)
        assert g.text == s.text
    # agent.wav holds the agent audio where it played, silence elsewhere.
    agent_src = read_wav(src.agent_path)
    agent_got = read_wav(got.agent_path)
    a = src.agent_turns[1]
    sl = slice(round(a.start * SR) + 10, round(a.end * SR) - 10)
    np.testing.assert_allclose(agent_got[sl], agent_src[sl], atol=2 / 32768)
    assert not agent_got[: round(src.agent_turns[0].start * SR) - 1].any()

    # It replays, and the replay's agent speaks at the same instants as on
    # the source (same audio, same detector); latencies differ only by how
    # far the derived turn ends moved.
    config = ReplayConfig()
    # The recorder does not carry the source's tool_call labels (a slow
    # lookup in turn 1): both replay without them.
    assert src.tool_calls
    src.manifest = src.manifest.model_copy(
        update={"events": [e for e in src.manifest.events if e.type != "tool_call"]}
    )
    score_src = await replay_call(src, "silence", config)
    score_got = await replay_call(got, "silence", config)
    assert len(score_got.turns) == len(score_src.turns)
    for g, s in zip(score_got.turns, score_src.turns, strict=True):
        assert not g.missed and not s.missed
        assert g.response_ms is not None and s.response_ms is not None
        assert _close(g.response_ms + g.end * 1000, s.response_ms + s.end * 1000, 1.0)
        assert g.interrupted == s.interrupted


async def test_round_trip_barge_in_with_host_vad(tmp_path: Path) -> None:
    """Host VAD edges, an interrupted reply whose queued audio never
    played, a caller turn that starts while the agent talks."""
    src = load_recording(CORPUS / "bargein-friday-05")
    out = await play_call(src, tmp_path / "call", host_vad=True, caller_rate=48000)
    assert out is not None
    got = load_recording(out, check_audio=True)
    assert json.loads((out / "call.json").read_text())["live"]["speech_from"] == "host-vad"
    assert [(t.start, t.end) for t in got.caller_turns] == [
        (t.start, t.end) for t in src.caller_turns
    ]
    assert [t.speech_spans() for t in got.caller_turns] == [
        [tuple(x) for x in t.speech_spans()] for t in src.caller_turns
    ]
    # The interrupted reply ends where playback stopped, not where its
    # queued audio would have.
    assert [(a.start, a.end) for a in got.agent_turns] == [
        (a.start, a.end) for a in src.agent_turns
    ]
    agent_got = read_wav(got.agent_path)
    stop = src.agent_turns[0].end
    assert not agent_got[round(stop * SR) + 1 : round(src.agent_turns[1].start * SR) - 1].any()
    # Same labels, same audio: the replay scores the recording as the source.
    score = await replay_call(got, "silence", ReplayConfig())
    score_src = await replay_call(src, "silence", ReplayConfig())
    # The caller audio went 16 -> 48 -> 16 kHz through two resamplers: the
    # VAD may move an edge by one 32 ms frame, no more.
    assert len(score.turns) == len(score_src.turns)
    for g, s in zip(score.turns, score_src.turns, strict=True):
        assert (g.missed, g.interrupted, g.barge_in) == (s.missed, s.interrupted, s.barge_in)
        if g.response_ms is not None and s.response_ms is not None:
            assert abs(g.response_ms - s.response_ms) <= 32.0 + 1e-6
    assert sum(not t.missed for t in score.turns) >= 2


async def test_words_before_a_late_vad_onset_stay_with_their_turn(tmp_path: Path) -> None:
    """A host whose speech-start edge comes 150 ms after the onset (LiveKit
    reports its user state when the VAD is sure): each transcript's words
    still go to their own turn, which is widened to hold them, and the
    folder loads (before: words outside the turn failed the format check,
    and a later turn's transcript went to the turn before it)."""
    src = load_recording(CORPUS / "order-natural-15")
    out = await play_call(src, tmp_path / "call", host_vad=True, onset_late_s=0.15)
    assert out is not None
    got = load_recording(out, check_audio=True)
    assert [t.text for t in got.caller_turns] == [t.text for t in src.caller_turns]
    for g, s in zip(got.caller_turns, src.caller_turns, strict=True):
        assert [w.text for w in g.words or []] == [w.text for w in s.words or []]
        assert all(_close(a.start, b.start, 0.001) for a, b in zip(g.words, s.words, strict=True))
        if s.words:
            assert g.start <= s.words[0].start + 0.001 and g.end >= s.words[-1].end - 0.001


async def test_speech_the_agent_talked_through_is_not_a_turn(tmp_path: Path) -> None:
    """A backchannel the agent did not stop for: left unlabelled (only a
    listener can say what it was), with its transcript kept beside it."""
    src = load_recording(CORPUS / "address-to-06")
    out = await play_call(src, tmp_path / "call", host_vad=True)
    assert out is not None
    manifest = json.loads((out / "call.json").read_text())
    got = load_recording(out)
    assert len(got.caller_turns) == len(src.caller_turns)
    assert got.backchannels == []
    # The host's VAD here reported caller turns only: nothing was talked over.
    assert manifest["unlabelled_speech"] == []

    rec = CallRecorder(tmp_path / "bc", clock=(clock := VirtualClock(T0)))
    audio = read_wav(src.caller_path)
    rec.caller_audio(audio, SR, at=T0)
    agent = read_wav(src.agent_path)
    a = src.agent_turns[0]
    bc = src.backchannels[0]
    t0 = src.caller_turns[0]
    rec.caller_speech(T0 + t0.start, T0 + t0.end)
    rec.agent_audio(agent[round(a.start * SR) : round(a.end * SR)], SR, at=T0 + a.start)
    rec.caller_speech(T0 + bc.start, T0 + bc.end)
    await clock.advance_to(T0 + bc.end + 0.3)
    rec.transcript(bc.text)
    out = rec.finish()
    assert out is not None
    manifest = json.loads((out / "call.json").read_text())
    got = load_recording(out)
    assert len(got.caller_turns) == 1
    assert manifest["unlabelled_speech"] == [[bc.start, bc.end, bc.text]]


@pytest.mark.parametrize("kind", ["user_turn_end", "end"])
async def test_speech_the_agent_talked_through_but_the_host_answered_is_a_turn(
    tmp_path: Path, kind: str
) -> None:
    """The caller answers ("Yes.") while the agent finishes its reply, the
    agent talks on, and the host commits the user turn (LiveKit's
    ``user_turn_end``): a caller turn with its words, not unlabelled speech
    (a LiveKit recording dropped it, and its replay judged the "Yes."
    wordless: 900 ms against the live 247 ms). Talked-through speech before
    it in the same reply joins it. A detector's decision alone (``end``) is
    no commit: the host may have talked through it."""
    src = load_recording(CORPUS / "address-to-06")
    rec = CallRecorder(tmp_path / "yes", clock=(clock := VirtualClock(T0)))
    rec.caller_audio(read_wav(src.caller_path), SR, at=T0)
    agent = read_wav(src.agent_path)
    a = src.agent_turns[0]
    bc = src.backchannels[0]  # speech over the agent's first reply
    t0 = src.caller_turns[0]
    rec.caller_speech(T0 + t0.start, T0 + t0.end)
    rec.agent_audio(agent[round(a.start * SR) : round(a.end * SR)], SR, at=T0 + a.start)
    mid = (bc.start + bc.end) / 2
    rec.caller_speech(T0 + bc.start, T0 + mid - 0.05)
    rec.caller_speech(T0 + mid + 0.05, T0 + bc.end)
    await clock.advance_to(T0 + bc.end + 0.25)
    rec.transcript(bc.text, final=True)
    rec.turn_event(kind)
    out = rec.finish()
    assert out is not None
    manifest = json.loads((out / "call.json").read_text())
    got = load_recording(out)
    if kind == "end":
        assert len(got.caller_turns) == 1 and len(manifest["unlabelled_speech"]) == 2
        return
    assert manifest["unlabelled_speech"] == []
    assert len(got.caller_turns) == 2
    turn = got.caller_turns[1]
    assert (turn.start, turn.end, turn.text) == (bc.start, bc.end, bc.text)
    assert len(turn.speech_spans()) == 2


async def test_a_reply_after_an_interrupted_one_is_its_own_agent_turn(tmp_path: Path) -> None:
    """The caller cut a reply, the host answered at once (0.3 s later): two
    agent turns with their own texts, not one joined over the short gap (the
    replay handed the second reply's text at the first one's start, and a
    turn said over the first was judged against both)."""
    rec, clock = _recorder_on_a_call(tmp_path)
    rec.agent_text("Which day would suit you?", at=T0 + 1.0)
    rec.agent_audio(TONE[: SR * 2], SR, at=T0 + 1.0)  # would play to 3.0 s
    await clock.advance_to(T0 + 2.5)
    rec.agent_interrupted(at=T0 + 2.5)
    rec.agent_text("Thanks, one moment.", at=T0 + 2.8)
    rec.agent_audio(TONE[:SR], SR, at=T0 + 2.8)
    assert await _agent_turns_at(rec, clock, T0 + 4.0) == [
        (1.0, 2.5, "Which day would suit you?"),
        (2.8, 3.8, "Thanks, one moment."),
    ]


TONE = (0.2 * np.sin(np.arange(SR * 3) / 7)).astype(np.float32)


def _recorder_on_a_call(tmp_path: Path) -> tuple[CallRecorder, VirtualClock]:
    """A recorder holding address-to-06's caller audio from T0."""
    src = load_recording(CORPUS / "address-to-06")
    rec = CallRecorder(tmp_path / "two", clock=(clock := VirtualClock(T0)))
    rec.caller_audio(read_wav(src.caller_path), SR, at=T0)
    return rec, clock


async def _agent_turns_at(
    rec: CallRecorder, clock: VirtualClock, end: float
) -> list[tuple[float, float, str]]:
    await clock.advance_to(end)
    out = rec.finish()
    assert out is not None
    return [(a.start, a.end, a.text) for a in load_recording(out).agent_turns]


async def test_a_reply_to_a_turn_committed_between_replies_is_its_own_agent_turn(
    tmp_path: Path,
) -> None:
    """The caller said "Yes." at the end of a reply; the host committed it
    and its answer started 0.1 s after the reply ended: two agent turns,
    not one joined over the short gap (the replay read "Yes." against the
    later reply, a statement, where the live detector had the question).
    A gap with no commit in it still joins."""
    rec, clock = _recorder_on_a_call(tmp_path)
    rec.agent_text("Which day would suit you?", at=T0 + 1.0)
    rec.agent_audio(TONE[: SR * 2], SR, at=T0 + 1.0)  # plays to 3.0 s
    rec.agent_audio(TONE[: SR // 2], SR, at=T0 + 3.2)  # same reply, 0.2 s on: joined
    await clock.advance_to(T0 + 3.7)
    rec.turn_event("user_turn_end", at=T0 + 3.75, text="Yes.")
    rec.agent_text("Thanks, one moment.", at=T0 + 3.8)
    rec.agent_audio(TONE[:SR], SR, at=T0 + 3.8)
    assert await _agent_turns_at(rec, clock, T0 + 5.0) == [
        (1.0, 3.7, "Which day would suit you?"),
        (3.8, 4.8, "Thanks, one moment."),
    ]


async def test_input_gap_is_filled_with_silence_to_keep_the_timeline(tmp_path: Path) -> None:
    clock = VirtualClock(T0)
    rec = CallRecorder(tmp_path / "gap", clock=clock, max_gap_s=0.2)
    tone = (0.3 * np.sin(np.arange(320) / 5)).astype(np.float32)
    rec.caller_audio(tone, SR, at=T0)
    rec.caller_audio(tone, SR, at=T0 + 0.02 + 0.1)  # jitter: appended
    rec.caller_audio(tone, SR, at=T0 + 1.0)  # a dropout: padded
    rec.caller_speech(T0 + 1.0, T0 + 1.02)
    out = rec.finish()
    assert out is not None
    audio, rate = sf.read(out / "caller.wav", dtype="float32")
    assert rate == SR
    assert len(audio) == round(1.02 * SR)
    assert not audio[640:SR].any()
    assert audio[SR : SR + 320].any()
    got = load_recording(out)
    assert [(t.start, t.end) for t in got.caller_turns] == [(1.0, 1.02)]
    assert got.agent_path is None


async def test_resampled_and_int16_inputs_keep_their_duration(tmp_path: Path) -> None:
    clock = VirtualClock()
    rec = CallRecorder(tmp_path / "rates", clock=clock)
    pcm = (np.sin(np.arange(24000) / 7) * 8000).astype("<i2")
    for i in range(0, 24000, 480):  # 1 s at 24 kHz in 20 ms byte chunks
        await clock.advance_to((i + 480) / 24000)
        rec.caller_audio(pcm[i : i + 480].tobytes(), 24000)
    rec.agent_audio(pcm[:4800], 24000, at=0.5)  # int16 ndarray, 0.2 s
    out = rec.finish()
    assert out is not None
    caller = read_wav(out / "caller.wav")
    agent = read_wav(out / "agent.wav")
    # soxr's streaming resampler holds back its filter delay: flushed at the end.
    assert abs(len(caller) - SR) <= 2
    assert len(agent) == len(caller)
    assert not agent[: round(0.5 * SR) - 1].any() and agent[round(0.5 * SR) + 200 :][:1000].any()


async def test_int16_input_at_the_recording_rate_is_written_back_bit_for_bit(
    tmp_path: Path,
) -> None:
    # The recorder reads int16 as k / 32768 and writes round(x * 32768)
    # (turnkit.audio.wav.to_pcm16): the host's samples, unchanged, full
    # scale included (x * 32767 lost an LSB at the top of the range).
    clock = VirtualClock()
    rec = CallRecorder(tmp_path / "exact", clock=clock)
    pcm = (np.sin(np.arange(SR) / 7) * 32767).astype("<i2")
    pcm[100], pcm[101] = -32768, 32767
    for i in range(0, SR, 320):
        await clock.advance_to((i + 320) / SR)
        rec.caller_audio(pcm[i : i + 320].tobytes(), SR)
    out = rec.finish()
    assert out is not None
    got, rate = sf.read(out / "caller.wav", dtype="int16")
    assert rate == SR
    assert np.array_equal(got, pcm)


def test_bad_input_names_the_field(tmp_path: Path) -> None:
    rec = CallRecorder(tmp_path / "bad", clock=VirtualClock())
    with pytest.raises(RecorderError, match=r"caller_audio\.audio: odd number of bytes"):
        rec.caller_audio(b"\x00\x01\x02", SR)
    with pytest.raises(RecorderError, match=r"caller_audio\.sample_rate"):
        rec.caller_audio(np.zeros(10, dtype=np.float32), 0)
    with pytest.raises(RecorderError, match=r"agent_audio\.audio: unsupported sample type"):
        rec.agent_audio(np.zeros(10, dtype=np.int64), SR)
    with pytest.raises(RecorderError, match=r"transcript\.words\[0\]"):
        rec.transcript("hi", words=[("hi", 2.0, 1.0)])
    with pytest.raises(RecorderError, match=r"caller_speech\.end"):
        rec.caller_speech(2.0, 1.0)
    # Nothing heard: nothing written, and the recorder says so.
    assert rec.finish() is None
    assert not (tmp_path / "bad" / "call.json").exists()
    with pytest.raises(RecorderError, match="already finished"):
        rec.caller_audio(np.zeros(10, dtype=np.float32), SR)


async def test_a_reply_cut_before_its_text_came_out_keeps_the_text_its_detector_had(
    tmp_path: Path,
) -> None:
    """The example Pipecat agent's replies cut within half a second (the
    caller went on) left agent turns with no text: the TTS sends a
    sentence's text only once its audio has played. The live detector had
    the whole reply (ReplyTextTap, at its first audio), the replay of the
    recording had no agent line, and the caller's next pause waited 524 ms
    where it had waited 282 ms live. The text handed to the detector now
    stands in for a turn with no spoken text; spoken text, where there is
    some, stays the turn's."""
    rec, clock = _recorder_on_a_call(tmp_path)
    rec.reply_text("Where will you be flying from?", at=T0 + 1.0)
    rec.agent_audio(TONE[: SR // 2], SR, at=T0 + 1.0)  # cut after 0.5 s: no TTS text
    await clock.advance_to(T0 + 1.5)
    rec.agent_interrupted(at=T0 + 1.5)
    rec.reply_text("There's a flight at seven.", at=T0 + 3.0)
    rec.agent_text("There's a flight at seven.", at=T0 + 3.0)  # spoken: not doubled
    rec.agent_audio(TONE[:SR], SR, at=T0 + 3.0)
    turns = await _agent_turns_at(rec, clock, T0 + 5.0)
    assert [t for _, _, t in turns] == [
        "Where will you be flying from?",
        "There's a flight at seven.",
    ]
