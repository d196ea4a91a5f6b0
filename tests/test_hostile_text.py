"""eot-score / eot-eval on hostile input: each bad line, file, option or
failing engine is one line naming it, no traceback, exit 1 (2 for a bad
option), and everything else is still scored and written."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def turnkit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
    )


def no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in r.stderr, r.stderr


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


GOOD_1 = b'{"text": "yes", "context": [{"role": "assistant", "content": "Is that right?"}]}'
GOOD_2 = b'{"text": "i would like to book a table for"}'


def test_eot_score_bad_lines_reported_rest_scored(tmp_path: Path) -> None:
    lines = [
        GOOD_1,
        b'{"text": "caf\xe9 au lait"}',  # latin-1 byte: not UTF-8
        b"[" * 200_000,  # RecursionError in json
        b'{"text": 1' + b"0" * 5000 + b"}",  # over Python's int digit limit
        GOOD_2,
        '{"text": "line\u2028separator inside a string"}'.encode(),  # one line, not two
    ]
    f = tmp_path / "in.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    r = turnkit("eot-score", str(f))
    no_traceback(r)
    assert r.returncode == 1
    out = [json.loads(s) for s in r.stdout.splitlines()]
    assert len(out) == len(lines)
    assert 0 <= out[0]["p_end"] <= 1 and "p_end" in out[4] and "p_end" in out[5]
    assert out[1]["error"].startswith(f"{f}:2: not UTF-8 (byte 0xe9")
    assert out[2]["error"] == f"{f}:3: JSON nested too deeply"
    assert out[3]["error"].startswith(f"{f}:4: malformed JSON")
    err = r.stderr.strip().splitlines()
    assert [e.split(":")[1] for e in err] == ["2", "3", "4"]


def test_eot_score_non_utf8_on_stdin(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "turnkit.cli", "eot-score", "-"],
        input=GOOD_1 + b"\n\xff\n" + GOOD_2 + b"\n",
        capture_output=True,
        timeout=300,
        cwd=ROOT,
    )
    assert b"Traceback" not in p.stderr
    assert p.returncode == 1
    out = [json.loads(s) for s in p.stdout.splitlines()]
    assert "p_end" in out[0] and "p_end" in out[2]
    assert out[1]["error"].startswith("<stdin>:2: not UTF-8")


def test_eot_score_llm_eou_engine_down_one_line_per_line(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_bytes(GOOD_1 + b"\n{bad\n" + GOOD_2 + b"\n")
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = turnkit("eot-score", "-d", f"llm-eou:base_url={url}", str(f))
    no_traceback(r)
    assert r.returncode == 1
    out = [json.loads(s) for s in r.stdout.splitlines()]
    assert len(out) == 3 and all("error" in o for o in out)
    assert out[0]["error"].startswith(f"{f}:1: scorer failed:")
    assert out[1]["error"].startswith(f"{f}:2: malformed JSON")
    assert out[2]["error"].startswith(f"{f}:3: scorer failed:")
    assert len(r.stderr.strip().splitlines()) == 3


def test_eot_score_bad_llm_eou_template_is_an_option_error(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_bytes(GOOD_1 + b"\n")
    r = turnkit("eot-score", "-d", "llm-eou:template={oops", str(f))
    no_traceback(r)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: detector spec 'llm-eou:template={oops': template: unknown chat template"
    )
    assert r.stdout == ""


def _eval_dir(d: Path) -> Path:
    d.mkdir()
    (d / "ten_finished.txt").write_text("I would like to book a table for two\n")
    (d / "ten_unfinished.txt").write_text("I would like to book a table for\n")
    (d / "ten_wait.txt").write_text("Stop talking\n")
    ts = [
        {"prompt": "can you help me with my order", "response": {"eou_probability": 1.0}},
        {"prompt": "so what do you think about", "response": {"eou_probability": 0.1}},
    ]
    (d / "turnsense_dataset_test.json").write_text(json.dumps(ts))
    return d


def test_eot_eval_bad_files_one_line_each_rest_evaluated(tmp_path: Path) -> None:
    d = _eval_dir(tmp_path / "eval")
    (d / "ten_wait.txt").write_bytes(b"Stop talking\n\xff\xfe\n")
    ts = json.loads((d / "turnsense_dataset_test.json").read_text())
    ts += [{"prompt": "no response"}, {"response": {"eou_probability": 1.0}}, 7]
    (d / "turnsense_dataset_test.json").write_text(json.dumps(ts))
    out_json = tmp_path / "rows.json"
    r = turnkit("eot-eval", "--eval-dir", str(d), "--json", str(out_json))
    no_traceback(r)
    assert r.returncode == 1
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 2
    assert "ten_wait.txt: not UTF-8" in err[0]
    assert "turnsense_dataset_test.json: 3 entries" in err[1] and "[2].response" in err[1]
    doc = json.loads(out_json.read_text())
    rows = {(x["set"], x["class"]): x for x in doc["rows"]}
    assert ("TEN (English)", "wait") not in rows
    assert rows[("TEN (English)", "finished")]["n"] == 1
    assert rows[("turnsense", "complete")]["n"] == 1
    assert len(doc["errors"]) == 2


def test_eot_eval_malformed_turnsense_json(tmp_path: Path) -> None:
    d = _eval_dir(tmp_path / "eval")
    (d / "turnsense_dataset_test.json").write_text('[{"prompt": "x", ')
    r = turnkit("eot-eval", "--eval-dir", str(d))
    no_traceback(r)
    assert r.returncode == 1
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "turnsense_dataset_test.json: malformed JSON" in err[0]
    assert "unfinished" in r.stdout  # TEN still evaluated
    (d / "turnsense_dataset_test.json").write_text('{"prompt": "x"}')
    r = turnkit("eot-eval", "--eval-dir", str(d))
    no_traceback(r)
    assert r.returncode == 1 and "expected a JSON list" in r.stderr


def test_eot_eval_unwritable_json_refused_before_the_run(tmp_path: Path) -> None:
    d = _eval_dir(tmp_path / "eval")
    for target, text in ((d, "is a folder"), (tmp_path / "missing" / "x.json", "does not exist")):
        r = turnkit("eot-eval", "--eval-dir", str(d), "--json", str(target))
        no_traceback(r)
        assert r.returncode == 2
        assert text in r.stderr and "--json" in r.stderr
        assert r.stdout == ""  # nothing evaluated


# -- long transcripts: the oracle and the acknowledgement filter -------------------------


def _oracle_frames(words: list, frames: int, frame_s: float = 0.032, **kw: float) -> list:  # type: ignore[type-arg]
    import asyncio

    import numpy as np

    from turnkit.frames import AudioInFrame, TranscriptFrame
    from turnkit.pipeline import CollectSink, Pipeline
    from turnkit.replay.oracle import OracleTranscriber

    async def run() -> list:  # type: ignore[type-arg]
        sink = CollectSink()
        pipe = Pipeline([OracleTranscriber(words, **kw), sink])
        await pipe.start()
        n = round(frame_s * 16000)
        for k in range(frames):
            frame = AudioInFrame(at=k * frame_s, audio=np.zeros(n, np.float32), sample_rate=16000)
            await pipe.queue_frame(frame)
            await pipe.wait_idle()
        await pipe.stop()
        return [f for f in sink.frames if isinstance(f, TranscriptFrame)]

    return asyncio.run(run())


def test_oracle_long_turn_one_frame_per_audio_frame_and_every_final() -> None:
    from turnkit.replay.oracle import TimedWord

    # 20,000 words in 2 s of one turn (two spans), then a 3-word backchannel.
    n = 20_000
    words = [
        TimedWord(f"w{i}", i * 1e-4, (i + 1) * 1e-4, 0, i in (n // 2 - 1, n - 1)) for i in range(n)
    ]
    words += [
        TimedWord(t, 2.5 + k * 0.1, 2.6 + k * 0.1, 1, k == 2)
        for k, t in enumerate(["oh", "i", "see"])
    ]
    frames = _oracle_frames(words, frames=100)
    turn = [f for f in frames if f.text.startswith("w0")]
    assert len(turn) <= 64 + 2  # at most one per audio frame (2 s / 32 ms), plus the finals
    assert [f.is_final for f in turn].count(True) == 2
    assert turn[-1].text == " ".join(f"w{i}" for i in range(n)) and len(turn[-1].words) == n
    final_mid = next(f for f in turn if f.is_final)
    assert final_mid.text.endswith(f"w{n // 2 - 1}") and final_mid.spoken_until == n // 2 * 1e-4
    assert [w.text for w in turn[5].words] == turn[5].text.split()  # words match the text
    bc = [f.text for f in frames if f not in turn]
    assert bc == ["oh", "oh i", "oh i see"]  # words 100 ms apart: one frame each, as before


def test_oracle_jitter_delays_words_in_order_and_repeats_with_its_seed() -> None:
    from turnkit.replay.oracle import TimedWord

    # A word every 100 ms for 2 s, one segment; 250 ms late, up to 300 ms more.
    words = [TimedWord(f"w{i}", i * 0.1, i * 0.1 + 0.08, 0, i == 19) for i in range(20)]
    plain = _oracle_frames(words, frames=120, delay_s=0.25)
    jittered = _oracle_frames(words, frames=120, delay_s=0.25, jitter_s=0.3, seed=7)
    again = _oracle_frames(words, frames=120, delay_s=0.25, jitter_s=0.3, seed=7)
    assert [(f.at, f.text) for f in again] == [(f.at, f.text) for f in jittered]
    assert [round(f.at - f.spoken_until, 6) for f in plain] == [0.25] * len(plain)
    lags = [f.at - f.spoken_until for f in jittered]
    assert all(0.25 - 1e-9 <= lag <= 0.25 + 0.3 + 0.1 for lag in lags)
    assert max(lags) - min(lags) > 0.1  # some words come later than others
    assert [f.at for f in jittered] == sorted(f.at for f in jittered)  # in order
    assert jittered[-1].text == plain[-1].text and jittered[-1].is_final


def test_barge_in_controller_tokens_of_a_growing_transcript_match_a_fresh_read() -> None:
    from turnkit.barge_in.controller import BargeInController
    from turnkit.clock import VirtualClock
    from turnkit.text.lexicon import tokens

    f = BargeInController(VirtualClock())
    texts = [
        "okay",
        "okay so",
        "okay so i",
        "okay so i'd",
        "okay so i'd-like",
        "Okay, so",
        "okay so",
    ]
    texts += ["okay so" + " more" * k for k in range(1, 50)] + [
        "different now",
        "different now yes",
    ]
    for t in texts:
        assert f._tokens(t) == tokens(t), t
