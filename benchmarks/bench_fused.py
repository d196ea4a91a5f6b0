"""Compute per decision of the fused detector, one core: the evidence it
gathers at a pause (semantic-text, and Smart Turn when installed), against
semantic-text alone measured in the same run.

    python benchmarks/bench_fused.py [--repeats 200]

Inputs are real: caller turns of the demo corpus (audio from the turn's
start, 500 ms before its first speech) and their transcripts.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from turnkit.clock import VirtualClock
from turnkit.detectors import create_detector
from turnkit.replay.recording import find_recordings, load_recording
from turnkit.text.normalize import normalize_text
from turnkit.text.semantic_model import SemanticTextModel

ROOT = Path(__file__).resolve().parent.parent
SR = 16000


def turns() -> list[tuple[object, str]]:
    out = []
    for folder in find_recordings([ROOT / "recordings"]):
        rec = load_recording(folder)
        audio = rec.caller_audio()
        for t in rec.caller_turns:
            a = audio[max(0, int((t.start - 0.5) * SR)) : int(t.end * SR)]
            out.append((a[-8 * SR :], normalize_text(t.text)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    data = turns()
    text_model = SemanticTextModel.load()

    def per_call_ms(fn) -> float:
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for audio, text in data:
                fn(audio, text)
            best = min(best, (time.perf_counter() - t0) / len(data) * 1000)
        return best

    base = per_call_ms(lambda a, t: text_model.predict(t, "What can I do for you?"))
    print(f"{len(data)} caller turns from recordings/, best of {args.repeats}")
    print(f"semantic-text alone:        {base:8.3f} ms/decision")
    for spec in ("fused:audio=off", "fused:audio=on"):
        try:
            det = create_detector(spec, VirtualClock())
        except Exception as exc:
            print(f"{spec:27s} unavailable: {exc}")
            continue

        loop = asyncio.new_event_loop()

        def gather(audio, text, det=det, loop=loop) -> None:
            det.transcript = text
            det._turn_audio.clear()
            det._turn_audio.ring.push(audio)
            # the clock reads 0: a start this far back selects the whole clip
            det._turn_audio.turn_start = 0.5 - len(audio) / SR
            loop.run_until_complete(det._gather())

        ms = per_call_ms(gather)
        print(f"{spec + ':':27s} {ms:8.3f} ms/decision   ratio to semantic-text {ms / base:6.1f}")


if __name__ == "__main__":
    main()
