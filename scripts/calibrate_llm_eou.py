"""Calibrate the ``llm-eou`` threshold for one model on a development split
built from chitchat-dataset dialogues (never on ``../shared/eval``: that is
the test set).

    pip install chitchat-dataset          # the `train` extra
    python scripts/calibrate_llm_eou.py [--base-url http://127.0.0.1:8080/v1]
                                        [--dialogues 160] [--json out.json]

Without ``--base-url`` it starts the local engine (llama-server +
SmolLM2-135M-Instruct, found as the tests find it: ``tests/engine.py``).

The split (deterministic: dialogues chosen by a hash of their id, positions
by ``random.Random(seed)``). A chitchat message is a *turn* made of one or
more chat lines its sender sent in a row. For a turn with at least one
message before it, the caller is that turn's sender (``user``), the other
party ``assistant``, and the prior messages are the context:

* ``end`` — the whole turn: the speaker is done;
* ``hold`` — the turn's first lines only, when it has several: the speaker
  paused between lines and went on (a pause inside a turn);
* ``cut`` — the turn's text cut after a random word (at least one word
  before and after the cut): words stopped mid-message.

The caller's words are written as a streaming recogniser gives them
(:func:`asr_text`: punctuation removed except ``'`` and ``-``, case kept),
as in the test sets; the context keeps its punctuation (an agent's messages
have it).

Each sample is scored once by :class:`~turnkit.llm.eou.LLMEndOfTurn` with
the given evidence settings; P(end token) and P(. ? !) come from the same
answer, so both ways of counting (``count_punct`` off/on) are evaluated.
For each, the threshold (from a fixed geometric grid) that maximises the
balanced accuracy — the mean of the ``end`` recall and the not-end recall
(``hold`` and ``cut`` together) — is chosen; ties go to the lower threshold.
It prints per-class accuracy, ROC AUC, the chosen operating point and the
line to store in :data:`turnkit.llm.eou.CALIBRATION`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import statistics
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from turnkit.llm.eou import (  # noqa: E402
    MAX_HISTORY_TOKENS,
    MAX_HISTORY_TURNS,
    EngineError,
    LLMEndOfTurn,
    model_key,
)

GRID = [round(10 ** (-4 + 4 * i / 160), 6) for i in range(161)]  # 1e-4 .. 1, geometric


@dataclass(frozen=True, slots=True)
class Sample:
    dialogue: str
    kind: str  # end | hold | cut
    text: str
    context: list[dict[str, str]]

    @property
    def is_end(self) -> bool:
        return self.kind == "end"


def asr_text(text: str) -> str:
    """Words as a streaming recogniser writes them: no punctuation but
    ``'`` and ``-``, case kept."""
    kept = "".join(
        ch for ch in text if not (unicodedata.category(ch).startswith("P") and ch not in "'-")
    )
    return " ".join(kept.split())


def _picked(key: str, modulus: int) -> bool:
    return int(hashlib.sha1(key.encode()).hexdigest(), 16) % modulus == 0


def build_split(n_dialogues: int = 160, seed: int = 0, turns_per_dialogue: int = 2) -> list[Sample]:
    """The development split (see the module docstring)."""
    import chitchat_dataset  # the `train` extra

    data = chitchat_dataset.Dataset()
    rng = random.Random(seed)
    keys = [k for k in sorted(data) if _picked(k, 7)][:n_dialogues]
    out: list[Sample] = []
    for key in keys:
        msgs = data[key]["messages"]
        if len(msgs) < 2:
            continue
        senders = [m[0]["sender"] for m in msgs]
        positions = list(range(1, len(msgs)))
        rng.shuffle(positions)
        for pos in sorted(positions[:turns_per_dialogue]):
            me = senders[pos]
            context = [
                {
                    "role": "user" if senders[i] == me else "assistant",
                    "content": " ".join(u["text"] for u in msgs[i]),
                }
                for i in range(pos)
            ][-MAX_HISTORY_TURNS:]
            lines = [asr_text(u["text"]) for u in msgs[pos]]
            lines = [ln for ln in lines if ln]
            if not lines:
                continue
            full = " ".join(lines)
            out.append(Sample(key, "end", full, context))
            if len(lines) >= 2:
                k = rng.randint(1, len(lines) - 1)
                out.append(Sample(key, "hold", " ".join(lines[:k]), context))
            words = full.split()
            if len(words) >= 3:
                j = rng.randint(1, len(words) - 1)
                out.append(Sample(key, "cut", " ".join(words[:j]), context))
    return out


def recording_samples(root: Path) -> list[Sample]:
    """A check set from the demo corpus (``recordings/*/call.json``), not
    used to choose anything: each caller turn at its end (``end``) and at
    each of its pauses (``hold``: the words spoken before it), with the
    call's earlier turns as context."""
    out: list[Sample] = []
    for path in sorted(root.glob("*/call.json")):
        doc = json.loads(path.read_text())
        context: list[dict[str, str]] = []
        for ev in doc.get("events", []):
            text = (ev.get("text") or "").strip()
            if not text or ev.get("type") not in ("caller_turn", "agent_turn"):
                continue
            if ev["type"] == "agent_turn":
                context.append({"role": "assistant", "content": text})
                continue
            words = ev.get("words") or []
            for hold in ev.get("holds") or []:
                before = [w["text"] for w in words if w["end"] <= hold["start"] + 1e-6]
                if before:
                    out.append(
                        Sample(path.parent.name, "hold", asr_text(" ".join(before)), list(context))
                    )
            out.append(Sample(path.parent.name, "end", asr_text(text), list(context)))
            context.append({"role": "user", "content": text})
    return out


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random end sample scores above a random not-end one); ties half."""
    if not pos or not neg:
        return float("nan")
    wins = 0.0
    for p in pos:
        for n in neg:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(pos) * len(neg))


def choose_threshold(scored: list[tuple[float, bool]]) -> tuple[float, float]:
    """(threshold, balanced accuracy) maximising balanced accuracy on the grid."""
    ends = [p for p, e in scored if e]
    holds = [p for p, e in scored if not e]
    best = (GRID[0], -1.0)
    for t in GRID:
        tpr = sum(p >= t for p in ends) / len(ends)
        tnr = sum(p < t for p in holds) / len(holds)
        bal = (tpr + tnr) / 2
        if bal > best[1] + 1e-12:
            best = (t, bal)
    return best


def per_class(rows: list[dict], key: str, threshold: float) -> dict[str, float]:
    out = {}
    for kind in ("end", "hold", "cut"):
        sel = [r for r in rows if r["kind"] == kind]
        if sel:
            ok = sum((r[key] >= threshold) == (kind == "end") for r in sel)
            out[kind] = ok / len(sel)
    return out


def score_all(eou: LLMEndOfTurn, samples: list[Sample]) -> list[dict]:
    rows = []
    for i, s in enumerate(samples):
        try:
            r = eou.score_sync(s.text, context=s.context)
        except EngineError as exc:
            print(f"sample {i}: engine error {exc}", file=sys.stderr)
            continue
        rows.append(
            {
                "kind": s.kind,
                "p_eot": r.p_eot,
                "p_end_punct": min(1.0, r.p_eot + r.p_punct),
                "ms": r.elapsed_ms,
                "prompt_tokens": r.prompt_tokens,
            }
        )
    return rows


def report(rows: list[dict], label: str) -> dict:
    summary: dict = {"label": label, "n": len(rows)}
    for key, punct in (("p_eot", False), ("p_end_punct", True)):
        ends = [r[key] for r in rows if r["kind"] == "end"]
        nots = [r[key] for r in rows if r["kind"] != "end"]
        t, bal = choose_threshold([(r[key], r["kind"] == "end") for r in rows])
        summary[key] = {
            "count_punct": punct,
            "auc": round(auc(ends, nots), 4),
            "threshold": t,
            "balanced_accuracy": round(bal, 4),
            "per_class": {k: round(v, 4) for k, v in per_class(rows, key, t).items()},
        }
    ms = [r["ms"] for r in rows]
    summary["ms_p50"] = round(statistics.median(ms), 1) if ms else None
    toks = [r["prompt_tokens"] for r in rows if r["prompt_tokens"]]
    summary["prompt_tokens_max"] = max(toks) if toks else None
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="", help="OpenAI-compatible API root (else start one)")
    ap.add_argument("--model", default="", help="model name sent and used as calibration key")
    ap.add_argument("--dialogues", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--top-k", type=int, default=20, help="logprobs requested (the detector's default)"
    )
    ap.add_argument(
        "--system",
        default=None,
        help="system message (default: the one stored for the model; none if not stored)",
    )
    ap.add_argument("--history-turns", type=int, default=MAX_HISTORY_TURNS)
    ap.add_argument("--max-tokens", type=int, default=MAX_HISTORY_TOKENS)
    ap.add_argument(
        "--no-normalize",
        action="store_true",
        help="keep case and punctuation (whitespace collapsed only) instead of LiveKit's normalisation",
    )
    ap.add_argument(
        "--old-format",
        action="store_true",
        help="also score the previous prompt (system + agent's last message + caller, as typed)",
    )
    ap.add_argument(
        "--check-recordings",
        action="store_true",
        help="also report accuracy at the chosen threshold on recordings/*/call.json "
        "(pauses vs ends; a check, not used to choose)",
    )
    ap.add_argument("--json", type=Path, help="write the summary here")
    args = ap.parse_args()

    samples = build_split(args.dialogues, args.seed)
    counts = {k: sum(s.kind == k for s in samples) for k in ("end", "hold", "cut")}
    print(f"development split: {len(samples)} samples {counts} from chitchat-dataset", flush=True)

    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if not base_url:
            from engine import running_llama_server

            base_url = stack.enter_context(running_llama_server())
        common = {"model": args.model, "timeout_ms": 60_000, "top_k": args.top_k}
        configs = {
            "livekit-style": LLMEndOfTurn(
                base_url,
                system=args.system,
                history_turns=args.history_turns,
                max_tokens=args.max_tokens,
                normalize=not args.no_normalize,
                **common,
            )
        }
        if args.old_format:
            configs["old"] = _OldFormat(base_url, **common)
        summaries = []
        checks = []
        rec = recording_samples(ROOT / "recordings") if args.check_recordings else []
        for label, eou in configs.items():
            eou.score_sync("hello", agent_text="hi")  # load; learn the end token's id
            t0 = time.perf_counter()
            rows = score_all(eou, samples)
            s = report(rows, label)
            s["system"] = eou.system
            s["wall_s"] = round(time.perf_counter() - t0, 1)
            summaries.append(s)
            print(json.dumps(s, indent=2), flush=True)
            if rec:
                rows = score_all(eou, rec)
                check = {"label": label, "n": len(rows)}
                for key in ("p_eot", "p_end_punct"):
                    t = s[key]["threshold"]
                    ends = [r[key] for r in rows if r["kind"] == "end"]
                    nots = [r[key] for r in rows if r["kind"] != "end"]
                    check[key] = {
                        "threshold": t,
                        "auc": round(auc(ends, nots), 4),
                        "per_class": {k: round(v, 4) for k, v in per_class(rows, key, t).items()},
                    }
                checks.append(check)
                print("recordings check:", json.dumps(check), flush=True)
            eou.close()

    best = summaries[0]
    pick = max(("p_eot", "p_end_punct"), key=lambda k: best[k]["balanced_accuracy"])
    cal = best[pick]
    key = model_key(args.model)
    print(
        f"\nCALIBRATION[{key!r}] = Calibration(threshold={cal['threshold']}, "
        f"count_punct={cal['count_punct']}, system={best['system']!r}, "
        f"source='scripts/calibrate_llm_eou.py "
        f"--dialogues {args.dialogues} --seed {args.seed} --top-k {args.top_k}: "
        f"{best['n']} chitchat samples, balanced accuracy {cal['balanced_accuracy']:.3f}, "
        f"AUC {cal['auc']:.3f}')"
    )
    if args.json:
        doc = {
            "split": {"dialogues": args.dialogues, "seed": args.seed, "counts": counts},
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "summaries": summaries,
            "recordings_check": checks,
            "example": asdict(samples[0]) if samples else None,
        }
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")


class _OldFormat(LLMEndOfTurn):
    """The previous prompt, for comparison: a fixed system prompt, the
    agent's last message (a stand-in when none) and the caller's words as
    typed (no normalisation), one exchange only."""

    SYSTEM = "You are a helpful voice assistant on a phone call."
    STAND_IN = "Hello! How can I help you today?"

    def __init__(self, base_url: str, **kw: object) -> None:
        super().__init__(
            base_url, system=self.SYSTEM, history_turns=2, normalize=False, max_tokens=4096, **kw
        )  # type: ignore[arg-type]

    def messages(self, text, agent_text="", context=None):  # type: ignore[no-untyped-def]
        if context is not None:
            agent_text = next(
                (m["content"] for m in reversed(context) if m.get("role") == "assistant"), ""
            )
        agent = " ".join(agent_text.split()) or self.STAND_IN
        return [
            {"role": "assistant", "content": agent},
            {"role": "user", "content": " ".join(text.split())},
        ]


if __name__ == "__main__":
    main()
