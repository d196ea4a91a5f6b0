#!/usr/bin/env python3
"""Write a telephone-band copy of a corpus of recorded calls.

    python scripts/narrowband.py SRC_DIR DST_DIR

Every call folder under SRC_DIR (searched for ``call.json``) is copied to the
same relative place under DST_DIR with its caller.wav and agent.wav passed
through :func:`turnkit.audio.telephone.telephone` (8 kHz, 300-3400 Hz, G.711
μ-law round trip) and written as 8 kHz PCM 16-bit, and its call.json copied
with the tag ``telephone`` added. Labels are unchanged: the channel is
zero-phase, so event times measured on the wideband audio still hold.

A call already tagged ``telephone`` has been through a phone line: its audio
is copied as it is (no second codec pass). A call that cannot be read is
named in one line and skipped; the others are still written (exit 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from turnkit.audio.telephone import TELEPHONE_RATE, telephone
from turnkit.audio.wav import AudioError, open_wav, read_wav

TAG = "telephone"


def _narrow(src: Path, dst: Path) -> None:
    info = open_wav(src)
    audio = read_wav(src, int(info.samplerate))
    dst.parent.mkdir(parents=True, exist_ok=True)
    sf.write(dst, telephone(audio, int(info.samplerate)), TELEPHONE_RATE, subtype="PCM_16")


def convert_call(src: Path, dst: Path) -> None:
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
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"{manifest_path}: audio: {name!r} is not a file name")
        if already:
            shutil.copyfile(src / name, dst / name)
        else:
            _narrow(src / name, dst / name)
    if not already:
        manifest["tags"] = [*tags, TAG]
    (dst / "call.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path, help="a call folder, or a folder of call folders")
    ap.add_argument("dst", type=Path, help="where the narrowband copy goes")
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
            convert_call(call, args.dst / rel)
        except (AudioError, ValueError, OSError) as exc:
            bad += 1
            print(str(exc).splitlines()[0], file=sys.stderr)
            continue
        print(f"wrote {args.dst / rel}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
