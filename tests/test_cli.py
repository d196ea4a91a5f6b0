"""The ``turnkit`` command as a user runs it: a real subprocess, real calls.

Bad input must give one line naming the file and the field, no traceback,
and every good call must still be replayed and written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "recordings" / "easy-short-08"


def turnkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "call.json").read_text())


def _write(folder: Path, manifest: dict) -> None:
    (folder / "call.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One good call and one call for each kind of bad input, with the text
    each error line must contain."""
    root = tmp_path_factory.mktemp("batch")
    shutil.copytree(GOOD, root / "good")
    expect: dict[str, str] = {}

    def bad(name: str, fragment: str) -> Path:
        folder = root / name
        shutil.copytree(GOOD, folder)
        expect[name] = fragment
        return folder

    f = bad("malformed", "malformed JSON")
    (f / "call.json").write_text('{"format": "turnkit.recording/v1", "id": ')

    f = bad("version", "format: unknown format 'turnkit.recording/v9'")
    m = _manifest(f)
    m["format"] = "turnkit.recording/v9"
    _write(f, m)

    f = bad("outside", "events[0].end")
    m = _manifest(f)
    m["events"][0]["end"] = 999.0
    m["events"][0]["spans"] = [[m["events"][0]["start"], 999.0]]
    _write(f, m)

    f = bad("overlap", ".start: caller turn at")
    m = _manifest(f)
    turns = [i for i, e in enumerate(m["events"]) if e["type"] == "caller_turn"]
    second = m["events"][turns[1]]
    first = m["events"][turns[0]]
    second["start"] = first["end"] - 0.2
    second["spans"] = [[second["start"], second["end"]]]
    second.pop("words", None)
    _write(f, m)

    f = bad("emptywav", "empty")
    (f / "caller.wav").write_bytes(b"")

    f = bad("truncated", "truncated")
    data = (f / "caller.wav").read_bytes()
    (f / "caller.wav").write_bytes(data[: len(data) // 3])

    f = bad("notwav", "not a readable WAV file")
    (f / "caller.wav").write_text("this is not audio\n" * 50)

    f = bad("escape", "audio.caller: path '../good/caller.wav' escapes the call folder")
    m = _manifest(f)
    m["audio"]["caller"] = "../good/caller.wav"
    _write(f, m)

    f = bad("nomanifest", "call.json: missing")
    (f / "call.json").unlink()

    f = bad("missingfield", "id:")
    m = _manifest(f)
    del m["id"]
    _write(f, m)

    f = bad("spanoutside", "spans[0]")
    m = _manifest(f)
    ev = m["events"][0]
    ev["spans"] = [[ev["start"] - 0.5, ev["end"]]]
    _write(f, m)
    return root, expect


def test_bad_input_one_line_each_and_good_calls_still_written(
    batch: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, expect = batch
    out = tmp_path / "res.json"
    dirs = sorted(str(p) for p in root.iterdir())
    proc = turnkit("replay", *dirs, "--detector", "silence", "--json", str(out), "--workers", "2")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == len(expect), proc.stderr
    for name, fragment in expect.items():
        mine = [
            line
            for line in error_lines
            if f"/{name}/" in line or line.rstrip().endswith(f"/{name}")
        ]
        assert len(mine) == 1, (name, error_lines)
        assert fragment in mine[0], (name, mine[0])

    doc = json.loads(out.read_text())
    assert doc["recordings"] == len(dirs)
    assert {Path(f["path"]).name for f in doc["failed"]} == set(expect)
    (res,) = doc["results"]
    assert res["detector"] == "silence"
    assert res["calls"] == 1
    assert res["turns"] == len([e for e in _manifest(GOOD)["events"] if e["type"] == "caller_turn"])
    assert {row["call"] for row in res["per_turn"]} == {"easy-short-08"}


def test_a_batch_where_every_call_is_bad_says_so_and_writes_the_failures(
    batch: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Nothing replayable, two detectors (the A/B comparison had no calls to
    pair) and --html: one line per bad call and one saying nothing was
    replayed, the JSON with every failure, no report, no traceback (before:
    a TypeError formatting the empty results, then numpy's in the paired
    comparison)."""
    root, expect = batch
    out = tmp_path / "res.json"
    dirs = sorted(str(p) for p in root.iterdir() if p.name != "good")
    proc = turnkit(
        "replay", *dirs, "-d", "silence", "-d", "fused", "--json", str(out),
        "--html", str(tmp_path / "r.html"), "--workers", "1",
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert f"error: no call could be replayed: {len(expect)} of {len(dirs)} failed" in errors
    assert any("--html" in line and "not written" in line for line in errors)
    assert len(errors) == len(expect) + 2
    doc = json.loads(out.read_text())
    assert {Path(f["path"]).name for f in doc["failed"]} == set(expect)
    assert doc["results"] == [] and doc["comparisons"] == []
    assert not (tmp_path / "r.html").exists()


def test_validate_reports_bad_calls_and_stats(batch: tuple[Path, dict[str, str]]) -> None:
    root, expect = batch
    proc = turnkit("validate", str(root))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    invalid = [line for line in proc.stderr.splitlines() if line.startswith("invalid:")]
    # nomanifest has no call.json, so a recursive search does not find it.
    assert len(invalid) == len(expect) - 1
    assert "easy-short-08" in proc.stdout
    assert f"1 valid, {len(expect) - 1} invalid" in proc.stdout


def test_json_contract_on_the_demo_corpus(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = turnkit(
        "replay",
        str(REPO / "recordings"),
        "-d",
        "silence:stop_ms=500",
        "-d",
        "silence",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "silence:stop_ms=500" in proc.stdout and "resp p50" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["failed"] == []
    assert doc["recordings"] >= 8
    assert [r["detector"] for r in doc["results"]] == ["silence:stop_ms=500", "silence"]
    for r in doc["results"]:
        assert isinstance(r["turns"], int) and r["turns"] > 0
        assert set(r["response_ms"]) >= {"p50", "p95", "mean"}
        assert set(r["eot_delay_ms"]) >= {"p50", "p95"}
        assert set(r["false_barge_in_rate"]) == {"backchannel", "echo", "noise"}
        for key in ("interruption_rate", "missed_rate"):
            assert 0.0 <= r[key] <= 1.0
        assert r["barge_in_recall"] is None or 0.0 <= r["barge_in_recall"] <= 1.0
        assert r["audio_seconds"] > 0 and r["wall_seconds"] > 0
        assert len(r["per_turn"]) == r["turns"]
        for row in r["per_turn"]:
            assert set(row) >= {"call", "turn", "end", "response_ms", "interrupted", "missed"}
    fast, slow = doc["results"]
    # The classic trade-off: a shorter timer answers sooner, cuts in more.
    assert fast["eot_delay_ms"]["p50"] < slow["eot_delay_ms"]["p50"]
    assert fast["interruption_rate"] >= slow["interruption_rate"]
    # The demo's three calls with tool_call events: their table, and its JSON.
    assert "tools (calls with tool_call events)" in proc.stdout
    for r in doc["results"]:
        t = r["tools"]
        assert t["calls_with_tools"] == 3 and t["writes"] == 2
        assert 0 <= t["writes_early"] <= t["writes"] and t["writes_from_discarded_drafts"] == 0
        assert isinstance(t["writes_withdrawn"], int)


def test_measured_runs_leave_half_the_cores_free() -> None:
    """Without --workers: measured model costs are timed with half the
    cores free (workers replaying faster than real time saturate every core
    and time each other), one worker with a live engine, every core when no
    wall clock is charged."""
    from turnkit.cli.replay import default_workers

    assert default_workers("measured", None, 2) == 1
    assert default_workers("measured", None, 16) == 8
    assert default_workers("measured", None, 1) == 1
    assert default_workers("fixed", None, 16) == 16
    assert default_workers("none", None, None) == 1
    assert default_workers("fixed", "http://127.0.0.1:8000/v1", 16) == 1


def test_empty_folder_says_no_recordings(tmp_path: Path) -> None:
    proc = turnkit("replay", str(tmp_path))
    assert proc.returncode == 2
    assert "no recordings" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_detector_spec_is_one_line(tmp_path: Path) -> None:
    proc = turnkit("replay", str(GOOD), "-d", "silence:stop_sm=5")
    assert proc.returncode == 2
    assert "stop_sm" in proc.stderr and "stop_ms" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = turnkit("replay", str(GOOD), "-d", "nope")
    assert proc.returncode == 2 and "unknown detector 'nope'" in proc.stderr


def test_bad_latency_spec_is_one_line() -> None:
    proc = turnkit("replay", str(GOOD), "--llm-ttft-ms", "p50=fast")
    assert proc.returncode == 2 and "--llm-ttft-ms" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_stereo_and_48k_caller_audio_is_accepted_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "stereo"
    shutil.copytree(GOOD, folder)
    from turnkit.audio.wav import read_wav, resample

    mono = read_wav(GOOD / "caller.wav")
    hi = resample(mono, 16000, 48000)
    sf.write(
        folder / "caller.wav", np.stack([hi, np.zeros_like(hi)], axis=1), 48000, subtype="PCM_16"
    )
    proc = turnkit("replay", str(folder), "--json", str(tmp_path / "s.json"), "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "2 channels, using the first" in proc.stderr
    ref = turnkit("replay", str(GOOD), "--json", str(tmp_path / "m.json"), "--workers", "1")
    a = json.loads((tmp_path / "s.json").read_text())["results"][0]
    b = json.loads((tmp_path / "m.json").read_text())["results"][0]
    assert a["turns"] == b["turns"] and a["missed_rate"] == b["missed_rate"]
    assert ref.returncode == 0


def test_sweep_reports_operating_points_with_the_silence_baseline(tmp_path: Path) -> None:
    out = tmp_path / "sw.json"
    proc = turnkit("replay", str(GOOD), "-d", "silence:stop_ms=500", "--sweep", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "operating points" in proc.stdout
    doc = json.loads(out.read_text())
    (sw,) = doc["sweeps"]  # the given detector is silence itself
    assert sw["detector"] == "silence" and sw["param"] == "stop_ms"
    lat = [p["eot_mean_ms"] for p in sw["points"]]
    assert lat == sorted(lat)  # a longer timer never decides sooner
    assert set(sw) >= {
        "cutoff_at_300ms",
        "cutoff_at_600ms",
        "latency_at_5pct_ms",
        "latency_at_10pct_ms",
    }
    assert [r["detector"] for r in doc["results"]] == ["silence:stop_ms=500"]


def test_missed_column_tells_turns_the_caller_went_on_from() -> None:
    """The summary's missed column counts, beside the rate, the missed turns
    the caller went on from by themselves (nobody could have answered them
    before the caller spoke again), so a reader can tell them from a caller
    left waiting; with none, the rate alone."""
    from turnkit.cli.replay import _missed

    assert _missed({"missed_rate": 2 / 50, "missed_caller_went_on": 2}) == "4.0% (2 went on)"
    assert _missed({"missed_rate": 1 / 50, "missed_caller_went_on": 0}) == "2.0%"
    assert _missed({"missed_rate": 0.0}) == "0.0%"


@pytest.mark.parametrize(("compute", "hinted"), [("measured", True), ("fixed", False)])
def test_replay_fallback_warning_points_measured_runs_at_compute_fixed(
    compute: str, hinted: bool
) -> None:
    # An engine that fails (here: nothing listens) makes every decision a
    # fallback. Under measured the warning names the likely cause in a replay
    # (an engine fed faster than live) and the remedy; under fixed it does not.
    from engine import closed_port

    call = Path(__file__).resolve().parent.parent / "recordings" / "easy-short-08"
    spec = f"llm-eou:base_url=http://127.0.0.1:{closed_port()}/v1,timeout_ms=200"
    proc = turnkit("replay", str(call), "-d", spec, "--compute", compute, "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    warning = " ".join(line for line in proc.stderr.splitlines() if "fell back" in line)
    assert "end-of-turn decisions fell back" in warning, proc.stderr
    assert ("--compute fixed" in warning) is hinted, warning


def test_replay_latency_from_live_reads_each_calls_host(tmp_path: Path) -> None:
    """--latency-from-live: a call with the live host's commits answers at
    its measured commit-to-audio time (JSON: the config and how many calls
    used it); a call recorded elsewhere keeps the model; it and --llm-url
    both set the LLM's latency, so both together is refused."""
    live = tmp_path / "live"
    shutil.copytree(GOOD, live)
    m = _manifest(live)
    first = min(e["start"] for e in m["events"] if e["type"] == "agent_turn")
    m["live"] = {"turn_events": [{"kind": "user_turn_end", "at": first - 0.12}]}
    m["id"] = "easy-short-08-live"
    _write(live, m)
    out = tmp_path / "r.json"
    r = turnkit("replay", str(live), str(GOOD), "--latency-from-live", "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["config"]["latency_from_live"] is True
    assert doc["results"][0]["live_latency_ms"] == {
        "calls": 1,
        "p50": 120.0,
        "p95": 120.0,
        "mean": 120.0,
    }
    both = turnkit("replay", str(GOOD), "--latency-from-live", "--llm-url", "http://127.0.0.1:9/v1")
    assert both.returncode == 2 and "--latency-from-live" in both.stderr
    plain = tmp_path / "p.json"
    assert turnkit("replay", str(GOOD), "--json", str(plain)).returncode == 0
    assert json.loads(plain.read_text())["results"][0]["live_latency_ms"] is None
