#!/usr/bin/env python3
"""Deterministic generator of the held-out barge-in set (turnkit.recording/v1).

    python scripts/gen_bargein_set.py [--out .cache/bargein-set] [--calls 24] [--first 0]

Not the demo corpus: other wording, other caller voices and speeds, other
agent replies. Each call is a run of episodes; in each the caller asks
something (one Piper utterance), the agent answers at length (espeak-ng, a
statement of 5-10 s) and, while it talks, the caller either makes a *bid*
for the floor ("wait, no, I said Tuesday", "okay, but what about the
refund?", "no") or a *backchannel* ("uh-huh", "okay", "yes yes", "right
right"). A bid is a ``caller_turn`` that starts while the agent speaks (the
recorded agent stops 0.9-1.3 s later, so a late stop is still measurable in
a replay); a backchannel is a ``backchannel`` event; the agent's reply to a
bid is the next episode's answer.

Variety, so that no single cue separates bids from backchannels:

* caller voice: Piper en_US joe (zero noise scales) at a per-call speaking
  rate (length_scale 0.85-1.15) and pitch (the 22.05 kHz output read at
  0.9-1.12 x its rate: a higher or lower voice), or, in one call of four,
  an espeak-ng voice (robotic; variety only);
* levels: bids at 0.55-1.0 x the caller's turn level, backchannels at
  0.45-0.95 x (overlapping); echo of the agent in half of the calls
  (-34 to -22 dB), pink or brown background noise in half;
* position in the agent's reply: bids anywhere past 1.2 s; half of the
  backchannels just after a comma or full stop of the agent's text (timed
  on the espeak clip by its share of the text), half anywhere.

All label times are measured from the synthesised audio (energy envelope,
as in ``recordings/generate.py``, whose helpers this script reuses).

Output: ``OUT/wb/{tune,test}/<call>/`` (16 kHz caller.wav) and the
telephone-band copy ``OUT/nb/{tune,test}/<call>/`` (8 kHz, 300-3400 Hz,
μ-law round trip: :func:`turnkit.audio.telephone.telephone`). Calls with an
even index are the tuning half, odd ones the held-out (report) half. About
12 MB in all: a cache folder, not committed; the same command writes the
same labels again (Piper's float output may differ in the last bits between
CPUs). Needs the ``synth`` extra (piper-tts is GPL-3.0+: run here, never
imported by turnkit).

``--first 24`` starts at call 24: calls that share nothing with the default
set's 24, a development set to study a rule on before the report half sees
it (each call's voice, wording and placement follow from its index). The
default set's tuning half holds no "mhm" at all (backchannels cycle by
index). 96 development calls (``--first 24 --calls 96``: 192 backchannels,
12 of each kind, ~207 bids; both halves), ``turnkit replay OUT/wb/tune OUT/wb/test -d fused --compute
fixed`` (2026-12-04), words on time: wideband 15 of 192 backchannels
stopped the agent (7.8 %), bids stopped at a median 260 ms; telephone copy
7 of 192 (3.6 %), 287 ms. Words 250 ms late: 42 and 38 of 192, 481 and 538
ms. The stopped ones (a per-event look, words on time) are the long
backchannels only: "mhm" (Piper's "Mm hm.", 0.48-0.64 s) and "i see".
Their share of energy above 1 kHz and spectral centroid over the first
0.35 s overlap the bids' (Piper's "mhm" is no closed-mouth hum), so no
audio rule was built on them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "recordings"))

import generate as g  # noqa: E402  (recordings/generate.py: the demo corpus's helpers)

from turnkit.audio.telephone import TELEPHONE_RATE, telephone  # noqa: E402

SR = g.SR
DEFAULT_OUT = ROOT / ".cache" / "bargein-set"

REQUESTS = [
    "Hi, I'm calling about my internet bill.",
    "Can you tell me when my package will arrive?",
    "I'd like to move my dentist appointment.",
    "What are your opening hours on the weekend?",
    "I need to update the address on my account.",
    "Could you check the status of my refund?",
    "I want to book two tickets to Denver.",
    "My card was charged twice last month.",
    "Is the blue jacket still in stock?",
    "I'd like to cancel my gym membership.",
    "How much would it cost to upgrade my plan?",
    "Can I pick up my prescription today?",
    "I'm locked out of my online account.",
    "Do you deliver to the north side of town?",
    "I'd like to report a problem with my order.",
    "Can you transfer me to the billing department?",
]

REPLIES = [
    "Sure, let me look that up. Your current bill is seventy two dollars, which includes the "
    "equipment rental, and the next payment is due on the fifteenth of the month.",
    "Your package left our warehouse this morning, and it is on the truck now. It should "
    "arrive between two and five in the afternoon, and the driver will call ahead.",
    "I can help with that. The next openings are on Tuesday at nine, Wednesday at eleven "
    "thirty, and Friday afternoon at three, and each visit takes about forty minutes.",
    "On Saturdays we open at eight in the morning and close at six, and on Sundays we open "
    "at ten and close at four, except on public holidays when we stay closed.",
    "To update your address I will first need to verify your identity, so I will send a "
    "six digit code to the phone number that we have on file for you.",
    "Your refund was approved on Monday, and it was sent back to the card you paid with. "
    "Banks usually take three to five business days to show it on the statement.",
    "I found two seats on the flight leaving at seven forty in the morning, with a short "
    "stop in Chicago, and the total comes to three hundred and eighty dollars.",
    "I can see both charges here. The second one is a temporary hold from the store, and "
    "it should drop off your account within a week without you doing anything.",
    "The blue jacket is in stock in medium and large, but the small size is sold out at "
    "the moment, and we expect a new delivery at the end of next week.",
    "Before I cancel it, I should mention that your contract has a thirty day notice "
    "period, so the last payment will be taken at the start of next month.",
    "The premium plan is fifteen dollars more per month, and it includes unlimited data, "
    "international calls to twenty countries, and a free phone upgrade every two years.",
    "Your prescription is ready at the pharmacy on Main Street, and it will be held there "
    "for seven days. Please bring a photo ID when you come to pick it up.",
    "I have reset your password, and a link is on its way to your email. The link works "
    "for one hour, and after that you will need to request a new one from the website.",
    "We deliver to the whole north side, including the industrial park, and orders over "
    "fifty dollars are free. Smaller orders have a delivery fee of four dollars.",
    "I am sorry to hear that. I have opened a case for the damaged item, and a replacement "
    "will be shipped today by express mail, at no cost to you at all.",
    "The billing team is busy right now, and the waiting time is about twelve minutes, but "
    "I can also answer most billing questions myself, if you would like.",
]

BIDS = [
    "Wait, no, I said Tuesday.",
    "Sorry, can I ask something?",
    "Actually, I need to change that.",
    "Hold on, that's not right.",
    "No, no, the other account.",
    "Excuse me, I didn't catch that.",
    "Hang on a second.",
    "But I already paid that bill.",
    "Can you repeat the last part?",
    "What about Friday instead?",
    "Um, actually, can we do next week?",
    "Sorry to interrupt, but I'm in a hurry.",
    "Wait.",
    "No, that's wrong.",
    "Stop, stop, that's not what I want.",
    "Actually, cancel that.",
    "Sorry, which number was that?",
    "I think you have the wrong address.",
    "Hmm, wait, what was the price?",
    "Can I talk to a person?",
    "Oh, sorry, I meant the blue one.",
    "Hold on, let me get a pen.",
    "That's not my name.",
    "Just a moment, please.",
    "No, I want the earlier flight.",
    "Sorry, what did you say the total was?",
    "Wait a second, is that including tax?",
    "Actually, make it two tickets.",
    "I already tried that.",
    "Could you slow down a bit?",
    "Excuse me, that's the wrong date.",
    "Well, actually, I live in Boston now.",
    "No, the appointment is on Monday.",
    "Sorry, I have a question about that.",
    "Okay, but what about the refund?",
    "Yeah, but I need it by Thursday.",
    "Right, so how long will it take?",
    "Hmm, I don't think that's right.",
    "Um, sorry, can you say that again?",
    "Listen, I just need the tracking number.",
    "Nope, that's not it.",
    "Wait, wait, go back.",
    "Oh no, that's too late for me.",
    "Pardon me, which store?",
    "Actually, I changed my mind.",
    "Is that the only option?",
    "No.",
    "No, I said fifteen, not fifty.",
]

# label text -> what Piper is asked to say (its spelling of the sound)
BACKCHANNELS = {
    "uh-huh": "Uh huh.",
    "mm-hmm": "Hmm hmm.",
    "okay": "Okay.",
    "right": "Right.",
    "yeah": "Yeah.",
    "yes yes": "Yes yes.",
    "yeah yeah": "Yeah yeah.",
    "okay okay": "Okay okay.",
    "i see": "I see.",
    "got it": "Got it.",
    "sure": "Sure.",
    "alright": "Alright.",
    "oh okay": "Oh, okay.",
    "yep": "Yep.",
    "right right": "Right right.",
    "mhm": "Mm hm.",
}

ESPEAK_CALLERS = ["en-us+m1", "en-gb+m3", "en-us+f2", "en-us+m7"]
AGENT_VOICES = ["en-us+f3", "en-us+m3", "en-gb+f4", "en-us+f5", "en-gb+m2"]
EPISODES = 4  # per call: 2 bids and 2 backchannels, in a per-call order


class Voice:
    """One caller's voice: Piper joe at a speaking rate and pitch, or espeak-ng."""

    def __init__(self, piper: g.Caller | None, rate: float, pitch: float, espeak: str | None):
        self.piper, self.rate, self.pitch, self.espeak = piper, rate, pitch, espeak

    def _piper(self) -> g.Caller:
        assert self.piper is not None
        p = self.piper
        p.cfg.length_scale = self.rate
        # read the 22.05 kHz samples at pitch x the rate: higher (or lower) and faster
        p.sr = round(p.voice.config.sample_rate * self.pitch)
        return p

    def utterance(self, text: str) -> dict:
        """16 kHz audio trimmed to its extent, speech spans, word times (or
        None: the replay spreads the words over the spans)."""
        if self.espeak is None:
            turn = g.build_caller_turn(self._piper(), text)
            x = turn["audio"]
            s0 = turn["spans"][0][0]
            e1 = turn["spans"][-1][1]
            x = x[int(s0 * SR) : int(np.ceil(e1 * SR))]
            spans = [[a - s0, b - s0] for a, b in turn["spans"]]
            words = [
                {"text": w["text"], "start": w["start"] - s0, "end": w["end"] - s0}
                for w in turn["words"]
            ]
        else:
            x = g.espeak(text, self.espeak, speed=round(165 / self.rate))
            runs = g.merge_runs(g.active_runs(x, SR), g.MIN_GAP_S)
            s0 = runs[0][0]
            x = x[int(s0 * SR) :]
            spans = [[a - s0, b - s0] for a, b in runs]
            words = None
        x = x / (np.max(np.abs(x)) + 1e-9)
        return {"audio": x.astype(np.float32), "spans": spans, "words": words}

    def short(self, say: str) -> np.ndarray:
        """A backchannel: one short utterance, trimmed to its extent."""
        if self.espeak is None:
            p = self._piper()
            p.cfg.length_scale = 0.85 * self.rate  # said quickly, as acknowledgements are
            x, _ = p.synth(say)
            x = g.resample(x, p.sr, SR)
        else:
            x = g.espeak(say, self.espeak, speed=round(1.4 * 165 / self.rate))
        s, e = g.extent(x, SR)
        x = x[int(s * SR) : int(np.ceil(e * SR))]
        return (x / (np.max(np.abs(x)) + 1e-9)).astype(np.float32)


def boundary_offsets(text: str, dur: float) -> list[float]:
    """Seconds into the agent's clip just after each comma or full stop
    (by the share of the text before it: espeak reads evenly enough)."""
    return [dur * (m.end() / len(text)) + 0.25 for m in re.finditer(r"[,.](?=\s)", text)]


def make_call(idx: int, piper: g.Caller, out: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9000 + idx)
    espeak_voice = ESPEAK_CALLERS[(idx // 4) % len(ESPEAK_CALLERS)] if idx % 4 == 3 else None
    voice = Voice(
        piper if espeak_voice is None else None,
        rate=float(rng.uniform(0.85, 1.15)),
        pitch=float(rng.uniform(0.9, 1.12)),
        espeak=espeak_voice,
    )
    agent_voice = AGENT_VOICES[idx % len(AGENT_VOICES)]
    peak = float(rng.uniform(0.5, 0.8))
    echo = (float(rng.uniform(-34, -22)), float(rng.uniform(20, 60))) if idx % 4 < 2 else None
    bg = (["pink", "brown"][idx % 3 % 2], float(rng.uniform(-58, -46))) if idx % 3 != 0 else None
    kinds = ["bid", "bid", "bc", "bc"]
    rng.shuffle(kinds)
    T = 120 * SR
    speech = np.zeros(T, np.float32)
    agent = np.zeros(T, np.float32)
    events: list[dict] = []
    clips: list[tuple[int, np.ndarray]] = []

    def place(track: np.ndarray, clip: np.ndarray, t: float) -> int:
        i = round(t * SR)
        track[i : i + len(clip)] += clip
        return i

    def caller_turn(text: str, t0: float, gain: float) -> dict:
        u = voice.utterance(text)
        place(speech, u["audio"] * peak * gain, t0)
        ev = {
            "type": "caller_turn",
            "start": t0 + u["spans"][0][0],
            "end": t0 + u["spans"][-1][1],
            "text": text,
            "spans": [[t0 + a, t0 + b] for a, b in u["spans"]],
        }
        if u["words"] is not None:
            ev["words"] = [
                {"text": w["text"], "start": t0 + w["start"], "end": t0 + w["end"]}
                for w in u["words"]
            ]
        events.append(ev)
        return ev

    req = [REQUESTS[(idx * 5 + k * 3) % len(REQUESTS)] for k in range(EPISODES)]
    bids = iter(BIDS[(idx * 2 + k) % len(BIDS)] for k in range(EPISODES))
    bcs = iter(list(BACKCHANNELS)[(idx * 2 + k) % len(BACKCHANNELS)] for k in range(EPISODES))
    last = caller_turn(req[0], 0.6 + float(rng.uniform(0, 0.4)), 1.0)
    for k, kind in enumerate(kinds):
        text = REPLIES[(idx * 3 + k * 7) % len(REPLIES)]
        clip = g.espeak(text, agent_voice) * 0.5
        t_agent = last["end"] + float(rng.uniform(1.21, 1.69))
        i0 = place(agent, clip, t_agent)
        dur = len(clip) / SR
        a0, a1 = g.extent(clip, SR, i0 / SR)
        ev_agent = {"type": "agent_turn", "start": a0, "end": a1, "text": text}
        events.append(ev_agent)
        if kind == "bid":
            off = float(rng.uniform(1.2, max(1.3, dur - 2.5)))
            bid = caller_turn(next(bids), a0 + off, float(rng.uniform(0.55, 1.0)))
            # the recorded agent stops 0.9-1.3 s into the bid (a late agent)
            stop = bid["start"] + float(rng.uniform(0.9, 1.3))
            i1 = round(stop * SR)
            f = int(0.03 * SR)
            c = clip[: i1 - i0].copy()
            c[-f:] *= np.linspace(1, 0, f)
            agent[i0 : i0 + len(clip)] = 0
            agent[i0 : i0 + len(c)] = c
            clip = c
            ev_agent["end"] = g.extent(c, SR, i0 / SR)[1]
            ev_agent["interrupted"] = True
            last = bid
        else:
            name = next(bcs)
            if rng.uniform() < 0.5:
                cands = [b for b in boundary_offsets(text, dur) if 1.0 <= b <= dur - 1.2]
                off = float(rng.choice(cands)) if cands else float(rng.uniform(1.0, dur - 1.2))
            else:
                off = float(rng.uniform(1.0, dur - 1.2))
            x = voice.short(BACKCHANNELS[name]) * peak * float(rng.uniform(0.45, 0.95))
            b0 = place(speech, x, a0 + off) / SR
            s, e = g.extent(x, SR, b0)
            events.append({"type": "backchannel", "start": s, "end": e, "text": name})
            # the caller's next request after the agent's reply
            if k + 1 < len(kinds):
                last = caller_turn(req[k + 1], a1 + float(rng.uniform(0.4, 0.9)), 1.0)
            else:
                last = {"end": a1}
        clips.append((i0, clip))
    echo_track = np.zeros(T, np.float32)
    if echo is not None:
        ir = g.echo_path(rng, *echo)
        for i0, c in clips:
            y = np.convolve(c, ir).astype(np.float32)
            place(echo_track, y, i0 / SR)
            s, e = g.extent(y, SR, i0 / SR)
            events.append(
                {"type": "echo", "start": s, "end": e, "gain_db": echo[0], "delay_ms": echo[1]}
            )
    end_t = max(ev["end"] for ev in events) + 0.8
    n = round(end_t * SR)
    mix = on_the_line(rng, speech[:n] + echo_track[:n], bg)
    order = {"caller_turn": 0, "agent_turn": 1, "backchannel": 2, "echo": 3}
    events.sort(key=lambda ev: (g.r3(ev["start"]), order[ev["type"]]))
    cid = f"bargein-{idx:02d}"
    manifest = {
        "format": "turnkit.recording/v1",
        "id": cid,
        "language": "en",
        "audio": {"caller": "caller.wav", "agent": "agent.wav"},
        "source": "synthetic",
        "tags": ["barge-in-set", half(idx)],
        "generator": {
            "script": "scripts/gen_bargein_set.py",
            "index": idx,
            "caller_voice": f"espeak-ng {espeak_voice}"
            if espeak_voice
            else f"piper en_US-joe-medium (length_scale {voice.rate:.3f}, pitch x{voice.pitch:.3f})",
            "agent_voice": f"espeak-ng {agent_voice}",
            "background": None if bg is None else {"color": bg[0], "dbfs": round(bg[1], 1)},
            "echo": None
            if echo is None
            else {"gain_db": round(echo[0], 1), "delay_ms": round(echo[1])},
        },
        "events": rounded(events),
    }
    return manifest, mix, agent[:n]


def half(idx: int) -> str:
    """The half a call belongs to: even calls tune, odd calls are reported."""
    return "tune" if idx % 2 == 0 else "test"


def on_the_line(rng: np.random.Generator, mix: np.ndarray, bg: tuple | None) -> np.ndarray:
    """The caller's side as the line carries it: ``mix`` with the call's
    background (colour, dBFS) under it, if it has one; never clipping."""
    if bg is not None:
        mix = mix + g.background(rng, len(mix), *bg)
    assert np.max(np.abs(mix)) < 0.99, "clipping"
    return mix


def write_call(out: Path, idx: int, manifest: dict, caller: np.ndarray, agent: np.ndarray) -> str:
    """The call in both bands under its half (``OUT/{wb,nb}/{tune,test}/ID``);
    returns the half."""
    h = half(idx)
    for band in ("wb", "nb"):
        write(out / band / h / manifest["id"], manifest, caller, agent, band == "nb")
    return h


def rounded(o: object) -> object:
    """Every float in a label structure rounded to the millisecond."""
    if isinstance(o, float):
        return g.r3(o)
    if isinstance(o, dict):
        return {k: rounded(v) for k, v in o.items()}
    if isinstance(o, list):
        return [rounded(v) for v in o]
    return o


def write(d: Path, manifest: dict, caller: np.ndarray, agent: np.ndarray, narrow: bool) -> None:
    d.mkdir(parents=True, exist_ok=True)
    m = json.loads(json.dumps(manifest))
    if narrow:
        m["tags"].append("telephone")
        sf.write(d / "caller.wav", telephone(caller, SR), TELEPHONE_RATE, subtype="PCM_16")
        sf.write(d / "agent.wav", telephone(agent, SR), TELEPHONE_RATE, subtype="PCM_16")
    else:
        sf.write(d / "caller.wav", caller, SR, subtype="PCM_16")
        sf.write(d / "agent.wav", g.resample(agent, SR, g.AGENT_SR), g.AGENT_SR, subtype="PCM_16")
    (d / "call.json").write_text(json.dumps(m, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--calls", type=int, default=24)
    ap.add_argument(
        "--first",
        type=int,
        default=0,
        help="index of the first call: from 24 on, calls that share no recording with the "
        "default set (a development set beside its report half)",
    )
    args = ap.parse_args(argv)
    if args.calls < 2:
        print("--calls: at least 2 (one per half)", file=sys.stderr)
        return 2
    piper = g.Caller()
    counts = {"bid": 0, "backchannel": 0}
    for idx in range(args.first, args.first + args.calls):
        manifest, caller, agent = make_call(idx, piper, args.out)
        h = write_call(args.out, idx, manifest, caller, agent)
        turns = [e for e in manifest["events"] if e["type"] == "caller_turn"]
        agents = [e for e in manifest["events"] if e["type"] == "agent_turn"]
        counts["bid"] += sum(any(a["start"] < t["start"] < a["end"] for a in agents) for t in turns)
        counts["backchannel"] += sum(e["type"] == "backchannel" for e in manifest["events"])
        print(f"{manifest['id']} ({h}): {manifest['generator']['caller_voice']}", flush=True)
    print(
        f"{args.calls} calls, {counts['bid']} bids, {counts['backchannel']} backchannels -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
