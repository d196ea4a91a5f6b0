"""examples/pipecat_agent.py end to end on the real llama-server: a recorded
call through the agent's turn-taking (turnkit strategies, drafting, gated
tools) and Pipecat's OpenAILLMService; every confirmed turn gets a reply.

The selfcheck's caller waits for each reply (an event, bounded by a generous
per-reply timeout) before its next turn, so the count does not depend on how
fast the machine generates: fed faster than real time without that wait, the
next caller turn interrupted the reply to the last one (3 turn ends, 2
replies)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))


def test_agent_selfcheck_with_llama_server() -> None:
    from engine import require_engine, running_llama_server

    require_engine()  # skips, or fails under TURNKIT_REQUIRE_ENGINE=1
    with running_llama_server() as url:
        env = dict(os.environ, TURNKIT_LLM_BASE_URL=url, TURNKIT_DETECTOR="fused")
        out = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "pipecat_agent.py"), "selfcheck"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,  # a bound only: selfcheck waits for each reply, up to 120 s
        )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = next(line for line in out.stdout.splitlines() if line.startswith("selfcheck:"))
    ends = int(summary.split()[1])
    replies = int(summary.split(", ")[1].split()[0])
    assert ends == 3 and replies == ends, summary
    # The drafter learned the engine's first token from Pipecat's TTFB metric.
    first = summary.split("first token ")[1]
    assert float(first.split()[0]) > 0 and int(first.split("lowest of ")[1].split()[0]) >= 1, (
        summary
    )
    assert out.stdout.count("caller (") == ends
    assert out.stdout.count("  agent: ") == replies
