"""Call-shaped load at two concurrencies, stable vs changing context.

    python benchmarks/bench_loadtest.py [--base-url URL] [--concurrency 1 2] [--calls 4]

Runs :func:`turnkit.llm.loadtest.run_load` four times (each concurrency x
``stable``/``changing``) with the same plan otherwise: 2 agents of ~400
tokens, 4 turns a call, think time 0.5 s, 25 % tool turns, 25 % background
requests, no prewarm. Prints TTFT p50/p90/p99, SLO attainment, goodput, the
cached share and uncached prompt tokens/s per run, and for each concurrency
the ratio changing/stable of p90 TTFT (the cost of a block that changes
inside the prompt, measured against the stable run of the same engine).

Without ``--base-url`` it starts llama-server + SmolLM2-135M itself with two
slots (``-np 2``, 8192 context shared) — found as the tests find them, see
tests/engine.py — a fresh one for each run: llama-server keeps earlier prompts
in host memory (``--cache-ram``) and restores them into a slot, so on one
shared engine each run started with the previous runs' prompts cached (the
concurrency-2 "changing" run showed a higher cached share than "stable").
With ``--base-url`` the runs share that engine: each run's calls are still
new to it (``LoadConfig.run_id``), but the agents' stable parts are warm
after the first run. CPU figures are small (a 2-core machine prefills ~100
tokens/s); what carries over is the ratio and the cached share.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from turnkit.llm.loadtest import LoadConfig, run_load  # noqa: E402


@contextlib.contextmanager
def engine(base_url: str | None) -> Iterator[str]:
    if base_url:
        yield base_url
        return
    from engine import running_llama_server

    with running_llama_server(parallel=2, ctx_size=8192) as url:
        yield url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url")
    ap.add_argument("--concurrency", type=int, nargs=2, default=[1, 2])
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=400)
    ap.add_argument("--slo-ms", type=float, default=2000.0)
    args = ap.parse_args()
    rows = []
    for conc in args.concurrency:
        for context in ("stable", "changing"):
            with engine(args.base_url) as url:  # cold engine: no run sees another's cache
                cfg = LoadConfig(
                    base_url=url, calls=args.calls, concurrency=conc, agents=2, turns=4,
                    think_s=0.5, stagger_s=1.0, arrival="poisson", context=context,
                    prompt_tokens=args.prompt_tokens, reply_tokens=8, tool_share=0.25,
                    background_share=0.25, slo_ttft_ms=args.slo_ms, max_duration_s=240,
                    request_timeout_s=240, seed=7,
                )  # fmt: skip
                s = asyncio.run(run_load(cfg)).summary()
                rows.append((conc, context, s))
                print(
                    f"concurrency {conc} {context:8s}: TTFT p50 {s['p50_ttft_ms']} / p90 "
                    f"{s['p90_ttft_ms']} / p99 {s['p99_ttft_ms']} ms; SLO<={args.slo_ms:g} ms "
                    f"{s['slo_attainment']:.0%}; goodput {s['request_goodput']} req/s; cached "
                    f"{s['cached_share']:.1%}; uncached {s['uncached_prompt_tokens_per_s']} tok/s; "
                    f"{s['completed']} req, {s['failed']} failed, {s['duration']} s",
                    flush=True,
                )
    for conc in args.concurrency:
        st = next(s for c, x, s in rows if c == conc and x == "stable")
        ch = next(s for c, x, s in rows if c == conc and x == "changing")
        print(
            f"concurrency {conc}: p90 TTFT changing/stable = "
            f"{ch['p90_ttft_ms'] / st['p90_ttft_ms']:.1f}x; cached share "
            f"{st['cached_share']:.1%} stable vs {ch['cached_share']:.1%} changing"
        )


if __name__ == "__main__":
    main()
