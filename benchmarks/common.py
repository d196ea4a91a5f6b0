"""What the benchmark scripts share: the repo root and best-of-N timing.

Scripts run as ``python benchmarks/bench_x.py``, so this folder is on
``sys.path`` and they import it as ``common``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``fn``, in seconds (the least
    disturbed by other work on a shared machine)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
