"""First-turn TTFT with per-call values at the top of the prompt vs at the end.

    python benchmarks/bench_prompt_layout.py [--base-url URL] [--tokens 2000] [--calls 3]

Same engine, same ~2,000-token agent prompt (``PromptLayout``: persona,
rules, call flow, reference, tools), same per-call values (caller name,
number dialled, time). "top": the per-call block is the first message, the
anti-pattern; "end": the layout's default, block last. For each layout,
``--calls`` successive calls (different callers) send their first turn
(``max_tokens=1``); the first call of each layout is cold for both and is
left out, the others are what every later call of a running agent sees.
Prints the median TTFT of each layout, cached tokens as the engine reports
them, and the ratio top/end (the issue's goal: >= 4x).

Without ``--base-url`` it starts llama-server + SmolLM2-135M itself (one
slot, 4096 context; found as the tests find them, see tests/engine.py). On
the 2-core CI-like machine a 2,000-token prefill takes ~20 s, so the run
takes 1-2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from turnkit.llm.client import ChatClient  # noqa: E402
from turnkit.llm.prompt import ChatRequest, PromptLayout  # noqa: E402

CALLERS = [
    ("Dana Reyes", "+1 555 0100 1001", "2025-03-04 09:12"),
    ("Eli Park", "+1 555 0100 1002", "2025-03-04 09:31"),
    ("Sam Okafor", "+1 555 0100 1003", "2025-03-04 10:05"),
    ("Mia Novak", "+1 555 0100 1004", "2025-03-04 10:47"),
    ("Ravi Shah", "+1 555 0100 1005", "2025-03-04 11:02"),
]
TOOL = {
    "type": "function",
    "function": {
        "name": "book_appointment",
        "description": "Book an appointment.",
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
    },
}


def agent(tokens: int) -> PromptLayout:
    # ~21 tokens per sentence for SmolLM2's tokenizer; checked against the
    # engine's prompt_tokens below.
    sentences = [
        f"Policy {i}: confirm the date, the time and the reason for the visit before booking."
        for i in range(max(1, tokens // 21))
    ]
    return PromptLayout(
        persona="You are Ava, the receptionist at Acme Dental. Greet the caller as {caller_name}.",
        rules=["Keep answers under two sentences.", "Never give medical advice."],
        call_flow="Greet, ask what they need, offer two slots, confirm, book, say goodbye.",
        reference=" ".join(sentences),
        tools=[TOOL],
        placeholders=("caller_name", "caller_number", "call_time"),
    )


def first_request(layout: PromptLayout, caller: tuple[str, str, str], top: bool) -> ChatRequest:
    name, number, when = caller
    call = layout.start_call({"caller_name": name, "caller_number": number, "call_time": when})
    call.add("assistant", "Acme Dental, this is Ava. How can I help?")
    call.add("user", "Hi, I'd like to book a cleaning next week.")
    req = call.request()
    if not top:
        return req
    return ChatRequest(messages=[req.messages[-1], *req.messages[:-1]], tools=req.tools)


async def measure(base_url: str, tokens: int, calls: int) -> dict[str, list[tuple[float, int, int]]]:
    layout = agent(tokens)
    out: dict[str, list[tuple[float, int, int]]] = {"top": [], "end": []}
    async with ChatClient(base_url, timeout_s=600, first_token_timeout_s=600) as c:
        for mode in ("top", "end"):
            for i in range(calls):
                req = first_request(layout, CALLERS[i % len(CALLERS)], top=(mode == "top"))
                r = await c.complete(req.messages, tools=req.tools, max_tokens=1)
                row = (r.ttft_ms or 0.0, r.usage.get("prompt_tokens", 0), r.cached_tokens or 0)
                print(f"  {mode:3s} call {i}: TTFT {row[0]:8.1f} ms, prompt {row[1]}, "
                      f"cached {row[2]}" + ("  (cold, left out)" if i == 0 else ""))  # fmt: skip
                out[mode].append(row)
    return out


@contextlib.contextmanager
def engine(base_url: str | None) -> Iterator[str]:
    if base_url:
        yield base_url
        return
    from engine import running_llama_server

    with running_llama_server(ctx_size=4096) as url:
        yield url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url")
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    if args.calls < 2:
        ap.error("--calls must be >= 2 (the first is cold)")
    with engine(args.base_url) as url:
        print(f"engine {url}; ~{args.tokens}-token prompt; {args.calls} calls per layout")
        got = asyncio.run(measure(url, args.tokens, args.calls))
    top = statistics.median(r[0] for r in got["top"][1:])
    end = statistics.median(r[0] for r in got["end"][1:])
    prompt = got["end"][-1][1]
    cached_top = statistics.median(r[2] for r in got["top"][1:])
    cached_end = statistics.median(r[2] for r in got["end"][1:])
    print(f"prompt tokens: {prompt}")
    print(f"per-call values at the top: first-turn TTFT {top:8.1f} ms (cached {cached_top:.0f})")
    print(f"per-call values at the end: first-turn TTFT {end:8.1f} ms (cached {cached_end:.0f})")
    ratio = top / end if end else float("inf")
    print(f"ratio top/end: {ratio:.1f}x (goal >= 4x: {'met' if ratio >= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
