"""Where the agent is in its reply, asked on every caller frame: cost per frame.

    python benchmarks/bench_reply_progress.py [--frame-ms 20] [--repeats 5]

A host that tells the barge-in controller how far into its reply's text
playback is (LiveKit's ``TurnkitBargeIn``, the replay's agent with
``--llm-url``) asks on every caller audio frame while the agent talks. Every
``agent_turn`` text of the committed corpus (recordings/*/call.json) is
played at the nominal rate and asked about every ``--frame-ms``, its text
arriving sentence by sentence with a sentence-end anchor each (as a TTS that
renders per sentence tells it), as LiveKit forwards it:

* ``ReplyProgress.heard`` — the word timings worked out once per change of
  the text, word times or anchors;
* baseline ``heard_prefix`` — the same answer worked out from scratch on
  every frame (what the hosts called before).

Printed: microseconds per frame for each (best of ``--repeats`` runs of the
whole corpus), the ratio to the baseline (same run), and a check that both
gave the same answer on every frame.
"""

from __future__ import annotations

import argparse
import json

from common import ROOT, best_of
from rich.console import Console

from turnkit.barge_in.truncation import (
    ReplyProgress,
    TruncationConfig,
    estimate_word_timings,
    heard_prefix,
    tokens,
)

Frame = tuple[str, float, tuple[tuple[float, int], ...]]


def corpus_frames(frame_s: float, cfg: TruncationConfig) -> list[list[Frame]]:
    """Per reply: (text so far, played seconds, anchors) at every frame."""
    replies: list[list[Frame]] = []
    for path in sorted((ROOT / "recordings").glob("*/call.json")):
        for e in json.loads(path.read_text())["events"]:
            text = (e.get("text") or "").strip() if e.get("type") == "agent_turn" else ""
            if not text:
                continue
            ends = [end for _, end in tokens(text) if text[end - 1] in ".!?"] or [len(text)]
            if ends[-1] != len(text):
                ends.append(len(text))
            timed = estimate_word_timings(text, nominal_unit_s=cfg.nominal_unit_s)
            toks = tokens(text)
            # The audio time at which each sentence's last word ends.
            end_at = {}
            for (_, tok_end), w in zip(toks, timed, strict=True):
                end_at[tok_end] = w.end
            anchors = tuple((end_at[c], c) for c in ends)
            frames: list[Frame] = []
            t = 0.0
            while t < anchors[-1][0] + frame_s:
                # The text forwarded so far: up to the sentence playing now.
                k = next((i for i, (a, _) in enumerate(anchors) if t <= a), len(anchors) - 1)
                frames.append((text[: anchors[k][1]], t, anchors[: k + 1]))
                t += frame_s
            replies.append(frames)
    return replies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frame-ms", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cfg = TruncationConfig()
    replies = corpus_frames(args.frame_ms / 1000, cfg)
    n = sum(len(r) for r in replies)

    def cached() -> list[int]:
        out = []
        for frames in replies:
            p = ReplyProgress(cfg)
            out += [p.heard(t, s, anchors=a).cut for t, s, a in frames]
        return out

    def fresh() -> list[int]:
        return [
            heard_prefix(t, s, anchors=a, config=cfg).cut for frames in replies for t, s, a in frames
        ]

    same = cached() == fresh()
    t_cached = best_of(cached, args.repeats) / n * 1e6
    t_fresh = best_of(fresh, args.repeats) / n * 1e6
    console = Console()
    console.print(f"{len(replies)} replies, {n} frames of {args.frame_ms:g} ms")
    console.print(f"ReplyProgress.heard: {t_cached:.1f} µs per frame")
    console.print(f"heard_prefix (baseline): {t_fresh:.1f} µs per frame")
    console.print(f"ratio: {t_cached / t_fresh:.3f} of the baseline; same answers: {same}")


if __name__ == "__main__":
    main()
