"""Peak memory of ``turnkit validate`` and ``turnkit replay`` on long calls,
against the size of the call's caller.wav, in the same run.

    python benchmarks/bench_memory.py [--minutes 30 120] [--no-replay] [--agent]

Writes synthetic calls (16 kHz mono PCM 16-bit, a caller turn every 12 s)
of each length into a temporary folder (a 2-hour caller.wav is 230 MB; it
is deleted afterwards), then runs each command in a fresh process and reads
that process's peak RSS (``wait4``'s ``ru_maxrss``). Baselines measured in
the same run: the interpreter with the command's imports only (the floor
any run pays) and the whole-file read the commands did before audio was
streamed (``read_wav``: float32 at 16 kHz, 2x the 16-bit file). Goal: peak
RSS <= 1.5x the caller.wav size on the 2-hour call, and flat with the
call's length (the 30-minute and 2-hour peaks close to each other).

``--agent`` adds an agent.wav of the same length (the echo filter's
reference, also streamed: ``turnkit.replay.reference.ReferenceFeeder``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

RATE = 16000
TURN_EVERY_S = 12.0

IMPORTS = (
    "import turnkit.cli, turnkit.replay.recording, turnkit.replay.simulator, "
    "turnkit.audio.vad, turnkit.replay.report, onnxruntime"
)


def write_call(folder: Path, minutes: float, agent: bool) -> int:
    """A call of ``minutes``: caller speech-like bursts (a caller turn of
    3-5 s every 12 s) over low noise, written a block at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    total = int(minutes * 60 * RATE)
    rng = np.random.default_rng(0)
    events = []
    t = 1.0
    while t + 6 < total / RATE:
        length = 3.0 + (len(events) % 3)
        events.append(
            {
                "type": "caller_turn",
                "start": round(t, 3),
                "end": round(t + length, 3),
                "text": "I would like to check the status of my order please",
            }
        )
        events.append(
            {
                "type": "agent_turn",
                "start": round(t + length + 0.8, 3),
                "end": round(t + length + 3.8, 3),
                "text": "Sure, one moment while I look that up.",
            }
        )
        t += TURN_EVERY_S
    turns = [(round(e["start"] * RATE), round(e["end"] * RATE)) for e in events[::2]]

    def write(path: Path, voiced: list[tuple[int, int]], seed: int) -> None:
        rng = np.random.default_rng(seed)
        block = RATE * 60
        with sf.SoundFile(path, "w", RATE, 1, subtype="PCM_16") as fh:
            for start in range(0, total, block):
                n = min(block, total - start)
                x = rng.standard_normal(n).astype(np.float32) * 0.003
                idx = np.arange(start, start + n)
                for a, b in voiced:
                    if b < start or a > start + n:
                        continue
                    m = (idx >= a) & (idx < b)
                    tt = idx[m] / RATE
                    # A voiced buzz with a syllable envelope: speech to a VAD.
                    env = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * tt)
                    x[m] += (0.3 * env * np.sign(np.sin(2 * np.pi * 140 * tt))).astype(np.float32)
                fh.write(x)

    write(folder / "caller.wav", turns, 1)
    audio = {"caller": "caller.wav"}
    if agent:
        agent_turns = [(round(e["start"] * RATE), round(e["end"] * RATE)) for e in events[1::2]]
        write(folder / "agent.wav", agent_turns, 2)
        audio["agent"] = "agent.wav"
    del rng
    manifest = {
        "format": "turnkit.recording/v1",
        "id": f"long-{minutes:g}min",
        "audio": audio,
        "source": "synthetic",
        "events": events,
    }
    (folder / "call.json").write_text(json.dumps(manifest))
    return (folder / "caller.wav").stat().st_size


def peak_rss(args: list[str]) -> tuple[int, float, int]:
    """Run ``python args`` and return (peak RSS bytes, wall seconds, rc)."""
    import time

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    return usage.ru_maxrss * 1024, time.perf_counter() - t0, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, nargs="+", default=[30.0, 120.0])
    ap.add_argument(
        "--no-replay", action="store_true", help="validate only (replay of 2 h: minutes)"
    )
    ap.add_argument("--agent", action="store_true", help="also write agent.wav (echo reference)")
    args = ap.parse_args()
    mb = 1024 * 1024
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_memory.") as tmp:
        floor, _, _ = peak_rss(["-c", IMPORTS])
        print(f"imports only (floor): {floor / mb:.0f} MB", flush=True)
        for minutes in args.minutes:
            folder = Path(tmp) / f"call-{minutes:g}"
            size = write_call(folder, minutes, args.agent)
            whole, _, _ = peak_rss(
                [
                    "-c",
                    f"{IMPORTS}\nfrom turnkit.audio.wav import read_wav\n"
                    f"read_wav({str(folder / 'caller.wav')!r}, 16000)",
                ]
            )
            val, val_s, val_rc = peak_rss(["-m", "turnkit.cli", "validate", str(folder)])
            row = {
                "minutes": minutes,
                "file_mb": size / mb,
                "floor_mb": floor / mb,
                "whole_read_mb": whole / mb,
                "validate_mb": val / mb,
                "validate_s": val_s,
                "validate_rc": val_rc,
            }
            print(
                f"{minutes:g} min, caller.wav {size / mb:.0f} MB: whole-file read {whole / mb:.0f} MB "
                f"({whole / size:.2f}x), validate {val / mb:.0f} MB ({val / size:.2f}x, "
                f"{val_s:.0f} s, rc {val_rc})",
                flush=True,
            )
            if not args.no_replay:
                rep, rep_s, rep_rc = peak_rss(
                    [
                        "-m",
                        "turnkit.cli",
                        "replay",
                        str(folder),
                        "--workers",
                        "1",
                        "--json",
                        str(Path(tmp) / f"r-{minutes:g}.json"),
                    ]
                )
                row |= {"replay_mb": rep / mb, "replay_s": rep_s, "replay_rc": rep_rc}
                print(
                    f"{minutes:g} min: replay {rep / mb:.0f} MB ({rep / size:.2f}x the file, "
                    f"{rep_s:.0f} s, rc {rep_rc})",
                    flush=True,
                )
            rows.append(row)
            for p in folder.iterdir():
                p.unlink()
    print()
    print("minutes  file MB  floor MB  whole-read MB  validate MB (x file)  replay MB (x file)")
    for r in rows:
        rep = (
            f"{r['replay_mb']:.0f} ({r['replay_mb'] / r['file_mb']:.2f}x)"
            if "replay_mb" in r
            else "—"
        )
        print(
            f"{r['minutes']:7g}  {r['file_mb']:7.0f}  {r['floor_mb']:8.0f}  "
            f"{r['whole_read_mb']:13.0f}  {r['validate_mb']:6.0f} "
            f"({r['validate_mb'] / r['file_mb']:.2f}x)        {rep}"
        )
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        growth = b["validate_mb"] - a["validate_mb"]
        print(
            f"validate peak grows {growth:+.0f} MB from {a['minutes']:g} to {b['minutes']:g} min "
            f"(whole-file read grows {b['whole_read_mb'] - a['whole_read_mb']:+.0f} MB)"
        )
        if "replay_mb" in a and "replay_mb" in b:
            print(f"replay peak grows {b['replay_mb'] - a['replay_mb']:+.0f} MB")


if __name__ == "__main__":
    main()
