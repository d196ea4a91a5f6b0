"""LiveKit's user-turn commit against turnkit's decision, in real time, before/after.

For each call, a real ``AgentSession`` (see ``plugins/livekit/tests/lk_commit.py``)
runs twice in real time: with LiveKit's own waits (``attach(...,
keep_livekit_waits=True)``: LiveKit commits after its VAD's end of speech) and
with turnkit's default (``DecisionCommitter``: LiveKit commits when turnkit
decides). The lag is the caller audio LiveKit had been handed when it called
``on_user_turn_completed`` minus turnkit's decision time (the detector's audio
clock), per committed turn; the table gives each call's lags and the median
and maximum over all calls, and the ratio of the two medians (same run).

    .venv/bin/python plugins/parity/commit_lag.py easy-order-status-01 easy-short-08

Real time: each call takes its length twice (about a minute). ``--hold``
holds the caller audio at each decision until LiveKit commits (the event-order
figure the test asserts on; LiveKit's own waits never commit while held).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "livekit" / "tests"))
from lk_commit import CommitRun, run_commits, summary

DEFAULT_CALLS = ("easy-order-status-01", "easy-short-08", "travel-natural-16", "refund-mixed-10")


async def main(calls: list[str], spec: str, hold: bool) -> None:
    console = Console(width=220)
    runs: dict[bool, list[CommitRun]] = {True: [], False: []}
    table = Table(
        title=f"LiveKit commit - turnkit decision ({spec}, real time{', held' if hold else ''})"
    )
    for col in (
        "call",
        "mode",
        "turnkit decisions (s)",
        "LiveKit commits (s)",
        "lag (ms)",
        "final after decision (ms)",
        "held out",
        "replies cut",
        "committer",
        "waited final",
    ):
        table.add_column(col)
    for call in calls:
        for keep in (True, False):
            r = await run_commits(call, spec, keep_livekit_waits=keep, hold=hold)
            runs[keep].append(r)
            table.add_row(
                call,
                "LiveKit waits" if keep else "turnkit commits",
                " ".join(f"{d.at:.3f}" for d in r.decisions),
                " ".join(f"{c:.3f}" for c, _ in r.commits),
                " ".join(str(int(x)) for x in r.lags_ms()),
                " ".join(str(int(x)) for x in r.stt_bound_ms()),
                str(len(r.held_out)),
                str(r.replies_interrupted),
                ",".join(sorted(set(r.how))) or "-",
                str(sum(r.waited_final)),
            )
    console.print(table)
    before, after = summary(runs[True]), summary(runs[False])
    console.print(f"LiveKit waits  : {before}")
    console.print(f"turnkit commits: {after}")
    if before["median_ms"]:
        console.print(
            f"median lag ratio (after/before, same run): {after['median_ms'] / before['median_ms']:.3f}"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("calls", nargs="*", default=list(DEFAULT_CALLS))
    ap.add_argument("--spec", default="fused")
    ap.add_argument("--hold", action="store_true")
    a = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(main(a.calls, a.spec, a.hold))
