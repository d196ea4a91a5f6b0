#!/usr/bin/env python3
"""Write a telephone-band copy of a corpus of recorded calls.

    python scripts/narrowband.py SRC_DIR DST_DIR [--caller-gain-db DB]

Every call folder under SRC_DIR (searched for ``call.json``) is copied to the
same relative place under DST_DIR with its caller.wav and agent.wav passed
through :func:`turnkit.audio.telephone.telephone` (8 kHz, 300-3400 Hz, G.711
μ-law round trip) and written as 8 kHz PCM 16-bit, and its call.json copied
with the tag ``telephone`` added. Labels are unchanged: the channel is
zero-phase, so event times measured on the wideband audio still hold.

A call already tagged ``telephone`` has been through a phone line: its audio
is copied as it is (no second codec pass). A call that cannot be read is
named in one line and skipped; the others are still written (exit 1).

``--caller-gain-db`` scales the caller's channel after the line (a quiet
handset or a far caller: telephone levels vary by 20 dB and more between
callers), clipped to full scale; the agent's channel is left as it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from turnkit.audio.telephone import TELEPHONE_RATE, telephone
from turnkit.audio.wav import AudioError, open_wav, read_wav

TAG = "telephone"


def _narrow(src: Path, dst: Path, gain_db: float = 0.0, line: bool = True) -> None:
    info = open_wav(src)
    rate = int(info.samplerate)
    audio = read_wav(src, rate)
    out, out_rate = (telephone(audio, rate), TELEPHONE_RATE) if line else (audio, rate)
    if gain_db:
        out = np.clip(out * 10 ** (gain_db / 20), -1.0, 1.0)
    dst.parent.mkdir(parents=True, exist_ok=True)
    sf.write(dst, out, out_rate, subtype="PCM_16")


def convert_call(src: Path, dst: Path, caller_gain_db: float = 0.0) -> None:
    """One call folder ``src`` -> ``dst`` (raises ValueError/OSError naming the file)."""
    manifest_path = src / "call.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{manifest_path}: not readable JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{manifest_path}: not a JSON object")
    tags = manifest.get("tags", [])
    if not isinstance(tags, list):
        raise ValueError(f"{manifest_path}: tags: not a list")
    audio = manifest.get("audio", {}) or {}
    if not isinstance(audio, dict):
        raise ValueError(f"{manifest_path}: audio: not an object")
    names = [audio.get("caller", "caller.wav")]
    if audio.get("agent"):
        names.append(audio["agent"])
    already = TAG in tags
    dst.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        if not isinstance(name, str):
            raise ValueError(f"{manifest_path}: audio: {name!r} is not a file name")
        gain = caller_gain_db if k == 0 else 0.0
        if already and not gain:
            shutil.copyfile(src / name, dst / name)
        else:
            _narrow(src / name, dst / name, gain, line=not already)
    if not already:
        manifest["tags"] = [*tags, TAG]
    (dst / "call.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path, help="a call folder, or a folder of call folders")
    ap.add_argument("dst", type=Path, help="where the narrowband copy goes")
    ap.add_argument(
        "--caller-gain-db", type=float, default=0.0, help="scale the caller's channel (dB)"
    )
    args = ap.parse_args(argv)
    src: Path = args.src
    if not src.is_dir():
        print(f"{src}: not a folder", file=sys.stderr)
        return 2
    if args.dst.resolve() == src.resolve():
        print(f"{args.dst}: the copy must go to another folder than SRC_DIR", file=sys.stderr)
        return 2
    calls = sorted(p.parent for p in src.rglob("call.json"))
    if not calls:
        print(f"{src}: no call.json found", file=sys.stderr)
        return 1
    bad = 0
    for call in calls:
        rel = call.relative_to(src)
        try:
            convert_call(call, args.dst / rel, args.caller_gain_db)
        except (AudioError, ValueError, OSError) as exc:
            bad += 1
            print(str(exc).splitlines()[0], file=sys.stderr)
            continue
        print(f"wrote {args.dst / rel}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
