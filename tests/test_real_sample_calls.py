"""``scripts/real_sample_calls.py`` turns a two-speaker mono recording with a
transcript (stm) and a diarization (rttm), read from a wheel, into one call
per speaker. The pyannote.audio wheel is not downloaded here: a wheel of the
same layout is made from a demo call (its caller and agent mixed to one
track, its labels written as stm and rttm; a stand-in for the real sample,
named so), and whisper tiny.en times its words as it would the real one's."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import soundfile as sf
from conftest import load_script

from turnkit.audio.wav import read_wav
from turnkit.replay.recording import load_recording

rs = load_script("real_sample_calls")
ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "recordings" / "travel-natural-16"


def _fake_pyannote_wheel(folder: Path) -> tuple[Path, dict]:
    """A wheel laid out as pyannote.audio's, holding a demo call as the sample:
    speaker A is the caller, B the agent, and the caller's first backchannel
    is diarized but not transcribed."""
    meta = json.loads((DEMO / "call.json").read_text())
    caller = read_wav(DEMO / "caller.wav", 16000)
    agent = read_wav(DEMO / "agent.wav", 16000)
    n = min(len(caller), len(agent))
    mix = (caller[:n] + agent[:n]).astype(np.float32)
    stm, rttm = [], []
    for e in meta["events"]:
        spk = {"caller_turn": "A", "agent_turn": "B"}.get(e["type"])
        if spk is not None:
            stm.append(f"sample 1 {spk} {e['start']} {e['end']} {e['text']}")
            label = "spkA" if spk == "A" else "spkB"
            rttm.append(
                f"SPEAKER sample 1 {e['start']:.3f} {e['end'] - e['start']:.3f} <NA> <NA> {label} <NA> <NA>"
            )
    bc = next(e for e in meta["events"] if e["type"] == "backchannel")
    rttm.append(
        f"SPEAKER sample 1 {bc['start']:.3f} {bc['end'] - bc['start']:.3f} <NA> <NA> spkA <NA> <NA>"
    )
    wav = folder / "sample.wav"
    sf.write(wav, mix, 16000, subtype="PCM_16")
    wheel = folder / "pyannote_audio-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(wav, rs.SAMPLE + ".wav")
        z.writestr(rs.SAMPLE + ".stm", "\n".join(stm) + "\n")
        z.writestr(rs.SAMPLE + ".rttm", "\n".join(rttm) + "\n")
    return wheel, meta


def test_each_speaker_is_the_caller_once_with_the_others_voice_muted(tmp_path: Path) -> None:
    wheel, meta = _fake_pyannote_wheel(tmp_path)
    folders = rs.build(wheel, tmp_path / "out")
    assert [f.name for f in folders] == ["pyannote-sample-a", "pyannote-sample-b"]

    a = load_recording(folders[0])
    said = [e for e in meta["events"] if e["type"] == "caller_turn"]
    assert [t.text for t in a.caller_turns] == [e["text"] for e in said]
    assert [(t.start, t.end) for t in a.caller_turns] == [(e["start"], e["end"]) for e in said]
    assert len(a.agent_turns) == sum(e["type"] == "agent_turn" for e in meta["events"])
    # whisper times the words inside each turn
    for t in a.caller_turns:
        assert t.words and t.start - 0.01 <= t.words[0].start and t.words[-1].end <= t.end + 0.01
    # the diarized stretch the transcript left out is a backchannel of A's
    assert len(a.backchannels) == 1
    b = load_recording(folders[1])
    assert not b.backchannels
    assert [t.text for t in b.caller_turns] == [
        e["text"] for e in meta["events"] if e["type"] == "agent_turn"
    ]

    # A's track: the mix inside A's speech, 40 dB down inside B's utterances
    audio = read_wav(folders[0] / "caller.wav", 16000)
    mix = read_wav(tmp_path / "sample.wav", 16000)
    b_turn = a.agent_turns[0]
    i0, i1 = int((b_turn.start + 0.1) * 16000), int((b_turn.end - 0.1) * 16000)
    ratio = np.sqrt(np.mean(audio[i0:i1] ** 2) / np.mean(mix[i0:i1] ** 2))
    assert abs(20 * np.log10(ratio) - rs.FLOOR_DB) < 1.0
    a_turn = a.caller_turns[0]
    j0, j1 = int((a_turn.start + 0.1) * 16000), int((a_turn.end - 0.1) * 16000)
    np.testing.assert_allclose(audio[j0:j1], mix[j0:j1], atol=2e-4)


def test_a_folder_without_the_wheel_is_named(tmp_path: Path) -> None:
    try:
        rs.build(tmp_path, tmp_path / "out")
    except SystemExit as e:
        assert str(tmp_path) in str(e) and "pyannote.audio" in str(e)
    else:
        raise AssertionError("no error")


def test_a_file_that_is_not_the_wheel_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "pyannote_audio-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("pyannote/audio/__init__.py", "")
    for wheel in (bad, tmp_path / "missing.whl"):
        try:
            rs.build(wheel, tmp_path / "out")
        except SystemExit as e:
            assert str(e).startswith(f"error: {wheel}: not a pyannote.audio wheel")
        else:
            raise AssertionError("no error")
