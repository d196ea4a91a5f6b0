"""Train the semantic-text end-of-turn model (turnkit/models/semantic_text.npz).

    python scripts/train_semantic_text.py [--out turnkit/models/semantic_text.npz]

Data (all allowed sources, nothing from ../shared/eval):

* ``chitchat-dataset`` (MIT): 7,168 chat conversations whose messages are
  grouped into turns. A whole turn is an end (positive), in the context of
  the other speaker's last message. Prefixes of it cut at word boundaries are
  holds (negatives), except cuts at a sentence end, a comma or before a
  capitalised word in the punctuated source (a prefix that is itself a
  sentence: "Yes" in "Yes, please"), which are left out. A message break
  inside a turn is a (weak) hold.
* Templates written here for what callers do on the phone: requests and
  their prefixes, one-word answers to yes/no questions, digits and spelling
  in progress against the number the agent asked for, "let me think",
  trailing conjunctions and fillers, asking the agent to stop or wait.
* The demo corpus transcripts (``recordings/*/call.json``): each caller
  turn is an end, its text up to a mid-sentence hold is a hold.

Everything is deterministic (fixed seeds, sorted inputs, single-threaded
BLAS, a zip written with fixed timestamps): running the script twice
writes a byte-identical model. About 10% of the examples, by conversation /
template group, are held out; the default threshold is the one with the best
balanced accuracy there.
"""

from __future__ import annotations

import os

# One BLAS thread: sums in a fixed order, so reruns are byte-identical.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from turnkit.text.features import (  # noqa: E402
    DEFAULT_BITS,
    FEATURE_VERSION,
    agent_context,
    text_features,
)
from turnkit.text.normalize import normalize_text  # noqa: E402

SEED = 20240601
HELD_OUT = 10  # one group in ten


@dataclass(frozen=True, slots=True)
class Example:
    text: str  # normalised
    agent: str  # raw agent text
    label: int  # 1 = end of turn
    weight: float
    group: str
    source: str


# --- chitchat -------------------------------------------------------------------

_SENT_END = re.compile(r"[.!?]+[\"')\]]*$|[,;:]$|\.\.\.$|…$")
_I_WORDS = {"I", "I'm", "I'll", "I've", "I'd", "I’m", "I’ll", "I’ve", "I’d"}
_TRAILERS = (
    "and", "and um", "but", "so", "or", "um", "uh", "because", "and uh", "so um",
    "and then", "but uh", "and also", "but um", "or um", "like", "if", "with", "to",
    "the", "and the", "that", "which is", "cause", "since", "when", "um so", "as well as",
)  # fmt: skip


# Words that often open a new clause: text typed without punctuation may
# have a sentence end before them ("i'm good how about you"), so a cut there
# is not a clear hold.
_STARTERS = {
    "i", "im", "i'm", "you", "we", "they", "he", "she", "it", "its", "it's", "that", "thats",
    "that's", "this", "there", "how", "what", "why", "where", "when", "who", "which", "do",
    "does", "did", "are", "is", "was", "can", "could", "would", "will", "have", "has",
    "lol", "haha", "hahaha", "lmao", "and", "but", "so", "or", "yeah", "yes", "no", "nope",
    "oh", "well", "ok", "okay", "thanks", "thank", "hope", "also", "plus", "please", "let's",
    "maybe", "i'd", "i'll", "i've", "my", "not", "too", "though", "anyway", "btw", "hey", "hi",
    "hello", "wow", "cool", "nice", "sure", "right", "then", "now", "because", "cause",
}  # fmt: skip


# Words a sentence does not end on: a cut after one is a hold whatever follows.
_OPEN = {
    "the", "a", "an", "to", "of", "for", "with", "about", "and", "but", "or", "my", "your",
    "our", "their", "his", "her", "in", "on", "at", "from", "because", "if", "is", "are",
    "was", "were", "i", "we", "they", "i'm", "im", "some", "very", "really", "so", "than",
    "into", "by", "as", "like", "would", "could", "should", "will", "can", "be", "been",
}  # fmt: skip


def _cut_ok(tok: str, nxt: str, typed: bool = False) -> bool:
    """A cut after raw token ``tok`` (``nxt`` follows) is a clear hold.

    ``typed``: casual chat, where a clause opener after the cut may start a
    new, unmarked sentence."""
    if _SENT_END.search(tok) or not tok[-1:].isalnum():
        return False
    if nxt[:1].isupper() and nxt not in _I_WORDS:
        return False
    if typed and tok.lower() not in _OPEN:
        return nxt.lower().strip("\"'(“‘") not in _STARTERS
    return True


def _punctuated(message: str) -> bool:
    """Whether the writer marks sentence ends (else a missing mark says nothing)."""
    return bool(re.search(r"[.!?,]", message)) and message.strip()[:1].isupper()


def chitchat_turns() -> Iterator[tuple[str, str, list[str]]]:
    """Every turn of ``chitchat-dataset``, in a fixed order: (conversation id,
    the other speaker's last message, this turn's non-empty messages).

    The one loader of the corpus: v1 and v2 (``train_semantic_text_v2.py``)
    both read it through here."""
    import chitchat_dataset as ccc

    data = ccc.Dataset()
    for cid in sorted(data):
        prev = ""
        for turn in data[cid]["messages"]:
            msgs = [m["text"] for m in turn if m["text"].strip()]
            if not msgs:
                continue
            yield cid, prev, msgs
            prev = msgs[-1]


def chitchat_examples(rng: random.Random) -> list[Example]:
    out: list[Example] = []
    for cid, prev, msgs in chitchat_turns():
        toks: list[str] = []
        cuts: list[int] = []  # token counts of clear-hold prefixes
        breaks: list[int] = []
        for mi, m in enumerate(msgs):
            mt = m.split()
            for i, tok in enumerate(mt[:-1]):
                if _punctuated(m) and _cut_ok(tok, mt[i + 1], typed=True):
                    cuts.append(len(toks) + i + 1)
            toks += mt
            if mi < len(msgs) - 1 and mt and not _SENT_END.search(mt[-1]):
                breaks.append(len(toks))
        full = normalize_text(" ".join(toks))
        if full:
            out.append(Example(full, prev, 1, 1.0, cid, "chitchat"))
            if rng.random() < 0.12:
                tr = rng.choice(_TRAILERS)
                out.append(Example(f"{full} {tr}", prev, 0, 0.7, cid, "chitchat+tail"))
            for c in sorted(rng.sample(cuts, min(2, len(cuts)))):
                t = normalize_text(" ".join(toks[:c]))
                if t:
                    out.append(Example(t, prev, 0, 1.0, cid, "chitchat"))
            for c in breaks:
                t = normalize_text(" ".join(toks[:c]))
                if t:
                    out.append(Example(t, prev, 0, 0.2, cid, "chitchat-break"))
    return out


# --- templates --------------------------------------------------------------------

OPENERS = [
    "Thanks for calling, how can I help you today?",
    "Hi, this is the support line. What can I do for you?",
    "Good morning, how may I help?",
    "How can I help?",
    "What can I help you with today?",
    "Is there anything else I can help you with?",
    "Okay. What else can I do for you?",
    "",
]
OBJECTS = [
    "my order", "my account", "my bill", "my last invoice", "my reservation", "my booking",
    "the delivery", "my subscription", "my password", "my appointment", "my refund",
    "a table for two", "a flight to denver", "my shipping address", "my phone plan",
    "the charge on my card", "my membership", "a hotel room for friday", "my internet connection",
    "the package i ordered last week", "my insurance claim", "the warranty", "my prescription",
    "a return", "my payment method", "the email you sent me", "my credit card",
]  # fmt: skip
VERBS = [
    "check on", "cancel", "change", "update", "track", "return", "book", "reschedule",
    "pay", "upgrade", "confirm", "ask about", "get help with", "dispute", "renew", "fix",
]  # fmt: skip
REQUEST_FRAMES = [
    "I'd like to {v} {o}.",
    "I want to {v} {o}.",
    "I need to {v} {o}.",
    "Can you help me {v} {o}?",
    "Could you help me {v} {o}?",
    "I was wondering if you could help me {v} {o}.",
    "I'm calling to {v} {o}.",
    "I'm calling about {o}.",
    "I have a question about {o}.",
    "I need some help with {o}.",
    "Is it possible to {v} {o}?",
    "How do I {v} {o}?",
    "I'm having trouble with {o}.",
    "Something is wrong with {o}.",
    "I'd like some information about {o}.",
    "Can I {v} {o} please?",
    "I've been trying to {v} {o} but it's not working.",
    "I called yesterday about {o} and nobody got back to me.",
    "I think there's a problem with {o}.",
    "Yeah I need to {v} {o} as soon as possible.",
    "I want to know why I can't {v} {o}.",
    "Could you tell me the status of {o}?",
    "I'm not sure if you can help me but I need to {v} {o}.",
    "My friend told me I could {v} {o} over the phone.",
]  # fmt: skip
GREETINGS = [
    "",
    "",
    "",
    "Hi, ",
    "Hello, ",
    "Hey there, ",
    "Yeah hi, ",
    "Um, ",
    "Uh, ",
    "So ",
    "Hi. ",
]
COMPLAINTS = [
    "It arrived damaged.",
    "It still hasn't arrived.",
    "I was charged twice.",
    "The app keeps crashing when I try to log in.",
    "My internet has been down since yesterday.",
    "I never got the confirmation email.",
    "The size is wrong.",
    "Nobody has called me back.",
    "I restarted the router twice and it didn't help.",
    "It stopped working after a week.",
    "The price on my bill is higher than what I was quoted.",
    "I can't remember my password.",
]
YN_QUESTIONS = [
    "Is that correct?",
    "Is that right?",
    "Would you like me to go ahead with that?",
    "Do you want me to cancel it?",
    "Can I help with anything else?",
    "Did you receive the confirmation email?",
    "Is this for a delivery?",
    "Shall I book it for you?",
    "Do you have your order number handy?",
    "Would you like a receipt by email?",
    "I have you down for Friday at ten, is that right?",
    "Are you still at the same address?",
    "Have you tried restarting it?",
    "Is there anything else?",
    "So that's two people at seven, correct?",
    "Was that the card ending in four two one one?",
    "Do you want the earlier flight?",
    "Is this the best number to reach you?",
]
YES_NO = [
    "Yes.", "No.", "Yeah.", "Yep.", "Nope.", "Correct.", "That's right.", "That's correct.",
    "Sure.", "Yes please.", "No thanks.", "No, that's all.", "Absolutely.", "Of course.",
    "Not really.", "I think so.", "I don't think so.", "Okay.", "Right.", "Exactly.",
    "Please do.", "Go ahead.", "Yes, that's right.", "No, that's wrong.", "Yeah, sure.",
    "Yes it is.", "No it's not.", "Yes I did.", "No I didn't.", "Uh yes.", "Um no.",
    "Yeah, that's it.", "Sounds good.", "Perfect.", "Yes, thank you.", "No, thank you.",
    "Definitely.", "Mm-hmm, yes.", "Yeah, go ahead.", "That would be great.", "Nah.",
    "Yup.", "Sure thing.", "Yes, please do that.", "No, that's everything, thanks.",
]  # fmt: skip
YES_NO_UNFINISHED = [
    "yes and", "no but", "yes um", "yeah but", "no i", "yes i want to", "well", "um",
    "uh", "so", "yes but", "actually", "no actually", "yeah so", "yes and also", "no the",
    "yes it's", "no it's", "well i", "yeah i think", "hmm", "no wait i", "yes i mean",
    "um i think", "i'm not", "no it was the", "yes but can you", "yeah and um",
]  # fmt: skip
THINKING = [
    "let me think", "um let me think", "let me think about that", "let me think about that for a moment",
    "let me check", "let me see", "hmm let me see", "let me look", "let me look that up",
    "one second let me find it", "let me find my card", "let me grab my wallet",
    "let me get the number", "i'm looking for it", "i need to find it", "let me check my calendar",
    "uh let me see here", "okay let me see", "let me pull it up", "let me find the email",
    "i have it somewhere", "where did i put it", "let me ask my wife", "let me check with my husband",
    "um hang on let me find it", "okay so let me think",
]  # fmt: skip
STOPS = [
    "Stop.", "Wait.", "Wait a second.", "Hold on.", "Hold on a second.", "Shut up.",
    "Be quiet.", "Please stop talking.", "Stop talking.", "Enough.", "Can you stop?",
    "Okay stop.", "No, stop.", "Hang on.", "One moment please.", "Just a moment.",
    "Give me a minute.", "Quiet please.", "Stop, stop.", "That's enough.", "Wait wait.",
    "Please be quiet.", "Hey, stop.", "Can you be quiet?", "Let me talk.", "Let me finish.",
    "Excuse me.", "Sorry, wait.", "Stop right there.", "Hold it.", "Just wait.",
    "Could you wait a moment?", "Can you hold on a sec?", "Stop for a second.", "Pause.",
    "Please hold.", "Just a sec.", "Give me a second.", "Hang on a minute.", "Shh.",
]  # fmt: skip
AGENT_STATEMENTS = [
    "I can help you with that. Our return window is thirty days from delivery.",
    "Let me explain the options. The basic plan includes unlimited calls and five gigabytes of data.",
    "Your order shipped on Monday and should arrive by Thursday.",
    "Okay, I've updated that for you.",
    "Sure. One moment while I look that up.",
    "Thanks. I see the charge here.",
    "Got it.",
    "",
]
DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
NUMBER_ASKS = [  # agent question, digit groups of a complete answer
    ("What's the card number?", (4, 4, 4, 4)),
    ("Can I have the long number on the front of your card?", (4, 4, 4, 4)),
    ("Please read me your credit card number.", (4, 4, 4, 4)),
    ("What's the best phone number to reach you?", (3, 3, 4)),
    ("What's the new number?", (3, 3, 4)),
    ("Could you give me your phone number?", (3, 3, 4)),
    ("And your zip code?", (5,)),
    ("What's the zip code there?", (5,)),
    ("What are the last four digits of your card?", (4,)),
    ("Can you confirm the last four of your social?", (4,)),
    ("What's your PIN?", (4,)),
    ("And the security code on the back?", (3,)),
    ("Can I have your account number?", (3, 2, 3)),
    ("What's your account number please?", (4, 4)),
    ("Do you have the order number?", (3, 3)),
    ("What's the confirmation number?", (2, 4)),
    ("What's your member number?", (3, 3, 3)),
]
NUMBER_LEADS = [
    "", "", "It's ", "Sure, it's ", "Yeah, it's ", "My number is ", "Okay, it's ", "Um, ",
    "That's ", "The number is ", "Yes, it's ", "Let's see, it's ",
]  # fmt: skip
CALLER_NUMBER_FRAMES = [  # no agent prompt: the caller names the number
    ("My phone number is {d}.", (3, 3, 4)),
    ("My new number is {d}.", (3, 3, 4)),
    ("You can call me back at {d}.", (3, 3, 4)),
    ("My card number is {d}.", (4, 4, 4, 4)),
    ("The last four digits are {d}.", (4,)),
    ("My zip code is {d}.", (5,)),
    ("My account number is {d}.", (4, 4)),
    ("The order number is {d}.", (3, 3)),
]
NAMES = [
    "smith", "johnson", "brown", "garcia", "miller", "davis", "lopez", "wilson", "taylor",
    "moore", "jackson", "martin", "lee", "thompson", "white", "harris", "clark", "lewis",
    "walker", "young", "allen", "king", "wright", "scott", "nguyen", "hill", "adams", "baker",
]  # fmt: skip
FIRST = [
    "john", "maria", "david", "sarah", "michael", "linda", "james", "emily", "robert", "anna",
    "daniel", "lisa", "kevin", "jennifer", "thomas", "laura", "chris", "amy", "brian", "karen",
]  # fmt: skip
SPELL_ASKS = [
    "Could you spell your last name for me?",
    "How do you spell that?",
    "Can you spell the street name?",
    "Please spell your first name.",
]
WH_QA = [  # agent question, complete answers (each also cut into prefixes)
    ("What's your name?", ["{F} {L}.", "It's {F} {L}.", "My name is {F} {L}.", "{F}.", "This is {F}."]),
    ("Can I get your full name please?", ["{F} {L}.", "Sure, it's {F} {L}.", "Yeah it's {F} {L}."]),
    ("What's the address?", [
        "It's twelve forty Main Street.", "Twenty six Birch Road.", "Four hundred Oak Lane, apartment five.",
        "Eighteen Oak Lane.", "One two three Elm Street in Portland.", "It's nine Pine Avenue, suite two hundred.",
        "Please send it to my office at fifty five Market Street.",
    ]),
    ("What day works best for you?", [
        "Next Tuesday.", "Friday afternoon.", "How about Monday at ten?", "The fifteenth.",
        "Any day next week is fine.", "Thursday works.", "Tomorrow morning if possible.",
        "Maybe Wednesday?", "I'm free on Saturday.",
    ]),
    ("What time would you like?", [
        "Around seven thirty.", "Maybe around seven.", "Seven pm.", "The nine o'clock one.",
        "As early as possible.", "Sometime in the afternoon.", "Noon.", "Eight fifteen please.",
    ]),
    ("How many people?", ["Four.", "Just two.", "A table for four people.", "Six of us.", "Three adults and two kids."]),
    ("What's your email address?", [
        "It's {F} dot {L} at gmail dot com.", "{F}{L} at yahoo dot com.", "{F} at example dot org.",
    ]),
    ("What's the reason for your call today?", ["{REQ}"]),
    ("Where are you flying to?", ["Denver.", "To Chicago on the fifteenth.", "New York, leaving Friday.", "I need to fly to Denver on the fifteenth."]),
    ("How can I help?", ["{REQ}", "{REQ} {COMP}"]),
    ("Which one would you like?", ["The first one.", "The cheaper one.", "The blue one please.", "The one for friday."]),
    ("What seems to be the problem?", ["{COMP}", "{COMP} {COMP}", "Well, {COMP}"]),
]  # fmt: skip
CALLER_QUESTIONS = [
    "Can I change my appointment?", "Is Friday open?", "What time does the first flight leave?",
    "How long will it take?", "Do you have anything earlier?", "How much does it cost?",
    "When will it arrive?", "Can you send me a copy of the receipt?", "Why was I charged twice?",
    "Is there a fee for that?", "What are your opening hours?", "Can I speak to a manager?",
    "Do you deliver on weekends?", "Where is my package?", "Can I pay with a different card?",
]  # fmt: skip
CLOSINGS = [
    "No, that's all. Thank you.", "Thanks, bye.", "That's it.", "Great, thanks.",
    "Perfect, thank you so much.", "Okay, bye.", "Thank you.", "Thanks for your help.",
    "That's everything.", "Alright, have a good day.", "Cool, thanks.", "Awesome, thank you.",
]  # fmt: skip


def _cut_points(raw: str) -> list[tuple[str, bool]]:
    """Every word-boundary prefix of ``raw`` with whether it is a clear hold."""
    toks = raw.split()
    out = []
    for i in range(1, len(toks)):
        out.append((" ".join(toks[:i]), _cut_ok(toks[i - 1], toks[i])))
    return out


class Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.out: list[Example] = []
        self._n = 0

    def group(self) -> str:
        self._n += 1
        return f"tpl{self._n}"

    def add(
        self, text: str, agent: str, label: int, group: str, w: float = 1.0, src: str = "template"
    ) -> None:
        t = normalize_text(text)
        if t:
            self.out.append(Example(t, agent, label, w, group, src))

    def sentence(
        self, raw: str, agent: str, n_cuts: int = 3, tail_p: float = 0.35, src: str = "template"
    ) -> None:
        """A complete caller turn, its clear-hold prefixes, maybe a trailer."""
        g = self.group()
        self.add(raw, agent, 1, g, src=src)
        cuts = [c for c, ok in _cut_points(raw) if ok]
        for c in self.rng.sample(cuts, min(n_cuts, len(cuts))):
            self.add(c, agent, 0, g, src=src)
        if self.rng.random() < tail_p:
            self.add(f"{raw} {self.rng.choice(_TRAILERS)}", agent, 0, g, src=src + "+tail")
        if self.rng.random() < 0.15:  # a filler inside stays finished
            toks = raw.split()
            k = self.rng.randrange(len(toks))
            self.add(
                " ".join([*toks[:k], self.rng.choice(["um", "uh"]), *toks[k:]]),
                agent,
                1,
                g,
                src=src,
            )


def _digits(rng: random.Random, groups: tuple[int, ...]) -> list[list[str]]:
    out = []
    for n in groups:
        g = []
        for _ in range(n):
            d = rng.randrange(10)
            w = DIGIT_WORDS[d]
            if d == 0 and rng.random() < 0.4:
                w = "oh"
            g.append(w)
        out.append(g)
    return out


def template_examples(rng: random.Random) -> list[Example]:
    b = Builder(rng)

    def request() -> str:
        return rng.choice(REQUEST_FRAMES).format(v=rng.choice(VERBS), o=rng.choice(OBJECTS))

    # requests, complaints, questions, closings
    for _ in range(5000):
        raw = rng.choice(GREETINGS) + request()
        if rng.random() < 0.25:
            raw += " " + rng.choice(COMPLAINTS)
        b.sentence(raw, rng.choice(OPENERS))
    for _ in range(800):
        b.sentence(rng.choice(COMPLAINTS), rng.choice([*OPENERS, "What seems to be the problem?"]))
    for _ in range(800):
        raw = rng.choice(["", "", "Okay. ", "Um, ", "Yes. ", "And ", "Also, "]) + rng.choice(
            CALLER_QUESTIONS
        )
        b.sentence(raw, rng.choice(AGENT_STATEMENTS + YN_QUESTIONS[:3]))
    for _ in range(400):
        b.sentence(
            rng.choice(CLOSINGS),
            rng.choice(
                ["Is there anything else?", "Can I help with anything else?", "You're all set."]
            ),
        )
    # yes / no answers
    for _ in range(2500):
        agent = rng.choice(YN_QUESTIONS)
        g = b.group()
        b.add(rng.choice(YES_NO), agent, 1, g)
        if rng.random() < 0.5:
            b.add(rng.choice(YES_NO_UNFINISHED), agent, 0, g)
        if rng.random() < 0.25:
            raw = rng.choice(["Yes, and ", "No, but ", "Yeah, also ", "No, "]) + request()
            b.sentence(raw, agent, n_cuts=2, tail_p=0.2)
    # digits and numbers in progress
    for _ in range(3000):
        if rng.random() < 0.75:
            agent, groups = rng.choice(NUMBER_ASKS)
            lead = rng.choice(NUMBER_LEADS)
            frame = lead + "{d}."
        else:
            agent = rng.choice(OPENERS + AGENT_STATEMENTS)
            frame, groups = rng.choice(CALLER_NUMBER_FRAMES)
        gs = _digits(rng, groups)
        flat = [w for g in gs for w in g]
        g = b.group()
        b.add(frame.format(d=" ".join(flat)), agent, 1, g, src="digits")
        # cuts inside the number (group ends are where callers pause)
        ends = np.cumsum([len(x) for x in gs])[:-1].tolist()
        picks = set(rng.sample(range(0, len(flat)), min(3, len(flat))))
        picks |= set(rng.sample(ends, min(2, len(ends))))
        for k in sorted(picks):
            b.add(frame.format(d=" ".join(flat[:k])).rstrip("."), agent, 0, g, src="digits")
        if rng.random() < 0.2:
            b.add(
                frame.format(d=" ".join(flat))
                + " "
                + rng.choice(["and", "and the", "um and", "and it expires"]),
                agent,
                0,
                g,
                src="digits",
            )
    # spelling
    for _ in range(800):
        agent = rng.choice(SPELL_ASKS)
        word = rng.choice(NAMES + FIRST)
        letters = " ".join(word)
        lead = rng.choice(["", "", "Sure, ", "It's ", "That's ", "Yeah it's "])
        g = b.group()
        b.add(f"{lead}{letters}.", agent, 1, g, src="spell")
        for k in sorted(rng.sample(range(1, len(word)), min(2, len(word) - 1))):
            b.add(f"{lead}{' '.join(word[:k])}", agent, 0, g, src="spell")
    # wh-questions
    for _ in range(3000):
        agent, answers = rng.choice(WH_QA)
        raw = rng.choice(answers).format(
            F=rng.choice(FIRST).title(),
            L=rng.choice(NAMES).title(),
            REQ=request(),
            COMP=rng.choice(COMPLAINTS),
        )
        b.sentence(raw, agent, n_cuts=2, tail_p=0.25)
    # holding the floor, and asking the agent to stop or wait
    for _ in range(1200):
        agent = rng.choice(WH_QA + NUMBER_ASKS)[0] if rng.random() < 0.7 else rng.choice(OPENERS)
        g = b.group()
        b.add(
            rng.choice(["", "", "Okay ", "Um ", "Hmm ", "Uh "]) + rng.choice(THINKING),
            agent,
            0,
            g,
            src="thinking",
        )
    for _ in range(1500):
        agent = rng.choice(AGENT_STATEMENTS + OPENERS + YN_QUESTIONS)
        b.add(
            rng.choice(["", "", "", "Okay ", "Sorry, ", "No no, ", "Hey, "]) + rng.choice(STOPS),
            agent,
            1,
            b.group(),
            src="stop",
        )
    # lone fillers and conjunctions never end a turn
    for _ in range(800):
        agent = rng.choice(AGENT_STATEMENTS + OPENERS + YN_QUESTIONS)
        b.add(
            rng.choice(
                [
                    "um",
                    "uh",
                    "so",
                    "and",
                    "but",
                    "well",
                    "and um",
                    "so um",
                    "like",
                    "or",
                    "i",
                    "the",
                    "my",
                    "it's",
                    "i'm",
                    "i was",
                    "can you",
                ]
            ),
            agent,
            0,
            b.group(),
            src="filler",
        )
    return b.out


# --- recordings -------------------------------------------------------------------


def recording_examples() -> list[Example]:
    out: list[Example] = []
    for path in sorted((ROOT / "recordings").glob("*/call.json")):
        doc = json.loads(path.read_text())
        events = sorted(doc["events"], key=lambda e: e["start"])
        agent = ""
        for e in events:
            if e["type"] == "agent_turn":
                agent = e.get("text", "")
            elif e["type"] == "caller_turn":
                g = f"rec:{doc['id']}"
                out.append(Example(normalize_text(e["text"]), agent, 1, 2.0, g, "recordings"))
                for h in e.get("holds", []):
                    if h.get("kind") != "mid-sentence":
                        continue
                    words = [w["text"] for w in e.get("words", []) if w["end"] <= h["start"] + 1e-6]
                    t = normalize_text(" ".join(words))
                    if t:
                        out.append(Example(t, agent, 0, 2.0, g, "recordings"))
    return out


# --- training ----------------------------------------------------------------------


def featurize(examples: list[Example], bits: int):
    from scipy.sparse import csr_matrix

    mask = (1 << bits) - 1
    indptr = [0]
    indices: list[int] = []
    for ex in examples:
        feats = dict.fromkeys(text_features(ex.text, agent_context(ex.agent)))
        indices.extend(zlib.crc32(s.encode()) & mask for s in feats)
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.float64)
    x = csr_matrix((data, np.array(indices), np.array(indptr)), shape=(len(examples), 1 << bits))
    x.sum_duplicates()
    return x


def held_out(group: str) -> bool:
    return zlib.crc32(group.encode()) % HELD_OUT == 0


def balanced_weights(examples: list[Example]) -> np.ndarray:
    w = np.array([e.weight for e in examples], dtype=np.float64)
    y = np.array([e.label for e in examples])
    pos, neg = w[y == 1].sum(), w[y == 0].sum()
    w[y == 1] *= (pos + neg) / (2 * pos)
    w[y == 0] *= (pos + neg) / (2 * neg)
    return w


def write_model(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz (zip of .npy) with fixed timestamps: byte-identical reruns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, npy.getvalue(), compresslevel=9)
    path.write_bytes(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "turnkit/models/semantic_text.npz")
    ap.add_argument("--bits", type=int, default=DEFAULT_BITS)
    ap.add_argument("--C", type=float, default=0.5, help="inverse L2 strength")
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss, roc_auc_score

    t0 = time.perf_counter()
    rng = random.Random(SEED)
    examples = chitchat_examples(random.Random(rng.random()))
    examples += template_examples(random.Random(rng.random()))
    examples += recording_examples()
    examples = [e for e in examples if e.text]
    by_src: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in examples:
        by_src[e.source][e.label] += 1
    print(f"examples: {len(examples)}")
    for s, (n0, n1) in sorted(by_src.items()):
        print(f"  {s:18s} end {n1:7d}  hold {n0:7d}")

    train = [e for e in examples if not held_out(e.group)]
    test = [e for e in examples if held_out(e.group)]
    x_tr, x_te = featurize(train, args.bits), featurize(test, args.bits)
    y_tr = np.array([e.label for e in train])
    y_te = np.array([e.label for e in test])
    clf = LogisticRegression(C=args.C, solver="lbfgs", max_iter=400, tol=1e-4)
    clf.fit(x_tr, y_tr, sample_weight=balanced_weights(train))
    w = clf.coef_[0].astype(np.float32)
    bias = float(np.float32(clf.intercept_[0]))
    # score held-out exactly as the runtime does (float32 weights)
    z = x_te @ w.astype(np.float64) + bias
    p = 1.0 / (1.0 + np.exp(-z))

    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    # class accuracies weighted as in training (weak labels count less)
    sw = np.array([e.weight for e in test])
    pos, neg = y_te == 1, y_te == 0
    tpr = np.array([sw[pos & (p >= t)].sum() / sw[pos].sum() for t in grid])
    tnr = np.array([sw[neg & (p < t)].sum() / sw[neg].sum() for t in grid])
    bal = (tpr + tnr) / 2
    threshold = float(grid[int(np.argmax(bal))])
    ok = [float(t) for t, r in zip(grid, tpr, strict=True) if r >= 0.95 and t <= threshold]
    eager = max(ok) if ok else threshold
    print(f"held out: {len(test)} examples ({(y_te == 1).sum()} end, {(y_te == 0).sum()} hold)")
    print(f"  auc {roc_auc_score(y_te, p):.4f}  log loss {log_loss(y_te, p):.4f}")
    print(f"  threshold {threshold:.2f} (best balanced accuracy), eager {eager:.2f}")
    src = np.array([e.source for e in test])
    for s in sorted(set(src)):
        m = src == s
        ends = p[m & (y_te == 1)]
        holds = p[m & (y_te == 0)]
        fe = f"{(ends >= threshold).mean() * 100:5.1f}% of {len(ends)}" if len(ends) else "—"
        fh = f"{(holds < threshold).mean() * 100:5.1f}% of {len(holds)}" if len(holds) else "—"
        print(f"  {s:18s} end correct {fe:>16s}   hold correct {fh:>16s}")
    i = int(np.argmax(bal))
    print(
        f"  all                end correct {tpr[i] * 100:5.1f}%   hold correct {tnr[i] * 100:5.1f}%"
    )

    meta = {
        "feature_version": FEATURE_VERSION,
        "bits": args.bits,
        "C": args.C,
        "seed": SEED,
        "trained_on": "chitchat-dataset (MIT), templates in scripts/train_semantic_text.py, recordings/*/call.json",
        "examples": len(examples),
        "held_out": len(test),
        "held_out_auc": round(float(roc_auc_score(y_te, p)), 4),
    }
    write_model(
        args.out,
        {
            "weights": w,
            "bias": np.float64(bias),
            "threshold": np.float64(threshold),
            "eager_threshold": np.float64(eager),
            "meta": np.array(json.dumps(meta, sort_keys=True)),
        },
    )
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.2f} MB) in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
