"""What the agent's last message asks of the caller — one reading, shared by
the text models' context features (:func:`turnkit.text.features.agent_context`)
and ``fused``'s patience profile (:func:`turnkit.detectors.fused.choose_profile`).

Decides, from the agent's raw text alone:

* whether it asks at all, and in which form: a wh-question ("what's your
  card number?"), a yes/no question ("is that right?", "do you…?", a tag
  "…, correct?", an elliptical "same address as before?"), another
  question, or a statement;
* whether it *requests data*: a request in a yes/no question's form ("can I
  have your email?", "could you spell it?") or an imperative ("please read
  me the number", "I'll need your date of birth"). A bare "yes" answers a
  check of the data ("Is the order under the email ending in gmail dot
  com?") and is the whole turn; after a request it only starts it ("yes,
  it's …"). Both read as the same yes/no question by form, so the reading
  keeps them apart.

Two readings that could disagree (the profile once called "Same address as
before?" a yes/no question while the features called it "other") are one
here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from turnkit.text.normalize import normalize_text

__all__ = ["AgentAsk", "read_agent"]

_SENT = re.compile(r"[^.!?]+[.!?]*")
_AUX = {
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "would",
    "will", "shall", "should", "may", "have", "has", "had", "isn't", "aren't",
    "don't", "doesn't", "didn't", "won't", "wouldn't", "can't", "couldn't", "shouldn't",
}  # fmt: skip
WH_WORDS = frozenset({"what", "which", "where", "when", "who", "whom", "whose", "why", "how"})
# A tag that makes a statement a yes/no question: "…, right?", "…, okay?"
_TAGS = {"right", "correct", "okay", "ok"}
# The agent asks for the data it names (not whether it is right): a request
# in a yes/no question's form ("can I have the order number?", "could you
# spell it?"), or "please …", "I (just) need your …", "go ahead".
_REQUEST = re.compile(
    r"\b(can|could|may|might|would|will)\s+(i|we|you)\b[^.!?]*\b(have|get|take|grab|give|tell|"
    r"spell|read|repeat|provide|confirm|verify|share|send|say|type|enter)\b"
    r"|\b(please|i need|i'll need|we need|just need|go ahead|let me have|tell me)\b"
)
# An elliptical yes/no question: "Same address as before?", "The usual card?"
_SAME = re.compile(r"^(and\s+)?(the\s+)?(same|usual)\b[^.!?]*\?\s*$|\bas before\?\s*$")

Kind = Literal["none", "statement", "wh", "yes-no", "other"]


@dataclass(frozen=True)
class AgentAsk:
    """The reading of one agent message.

    ``sentence`` is the sentence read (lower case, punctuation kept): the
    question if one of the last two sentences is one, else the last;
    ``last`` the last sentence; ``recent`` the last two (where topics are
    looked for)."""

    kind: Kind
    wh: str = ""  # the question word of a wh-question
    alternative: bool = False  # "window or aisle?"
    request: bool = False
    sentence: str = ""
    last: str = ""
    recent: str = ""

    @property
    def question(self) -> bool:
        return self.kind in ("wh", "yes-no", "other")


def read_agent(agent_text: str) -> AgentAsk:
    """Read what the agent's last message (raw text) asks of the caller."""
    raw = agent_text.strip()
    if not raw:
        return AgentAsk("none")
    sents = [s.strip() for s in _SENT.findall(raw) if s.strip()] or [raw]
    last = sents[-1].lower()
    recent = " ".join(sents[-2:]).lower()
    # The question, if any, is usually the last sentence with a "?".
    question = next((s for s in reversed(sents[-2:]) if s.endswith("?")), "").lower()
    sentence = question or last
    request = bool(_REQUEST.search(sentence))
    common = {"sentence": sentence, "last": last, "recent": recent, "request": request}
    if not question:
        return AgentAsk("statement", **common)
    # "what's" / "how's" / "isn't it" → their question word
    words = [
        w.split("'")[0] if w.split("'")[0] in WH_WORDS else w
        for w in normalize_text(question).split()
    ]
    first = words[0] if words else ""
    if first in WH_WORDS or (len(words) > 1 and words[1] in WH_WORDS):
        return AgentAsk("wh", wh=first if first in WH_WORDS else words[1], **common)
    if (
        first in _AUX
        or "right" in words[-2:]
        or "correct" in words[-2:]
        or (words and words[-1] in _TAGS)
        or _SAME.search(question)
    ):
        return AgentAsk("yes-no", alternative=" or " in f" {' '.join(words)} ", **common)
    return AgentAsk("other", **common)
