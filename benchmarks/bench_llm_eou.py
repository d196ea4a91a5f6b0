"""llm-eou cost per decision on the local engine, LiveKit-style evidence
against the previous prompt, both measured in this run.

    python benchmarks/bench_llm_eou.py [--base-url http://127.0.0.1:8080/v1] [--calls 17]
                                       [--rounds 2] [--json out.json]

Without ``--base-url`` it starts llama-server + SmolLM2-135M itself (found as
the tests find them: ``tests/engine.py``). A decision is one
:meth:`LLMEndOfTurn.score` request, which is what the detector awaits at a
pause.

The calls are the demo corpus's transcripts (``recordings/*/call.json``):
caller and agent turns in order. Each caller turn is decided at each of its
pauses (``holds``: the words spoken before the pause) and at its end, with
the conversation so far as context — as a call would ask. Formats:

* ``old`` — the previous prompt: a fixed system prompt, the agent's last
  message (a stand-in before the first), the caller's words as typed;
* ``livekit`` — this module's default: the last 6 messages merged by
  speaker, normalised, ~128 tokens, no system message;
* ``livekit+prewarm`` — the same, with :meth:`LLMEndOfTurn.prewarm` sent
  when the agent's message is known (not counted as a decision).

Prints per format: decisions, ms per decision p50/p95 (all, and the first
decision of each turn, where the history is new), prompt and cached tokens
and the tokens computed per decision (``new``: prompt minus cached, the
load-independent part of the cost), and each format's p50/p95 as a ratio to
``old``. Absolute times move with
the machine's load (the engine runs one thread); the formats take turns in
``--rounds`` rounds so load hits them alike, and the ratio is what to
compare between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from turnkit.llm.eou import LLMEndOfTurn  # noqa: E402

OLD_SYSTEM = "You are a helpful voice assistant on a phone call."
OLD_STAND_IN = "Hello! How can I help you today?"


@dataclass
class Turn:
    role: str
    text: str
    cuts: list[str] = field(default_factory=list)  # caller: words at each pause, then all


def load_calls(root: Path, limit: int) -> list[list[Turn]]:
    calls = []
    for path in sorted(root.glob("*/call.json"))[:limit]:
        doc = json.loads(path.read_text())
        turns = []
        for ev in doc.get("events", []):
            text = (ev.get("text") or "").strip()
            if ev.get("type") == "agent_turn" and text:
                turns.append(Turn("assistant", text))
            elif ev.get("type") == "caller_turn" and text:
                words = ev.get("words") or []
                cuts = []
                for hold in ev.get("holds") or []:
                    before = [w["text"] for w in words if w["end"] <= hold["start"] + 1e-6]
                    if before:
                        cuts.append(" ".join(before))
                cuts.append(text)
                turns.append(Turn("user", text, cuts))
        if turns:
            calls.append(turns)
    return calls


@dataclass
class Stats:
    ms: list[float] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def run_format(name: str, eou: LLMEndOfTurn, calls: list[list[Turn]], st: Stats) -> None:
    await eou.score("hello there", agent_text="hi")  # load; learn the end token's id
    for call in calls:
        context: list[dict[str, str]] = []
        for turn in call:
            if turn.role == "assistant":
                context.append({"role": "assistant", "content": turn.text})
                if name.endswith("+prewarm"):
                    await eou.prewarm(context=context)
                continue
            for i, words in enumerate(turn.cuts):
                if name == "old":
                    agent = next(
                        (m["content"] for m in reversed(context) if m["role"] == "assistant"),
                        OLD_STAND_IN,
                    )
                    r = await eou.score(words, agent)
                else:
                    r = await eou.score(words, context=context)
                st.ms.append(r.elapsed_ms)
                if i == 0:
                    st.first_ms.append(r.elapsed_ms)
                st.prompt.append(r.prompt_tokens or 0)
                st.cached.append(r.cached_tokens or 0)
            context.append({"role": "user", "content": turn.text})


def make(name: str, base_url: str) -> LLMEndOfTurn:
    if name == "old":
        return LLMEndOfTurn(
            base_url,
            system=OLD_SYSTEM,
            history_turns=2,
            normalize=False,
            max_tokens=4096,
            timeout_ms=60_000,
        )
    return LLMEndOfTurn(base_url, timeout_ms=60_000)


async def run(base_url: str, calls: list[list[Turn]], rounds: int) -> dict:
    names = ["old", "livekit", "livekit+prewarm"]
    stats = {n: Stats() for n in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else list(reversed(names))
        for name in order:
            eou = make(name, base_url)
            await run_format(name, eou, calls, stats[name])
            await eou.aclose()
    base = stats["old"]
    out = {}
    print(f"llm-eou on {base_url}: {len(calls)} calls, {rounds} rounds")
    print(
        f"{'format':<16} {'n':>4} {'p50 ms':>7} {'p95 ms':>7} {'1st p50':>8} {'1st p95':>8}"
        f" {'prompt':>6} {'cached':>6} {'new':>5} {'p50/old':>7} {'p95/old':>7}"
    )
    for name, st in stats.items():
        row = {
            "decisions": len(st.ms),
            "p50_ms": round(_pct(st.ms, 0.5), 1),
            "p95_ms": round(_pct(st.ms, 0.95), 1),
            "first_p50_ms": round(_pct(st.first_ms, 0.5), 1),
            "first_p95_ms": round(_pct(st.first_ms, 0.95), 1),
            "prompt_tokens_mean": round(statistics.mean(st.prompt), 1) if st.prompt else None,
            "cached_tokens_mean": round(statistics.mean(st.cached), 1) if st.cached else None,
            # Prompt tokens the engine computed per decision (not from its
            # cache): what the time is made of, independent of the load.
            "computed_tokens_mean": (
                round(statistics.mean(p - c for p, c in zip(st.prompt, st.cached, strict=True)), 1)
                if st.prompt
                else None
            ),
            "p50_ratio_to_old": round(_pct(st.ms, 0.5) / _pct(base.ms, 0.5), 2),
            "p95_ratio_to_old": round(_pct(st.ms, 0.95) / _pct(base.ms, 0.95), 2),
        }
        out[name] = row
        print(
            f"{name:<16} {row['decisions']:>4} {row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f}"
            f" {row['first_p50_ms']:>8.1f} {row['first_p95_ms']:>8.1f}"
            f" {row['prompt_tokens_mean']:>6} {row['cached_tokens_mean']:>6}"
            f" {row['computed_tokens_mean']:>5}"
            f" {row['p50_ratio_to_old']:>7.2f} {row['p95_ratio_to_old']:>7.2f}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--base-url", default="", help="an engine already running (else one is started)"
    )
    ap.add_argument("--calls", type=int, default=17, help="recordings to take (sorted)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="llama-server threads when started here (0: tests' default)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    calls = load_calls(ROOT / "recordings", args.calls)
    if not calls:
        sys.exit("bench_llm_eou: no recordings/*/call.json with turns")
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if not base_url:
            from engine import EngineMissing, find_engine, running_llama_server

            try:
                find_engine()
            except EngineMissing as exc:
                sys.exit(f"bench_llm_eou: {exc}")
            base_url = stack.enter_context(running_llama_server(threads=args.threads or None))
        out = asyncio.run(run(base_url, calls, args.rounds))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
