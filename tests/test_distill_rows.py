"""The teacher rows of scripts/distill_llm_eou.py as the v2 training script reads them."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import distill_llm_eou  # noqa: E402
import train_semantic_text_v2 as v2  # noqa: E402

THR = 0.03


def _rows(tmp_path: Path) -> Path:
    rows = [
        {"text": "i need a", "p_llm": 0.0, "kind": "cut"},  # underflowed P: clearly open
        {"text": "i need a hotel", "p_llm": THR, "kind": "cut"},  # at the threshold
        {"text": "i need a hotel please", "p_llm": 9 * THR / (1 + 8 * THR), "kind": "whole"},
        {"text": "i need", "p_llm": THR / 2, "kind": "cut"},  # under it, not clearly
    ]
    path = tmp_path / "teacher.jsonl"
    with path.open("w") as f:
        for r in rows:
            r |= {"agent": "How can I help?", "threshold": THR, "group": "g1"}
            f.write(json.dumps(r | {"source": "distill-chitchat"}) + "\n")
    return path


def test_soft_targets_sit_on_the_teachers_scale(tmp_path: Path) -> None:
    ex, soft = v2.distill_examples(_rows(tmp_path), weight=2.0)
    assert [e.label for e in ex] == [0, 1, 1, 0]
    assert all(e.weight == 2.0 and e.source == "distill-chitchat" for e in ex)
    assert soft[0] < 1e-3  # P 0 is clamped, not a log of zero
    assert soft[1] == pytest.approx(0.5)  # the teacher's threshold reads 0.5
    assert soft[2] == pytest.approx(0.9)  # odds nine times the threshold's
    assert soft[3] == pytest.approx(1 / 3, abs=0.01)


def test_holds_mode_keeps_only_clearly_unfinished_cuts(tmp_path: Path) -> None:
    ex, soft = v2.distill_examples(_rows(tmp_path), weight=1.0, mode="holds")
    assert [(e.text, e.label) for e in ex] == [("i need a", 0)]
    assert soft == {}


def test_cuts_fall_inside_the_words() -> None:
    words = ["can", "you", "help", "me", "find", "a", "hotel"]
    rng = random.Random(0)
    for _ in range(50):
        cuts = distill_llm_eou._cuts(words, rng, 2)
        assert len(cuts) == 2 and cuts == sorted(set(cuts))
        assert all(1 <= c < len(words) for c in cuts)
    assert distill_llm_eou._cuts(["yes"], rng, 2) == []
