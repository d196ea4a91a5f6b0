"""Hostile and careless input to ``turnkit replay`` / ``validate`` (issue 14).

Every case: one line naming the file and the field or option, exit 1 (2 for
a bad option), no traceback, and every other call still replayed and
written. What is suspicious but usable is a warning line and a
``warnings[]`` entry, never a silent change of score. Real calls (copies of
the demo corpus), real subprocesses, real signals."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from turnkit.audio.wav import AudioError, AudioStats, iter_wav_frames, read_wav, scan_wav
from turnkit.frames import Frame, TranscriptFrame
from turnkit.pipeline import CollectSink, FrameDirection, FrameProcessor, Pipeline, collect_errors
from turnkit.replay.latency import LatencyModel, LatencySpecError
from turnkit.replay.recording import RecordingError, find_recordings, load_recording

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "recordings" / "easy-short-08"


def turnkit(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "250"},
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]
    assert "pydantic.dev" not in proc.stderr, proc.stderr


def copy_call(root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(GOOD, folder)
    return folder


def manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "call.json").read_text())


def put(folder: Path, m: dict[str, Any] | None = None, raw: str | None = None) -> None:
    (folder / "call.json").write_text(raw if raw is not None else json.dumps(m))


def first_turn(m: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in m["events"] if e["type"] == "caller_turn")


# --- the cases -----------------------------------------------------------------

# name -> (how to break a copy of GOOD, what its one error line must contain)
BROKEN: dict[str, tuple[Any, str]] = {}


def case(fragment: str):
    def deco(fn):
        BROKEN[fn.__name__.removeprefix("break_")] = (fn, fragment)
        return fn

    return deco


@case("audio.caller: path 'caller\\x00.wav' contains a NUL character")
def break_nul(f: Path) -> None:
    m = manifest(f)
    m["audio"]["caller"] = "caller\0.wav"
    put(f, m)


@case("an integer of 5000 digits")
def break_bigint(f: Path) -> None:
    put(f, raw=json.dumps(manifest(f))[:-1] + ', "x": ' + "9" * 5000 + "}")


@case("nested too deeply")
def break_deep(f: Path) -> None:
    put(f, raw=json.dumps(manifest(f))[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}")


@case("nested more than 64 deep")
def break_deep_but_parsable(f: Path) -> None:
    put(f, raw=json.dumps(manifest(f))[:-1] + ', "x": ' + "[" * 500 + "]" * 500 + "}")


@case("audio.caller: 'caller.wav' is a symlink loop")
def break_symlink_loop_wav(f: Path) -> None:
    (f / "caller.wav").unlink()
    os.symlink("caller2.wav", f / "caller.wav")
    os.symlink("caller.wav", f / "caller2.wav")


@case("lone surrogate U+D800")
def break_surrogate(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["text"] = "PLACEHOLDER"
    put(f, raw=json.dumps(m).replace("PLACEHOLDER", "\\ud800"))


@case("NaN is not a JSON number")
def break_nan_time(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["end"] = 12345.678
    put(f, raw=json.dumps(m).replace("12345.678", "NaN"))


@case("too large for a float")
def break_huge_float(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["spans"] = [[0.25, 0.5]]
    put(f, raw=json.dumps(m).replace("[[0.25, 0.5]]", "[[1e999, 1e999]]"))


@case("duplicate key 'id'")
def break_duplicate_key(f: Path) -> None:
    put(f, raw=json.dumps(manifest(f)).replace('"format"', '"id": "other", "format"', 1))


@case("events[0].start: Input should be a valid number")
def break_bool_time(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["start"] = True
    put(f, m)


@case("events[0].end: Input should be a valid number")
def break_string_time(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["end"] = str(first_turn(m)["end"])
    put(f, m)


@case("events[0].type: unknown event type 'caller_trun' (did you mean 'caller_turn'?)")
def break_type_typo(f: Path) -> None:
    m = manifest(f)
    first_turn(m)["type"] = "caller_trun"
    put(f, m)


@case("events[0].type: missing")
def break_type_missing(f: Path) -> None:
    m = manifest(f)
    del first_turn(m)["type"]
    put(f, m)


@case("is outside the turn")
def break_word_outside(f: Path) -> None:
    m = manifest(f)
    t = first_turn(m)
    t["words"] = [{"text": "late", "start": t["end"] + 1.0, "end": t["end"] + 1.2}]
    put(f, m)


@case("is outside the turn")
def break_hold_outside(f: Path) -> None:
    m = manifest(f)
    t = first_turn(m)
    t["holds"] = [{"start": t["end"] + 0.5, "end": t["end"] + 0.6, "kind": "comma"}]
    put(f, m)


@case("agent.wav: sample 0 (0.000 s) is NaN")
def break_nan_agent_audio(f: Path) -> None:
    audio, rate = sf.read(f / "agent.wav", dtype="float32")
    sf.write(f / "agent.wav", np.full_like(audio, np.nan), rate, subtype="FLOAT")


@case("is 1e+30: not audio scaled to ±1")
def break_huge_caller_sample(f: Path) -> None:
    audio, rate = sf.read(f / "caller.wav", dtype="float32")
    audio[rate] = 1e30
    sf.write(f / "caller.wav", audio, rate, subtype="FLOAT")


@case("is infinite")
def break_inf_caller_sample(f: Path) -> None:
    audio, rate = sf.read(f / "caller.wav", dtype="float32")
    audio[-5] = np.inf
    sf.write(f / "caller.wav", audio, rate, subtype="FLOAT")


def build_batch(root: Path) -> dict[str, str]:
    """Good calls and one folder per broken case; returns folder -> fragment."""
    root.mkdir(parents=True, exist_ok=True)
    for name, (breaker, _) in BROKEN.items():
        breaker(copy_call(root, name))
    # Usable calls: each must be scored, the doubtful ones with a warning.
    copy_call(root, "good")
    f = copy_call(root, "calls [draft]")  # rich would eat "[draft]"
    m = manifest(f)
    m["id"] = "draft-call"
    put(f, m)
    f = copy_call(root / "x[", "b]")  # a folder "x[/b]": MarkupError in rich
    m = manifest(f)
    m["id"] = "markup[/b]"
    put(f, m)
    f = copy_call(root, "unknown-type")
    m = manifest(f)
    m["id"] = "unknown-type"
    m["events"].append({"type": "laughter", "start": 0.1, "end": 0.2})
    put(f, m)
    # Same id as "good": the second by path fails.
    f = copy_call(root, "zz-duplicate-id")
    os.symlink(root / "good", root / "symlinked-call")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    return {name: frag for name, (_, frag) in BROKEN.items()} | {
        "zz-duplicate-id": "id: 'easy-short-08' is already the id of"
    }


# --- the recording loader, case by case ----------------------------------------


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_call_is_one_line_naming_file_and_field(tmp_path: Path, name: str) -> None:
    breaker, fragment = BROKEN[name]
    folder = copy_call(tmp_path, name)
    breaker(folder)
    with pytest.raises(RecordingError) as exc:
        load_recording(folder, check_audio=True)
    msg = str(exc.value)
    assert "\n" not in msg and "\r" not in msg, msg
    assert fragment in msg, msg
    assert str(folder) in msg, msg


def test_audio_errors_in_samples_are_also_caught_while_streaming(tmp_path: Path) -> None:
    # replay does not scan the audio first: the block that holds the bad
    # sample fails the call, never a score.
    folder = copy_call(tmp_path, "inf")
    break_inf_caller_sample(folder)
    rec = load_recording(folder)
    with pytest.raises(AudioError, match="is infinite"):
        for _ in rec.caller_frames(16000, 512):
            pass


def test_a_symlink_loop_or_missing_folder_is_named(tmp_path: Path) -> None:
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    with pytest.raises(RecordingError, match="symlink loop"):
        load_recording(tmp_path / "a")
    with pytest.raises(RecordingError, match="NUL"):
        load_recording(tmp_path / "x\0y")
    assert find_recordings([tmp_path / "a", tmp_path / "x\0y"])  # kept to be reported


def test_suspicious_but_usable_calls_load_with_warnings(tmp_path: Path) -> None:
    folder = copy_call(tmp_path, "warn")
    m = manifest(folder)
    m["events"].append({"type": "laughter", "start": 0.1, "end": 0.2})
    m["events"].append(
        {
            "type": "tool_call",
            "turn": 0,
            "start": 1.0,
            "name": "lookup",
            "arguments": {},
            "effect": "read",
            "duration_s": 0.2,
        }
    )
    put(folder, m)
    audio, rate = sf.read(folder / "caller.wav", dtype="float32")
    audio = audio / max(1e-9, float(np.max(np.abs(audio)))) * 1.5  # past full scale
    sf.write(folder / "caller.wav", np.stack([audio, audio], axis=1), rate, subtype="FLOAT")
    rec = load_recording(folder, check_audio=True)
    text = "\n".join(rec.warnings)
    assert "unknown event type 'laughter' ignored" in text
    assert "tool_call" not in text  # a documented event type: no warning
    assert "2 channels, using the first (audio.caller)" in text
    assert "exceed full scale (peak 1.5" in text
    assert all("\n" not in w for w in rec.warnings)
    assert len(rec.caller_turns) == len(first_turn_count(GOOD))


def first_turn_count(folder: Path) -> list[dict[str, Any]]:
    return [e for e in manifest(folder)["events"] if e["type"] == "caller_turn"]


def test_no_caller_turn_and_agent_length_are_warnings(tmp_path: Path) -> None:
    folder = copy_call(tmp_path, "empty")
    m = manifest(folder)
    m["events"] = [e for e in m["events"] if e["type"] != "caller_turn"]
    put(folder, m)
    audio, rate = sf.read(folder / "agent.wav", dtype="float32")
    sf.write(folder / "agent.wav", audio[: len(audio) // 2], rate)
    rec = load_recording(folder)
    assert any("no caller_turn" in w for w in rec.warnings)
    assert any("padded with silence" in w and "audio.agent" in w for w in rec.warnings)


def test_the_recursive_search_names_symlinked_call_folders(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    copy_call(corpus, "a")
    os.symlink(corpus / "a", corpus / "linked")
    os.symlink("loop2", corpus / "loop1")
    os.symlink("loop1", corpus / "loop2")
    notes: list[str] = []
    found = find_recordings([corpus], notes)
    assert found == [(corpus / "a").resolve()]
    assert len(notes) == 1 and "linked: symlinked call folder" in notes[0], notes
    # Named on the command line, it is taken.
    assert find_recordings([corpus / "linked"]) == [(corpus / "a").resolve()]


# --- audio read in blocks ------------------------------------------------------


@pytest.mark.parametrize(("rate", "channels"), [(16000, 1), (48000, 2), (44100, 1), (8000, 1)])
def test_streamed_frames_equal_the_whole_file(tmp_path: Path, rate: int, channels: int) -> None:
    rng = np.random.default_rng(rate)
    n = rate * 7 + 123  # several read blocks and a ragged end
    audio = (rng.standard_normal((n, channels)) * 0.1).astype(np.float32)
    path = tmp_path / "a.wav"
    sf.write(path, audio, rate, subtype="PCM_16")
    whole = read_wav(path, 16000)
    frames = list(iter_wav_frames(path, 16000, 512))
    from turnkit.audio.wav import iter_frames, resampled_length

    expected = list(iter_frames(whole, 512))
    assert len(whole) == resampled_length(n, rate, 16000)
    assert [s for s, _ in frames] == [s for s, _ in expected]
    np.testing.assert_allclose(
        np.concatenate([f for _, f in frames]), np.concatenate([f for _, f in expected]), atol=1e-6
    )


def test_scan_reports_peak_and_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    sf.write(path, np.full(16000, 0.25, dtype=np.float32), 16000, subtype="FLOAT")
    stats = scan_wav(path)
    assert (
        isinstance(stats, AudioStats) and stats.peak == pytest.approx(0.25) and not stats.warnings
    )
    sf.write(path, np.full(16000, np.nan, dtype=np.float32), 16000, subtype="FLOAT")
    with pytest.raises(AudioError, match=r"a\.wav: sample 0 \(0\.000 s\) is NaN"):
        scan_wav(path)


# --- latency specs and pipeline exceptions --------------------------------------


@pytest.mark.parametrize(
    "spec", ["p50=1e-300,p95=1e300", "1e300", "inf", "nan", "p50=nan,p95=900", "p50=1,p95=500000"]
)
def test_latency_specs_that_would_overflow_are_refused(spec: str) -> None:
    with pytest.raises(LatencySpecError):
        LatencyModel.parse(spec)


def test_latency_samples_stay_finite_at_the_bound() -> None:
    model = LatencyModel.parse("p50=300,p99=60000")
    rng = random.Random(0)
    assert all(math.isfinite(model.sample(rng)) for _ in range(20000))


class RaisingProcessor(FrameProcessor):
    """A real processor whose handler fails on every transcript frame."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TranscriptFrame):
            raise OverflowError("math range error")
        await self.push_frame(frame, direction)


async def test_collect_errors_reports_what_a_processor_survived() -> None:
    sink = CollectSink()
    pipe = Pipeline([RaisingProcessor(), sink])
    with collect_errors() as errors:
        await pipe.start()
        await pipe.queue_frame(TranscriptFrame(text="hi"))
        await pipe.queue_frame(TranscriptFrame(text="again"))
        await pipe.wait_idle()
        await pipe.stop()
    assert len(errors) == 2
    assert errors[0] == (
        "RaisingProcessor failed on TranscriptFrame: OverflowError: math range error"
    )


def test_an_exception_inside_a_replay_pipeline_fails_the_call() -> None:
    """A detector that raises inside the pipeline (its processor survives
    the frame, the call goes on): the call fails with one line instead of
    being scored on the decisions that survived."""
    from turnkit.detectors.registry import register
    from turnkit.detectors.silence import SilenceDetector
    from turnkit.replay.simulator import CallFailure, ReplayConfig, _replay_job

    @register
    class FailingSilence(SilenceDetector):
        """The silence baseline, failing on its third pause."""

        name = "failing-silence-test"

        def wait_policy(self, agent_text: str, text: str = ""):  # type: ignore[no-untyped-def]
            self._n = getattr(self, "_n", 0) + 1
            if self._n >= 3:
                raise OverflowError("math range error")
            return super().wait_policy(agent_text, text)

    _, ok, _ = _replay_job(str(GOOD), ["silence"], ReplayConfig())
    assert isinstance(ok, list) and ok
    _, res, _ = _replay_job(str(GOOD), ["silence", FailingSilence.name], ReplayConfig())
    assert isinstance(res, CallFailure), res
    assert "\n" not in res.error and str(GOOD) in res.error, res.error
    assert "failing-silence-test failed" in res.error and "OverflowError" in res.error, res.error


def test_an_exception_before_the_pipeline_fails_the_call() -> None:
    from turnkit.replay.simulator import CallFailure, ReplayConfig, _replay_job

    config = ReplayConfig(tts_ttfb_ms="p50=1e-300,p95=1e300")  # not checked by a CLI here
    _, res, _ = _replay_job(str(GOOD), ["silence"], config)
    assert isinstance(res, CallFailure)
    assert "\n" not in res.error and str(GOOD) in res.error, res.error


# --- the command line -----------------------------------------------------------


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Any]:
    root = tmp_path_factory.mktemp("hostile")
    expect = build_batch(root / "calls")
    out = root / "missing" / "folder"  # created before the run
    proc = turnkit(
        "replay",
        str(root / "calls"),
        "--workers",
        "2",
        "--json",
        str(out / "r.json"),
        "--html",
        str(out / "r.html"),
    )
    return root, expect, proc


def test_batch_of_hostile_calls_fails_each_and_scores_the_rest(batch_run) -> None:
    root, expect, proc = batch_run
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((root / "missing" / "folder" / "r.json").read_text())
    html = (root / "missing" / "folder" / "r.html").read_text()
    assert "<html" in html.lower()
    failed = {Path(f["path"]).name: f["error"] for f in doc["failed"]}
    assert set(failed) == set(expect), sorted(failed)
    for name, fragment in expect.items():
        assert fragment in failed[name], (name, failed[name])
        assert "\n" not in failed[name]
        # ... and the same line on the console.
        assert failed[name] in proc.stderr.replace("\n", ""), name
    scored = {t["call"] for t in doc["results"][0]["per_turn"]}
    assert scored == {"easy-short-08", "draft-call", "markup[/b]", "unknown-type"}, scored
    assert doc["results"][0]["turns"] == 4 * len(first_turn_count(GOOD))
    # Paths print as written, never as markup.
    assert "calls [draft]" not in failed and "x[/b]" not in "".join(failed)
    warnings = doc["warnings"]
    assert {"path", "warning"} <= set(warnings[0])
    text = "\n".join(w["warning"] for w in warnings)
    assert "symlinked-call: symlinked call folder" in text
    assert "unknown event type 'laughter' ignored" in text
    for w in warnings:
        assert w["warning"] in proc.stderr.replace("\n", "")


def test_markup_in_paths_is_printed_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "calls [draft]" / "c1"
    proc = turnkit("validate", str(folder), str(tmp_path / "x[" / "b]"))
    no_traceback(proc)
    assert proc.returncode == 2
    assert "calls [draft]/c1" in proc.stderr or "x[/b]" in proc.stderr, proc.stderr


def test_install_hint_and_errors_keep_their_brackets() -> None:
    from rich.console import Console

    from turnkit.cli import common
    from turnkit.detectors.smart_turn import INSTALL_HINT

    buf = io.StringIO()
    saved = common.err
    common.err = Console(file=buf, width=300)
    try:
        common.say_error(INSTALL_HINT)
        common.warn("x[/b] and [bold]y[/bold]")
    finally:
        common.err = saved
    assert "pip install 'turnkit[smart-turn]'" in buf.getvalue()
    assert "x[/b] and [bold]y[/bold]" in buf.getvalue()


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--timeout-s", "inf"], "--timeout-s"),
        (["--timeout-s", "0"], "--timeout-s"),
        (["--stt-delay-ms", "inf"], "--stt-delay-ms"),
        (["--stt-delay-ms", "-1"], "--stt-delay-ms"),
        (["--llm-ttft-ms", "p50=1e-300,p95=1e300"], "--llm-ttft-ms"),
        (["--workers", "-2"], "--workers"),
    ],
)
def test_bad_options_name_the_option(args: list[str], option: str) -> None:
    proc = turnkit("replay", str(GOOD), *args)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}:"), proc.stderr


def test_unwritable_outputs_are_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("x")
    for option, target, why in (
        ("--json", tmp_path / "a-dir", "is a directory"),
        ("--html", tmp_path / "a-dir", "is a directory"),
        ("--json", tmp_path / "a-file" / "r.json", "is not a folder"),
    ):
        proc = turnkit("replay", str(GOOD), option, str(target))
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert f"error: {option} {target}: " in proc.stderr and why in proc.stderr, proc.stderr
        assert "turnkit replay —" not in proc.stdout  # refused before any call ran


def test_write_atomic_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    from turnkit.cli.common import write_atomic

    target = tmp_path / "r.json"
    write_atomic(target, '{"a": 1}\n')
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        write_atomic(tmp_path / "d", "x")  # a directory cannot be replaced by a file
    write_atomic(tmp_path / "s.html", "lone \ud800 surrogate")  # replaced, never refused
    assert "lone ? surrogate" in (tmp_path / "s.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "r.json", "s.html"]
    assert json.loads(target.read_text()) == {"a": 1}


# --- signals: no worker outlives the batch ---------------------------------------


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        kids = {p for p, pp in parents.items() if pp in frontier} - out
        out |= kids
        frontier = kids
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize(
    ("sig", "rc", "group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)]
)
def test_a_signal_ends_every_worker_within_5_s(
    tmp_path: Path, sig: signal.Signals, rc: int, group: bool
) -> None:
    calls = tmp_path / "calls"
    for i in range(40):  # minutes of work: the signal comes long before the end
        f = copy_call(calls, f"c{i}")
        m = manifest(f)
        m["id"] = f"c{i}"
        put(f, m)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turnkit.cli",
            "replay",
            str(calls),
            "--workers",
            "2",
            "-d",
            "silence",
            "-d",
            "silence:stop_ms=500",
            "-d",
            "silence:stop_ms=1200",
            "--json",
            str(tmp_path / "r.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 240
        kids: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            kids = _children(proc.pid)
            if len(kids) >= 2:  # both workers (and the resource tracker) are up
                break
            time.sleep(0.2)
        if proc.poll() is not None:
            pytest.fail(f"replay ended before the signal: {proc.communicate()[1][-2000:]}")
        assert len(kids) >= 2, "workers never started"
        time.sleep(1.0)  # let them be inside a call
        kids = _children(proc.pid)
        t0 = time.monotonic()
        if group:  # Ctrl-C in a terminal reaches the whole process group
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        while time.monotonic() - t0 < 5 and any(_alive(k) for k in kids):
            time.sleep(0.1)
        survivors = [k for k in kids if _alive(k)]
        assert not survivors, f"still running {time.monotonic() - t0:.1f} s after {sig.name}"
        assert proc.returncode == rc, err
        assert "Traceback" not in err, err
        assert [ln for ln in err.splitlines() if ln.strip()][-1].startswith("stopped:"), err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ending_a_pool_waits_for_its_manager_thread() -> None:
    """At exit, concurrent.futures wakes every pool's manager thread through
    a pipe that thread closes as it ends; a manager still ending races that
    write ("Bad file descriptor", a traceback after a clean stop, which CI
    once saw). Ending the pool must leave no manager running."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from turnkit.replay.simulator import _end_workers

    pool = ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn"))
    for _ in range(4):
        pool.submit(time.sleep, 60)
    manager = pool._executor_manager_thread
    assert manager is not None and manager.is_alive()
    ending = manager.join_executor_internals

    def slow_ending() -> None:  # a loaded machine: the manager ends late
        time.sleep(1.0)
        ending()

    manager.join_executor_internals = slow_ending
    _end_workers(pool)
    assert not manager.is_alive()
    wakeup = manager.thread_wakeup
    assert wakeup._closed  # at exit, nothing is written to a closed pipe


def test_a_detector_falling_back_is_said_on_the_console_and_in_the_json(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = f"llm-eou:base_url=http://127.0.0.1:{port}/v1"
    proc = turnkit("replay", str(GOOD), "-d", spec, "--json", str(tmp_path / "r.json"))
    no_traceback(proc)
    doc = json.loads((tmp_path / "r.json").read_text())
    n = doc["results"][0]["fallback_decisions"]
    assert n > 0
    (w,) = [w for w in doc["warnings"] if w.get("detector") == spec]
    assert w["path"] is None and f"{n} of " in w["warning"]
    assert f"warning: {w['warning']}" in proc.stderr.replace("\n", "")


def _has_open(pid: int, name: str) -> bool:
    try:
        return any(os.readlink(fd).endswith(name) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_sigterm_stops_a_one_process_replay_mid_call(tmp_path: Path) -> None:
    """--workers 1 replays in the main process: SIGTERM must not be taken for
    one failed call (the batch going on), but stop it."""
    calls = tmp_path / "calls"
    for i in range(20):
        f = copy_call(calls, f"c{i}")
        m = manifest(f)
        m["id"] = f"c{i}"
        put(f, m)
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnkit.cli", "replay", str(calls), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 240
        # Streaming keeps caller.wav open while a call is replayed.
        while time.monotonic() < deadline and proc.poll() is None:
            if _has_open(proc.pid, "caller.wav"):
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        # It must stop mid-batch, not finish the 20 calls first; how soon
        # depends on the machine's load (communicate's timeout bounds it).
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        assert "Traceback" not in err and "stopped by SIGTERM" in err, err
        assert "error:" not in err, err  # no call was failed for it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("cut", [None, 0.5, 1.5])
def test_streamed_echo_reference_equals_the_whole_track(tmp_path: Path, cut: float | None) -> None:
    """ReferenceFeeder (agent.wav in blocks, pushed just ahead of each
    microphone frame) gives the echo filter exactly what set_reference on
    the aligned whole track gives it: same steps, frame by frame. Also with
    an agent track shorter (padded) or longer (cut) than the caller's."""
    from turnkit.audio.wav import iter_frames
    from turnkit.barge_in.echo import EchoFilter, align_reference
    from turnkit.replay.reference import ReferenceFeeder

    agent = GOOD / "agent.wav"
    if cut is not None:
        audio, rate = sf.read(agent, dtype="float32")
        n = int(len(audio) * cut)
        audio = audio[:n] if cut < 1 else np.concatenate([audio, audio[: n - len(audio)]])
        agent = tmp_path / "agent.wav"
        sf.write(agent, audio, rate, subtype="FLOAT")
    mic = read_wav(GOOD / "caller.wav", 16000)
    whole = EchoFilter(rate=16000, frame_samples=512)
    whole.set_reference(align_reference(read_wav(agent, 16000), 16000, len(mic)))
    streamed = EchoFilter(rate=16000, frame_samples=512)
    feeder = ReferenceFeeder(streamed, agent, len(mic), 16000)
    for start, frame in iter_frames(mic, 512):
        feeder.feed_until(start + 512)
        a = whole.process(frame, start / 16000)
        b = streamed.process(frame, start / 16000)
        assert (a.caller_present, a.reference_active, a.delay_ms) == (
            b.caller_present,
            b.reference_active,
            b.delay_ms,
        ), start
        np.testing.assert_array_equal(a.audio, b.audio)


def test_sigterm_inside_a_reply_task_stops_the_call_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A SIGTERM that lands while a task other than the call's own runs
    (a reply being generated) stops the call as ReplayInterrupted; asyncio
    must not be left a task holding the exception ("Task exception was
    never retrieved", with a traceback, as CI once printed)."""
    import asyncio

    from turnkit.replay.simulator import ReplayInterrupted, _run_call, _sigterm_raises

    tasks: list[asyncio.Task] = []

    async def call() -> None:
        async def reply() -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                await asyncio.sleep(0)

        tasks.append(asyncio.create_task(reply(), name="reply-1"))
        await asyncio.sleep(3600)

    with (
        caplog.at_level(logging.ERROR),
        _sigterm_raises(),
        pytest.raises(ReplayInterrupted) as got,
    ):
        _run_call(call())
    assert got.value.code == 128 + signal.SIGTERM
    (reply_task,) = tasks
    # The old handler raised inside the reply task, which kept it as its
    # result for asyncio to report when collected.
    assert reply_task.cancelled(), reply_task.exception()
    assert "never retrieved" not in caplog.text
