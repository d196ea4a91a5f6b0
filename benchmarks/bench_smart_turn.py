"""Smart Turn v3 cost per inference (an 8 s window: features + ONNX) on one
core, against the Silero VAD's cost per 32 ms frame, both measured in this
run.

    python benchmarks/bench_smart_turn.py [--windows 20] [--repeats 3]
        [--activations int8|float]

smart-turn runs the model once per pause (when the VAD reports a stop), so
the ratio says how many VAD frames one end-of-turn judgement costs. The
features (numpy, float64 FFT) and the ONNX run are also timed apart.
Absolute times move with the machine's load; the ratios are what to compare
between runs. Needs pipecat-ai installed (the model ships in its wheel).
"""

from __future__ import annotations

import argparse
import os
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, as in replay workers

import numpy as np  # noqa: E402
from common import ROOT, best_of  # noqa: E402

from turnkit.audio.mel import WINDOW_SAMPLES, smart_turn_features  # noqa: E402
from turnkit.audio.vad import SileroVAD  # noqa: E402
from turnkit.audio.wav import iter_frames, read_wav  # noqa: E402
from turnkit.detectors.smart_turn import FIXED_COST, SmartTurnModel  # noqa: E402


def corpus_audio() -> np.ndarray:
    return np.concatenate([read_wav(w) for w in sorted((ROOT / "recordings").glob("*/caller.wav"))])


def windows(audio: np.ndarray, n: int) -> list[np.ndarray]:
    """``n`` 8 s windows ending at evenly spread points of the corpus."""
    ends = np.linspace(WINDOW_SAMPLES, audio.size, n).astype(int)
    return [audio[e - WINDOW_SAMPLES : e] for e in ends]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--activations", choices=["int8", "float"], default="int8")
    args = ap.parse_args()

    audio = corpus_audio()
    wins = windows(audio, args.windows)
    frames = [f for _, f in iter_frames(audio, 512)][: args.frames]
    model = SmartTurnModel(activations=args.activations)
    vad = SileroVAD()
    feats = [smart_turn_features(w)[np.newaxis] for w in wins]
    session, name = model._session, model._input

    def smart_turn() -> None:
        for w in wins:
            model.predict(w)

    def features() -> None:
        for w in wins:
            smart_turn_features(w)

    def onnx() -> None:
        for f in feats:
            session.run(None, {name: f})

    def silero() -> None:
        vad.reset()
        for f in frames:
            vad(f)

    smart_turn()  # warm up both sessions
    silero()
    t_st = best_of(smart_turn, args.repeats) / len(wins)
    t_feat = best_of(features, args.repeats) / len(wins)
    t_onnx = best_of(onnx, args.repeats) / len(wins)
    t_vad = best_of(silero, args.repeats) / len(frames)
    print(
        f"model: {model.path.name} ({args.activations} activations); "
        f"{len(wins)} windows x 8 s, best of {args.repeats}"
    )
    print(
        f"smart-turn inference: {t_st * 1e3:8.1f} ms   (features {t_feat * 1e3:.1f} ms, onnx {t_onnx * 1e3:.1f} ms)"
    )
    print(f"silero vad frame:     {t_vad * 1e3:8.3f} ms   ({len(frames)} x 32 ms frames)")
    print(f"ratio smart-turn inference / silero frame: {t_st / t_vad:.0f}")
    print(f"one inference = {t_st / 0.032:.1f} frames of real time on one core")
    # CPU time per inference: what `turnkit replay --compute fixed` charges
    # (turnkit.detectors.smart_turn.FIXED_COST_MS); a busy machine inflates
    # it far less than wall time.
    cpu = []
    for w in wins:
        c0 = time.process_time()
        model.predict(w)
        cpu.append(time.process_time() - c0)
    print(
        f"smart-turn CPU time per inference p50: {float(np.median(cpu)) * 1e3:.1f} ms "
        f"(recorded with the model: {FIXED_COST[args.activations]:.0f} ms)"
    )


if __name__ == "__main__":
    main()
