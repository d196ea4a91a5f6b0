"""TEN English and turnsense accuracy per class for semantic-text v1 and v2, same run.

    python scripts/eval_semantic_text.py [--eval-dir ../shared/eval] [--v2 PATH ...]

``--v2`` (repeatable) scores other v2 model files beside the packaged ones,
e.g. the committed model against a retrained one, in the same run. Each
model at its own default threshold (chosen by its training script on
its own held-out split). The eval files are a TEST set: report, never tune.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from turnkit.cli.eot import load_eval  # noqa: E402
from turnkit.text.neural_model import NeuralTextModel  # noqa: E402
from turnkit.text.semantic_model import SemanticTextModel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval-dir", type=Path, default=ROOT.parent / "shared" / "eval")
    ap.add_argument(
        "--v2",
        type=Path,
        action="append",
        default=[],
        help="another v2 model file to score beside the packaged v1 and v2 (repeatable)",
    )
    args = ap.parse_args()
    models = {"v1": SemanticTextModel.load("v1"), "v2": SemanticTextModel.load("v2")}
    for i, path in enumerate(args.v2):
        models[f"v2[{i + 1}]"] = NeuralTextModel.from_file(path)
    sets = load_eval(args.eval_dir)
    print(f"{'set':14s} {'class':11s} {'n':>4s} " + " ".join(f"{k:>8s}" for k in models))
    for name, classes in sets.items():
        for cls, texts, end in classes:
            accs = []
            for m in models.values():
                hits = sum((m.predict(t, "") >= m.threshold) == end for t in texts)
                accs.append(f"{hits / max(1, len(texts)) * 100:7.2f}%")
            print(f"{name:14s} {cls:11s} {len(texts):4d} " + " ".join(accs))
    for i, path in enumerate(args.v2):
        print(f"v2[{i + 1}]: {path}")
    print("thresholds: " + ", ".join(f"{k} {m.threshold:.2f}" for k, m in models.items()))


if __name__ == "__main__":
    main()
