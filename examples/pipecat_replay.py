"""Replay a recorded call through a real Pipecat pipeline, offline.

    python examples/pipecat_replay.py recordings/easy-order-status-01 -d silence [--compare]
    python examples/pipecat_replay.py recordings -d fused --compare --compute fixed [--no-eager]

Caller audio goes in as InputAudioRawFrames and the manifest's words as
Pipecat transcription frames, into Pipecat's LLMUserAggregator running the
turnkit strategies; the LLM and TTS are turnkit replay's latency model (no
transport, no network). Prints one line per caller turn with its response
latency; --compare also runs `turnkit replay` on the same call and prints
its number beside it. With ``--compute fixed`` (each model's benchmark
cost, not the wall clock) both runs are deterministic and the figures are
identical but for the differences the parity test lists
(plugins/parity/tests: every decision of every demo call, event by event,
in turnkit replay, this Pipecat host and a LiveKit AgentSession).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from loguru import logger
from turnkit_pipecat.replay import replay_in_pipecat

from turnkit.replay.recording import RecordingError, find_recordings, load_recording
from turnkit.replay.simulator import ReplayConfig, replay_call


def _ms(v: float | None) -> str:
    return "missed" if v is None else f"{v:.0f} ms"


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("-d", "--detector", default="fused")
    ap.add_argument("--compare", action="store_true", help="also run turnkit replay")
    ap.add_argument(
        "--no-compute",
        action="store_true",
        help="leave the detector's model cost out of the latency (the same as --compute none)",
    )
    ap.add_argument(
        "--compute",
        choices=["measured", "fixed", "none"],
        default="measured",
        help="model cost added to decisions: measured (wall clock), fixed (each model's "
        "benchmark figure: identical reruns) or none",
    )
    ap.add_argument(
        "--eager",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="eager drafts (the Responder's drafter; on by default, as turnkit replay)",
    )
    ap.add_argument(
        "--stt",
        choices=["streaming", "segmented"],
        default="streaming",
        help="the recogniser the transcripts stand for: streaming (each word as said, with "
        "word times) or segmented (Whisper behind a VAD: each run whole once the VAD closed "
        "it, no word times; the engine is told so), as turnkit replay --stt",
    )
    ap.add_argument("--stt-delay-ms", type=float, default=0.0, help="transcription delay")
    ap.add_argument(
        "--stt-jitter-ms", type=float, default=0.0, help="up to this much more delay (seeded)"
    )
    ap.add_argument(
        "--no-filters", action="store_true", help="raw VAD barge-in, no echo/ack filters"
    )
    args = ap.parse_args()
    logger.remove()  # Pipecat logs every frame at DEBUG
    logging.basicConfig(level=logging.WARNING)
    config = ReplayConfig(
        count_compute=not args.no_compute,
        compute=args.compute,
        eager=args.eager,
        filters=not args.no_filters,
        stt=args.stt,
        stt_delay_ms=args.stt_delay_ms,
        stt_jitter_ms=args.stt_jitter_ms,
        # Pipecat's speculation holds the LLM's output: no speech is rendered
        # before the commit, and the reference replay is told so too.
        preemptive_tts=False,
    )
    status = 0
    same = total = 0
    worst = 0.0
    for path in find_recordings(args.paths):
        try:
            rec = load_recording(path)
        except RecordingError as exc:
            print(exc, file=sys.stderr)
            status = 1
            continue
        got = await replay_in_pipecat(rec, args.detector, config)
        want = await replay_call(rec, args.detector, config) if args.compare else None
        for i, t in enumerate(got.turns):
            line = f"{rec.id} turn {t.turn} end {t.end:.3f}s response {_ms(t.response_ms)}"
            if t.interrupted:
                line += f" (cut off {t.cutoffs}x)"
            if want is not None:
                w = want.turns[i]
                line += f" | turnkit replay {_ms(w.response_ms)}"
                if w.interrupted:
                    line += f" (cut off {w.cutoffs}x)"
                total += 1
                if t.row() == w.row():
                    same += 1
                else:
                    line += "  <- differs"
                    if t.response_ms is not None and w.response_ms is not None:
                        worst = max(worst, abs(t.response_ms - w.response_ms))
                    else:
                        worst = float("inf")
            print(line)
    if total:
        print(
            f"{same}/{total} turns identical to turnkit replay "
            f"(response, cut-offs, missed); largest latency difference {worst:.0f} ms"
        )
    return status


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
