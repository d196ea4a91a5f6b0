#!/usr/bin/env python3
"""Deterministic generator of the held-out turn-taking set (turnkit.recording/v1).

    python scripts/gen_turntaking_set.py [--out .cache/turntaking-set] [--calls 40] [--first 0]

What the real-call figures of issue 12 are judged on, and what no rule,
threshold or model in turnkit was fitted to: task-oriented phone calls whose
wording appears nowhere else in the repository (not the demo corpus, not the
training templates of the text models, not the barge-in set), with pauses
inside the caller's turns drawn from the timing measured on real calls, not
written by hand:

* pauses: 40 % of caller turns hold one or more (real calls: 38 of 101),
  1-3 per such turn at the places its script allows (after a comma or a
  full stop, or mid-sentence after an "uh", a "the", an "and"); each pause
  lasts a lognormal draw with median 0.20 s and sigma 0.65 (p75 0.31 s,
  p90 0.46 s, 8 % over 0.5 s: the real calls' 0.20 / 0.31 / 0.45 s, 6 of
  63 over 0.5 s), cut to 0.12-1.6 s (a draw under 0.16 s opens none);
* wording: spontaneous, disfluent (fillers, restarts, "yeah no"), short
  answers to the clerk's questions, numbers read out, the caller's own
  questions; the clerk's lines ask what the next caller turn answers;
* timing: the recorded clerk answers 0.5-1.1 s after the caller stops (the
  real clerks' median 0.78 s) and the caller answers the clerk 0.25-0.9 s
  after it stops;
* voices: Piper en_US joe (zero noise scales) at a per-call speaking rate
  (length_scale 0.9-1.12) and pitch (0.92-1.1 x); clerks espeak-ng; a faint
  pink or brown line noise in half the calls (-60 to -50 dBFS).

Every label time is measured from the synthesised audio
(``recordings/generate.py``'s helpers, which build each caller turn as one
utterance and open its pauses at word boundaries, keeping the melody before
them). Output: ``OUT/wb/{tune,test}/<call>/`` (16 kHz) and the telephone copy
``OUT/nb/{tune,test}/<call>/`` (8 kHz, 300-3400 Hz, μ-law round trip).
Even call indices are the tuning half (look at these), odd ones the report
half (only measure). Each scenario is rendered twice (calls 2k and 2k+1:
the same words with other pauses, voice and clerk), so the halves share
wording but no audio or timing. A cache folder, never committed; the same
command writes the same labels (Piper's floats may differ in the last bits
between CPUs). Needs the ``synth`` extra (piper-tts, GPL-3.0+: run here,
never imported by turnkit).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "recordings"))
sys.path.insert(0, str(ROOT / "scripts"))

import generate as g  # noqa: E402  (recordings/generate.py: the demo corpus's helpers)
from gen_bargein_set import (  # noqa: E402  (the same line, labels, files and halves)
    half,
    on_the_line,
    rounded,
    write_call,
)

SR = g.SR
DEFAULT_OUT = ROOT / ".cache" / "turntaking-set"

# Pause lengths inside a caller's turn (s): lognormal, median 0.20, sigma 0.65.
PAUSE_MEDIAN_S = 0.20
PAUSE_SIGMA = 0.65
PAUSE_RANGE_S = (0.12, 1.6)
# A draw shorter than this opens no pause: the labels (as the real calls')
# keep a gap under 0.15 s of silence inside a stretch of speech.
MIN_PAUSE_S = 0.15
EDGE_S = 0.07
TURNS_WITH_PAUSE = 0.55
CLERK_GAP_S = (0.5, 1.1)  # caller stops -> recorded clerk starts
CALLER_GAP_S = (0.25, 0.9)  # clerk stops -> caller starts
AGENT_VOICES = ["en-us+f3", "en-us+m3", "en-gb+f4", "en-us+f5", "en-gb+m2", "en-us+m1"]

# The scenarios: the caller's first turn, then (clerk line, caller turn) pairs.
# In a caller turn, ``|c`` / ``|s`` / ``|m`` after a word is a place a pause
# may open (comma, between sentences, mid-sentence); the generator decides
# which open and for how long.
SCENARIOS: list[list[str]] = [
    [
        "Hello, |c yeah I'm calling because my heating |m stopped working last night.",
        "I'm sorry to hear that. Is it the whole house, or just one room?",
        "The whole house. |s Nothing comes on, |c not even the little light on the boiler.",
        "Okay. Can I have the address where the boiler is?",
        "It's twenty two |m Maple Court.",
        "Thank you. I can send an engineer tomorrow between eight and twelve.",
        "Tomorrow morning is fine, |c yeah.",
        "Great, that's booked. Is there anything else?",
        "No that's all for now, |c thanks.",
    ],
    [
        "Hi there. |s I uh |m I'd like to know if you have any tables free tonight.",
        "For how many people?",
        "We're six, |c six adults.",
        "We have a table at seven fifteen or at nine.",
        "Seven fifteen please.",
        "And what name should I put it under?",
        "Under Okafor. |s O K A F O R.",
        "Perfect, you're all set for seven fifteen.",
        "Oh one more thing, |c do you have parking |m near the restaurant?",
        "Yes, there's a car park right behind us, free after six.",
        "Lovely, |c thank you.",
    ],
    [
        "Yes hello, |c I got a letter saying my passport application |m is missing a document.",
        "Let me check. Do you have your application number?",
        "I think so, |c hang on. |s It's four four seven |m nine one two six.",
        "Thanks. It looks like we still need a recent photo.",
        "But I sent the photo |m with the form. |s Can I send it again by email?",
        "I'm afraid it has to be posted to us.",
        "Okay, |c and how long will it take after that?",
        "About three weeks from the day we receive it.",
        "Alright. |s Thanks for your help.",
    ],
    [
        "Hi, |c um, |c my daughter is sick and she can't go to school today.",
        "I'm sorry to hear that. What's her name?",
        "Lina Haddad, |c she's in year four.",
        "Thank you. Do you know how long she'll be away?",
        "Probably two days, |c maybe |m three.",
        "That's fine. Please call again if she needs longer.",
        "I will. |s Does she need a note from the doctor?",
        "Only if she's away for more than five days.",
        "Okay good. |s Bye.",
    ],
    [
        "Good morning. |s I'm trying to pay my water bill online but the website |m keeps giving me an error.",
        "I can take the payment over the phone if you like. What's your customer number?",
        "Yes please. |s It's eight zero |m three three five.",
        "Thank you. The amount due is forty six dollars and twenty cents.",
        "That's right.",
        "Would you like to pay the full amount today?",
        "Yeah, |c the full amount.",
        "Okay. Which card would you like to use?",
        "The visa |m ending in two nine.",
        "Done, you'll get a receipt by email.",
        "Great. |s Thanks a lot.",
    ],
    [
        "Hi I I'm calling about the flat |m on Elm Street. |s Is it still available?",
        "It is. Would you like to come and see it?",
        "Yes, |c definitely. |s Could I come on |m Saturday?",
        "Saturday at ten or at two?",
        "Two is better for me.",
        "Great. Can I get a phone number in case something changes?",
        "Sure, |c it's oh seven seven |m one two, |c four five six, |c seven eight nine.",
        "Got it. See you on Saturday at two.",
        "See you then.",
    ],
    [
        "Hello. |s So I ordered a sofa |m three weeks ago and it still hasn't arrived.",
        "Let me look into it. What's the order number?",
        "It's |m S F nine eight one.",
        "Thanks. The sofa is at our depot and delivery is planned for Thursday.",
        "Thursday. |s Can you tell me roughly |m what time?",
        "The driver will text you a two hour window the day before.",
        "Okay. |s And can they take the old one away?",
        "Yes, for an extra twenty five dollars.",
        "Yeah that's fine, |c add that please.",
        "Done. Anything else I can do for you?",
        "No, |c that's it.",
    ],
    [
        "Hi. |s I need to renew my car insurance, |c it runs out |m at the end of the month.",
        "Of course. Has anything changed since last year, like your address or the car?",
        "Um no, |c same car, |c same address.",
        "And any claims in the last twelve months?",
        "No, |c none.",
        "Then your new premium is five hundred and ten dollars for the year.",
        "Hmm, |c that's more than last year. |s Is there anything |m cheaper?",
        "If you raise the excess to five hundred, it comes down to four sixty.",
        "Okay let's do that.",
        "Alright, I've updated it. The documents will arrive by email.",
        "Perfect, |c thank you.",
    ],
    [
        "Hey, |c is this the library?",
        "Yes, this is the central library. How can I help?",
        "I have two books that are due today, |c and I can't make it |m in time. |s Can I renew them?",
        "Sure. What's your library card number?",
        "One one |m zero |m four seven eight.",
        "Thanks. Both books are renewed for two more weeks.",
        "Oh great. |s And is the reading room |m open on Sunday?",
        "Yes, from twelve to five.",
        "Okay, |c cheers.",
    ],
    [
        "Yeah hi, |c I'd like to cancel |m the newspaper delivery |m while we're away.",
        "No problem. From which date?",
        "From the fourteenth, |c um, |c until the twenty eighth.",
        "From the fourteenth to the twenty eighth. Should it start again on the twenty ninth?",
        "Yes please.",
        "All done. Is there anything else?",
        "Actually yes. |s Could you send the missed issues |m to my sister's address?",
        "I'm afraid we can only deliver to the address on the account.",
        "Okay, |c never mind then. |s Thanks.",
    ],
    [
        "Hello, |c I'm calling from room four twelve. |s The air conditioning |m is making a loud noise.",
        "I'm sorry about that. I'll send someone from maintenance. Will you be in the room?",
        "For the next hour or so, |c yeah.",
        "Someone will be there in about fifteen minutes.",
        "Thanks. |s Also |m could we get two more towels?",
        "Of course, they'll bring them up.",
        "And what time is breakfast |m until?",
        "Breakfast is served until half past ten.",
        "Okay. |s Thank you very much.",
    ],
    [
        "Hi, |c I'd like to book a driving lesson |m for my son.",
        "Sure. Has he had lessons with us before?",
        "No, |c it's his first one.",
        "Then I'd suggest a two hour first lesson. Which days suit him?",
        "Weekdays after four, |c or |m any time on Sunday.",
        "I have Wednesday at half past four.",
        "Wednesday works.",
        "Great. Can I take his full name?",
        "Daniel Novak. |s N O V A K.",
        "Thank you, that's booked.",
        "Brilliant, |c thanks.",
    ],
    [
        "Good afternoon. |s My mobile bill is |m much higher than usual this month, |c and I don't know why.",
        "Let me take a look. I can see some roaming charges from last week.",
        "Roaming? |s But I was only in |m Canada for two days.",
        "Yes, those two days came to thirty eight dollars.",
        "Oh. |s I didn't know that wasn't included. |s Can I add a travel plan |m for next time?",
        "Yes, the travel add-on is five dollars a day.",
        "Okay, |c put that on my account please.",
        "Done. It'll apply whenever you're abroad.",
        "Thanks, |c that's helpful.",
    ],
    [
        "Hi, |c yeah, |c I'm at the train station and I think I left my bag |m on the train.",
        "I'm sorry. Which train were you on?",
        "The eight forty |m from Riverside, |c it got in at nine twenty.",
        "Can you describe the bag?",
        "It's a black backpack |m with a red zip. |s There's a laptop in it.",
        "I'll ask the staff at the end of the line to check the train.",
        "Thank you. |s Should I wait here |m or go home?",
        "You can go home; we'll call you if it's found.",
        "Okay. |s My number is oh two oh |m seven |m five five five, |c one nine one nine.",
        "Got it. We'll be in touch.",
        "Thank you, |c that's a relief.",
    ],
    [
        "Hello. |s I'd like to ask about your yoga classes |m for beginners.",
        "We have beginner classes on Monday and Thursday evenings.",
        "What time |m on Thursday?",
        "Thursday's class is at seven and lasts an hour.",
        "Okay. |s And do I need to bring my own mat, |c or |m do you have some?",
        "We have mats you can borrow.",
        "Great. |s How much is one class?",
        "Twelve dollars, or a pass of ten classes for a hundred.",
        "I'll try one first. |s Can I just |m turn up?",
        "Yes, just come ten minutes early.",
        "Perfect. |s See you Thursday.",
    ],
    [
        "Hi, |c um, |c I got charged twice |m for the same concert ticket.",
        "I'm sorry about that. Can you give me the email you booked with?",
        "It's maria dot lopez |m at mail dot com.",
        "Thank you. I can see two payments of sixty dollars.",
        "Yes, |c that's it.",
        "I've refunded the second one. It'll take three to five days.",
        "Okay. |s And I still have the two tickets, |c right? |s Not four?",
        "Just two tickets, yes.",
        "Good. |s Thank you.",
    ],
    [
        "Hello, |c I'm calling to check |m if my prescription is ready.",
        "Can I have your date of birth?",
        "The third of May, |c nineteen |m sixty two.",
        "And your surname?",
        "Brennan.",
        "Yes, Mr Brennan, it's ready. There's one item still on order though.",
        "Which one is missing?",
        "The eye drops. They should be in on Friday.",
        "Okay, |c I'll collect everything |m on Friday then.",
        "That's fine, we'll keep it all together for you.",
        "Thanks, |c bye.",
    ],
    [
        "Hi, |c I saw an advert for a used bike, |c a blue one, |c is it |m still for sale?",
        "Yes, it's still here.",
        "How old is it?",
        "About two years, and it was serviced last month.",
        "And uh |m what's the lowest price |m you'd take for it?",
        "I could do two hundred and fifty.",
        "Hmm. |s Could you do two twenty?",
        "Two thirty and it's yours.",
        "Okay, |c deal. |s I can pick it up |m this evening.",
        "Great, any time after six.",
        "See you then.",
    ],
    [
        "Good morning. |s My internet has been |m dropping out all week, |c every few hours.",
        "I'm sorry about that. Have you tried restarting the router?",
        "Yeah, |c like five times. |s It helps for a bit |m and then |m it goes again.",
        "Okay. I can see some errors on your line. I'll book an engineer.",
        "When could somebody |m come out?",
        "The earliest is Monday afternoon.",
        "Monday's fine. |s Will I have to pay |m for it?",
        "No, a fault on the line is free to fix.",
        "Oh good. |s Thank you.",
    ],
    [
        "Yes hi. |s We're moving house next month |m and I need to transfer |m the electricity.",
        "Of course. What's the date of your move?",
        "The twentieth. |s The twentieth of |m next month.",
        "And the new address?",
        "Fourteen Harbour Road, |c apartment six.",
        "Thank you. Would you like the same tariff at the new place?",
        "Um, |c is there a cheaper one?",
        "The green saver tariff would be about ten dollars less each month.",
        "Then let's switch to that.",
        "Done. You'll get a confirmation letter this week.",
        "Great, |c thanks for your help.",
    ],
]


def pause_s(rng: np.random.Generator) -> float:
    x = math.exp(math.log(PAUSE_MEDIAN_S) + PAUSE_SIGMA * float(rng.standard_normal()))
    return min(max(x, PAUSE_RANGE_S[0]), PAUSE_RANGE_S[1])


def realise(script: str, rng: np.random.Generator) -> tuple[str, str]:
    """The caller turn's marked text for ``generate.build_caller_turn``
    (``{0.23c}`` after a word opens a pause; no punctuation inside, so that
    Piper opens none of its own) and its written text: pauses open at 1-3 of
    the allowed places in 40 % of turns."""
    toks = script.split()
    places = [k for k, t in enumerate(toks) if re.fullmatch(r"\|[csm]", t)]
    chosen: set[int] = set()
    if places and rng.uniform() < TURNS_WITH_PAUSE:
        n = min(len(places), int(rng.choice([1, 1, 2, 2, 3])))
        chosen = {int(k) for k in rng.choice(places, size=n, replace=False)}
    words = [k for k, t in enumerate(toks) if k not in places]
    out = []
    for k, t in enumerate(toks):
        if k in places:
            d = pause_s(rng) if k in chosen else 0.0
            if d >= MIN_PAUSE_S:
                # the silence measured is what is inserted plus the words'
                # own edges at the cut (~0.07 s)
                out.append(f"{{{d - EDGE_S:.2f}{t[1]}}}")
        elif k == words[-1]:
            out.append(t)
        else:
            # Piper pauses at every comma and full stop inside an utterance:
            # the pauses are the draws above, nowhere else.
            out.append(t.rstrip(",.?!;:"))
    return " ".join(out), " ".join(toks[k] for k in words)


class Voice:
    """One caller: Piper joe at a speaking rate and pitch."""

    def __init__(self, piper: g.Caller, rate: float, pitch: float):
        self.piper, self.rate, self.pitch = piper, rate, pitch

    def turn(self, marked: str) -> dict:
        p = self.piper
        p.cfg.length_scale = self.rate
        p.sr = round(p.voice.config.sample_rate * self.pitch)
        try:
            t = g.build_caller_turn(p, marked)
        except RuntimeError as e:
            if "not measured" in str(e):
                # Too short to measure against the words' own edges: that
                # one (the shortest) stays closed.
                holds = re.findall(r"\{[^}]+\}", marked)
                short = min(holds, key=lambda h: float(h[1:-2]))
                return self.turn(marked.replace(" " + short, "", 1))
            if "cannot open a hold" not in str(e):
                raise
            # Piper says two words as one group there: no pause can open
            # between them, so that one place stays closed.
            bad = re.search(r"merges '([^']+)'", str(e))
            assert bad is not None
            marked = re.sub(rf"(\b{re.escape(bad.group(1))}) \{{[^}}]+\}}", r"\1", marked, count=1)
            return self.turn(marked)
        x = t["audio"]
        s0, e1 = t["spans"][0][0], t["spans"][-1][1]
        x = x[int(s0 * SR) : math.ceil(e1 * SR)]
        shift = lambda a: a - s0  # noqa: E731
        return {
            "audio": (x / (np.max(np.abs(x)) + 1e-9)).astype(np.float32),
            "spans": [[shift(a), shift(b)] for a, b in t["spans"]],
            "holds": [
                {**h, "start": shift(h["start"]), "end": shift(h["end"])} for h in t["holds"]
            ],
            "words": [
                {"text": w["text"], "start": shift(w["start"]), "end": shift(w["end"])}
                for w in t["words"]
            ],
            "text": t["text"],
        }


def make_call(idx: int, piper: g.Caller) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12000 + idx)
    scenario = SCENARIOS[(idx // 2) % len(SCENARIOS)]
    voice = Voice(piper, rate=float(rng.uniform(0.9, 1.12)), pitch=float(rng.uniform(0.92, 1.1)))
    agent_voice = AGENT_VOICES[idx % len(AGENT_VOICES)]
    peak = float(rng.uniform(0.5, 0.8))
    bg = (["pink", "brown"][idx % 2], float(rng.uniform(-60, -50))) if idx % 4 < 2 else None
    T = 240 * SR
    caller = np.zeros(T, np.float32)
    agent = np.zeros(T, np.float32)
    events: list[dict] = []
    t = 0.5 + float(rng.uniform(0, 0.5))
    for k, line in enumerate(scenario):
        if k % 2 == 0:  # the caller
            marked, written = realise(line, rng)
            u = voice.turn(marked)
            i = round(t * SR)
            caller[i : i + len(u["audio"])] += u["audio"] * peak
            ev = {
                "type": "caller_turn",
                "start": t + u["spans"][0][0],
                "end": t + u["spans"][-1][1],
                "text": written,
                "spans": [[t + a, t + b] for a, b in u["spans"]],
                "holds": [{**h, "start": t + h["start"], "end": t + h["end"]} for h in u["holds"]],
                "words": [{**w, "start": t + w["start"], "end": t + w["end"]} for w in u["words"]],
            }
            events.append(ev)
            t = ev["end"] + float(rng.uniform(*CLERK_GAP_S))
        else:  # the clerk
            clip = g.espeak(line, agent_voice) * 0.5
            s, e = g.extent(clip, SR)
            clip = clip[int(s * SR) : math.ceil(e * SR)]
            i = round(t * SR)
            agent[i : i + len(clip)] += clip
            a0, a1 = g.extent(clip, SR, t)
            events.append({"type": "agent_turn", "start": a0, "end": a1, "text": line})
            t = a1 + float(rng.uniform(*CALLER_GAP_S))
    n = round((max(ev["end"] for ev in events) + 1.0) * SR)
    mix = on_the_line(rng, caller[:n], bg)

    manifest = {
        "format": "turnkit.recording/v1",
        "id": f"turntaking-{idx:02d}",
        "language": "en",
        "audio": {"caller": "caller.wav", "agent": "agent.wav"},
        "source": "synthetic",
        "tags": ["turntaking-set", half(idx)],
        "generator": {
            "script": "scripts/gen_turntaking_set.py",
            "index": idx,
            "scenario": (idx // 2) % len(SCENARIOS),
            "caller_voice": f"piper en_US-joe-medium (length_scale {voice.rate:.3f}, "
            f"pitch x{voice.pitch:.3f})",
            "agent_voice": f"espeak-ng {agent_voice}",
            "background": None if bg is None else {"color": bg[0], "dbfs": round(bg[1], 1)},
            "pauses": f"lognormal median {PAUSE_MEDIAN_S} s sigma {PAUSE_SIGMA}, "
            f"{TURNS_WITH_PAUSE:.0%} of turns",
        },
        "events": rounded(events),
    }
    return manifest, mix, agent[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--calls", type=int, default=2 * len(SCENARIOS))
    ap.add_argument("--first", type=int, default=0)
    args = ap.parse_args(argv)
    if args.calls < 2:
        print("--calls: at least 2 (one per half)", file=sys.stderr)
        return 2
    piper = g.Caller()
    turns = holds = 0
    for idx in range(args.first, args.first + args.calls):
        manifest, caller, agent = make_call(idx, piper)
        h = write_call(args.out, idx, manifest, caller, agent)
        ct = [e for e in manifest["events"] if e["type"] == "caller_turn"]
        turns += len(ct)
        holds += sum(len(e["holds"]) for e in ct)
        print(
            f"{manifest['id']} ({h}): {len(ct)} turns, "
            f"{sum(bool(e['holds']) for e in ct)} with a pause",
            flush=True,
        )
    print(f"{args.calls} calls, {turns} caller turns, {holds} pauses -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
