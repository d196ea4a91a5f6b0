"""load_recording / find_recordings on hand-built call folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from turnkit.replay.oracle import oracle_words
from turnkit.replay.recording import (
    FORMAT,
    CallerTurn,
    Noise,
    RecordingError,
    find_recordings,
    load_recording,
)

SR = 16000
DURATION = 4.0


def write_wav(path: Path, seconds: float = DURATION, rate: int = SR, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    audio = (rng.standard_normal(round(seconds * rate)) * 0.01).astype(np.float32)
    sf.write(path, audio, rate, subtype="PCM_16")


def manifest(**over: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "format": FORMAT,
        "id": "call-1",
        "events": [
            {"type": "caller_turn", "start": 0.5, "end": 1.5, "text": "hello there"},
            {"type": "agent_turn", "start": 2.0, "end": 3.0, "text": "hi"},
        ],
    }
    m.update(over)
    return m


def make_call(folder: Path, data: Any = None, *, wav: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = data if isinstance(data, str) else json.dumps(manifest() if data is None else data)
    (folder / "call.json").write_text(text, encoding="utf-8")
    if wav:
        write_wav(folder / "caller.wav")
    return folder


def load_error(folder: Path, **kw: Any) -> str:
    with pytest.raises(RecordingError) as exc:
        load_recording(folder, **kw)
    msg = str(exc.value)
    assert "\n" not in msg and "\r" not in msg, f"not one line: {msg!r}"
    return msg


# --- valid calls ----------------------------------------------------------------


def test_valid_minimal_call_loads(tmp_path):
    folder = make_call(tmp_path / "c", {"format": FORMAT, "id": "min"})
    rec = load_recording(folder)
    assert rec.id == "min"
    assert rec.duration == pytest.approx(DURATION)
    assert rec.caller_path == folder / "caller.wav"
    assert rec.agent_path is None
    assert rec.manifest.language == "en"
    assert rec.caller_turns == [] and rec.agent_turns == []
    audio = rec.caller_audio()
    assert audio.dtype == np.float32 and len(audio) == round(DURATION * SR)


def test_events_are_parsed_into_typed_lists_sorted_by_start(tmp_path):
    data = manifest(
        events=[
            {"type": "caller_turn", "start": 2.0, "end": 3.0, "spans": [[2.0, 2.4], [2.7, 3.0]]},
            {"type": "noise", "start": 1.8, "end": 1.9, "label": "cough"},
            {"type": "caller_turn", "start": 0.2, "end": 1.0},
            {"type": "backchannel", "start": 3.1, "end": 3.3, "text": "uh-huh"},
            {"type": "echo", "start": 3.4, "end": 3.9},
        ]
    )
    rec = load_recording(make_call(tmp_path / "c", data))
    assert [(t.start, t.end) for t in rec.caller_turns] == [(0.2, 1.0), (2.0, 3.0)]
    assert all(isinstance(t, CallerTurn) for t in rec.caller_turns)
    assert rec.caller_turns[0].speech_spans() == [(0.2, 1.0)]
    assert rec.caller_turns[1].gaps() == [(2.4, 2.7, "unlabelled")]
    assert isinstance(rec.noises[0], Noise) and rec.noises[0].label == "cough"
    assert [b.text for b in rec.backchannels] == ["uh-huh"]
    assert len(rec.echoes) == 1


def test_unknown_fields_are_kept(tmp_path):
    data = manifest(generator={"seed": 7}, tags=["a"])
    data["events"][0]["confidence"] = 0.9
    rec = load_recording(make_call(tmp_path / "c", data))
    assert rec.manifest.model_extra["generator"] == {"seed": 7}
    assert rec.caller_turns[0].model_extra["confidence"] == 0.9
    assert rec.manifest.tags == ["a"]


def test_unknown_event_types_are_ignored(tmp_path):
    data = manifest()
    data["events"].insert(0, {"type": "laughter", "start": 0.1, "end": 99.0, "whatever": 1})
    rec = load_recording(make_call(tmp_path / "c", data))
    assert [type(e).__name__ for e in rec.manifest.events] == ["CallerTurn", "AgentTurn"]


def test_label_a_hair_past_the_end_is_tolerated(tmp_path):
    data = manifest(events=[{"type": "caller_turn", "start": 3.0, "end": DURATION + 0.01}])
    rec = load_recording(make_call(tmp_path / "c", data))
    assert rec.caller_turns[0].end == DURATION + 0.01


def test_agent_wav_is_optional_and_checked_when_named(tmp_path):
    folder = make_call(
        tmp_path / "c", manifest(audio={"caller": "caller.wav", "agent": "agent.wav"})
    )
    msg = load_error(folder)
    assert str(folder / "call.json") in msg and "audio.agent" in msg and "agent.wav" in msg
    write_wav(folder / "agent.wav", seed=1)
    rec = load_recording(folder)
    assert rec.agent_path == folder / "agent.wav"


# --- bad manifests: one line, the file, the field --------------------------------


def test_missing_call_json(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    msg = load_error(folder)
    assert str(folder / "call.json") in msg


def test_malformed_json(tmp_path):
    folder = make_call(tmp_path / "c", '{"format": "turnkit.recording/v1",\n "id": }')
    msg = load_error(folder)
    assert str(folder / "call.json") in msg
    assert "line 2" in msg


def test_json_list_instead_of_object(tmp_path):
    folder = make_call(tmp_path / "c", "[1, 2, 3]")
    msg = load_error(folder)
    assert str(folder / "call.json") in msg and "object" in msg


def test_non_utf8_manifest(tmp_path):
    folder = make_call(tmp_path / "c")
    (folder / "call.json").write_bytes(b'{"id": "\xff\xfe"}')
    msg = load_error(folder)
    assert str(folder / "call.json") in msg


@pytest.mark.parametrize("fmt", ["turnkit.recording/v9", "turnkit.recording/v2", None, 1])
def test_unknown_format(tmp_path, fmt):
    data = (
        manifest(format=fmt)
        if fmt is not None
        else {k: v for k, v in manifest().items() if k != "format"}
    )
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert str(folder / "call.json") in msg
    assert "format" in msg and repr(fmt) in msg


def test_missing_id(tmp_path):
    data = manifest()
    del data["id"]
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert msg.startswith(f"{folder / 'call.json'}: id:")


def test_empty_id(tmp_path):
    folder = make_call(tmp_path / "c", manifest(id=""))
    msg = load_error(folder)
    assert msg.startswith(f"{folder / 'call.json'}: id:")


def test_event_end_before_start(tmp_path):
    data = manifest(events=[{"type": "caller_turn", "start": 2.0, "end": 1.0}])
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert "end 1.0 is before start 2.0" in msg
    # The field path is the event (or its end), not the discriminator tag:
    # "events[0].caller_turn" names no field of the file.
    mpath = folder / "call.json"
    assert msg.startswith((f"{mpath}: events[0]: ", f"{mpath}: events[0].end: ")), msg


def test_event_field_error_names_the_field_path(tmp_path):
    data = manifest(events=[{"type": "caller_turn", "start": -1.0, "end": 1.0}])
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert msg.startswith(f"{folder / 'call.json'}: events[0].start: "), msg


def test_event_error_index_counts_unknown_events_in_the_file(tmp_path):
    data = manifest(
        events=[
            {"type": "laughter", "start": 0.1, "end": 0.2},
            {"type": "caller_turn", "start": 2.0, "end": 1.0},
        ]
    )
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    # The bad event is the file's events[1]; events[0] is the (valid) laughter.
    assert "events[1]" in msg and "events[0]" not in msg, msg


def test_event_past_the_end_of_the_audio(tmp_path):
    data = manifest()
    data["events"].append({"type": "noise", "start": 3.5, "end": DURATION + 1.0})
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert msg.startswith(f"{folder / 'call.json'}: events[2].end: "), msg
    assert "caller.wav" in msg


def test_event_past_the_end_index_counts_unknown_events(tmp_path):
    data = manifest()
    data["events"].insert(0, {"type": "laughter", "start": 0.0, "end": 0.1})
    data["events"].append({"type": "noise", "start": 3.5, "end": DURATION + 1.0})
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert f"{folder / 'call.json'}: events[3].end: " in msg, msg


def test_overlapping_caller_turns(tmp_path):
    data = manifest(
        events=[
            {"type": "caller_turn", "start": 0.5, "end": 2.0},
            {"type": "agent_turn", "start": 2.1, "end": 2.5},
            {"type": "caller_turn", "start": 1.5, "end": 3.0},
        ]
    )
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert msg.startswith(f"{folder / 'call.json'}: events[2].start: "), msg
    assert "events[0]" in msg


def test_touching_caller_turns_are_not_overlapping(tmp_path):
    data = manifest(
        events=[
            {"type": "caller_turn", "start": 0.5, "end": 2.0},
            {"type": "caller_turn", "start": 2.0, "end": 3.0},
        ]
    )
    rec = load_recording(make_call(tmp_path / "c", data))
    assert len(rec.caller_turns) == 2


def test_span_outside_its_turn(tmp_path):
    data = manifest(
        events=[
            {"type": "caller_turn", "start": 0.5, "end": 1.5, "spans": [[0.5, 1.0], [1.2, 1.8]]}
        ]
    )
    folder = make_call(tmp_path / "c", data)
    msg = load_error(folder)
    assert str(folder / "call.json") in msg
    assert "events[0]" in msg and "spans[1]" in msg and "outside" in msg


def test_words_reaching_past_their_turn_are_read_inside_it(tmp_path):
    """Word times from a recogniser and turn edges from another tool
    disagree by tens of ms: such a call loads (before: refused whole, "is
    outside the turn"), with one warning line naming the file and field,
    and the replay's recogniser writes those words inside the turn. A word
    further than WORD_REACH_S out belongs to no turn: refused."""
    words = [
        {"text": "hello", "start": 0.42, "end": 0.9},  # begins before the turn
        {"text": "there", "start": 0.95, "end": 1.62},  # ends after it
    ]
    turn = {"type": "caller_turn", "start": 0.5, "end": 1.5, "text": "hello there"}
    folder = make_call(tmp_path / "c", manifest(events=[{**turn, "words": words}]))
    rec = load_recording(folder)
    assert rec.warnings == [
        f"{folder / 'call.json'}: events[0].words: 2 word(s) reach past the turn "
        "[0.5, 1.5] (by up to 0.120 s): read as inside it"
    ]
    said = [(w.text, w.start, w.end) for w in oracle_words(rec)]
    assert said == [("hello", 0.5, 0.9), ("there", 0.95, 1.5)]
    after = {"text": "now", "start": 1.6, "end": 1.7}  # wholly after, within reach
    folder = make_call(tmp_path / "after", manifest(events=[{**turn, "words": [*words, after]}]))
    said = [(w.text, w.start, w.end) for w in oracle_words(load_recording(folder))]
    assert said[-1] == ("now", 1.5, 1.5)
    far = [{"text": "later", "start": 1.9, "end": 2.2}]
    folder = make_call(tmp_path / "far", manifest(events=[{**turn, "words": far}]))
    msg = load_error(folder)
    assert "events[0]" in msg and "words[0]" in msg and "outside the turn" in msg


def test_overlapping_spans(tmp_path):
    data = manifest(
        events=[
            {"type": "caller_turn", "start": 0.5, "end": 1.5, "spans": [[0.5, 1.0], [0.9, 1.5]]}
        ]
    )
    msg = load_error(make_call(tmp_path / "c", data))
    assert "events[0]" in msg and "spans[1]" in msg


def test_bad_hold_kind(tmp_path):
    data = manifest(
        events=[
            {
                "type": "caller_turn",
                "start": 0.5,
                "end": 1.5,
                "holds": [{"start": 1.0, "end": 1.1, "kind": "sigh"}],
            }
        ]
    )
    msg = load_error(make_call(tmp_path / "c", data))
    assert "events[0]" in msg and "holds[0]" in msg and "kind" in msg


@pytest.mark.parametrize("rel", ["../x.wav", "../c/../../x.wav", "/etc/hostname"])
def test_caller_path_escaping_the_folder(tmp_path, rel):
    write_wav(tmp_path / "x.wav")
    folder = make_call(tmp_path / "c", manifest(audio={"caller": rel}))
    msg = load_error(folder)
    assert str(folder / "call.json") in msg and "audio.caller" in msg and "escapes" in msg


def test_missing_caller_wav(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    msg = load_error(folder)
    assert str(folder / "call.json") in msg and "audio.caller" in msg and "caller.wav" in msg


def test_empty_caller_wav(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    (folder / "caller.wav").write_bytes(b"")
    msg = load_error(folder)
    assert str(folder / "caller.wav") in msg and "audio.caller" in msg


def test_caller_wav_with_zero_samples(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    sf.write(folder / "caller.wav", np.zeros(0, dtype=np.float32), SR, subtype="PCM_16")
    msg = load_error(folder)
    assert str(folder / "caller.wav") in msg and "audio.caller" in msg


def test_text_file_as_caller_wav(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    (folder / "caller.wav").write_text("not audio at all\n")
    msg = load_error(folder)
    assert str(folder / "caller.wav") in msg and "audio.caller" in msg


def test_flac_file_as_caller_wav(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    sf.write(folder / "x.flac", np.zeros(SR * 4, dtype=np.float32), SR)
    (folder / "x.flac").rename(folder / "caller.wav")
    msg = load_error(folder)
    assert str(folder / "caller.wav") in msg and "audio.caller" in msg


def test_caller_wav_at_an_unsupported_rate(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    write_wav(folder / "caller.wav", rate=11025)
    msg = load_error(folder)
    assert str(folder / "caller.wav") in msg and "11025" in msg


def test_caller_wav_at_an_unsupported_rate_with_check_audio(tmp_path):
    folder = make_call(tmp_path / "c", wav=False)
    write_wav(folder / "caller.wav", rate=11025)
    msg = load_error(folder, check_audio=True)
    assert str(folder / "caller.wav") in msg and "11025" in msg


def test_caller_wav_cut_inside_its_header(tmp_path):
    folder = make_call(tmp_path / "c")
    blob = (folder / "caller.wav").read_bytes()
    (folder / "caller.wav").write_bytes(blob[:30])
    msg = load_error(folder, check_audio=True)
    assert str(folder / "caller.wav") in msg


@pytest.mark.parametrize("check_audio", [False, True])
def test_truncated_caller_wav_is_refused(tmp_path, check_audio):
    # Labels end at 1.5 s, well inside the half that survives; the WAV header
    # still promises 4 s of data, and libsndfile would quietly read 2 s.
    data = manifest(events=[{"type": "caller_turn", "start": 0.5, "end": 1.5}])
    folder = make_call(tmp_path / "c", data)
    blob = (folder / "caller.wav").read_bytes()
    (folder / "caller.wav").write_bytes(blob[: len(blob) // 2])
    msg = load_error(folder, check_audio=check_audio)
    assert str(folder / "caller.wav") in msg


def test_truncated_caller_wav_with_labels_past_the_cut_is_refused(tmp_path):
    folder = make_call(tmp_path / "c")  # labels run to 3.0 s of 4.0 s
    blob = (folder / "caller.wav").read_bytes()
    (folder / "caller.wav").write_bytes(blob[: len(blob) // 2])
    msg = load_error(folder)
    # either the truncation itself or the label past the (short) audio
    assert str(folder / "caller.wav") in msg or "events[1].end" in msg, msg


def test_recording_error_is_a_value_error():
    assert issubclass(RecordingError, ValueError)


# --- find_recordings ------------------------------------------------------------


def test_find_recordings_finds_nested_call_folders(tmp_path):
    a = make_call(tmp_path / "corpus" / "a")
    b = make_call(tmp_path / "corpus" / "group" / "b")
    c = make_call(tmp_path / "corpus" / "group" / "deeper" / "c")
    (tmp_path / "corpus" / "not-a-call").mkdir()
    (tmp_path / "corpus" / "not-a-call" / "notes.txt").write_text("x")
    found = find_recordings([tmp_path / "corpus"])
    assert found == sorted([a.resolve(), b.resolve(), c.resolve()])


def test_find_recordings_deduplicates_and_accepts_call_json_paths(tmp_path):
    a = make_call(tmp_path / "corpus" / "a")
    b = make_call(tmp_path / "corpus" / "b")
    found = find_recordings(
        [a / "call.json", tmp_path / "corpus", a, tmp_path / "corpus" / "." / "b"]
    )
    assert sorted(found) == sorted([a.resolve(), b.resolve()])
    assert len(found) == 2


def test_find_recordings_on_a_call_folder_returns_it(tmp_path):
    a = make_call(tmp_path / "a")
    assert find_recordings([a]) == [a.resolve()]
    assert find_recordings([a / "call.json"]) == [a.resolve()]


def test_find_recordings_keeps_a_missing_path_for_the_caller_to_report(tmp_path):
    missing = tmp_path / "nope"
    assert find_recordings([missing]) == [missing.resolve()]
    with pytest.raises(RecordingError):
        load_recording(missing)


def test_found_folders_load(tmp_path):
    make_call(tmp_path / "corpus" / "a", manifest(id="a"))
    make_call(tmp_path / "corpus" / "x" / "b", manifest(id="b"))
    ids = [load_recording(p).id for p in find_recordings([tmp_path / "corpus"])]
    assert ids == ["a", "b"]
