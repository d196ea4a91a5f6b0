"""TEN English and turnsense per class for ``fused:llm=on``'s text evidence.

    python scripts/eval_fused_text.py [--eval-dir ../shared/eval] [--base-url URL]

What ``fused`` reads from words when its engine is on: semantic-text v2's
P(end) and ``llm-eou``'s (centred on its calibrated threshold,
:func:`turnkit.detectors.fused.centred_llm`), combined by
:meth:`FusedScorer.fuse` with the detector's default weights. ``fused``
waits on that probability continuously and has no threshold of its own; to
read it as a yes/no on the test sets, this script picks one on the
development split of ``scripts/calibrate_llm_eou.py`` (chitchat dialogues;
best balanced accuracy, ties to the lower), never on the test sets, and
prints v2 and ``llm-eou`` alone (each at its own threshold) beside it.

Without ``--base-url`` it starts the local engine (llama-server +
SmolLM2-135M, as the tests do: ``tests/engine.py``). Needs the ``train``
extra (chitchat-dataset) for the development split.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from calibrate_llm_eou import build_split  # noqa: E402

from turnkit.cli.eot import load_eval  # noqa: E402
from turnkit.detectors.fused import FusedParams, FusedScorer, centred_llm  # noqa: E402
from turnkit.llm.eou import LLMEndOfTurn, calibration_for  # noqa: E402
from turnkit.text.semantic_model import SemanticTextModel  # noqa: E402

GRID = [i / 100 for i in range(5, 96)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval-dir", type=Path, default=ROOT.parent / "shared" / "eval")
    ap.add_argument("--base-url", default="", help="OpenAI-compatible API root (else start one)")
    args = ap.parse_args()
    v2 = SemanticTextModel.load("v2")
    cal = calibration_for("")
    thr_llm = cal.threshold if cal is not None else 0.5
    prm = FusedParams()
    fuser = FusedScorer(None, None, None, (prm.w_audio, prm.w_text, prm.w_llm))

    with contextlib.ExitStack() as stack:
        url = args.base_url
        if not url:
            from engine import running_llama_server

            url = stack.enter_context(running_llama_server())
        eou = LLMEndOfTurn(url, timeout_ms=60_000)

        def evidence(text: str, context: list[dict[str, str]] | None = None) -> tuple[float, float]:
            agent = next(
                (m["content"] for m in reversed(context or []) if m["role"] == "assistant"), ""
            )
            return v2.predict(text, agent), eou.predict_sync(text, "", context)

        def fused(pt: float, pl: float) -> float:
            p = fuser.fuse({"p_text": pt, "p_llm": centred_llm(pl, thr_llm)})
            assert p is not None
            return p

        dev = [(s.is_end, *evidence(s.text, s.context)) for s in build_split()]

        def balanced(t: float) -> float:
            ends = [fused(a, b) >= t for y, a, b in dev if y]
            nots = [fused(a, b) < t for y, a, b in dev if not y]
            return (sum(ends) / len(ends) + sum(nots) / len(nots)) / 2

        threshold = max(GRID, key=lambda t: (balanced(t), -t))
        print(
            f"development split: {len(dev)} samples; fused threshold {threshold:.2f} "
            f"(balanced accuracy {balanced(threshold):.3f})"
        )
        print(f"{'set':14s} {'class':11s} {'n':>4s} {'fused':>8s} {'v2':>8s} {'llm-eou':>8s}")
        for name, classes in load_eval(args.eval_dir).items():
            for cls, texts, end in classes:
                got = [evidence(t) for t in texts]
                accs = [
                    sum((f(a, b) >= t) == end for a, b in got) / max(1, len(got)) * 100
                    for f, t in (
                        (fused, threshold),
                        (lambda a, b: a, v2.threshold),
                        (lambda a, b: b, thr_llm),
                    )
                ]
                print(
                    f"{name:14s} {cls:11s} {len(texts):4d} " + " ".join(f"{x:7.2f}%" for x in accs)
                )
        eou.close()


if __name__ == "__main__":
    main()
