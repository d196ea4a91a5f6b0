"""Responder soak: 200 concurrent sessions, RSS against turns served.

Each session is a :class:`~turnkit.drafting.responder.Responder` taking turn
after turn (``on_end`` → a streamed reply → the next turn) against an
in-process **fake** engine (an ``httpx.MockTransport`` that answers every
request with one short SSE reply at once: no sockets, no model), so the run
measures what the Responder itself keeps, not an engine. Two modes, each in
its own process so their RSS do not mix:

- ``policy``: the default history policy (stable prefix + the last 64 turns);
- ``keep-all``: ``history_turns=None`` (the conversation kept and resent
  whole, as before the policy).

For each it prints the RSS slope over the second half of the run (MB per
1,000 turns, least squares over samples every 0.25 s), the RSS at the end,
turns per second in the first and last quarter, and the largest request
(messages) sent. Goal: the policy's slope about flat and its turn rate
steady; keep-all's slope and the falling turn rate show what it prevents.

Run::

    python benchmarks/bench_responder_soak.py            # 200 sessions x 400 turns
    python benchmarks/bench_responder_soak.py --sessions 50 --turns 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import numpy as np

from turnkit.clock import RealClock
from turnkit.drafting.responder import Responder, ResponderParams
from turnkit.frames import LLMTextFrame
from turnkit.llm.client import ChatClient

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
WORDS = "I would like to move my appointment to later in the week if that is possible "


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MB


def fake_engine_transport(largest: list[int]) -> httpx.MockTransport:
    """A fake engine: one short streamed reply per request, at once."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "Okay, I can do that."}}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()

    async def handler(request: httpx.Request) -> httpx.Response:
        n = request.content.count(b'"role"')
        if n > largest[0]:
            largest[0] = n
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body)

    return httpx.MockTransport(handler)


async def soak(mode: str, sessions: int, turns: int) -> dict[str, object]:
    largest = [0]
    client = ChatClient("http://fake.invalid/v1", transport=fake_engine_transport(largest))
    params = ResponderParams() if mode == "policy" else ResponderParams(history_turns=None)
    done = [0]
    samples: list[tuple[float, int, float]] = []

    async def session(i: int) -> None:
        finished = asyncio.Event()

        def emit(frame: LLMTextFrame) -> None:
            if frame.final:
                finished.set()

        r = Responder(client, RealClock(), emit=emit, params=params)
        for t in range(turns):
            finished.clear()
            await r.on_end(f"session {i} turn {t}: {WORDS}")
            await finished.wait()
            done[0] += 1
        await r.idle()

    async def sample() -> None:
        t0 = time.perf_counter()
        while True:
            samples.append((time.perf_counter() - t0, done[0], rss_mb()))
            await asyncio.sleep(0.25)

    start_rss = rss_mb()
    sampler = asyncio.create_task(sample())
    t0 = time.perf_counter()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    elapsed = time.perf_counter() - t0
    sampler.cancel()
    samples.append((elapsed, done[0], rss_mb()))
    await client.aclose()

    total = sessions * turns
    half = [(n, m) for _, n, m in samples if n >= total / 2]
    slope = None
    if len(half) >= 3 and half[-1][0] > half[0][0]:
        x = np.array([n for n, _ in half], dtype=float)
        y = np.array([m for _, m in half], dtype=float)
        slope = float(np.polyfit(x / 1000.0, y, 1)[0])

    def rate(lo: float, hi: float) -> float | None:
        pts = [(t, n) for t, n, _ in samples if lo * total <= n <= hi * total]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    return {
        "mode": mode,
        "sessions": sessions,
        "turns": total,
        "seconds": round(elapsed, 1),
        "rss_start_mb": round(start_rss, 1),
        "rss_end_mb": round(samples[-1][2], 1),
        "slope_mb_per_1k_turns_2nd_half": None if slope is None else round(slope, 3),
        "turns_per_s_first_quarter": rate(0.0, 0.25),
        "turns_per_s_last_quarter": rate(0.75, 1.0),
        "largest_request_messages": largest[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=400, help="turns per session")
    ap.add_argument("--mode", choices=["policy", "keep-all"], help="(internal) one mode")
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(asyncio.run(soak(args.mode, args.sessions, args.turns))), flush=True)
        return
    print(f"Responder soak: {args.sessions} sessions x {args.turns} turns, fake in-process engine")
    for mode in ("policy", "keep-all"):
        cmd = [sys.executable, __file__, "--mode", mode, "--sessions", str(args.sessions)]
        p = subprocess.run([*cmd, "--turns", str(args.turns)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{mode}: failed\n{p.stderr[-2000:]}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])

        def f(v: object) -> str:
            return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)

        print(
            f"{mode:9s} {r['turns']} turns in {r['seconds']} s | RSS {r['rss_start_mb']} -> "
            f"{r['rss_end_mb']} MB, slope (2nd half) {f(r['slope_mb_per_1k_turns_2nd_half'])} "
            f"MB / 1k turns | turns/s first quarter {f(r['turns_per_s_first_quarter'])}, last "
            f"quarter {f(r['turns_per_s_last_quarter'])} | largest request "
            f"{r['largest_request_messages']} messages"
        )


if __name__ == "__main__":
    main()
