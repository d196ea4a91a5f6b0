"""Import time of the plugins against the frameworks they plug into.

Each figure is the best of ``--repeats`` fresh interpreters running
``import X`` (minus a bare interpreter's start, measured the same way), so
caches warm but no module is already loaded. Ratios: ``turnkit_livekit`` vs
``livekit.agents`` (what a LiveKit agent imports anyway) and
``turnkit_deepgram`` vs ``deepgram`` + its listen v2 types (what a Flux client
imports anyway). The extra cost of a plugin is its figure minus its baseline.

    python benchmarks/bench_plugin_import.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CASES = [
    ("livekit.agents", "import livekit.agents"),
    ("turnkit_livekit", "import turnkit_livekit"),
    ("deepgram (listen v2 types)", "import deepgram.listen.v2.types as t; t.ListenV2TurnInfo"),
    ("turnkit_deepgram", "import turnkit_deepgram"),
]


def wall(code: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    bare = wall("pass", args.repeats)
    print(f"bare interpreter start: {bare * 1000:.0f} ms (subtracted below)")
    ms = {name: (wall(code, args.repeats) - bare) * 1000 for name, code in CASES}
    for name, v in ms.items():
        print(f"import {name:<28} {v:7.0f} ms")
    lk, tl = ms["livekit.agents"], ms["turnkit_livekit"]
    dg, td = ms["deepgram (listen v2 types)"], ms["turnkit_deepgram"]
    print(f"turnkit_livekit / livekit.agents  = {tl / lk:.2f}x  (plugin adds {tl - lk:+.0f} ms)")
    print(f"turnkit_deepgram / deepgram       = {td / dg:.2f}x  (plugin adds {td - dg:+.0f} ms)")


if __name__ == "__main__":
    main()
