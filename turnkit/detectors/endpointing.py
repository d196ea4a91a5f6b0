"""Endpointing: when does a pause end the caller's turn?

Every end-of-turn detector is a :class:`Scorer` — P(the caller is done),
from audio, words, an LLM or a fusion of them, and nothing else — plus this
one pause state machine, which owns all the waiting:

* a turn opens when the VAD hears speech and closes at a commit
  (:class:`~turnkit.frames.TurnEndFrame`);
* a **pause** begins on the first frame the VAD no longer calls speech
  (its stop hysteresis has passed); the scorer is asked once then, and again
  only when the words of the turn change during the pause (a recogniser's
  final arriving late);
* the :class:`WaitPolicy` turns the score into a wait: ``threshold`` mode is
  LiveKit's and Pipecat's binary choice (``min_wait`` when p clears the
  threshold, ``max_wait`` otherwise), ``continuous`` mode reads the wait off
  a model of hold lengths (see :meth:`WaitPolicy.wait_ms`); the turn ends
  once the silence since the last speech reaches the wait;
* one **eager** signal (:class:`~turnkit.frames.TurnEagerFrame`) per pause
  when p reaches ``eager`` before the commit, so a draft may start; with
  ``early_eager`` a text scorer may send it on the first quiet frame, before
  the VAD confirms the pause; speech after either yields
  :class:`~turnkit.frames.TurnResumedFrame`; another for the same pause
  only when the recogniser writes a word begun before it (its draft
  answered words the turn no longer ends on: :meth:`Endpointing._may_signal`);
* **a draft out holds the commit** (a host that drafts on eager signals and
  attached its drafter, knowing the engine's time to a first token): a
  pause commits no sooner than the draft for its words has that token (a
  commit before brings the reply no sooner; a caller who goes on inside
  it is cut off), and a commit due within that time sends its eager
  signal first (:meth:`Endpointing._draft_holds`);
* **one stale-transcript rule**: words whose last one was spoken before the
  previous commit's speech end belong to that turn, not this one;
* **a ceiling**: no wait exceeds ``max_wait_ms``, whatever the scorer says
  (a turn nobody answers is the worst outcome), but inside a read-out
  number (``digit_run_ms``) or a phrase left open ("i need to fly to":
  ``open_frame_ms``, :func:`ends_open`); a scorer that fails or has
  no evidence falls back to a fixed silence wait;
* **the words stopped** (model detectors, with a recogniser that streams):
  another voice under the caller's (a television, an office) keeps the VAD
  calling it speech after the caller is done, and no pause lasts. A turn
  whose words have not changed through ``STALLED_MS`` of speech is ended
  as if that were a pause at its ceiling (:meth:`Endpointing.stalled`),
  through ``STALLED_SURE_MS`` if they read surely finished (p at the
  policy's eager level), unless the words so far read unfinished (a text
  scorer's verdict on them alone) and do not end in a run of digits or
  letters being read out: a caller drawing out an "uhhh" the recogniser drops is
  still speaking, so such a turn waits ``STALLED_OPEN_MS``; the same sound
  then opens no new turn, the caller's next words do;
* **no words yet** (text scorers, with a recogniser that streams): a new
  turn the recogniser has written nothing for (a held "ummm" it drops, a
  cough) waits the ceiling however finished its audio sounds
  (:meth:`Endpointing._wordless`); a turn is new once the agent has spoken
  since the last commit, or when that commit ended on an acknowledgement
  alone ("yeah" over the agent, who talks on).
* **words the VAD did not hear** (model detectors): a quiet caller's
  short answer ("correct", "yes") on a faint line can pass under the VAD's
  threshold, and no turn would open: the caller is never answered. Words
  for this turn that end :data:`OWED_SPEECH_MS` or more past the VAD's last
  speech, while it hears none, open the turn themselves; its pause is
  timed from their end (:meth:`Endpointing._unheard`).
* **compute**: a model's cost delays the decision by the part still running
  when the turn ends — measured (wall clock), ``fixed`` (the benchmark figure
  recorded with the model, so two runs give identical figures) or ``none``.

Example::

    ep = Endpointing(clock, SemanticTextScorer(model), WaitPolicy(threshold=0.4))
    out = await ep.on_transcript(frame)       # words
    out = await ep.on_audio(frame, vad_step)  # [TurnEndFrame(...)] at a pause
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnkit.audio.level import frame_energy_db
from turnkit.audio.turn_audio import TurnAudio
from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    Word,
)
from turnkit.text.features import (
    DIGITS,
    FILLERS,
    NUMBERS,
    expected_digits,
    phone_complete,
    trailing_digits,
)
from turnkit.text.lexicon import is_backchannel
from turnkit.text.normalize import normalize_text
from turnkit.text.numerals import DIGIT_WORDS, spoken_numbers
from turnkit.text.question import announces_more, read_agent
from turnkit.text.recogniser import RecogniserKind, StreamingWatch

if TYPE_CHECKING:
    from turnkit.drafting.drafter import EagerDrafter

__all__ = [
    "ANNOUNCE_FLOOR_MS",
    "CEILING_MS",
    "DIGIT_RUN_FLOOR_MS",
    "DIGIT_RUN_MS",
    "OPEN_FRAME_MS",
    "SEGMENT_WAIT_MS",
    "ComputeMode",
    "Endpointing",
    "Evidence",
    "Score",
    "Scorer",
    "WaitPolicy",
    "ends_open",
    "in_digit_run",
    "number_complete",
]

ComputeMode = Literal["measured", "none", "fixed"]
_NORMAL = NormalDist()
# Every detector's default ceiling: no wait is longer, whatever the evidence
# says (a turn nobody answers is the worst outcome); only a caller in the
# middle of a digit or spelling run may extend it, to DIGIT_RUN_MS. A p95 of
# 1.6 s from the caller's last word to the agent's voice, less LLM 350 and
# TTS 150 ms, less the VAD's speech end after the last word (60-100 ms) and
# a frame's step (32 ms), leaves at most ~970 ms: at 1000 ms a turn answered
# at the ceiling was heard 1.60-1.62 s after its end (the real-call
# variants' annotation-only turns). At 900 ms: 1.50-1.52 s. What it costs:
# real pauses inside a turn are median 0.20 s, p90 0.45 s (docs/endpointing.md);
# the hold model puts 1.0 % of them over 900 ms and 0.66 % over 1000 ms, and
# on 676 turns of the demo, real-call, drawl, lines, noisy and unpunctuated
# calls (wideband and telephone) no detector cut or missed one more turn.
CEILING_MS = 900.0
# Inside a digit or spelling run the ceiling is a little longer, and still
# inside the same 1.6 s budget: a code of unknown length reads undecided at
# its last chunk as at every other (in fused's patient profile a p under
# 0.42 waits to the ceiling), so most read-out turns are answered at it. At
# 1200 ms each was heard ~1.8 s after its last digit, and where callers
# give phone numbers, postcodes or spelled names such turns alone set the
# p95 (the real-call variants: 1658 ms, from one read-out code; at 950 ms
# 1548 ms). What it costs: a chunk pause longer than 950 ms (the patient
# hold model puts 3.8 % of them over 950 ms, 1.7 % over 1200 ms); on every
# development corpus one turn more was cut, the demo's stress call pausing
# 1.03 and 1.20 s inside a phone number.
DIGIT_RUN_MS = 950.0
# The other exception to the ceiling: a caller whose words stop on a word
# that no sentence ends on ("i need to fly to", "the second one is the",
# "and um"; :func:`ends_open`) is inside a phrase, and the silence is a
# search for the next word, not a turn handed over. The wait still follows
# the scorer's p (fused: P(done | silence); a threshold detector: its
# threshold), so only a p that reads the phrase open waits past CEILING_MS.
# Why: pauses inside real caller turns are short (p90 0.45 s) but their tail
# is heavier than the hold model's: on the hidden real calls a silence timer
# of 800 ms still cut 5.9 % of the turns (500 ms: 7.9 %), so ~6 turns in 100
# hold a silence the VAD hears as longer than CEILING_MS, and a 900 ms cap
# cuts every one of them whatever the words say. 1600 ms keeps the hold
# model's own wait for a p near 0.01 (default profile: 1680 ms) and a reply
# heard ~2.2 s after a turn that really ended so, one in a hundred turns at
# most, under the p95's 5 %.
OPEN_FRAME_MS = 1600.0
# A threshold detector's floor in a digit or spelling run: a caller reading
# out a code of unknown length pauses between chunks, and the text looks
# finished at every chunk ("B as in boy seven two | five"). The fused
# detector's patient profile models those pauses (log-normal, median 300 ms,
# sigma 0.65) and weighs them against p; a threshold detector cannot, so it
# waits out 4 in 5 of them: 300 ms x e^(0.65 x 0.84) = 520 ms.
DIGIT_RUN_FLOOR_MS = 520.0
# How long after a run of speech a recogniser that writes each run whole
# once its VAD closed it (Whisper behind a VAD) may take to write it, unless
# the host says (its STT's p99 time to a final): Pipecat's own default for
# an STT that does not say (``pipecat.services.stt_latency.DEFAULT_TTFS_P99``).
SEGMENT_WAIT_MS = 1000.0
# The same floor where the caller's bare "yes" answers an offer of more
# ("Anything else?": turnkit.text.question.announces_more): the request
# follows after a hold of the kind the patient profile models, and the text
# models read that "yes" finished (semantic-text v2 0.96).
ANNOUNCE_FLOOR_MS = DIGIT_RUN_FLOOR_MS
# Messages of the conversation kept for scorers that read it (LiveKit's
# detector reads the last 6, merged by speaker).
HISTORY_MESSAGES = 12
# The scorer's first look at a pause is taken this long into the silence,
# while the VAD's stop hysteresis (96 ms) has not yet confirmed it: the
# model then runs during the hangover instead of after it, and its cost no
# longer delays a confident answer (Smart Turn's ~55 ms on one core was
# charged almost whole on turns answered at the floor). Two quiet frames,
# not one: a single quiet frame inside a word (a stop consonant) is common
# and would run the model for nothing.
PRELOOK_MS = 64.0
# Speech heard with no new word before a turn counts as stalled: longer
# than any wait on silence (DIGIT_RUN_MS), which also leaves a streaming
# recogniser its lag (interim words 0.3-0.6 s behind the voice, a long word
# before them). On the noisy variants 1000 ms and 1200 ms answered alike
# (fused missed 3.3 % and 0 %, one turn), 1500 ms missed 10 %: the longer
# the wait, the likelier another voice's onset cancels the reply.
STALLED_MS = 1200.0
# ...unless the words so far read unfinished ("maybe thursday or"): then the
# caller is more likely still speaking with no word to show for it (a drawn
# out "uhhh" the recogniser drops, as most do by default, with the next word
# and the recogniser's lag after it), and the stall must last twice as long.
STALLED_OPEN_MS = 2.0 * STALLED_MS
# ...and sooner when they read surely finished (p at the policy's eager
# level): "i want to change my delivery address" under a television is over
# once the words have stopped for longer than the next word takes to come.
# A recogniser's steady lag cancels out (each update is late by about the
# same); what is left is a word and the gap before it plus the lag's
# jitter. On the noisy variants' talk calls (a television, an office, 15
# turns) fused's p50 went 1717 → 1319 ms at 800 ms (1127 at 600); on the
# real-call, drawl and demo calls with words 300 ± 300 ms late, 800 ms cut
# no turn that 1200 ms did not, 600 ms cut one more (fused) and 3
# (semantic-text).
STALLED_SURE_MS = 800.0
# A draft for a stalled turn's end starts this far into the wordless speech
# (or later, within the draft's time to its first token of that end): the
# words of a caller still talking come this late at most. Wordless speech
# inside a caller's own talk (a word, the recogniser's lag, the VAD's
# hangover) reached 320-512 ms on the demo, real-call, turn-taking and
# barge-in sets, where its level can read far under their voice (quiet
# hangover frames); at 500 ms 14 drafts of 830 turns were voided for it,
# at 600 none, and the noisy variants' stalled ends got their draft ~190
# ms sooner than a fresh request (at 500: ~290).
STALL_DRAFT_MS = 600.0
# ...unless the wordless sound is the caller's own voice: its level (median
# of its frames) within OWN_VOICE_DB of the caller's speech level (median of
# the speech frames heard while they said the words the recogniser wrote, by
# the words' times, the last VOICE_FRAMES of them; at least VOICE_MIN_FRAMES
# before it is known). A caller's drawn-out "uhhhh"
# is as loud as their words or louder (the drawl variants' 0.9 s fillers:
# -1 to +14 dB against the median of their word frames); a television, an
# office or a fan under the line is softer (the noisy variants, at the
# moment their stalls ended turns: -5.6 to -22 dB). Real non-native callers
# hold fillers 1-1.8 s (SpokenWOZ's word times): after words that read
# finished ("... if they have free internet, uhhhh, free parking"),
# STALLED_SURE_MS ended the turn inside the filler. The caller's own sound
# ends a stalled turn only at STALLED_OPEN_MS, whatever the words read.
OWN_VOICE_DB = 5.0
VOICE_FRAMES = 400
VOICE_MIN_FRAMES = 20
# Speech frames kept (with their time) until the words spoken over them come:
# 2 s, longer than any recogniser's lag.
RECENT_FRAMES = 64
# Frames quieter than this are no level at all (digital silence).
SILENT_DB = -90.0
# After a stalled-words end, this much silence clears it: the next speech
# opens a turn again even without words (gaps in a background voice are
# shorter; a caller stranded by a recogniser that writes nothing is not).
STALL_CLEAR_MS = 500.0
# The transcript is behind the audio when the VAD's speech end is this far
# past its last word's end (the VAD's own end trails a word by ~80 ms,
# median, 100 ms at p90 on the demo corpus).
OWED_SPEECH_MS = 150.0
# Updates before the recogniser's lag (their median) is trusted, and the
# margin a word may come after it.
LAG_SAMPLES = 3
LAG_MARGIN_MS = 50.0
log = logging.getLogger(__name__)


# The digit words the text features count ("oh", "double", "forty"), and
# the "dash" read between groups.
_DIGIT_WORDS = frozenset(DIGITS) | NUMBERS | {"dash"}


# A time of day after these is said whole ("leave after seventeen forty
# five", "at three thirty"), not read out in chunks.
_TIME_PREPOSITIONS = frozenset({"at", "by", "after", "before", "until", "till", "around"})
_ONES = frozenset(DIGIT_WORDS[1:])  # "one" to "nine"
_TEENS = frozenset(
    {"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"}
    | {"sixteen", "seventeen", "eighteen", "nineteen"}
)
_TENS = frozenset({"twenty", "thirty", "forty", "fifty"})
_HOURS = _ONES | _TEENS | {"twenty"}
# The minutes said after the hour: none, "hundred", a recogniser's "21:00"
# said digit by digit ("oh oh"), a teen or a ten, "oh five", "forty five".
_MINUTES = frozenset(
    {(), ("hundred",), ("oh", "oh")}
    | {(m,) for m in _TEENS | _TENS}
    | {("oh", d) for d in _ONES}
    | {(t, d) for t in _TENS for d in _ONES}
)


def _clock_time(words: list[str]) -> bool:
    """``words`` end in a time of day said after a time preposition: an hour
    ("twenty one" too) and its minutes (:data:`_MINUTES`): "at fourteen
    fifteen" (a recogniser's "at 14:15"), "after twelve forty five", "by nine
    oh five". Not "at four one five": minutes are not read digit by digit."""
    for k in range(len(words) - 1, -1, -1):
        if words[k] in _TIME_PREPOSITIONS:
            tail = words[k + 1 :]
            break
    else:
        return False
    if not tail or tail[0] not in _HOURS:
        return False
    rest = tail[1:]
    if tail[0] == "twenty" and rest and rest[0] in {"one", "two", "three"}:
        rest = rest[1:]
    return tuple(rest) in _MINUTES


def in_digit_run(text: str, run: int = 2) -> bool:
    """The words end in a run of digits or spelled letters ("four one five",
    "s m i"): the caller is reading something out and pauses between chunks.
    A time of day is no run (:func:`_clock_time`: "at three thirty")."""
    # Numerals as they are said: a recogniser writes "4 1 5", "415-555" or
    # "4155550132" for the same digits.
    said = spoken_numbers(normalize_text(text).split())
    words = said[-run:]
    if len(words) < run:
        return False
    if not all(w.isdigit() or w in _DIGIT_WORDS or (len(w) == 1 and w.isalpha()) for w in words):
        return False
    return not _clock_time(said[-5:])


# Words no English sentence ends on: articles and possessive determiners,
# "and" / "because" (not "but", "or", "so": a turn may trail off on them,
# handing over: "is it tuesday or"), a bare subject "i" and a subject with
# its auxiliary ("i'd", "we're"), and prepositions that need their object
# here (not "in", "on", "by", "at", "about", which end phrasal verbs and
# questions: "log in", "what's it about").
_OPEN_WORDS = frozenset(
    {"a", "an", "the", "my", "your", "our", "their", "and", "because"}
    | {"i", "i'm", "i'd", "i'll", "i've", "we're", "we'll", "we'd", "you're", "they're"}
)
# A subject pronoun with no verb after it ("my son he", "and um it") is as
# open as a bare "i": "he", "she", "we", "they" are subjects wherever they
# stand, except after a verb that put them there ("how are they", the tags
# "aren't we", "did she") or "than" / "as"; "it" is a subject only where a
# clause starts ("and it", "because it"), not after its verb ("i want it",
# "that's it").
_SUBJECTS = frozenset({"he", "she", "we", "they"})
_CLAUSE_STARTS = frozenset(
    {"and", "but", "so", "or", "because", "cause", "when", "if", "then", "since"}
)
_PRONOUN_VERBS = frozenset(
    {"am", "is", "are", "was", "were", "do", "does", "did", "have", "has", "had"}
    | {"can", "could", "will", "would", "shall", "should", "may", "might", "must"}
    | {"than", "as"}
)
_OPEN_PREPOSITIONS = frozenset({"to", "of", "for", "with", "from", "into"})
# A preposition left at the end of a question or a relative clause is
# finished ("what can you help me with", "the one i was looking for", "who
# it's from", "someone i can talk to"): a wh-word, "that" or an indefinite
# before it in the last few words strands it.
_STRANDING = frozenset(
    {"what", "who", "whom", "which", "where", "that", "that's", "whatever"}
    | {"someone", "somebody", "something", "anyone", "anybody", "anything", "somewhere"}
)
_STRAND_SPAN = 8
# "to" after a verb that takes it answers a question with the verb left out
# ("would you like to add insurance?" "yes i'd like to").
_ELLIPSIS_VERBS = frozenset(
    {"like", "love", "want", "need", "have", "has", "going", "got", "able", "supposed", "try"}
)


def ends_open(text: str) -> bool:
    """The caller's words stop inside a phrase: the last word but fillers
    ("to um") is one no sentence ends on (:data:`_OPEN_WORDS`: "the second
    one is the", "yes and"), a subject still owed its verb ("and um it",
    "my wife she"; :data:`_SUBJECTS`), or a preposition still owed its object ("i
    need to fly to"; not "what can you help me with", not "yes i'd like
    to"). Such a pause may wait past the ceiling, to the policy's
    ``open_frame_ms`` (:data:`OPEN_FRAME_MS`)."""
    words = [w for w in normalize_text(text).split() if w not in FILLERS]
    if not words:
        return False
    last = words[-1]
    if last in _OPEN_WORDS:
        return True
    before = words[-2] if len(words) > 1 else ""
    if last in _SUBJECTS:
        return not (before in _PRONOUN_VERBS or before.endswith("n't"))
    if last == "it":
        return before in _CLAUSE_STARTS
    if last not in _OPEN_PREPOSITIONS:
        return False
    if last == "to" and len(words) > 1 and words[-2] in _ELLIPSIS_VERBS:
        return False
    return not _STRANDING.intersection(words[-_STRAND_SPAN:-1])


def number_complete(agent_text: str, text: str) -> bool:
    """The caller has read out as many digits as the field the agent asked
    for has ("four one five five" after "the last four digits of your
    card?"): the run is whole, no chunk is to come, so it gets no longer
    floor or ceiling; the scorer's P decides as for any turn."""
    want = expected_digits(agent_text)
    if want is not None:
        return trailing_digits(text) == want
    return "phone" in read_agent(agent_text).fields and phone_complete(text)


@dataclass(slots=True)
class Evidence:
    """What a scorer may judge, at one moment of one pause."""

    pause: int  # the same number for every look at one pause (scorers cache on it)
    text: str  # the current turn's words so far ("" when none, or only stale ones)
    agent_text: str  # the agent's last message
    audio: Callable[[], np.ndarray] | None = None  # the turn's 16 kHz audio up to now
    text_only: bool = False  # an early look before the VAD confirmed the pause: words only
    # The conversation before this turn, oldest first ({"role", "content"}):
    # the agent's messages and the caller's committed turns.
    history: list[dict[str, str]] = field(default_factory=list)
    # An engine's answer counts only within its live deadline (compute
    # "measured"). Under "fixed" / "none" the decision is charged the recorded
    # cost, so this machine's load must not decide it either: an engine-backed
    # scorer waits for the answer instead.
    timed: bool = True


@dataclass(slots=True)
class Score:
    """A scorer's verdict: P(the caller is done), or None for no evidence."""

    p: float | None
    compute_ms: float = 0.0  # measured wall-clock cost of this look
    fixed_ms: float = 0.0  # the recorded benchmark cost of the same work
    parts: dict[str, float] = field(default_factory=dict)  # p per evidence kind
    error: str | None = None  # the scorer failed (an engine down): the fallback decides


@runtime_checkable
class Scorer(Protocol):
    """P(end of turn) from one kind of evidence, or a fusion of several.

    A scorer decides nothing about time: :class:`Endpointing` asks it at a
    pause and turns its answer into a wait."""

    hears_audio: bool  # needs the turn's audio (Evidence.audio)
    reads_text: bool  # judges the transcript (asked again when it changes)

    def score(self, ev: Evidence) -> Awaitable[Score]: ...


class WaitPolicy(BaseModel):
    """How long a pause must last before it ends the turn, given the score.

    ``threshold`` mode: ``min_wait_ms`` when p ≥ ``threshold``, else
    ``max_wait_ms``. ``continuous`` mode: if the caller is not done, the
    pause is a hold, and holds have a length distribution (log-normal,
    median ``hold_ms``, spread ``hold_sigma``). After ``t`` ms of silence

        P(done | t) = p / (p + (1 - p) · S(t)),   S(t) = P(hold lasts > t)

    and the turn ends once that reaches ``confidence``, clamped to
    ``[min_wait_ms, max_wait_ms]``. No score (no words for a text model) waits
    ``no_evidence_ms``; a failed scorer ``fallback_ms``. ``max_wait_ms`` is the
    ceiling of every wait."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["threshold", "continuous"] = "threshold"
    threshold: float = Field(0.5, ge=0, le=1)
    eager: float | None = Field(None, ge=0, le=1)
    early_eager: bool = False
    min_wait_ms: float = Field(0.0, ge=0)
    max_wait_ms: float = Field(800.0, ge=0)
    no_evidence_ms: float | None = Field(None, ge=0)
    fallback_ms: float | None = Field(None, ge=0)
    hold_ms: float = Field(200.0, gt=0)
    hold_sigma: float = Field(0.65, gt=0)
    confidence: float = Field(0.95, gt=0, lt=1)
    prior: float = Field(0.5, gt=0, lt=1, description="p when a continuous scorer has none")
    digit_run_ms: float | None = Field(
        None,
        ge=0,
        description="the ceiling while the caller's words end in a digit or spelling run "
        "(people read numbers in chunks); None: max_wait_ms holds there too",
    )
    digit_run_floor_ms: float | None = Field(
        None,
        ge=0,
        description="the floor while the caller's words end in a digit or spelling run: "
        "a pause between chunks of a code is not the end, however finished the words "
        "look; None: min_wait_ms holds there too",
    )
    open_frame_ms: float | None = Field(
        None,
        ge=0,
        description="the ceiling while the caller's words stop on a word no sentence ends "
        "on ('i need to fly to': ends_open); None: max_wait_ms holds there too",
    )
    announce_floor_ms: float | None = Field(
        None,
        ge=0,
        description="the floor where the caller's bare 'yes' answers an offer of more "
        "('Anything else?': turnkit.text.question.announces_more): it announces the "
        "request, however finished it reads; None: min_wait_ms holds there too",
    )

    @model_validator(mode="after")
    def _order(self) -> WaitPolicy:
        if self.min_wait_ms > self.max_wait_ms:
            raise ValueError(
                f"min_wait_ms ({self.min_wait_ms:g}) must not exceed max_wait_ms "
                f"({self.max_wait_ms:g})"
            )
        return self

    def hold_wait_ms(self, p: float) -> float:
        """Continuous mode: the silence after which P(done | silence)
        reaches ``confidence`` (before the clamp)."""
        p = min(1 - 1e-6, max(1e-6, p))
        c = self.confidence
        # Commit when S(t) <= x: a hold would have to be longer than is likely.
        x = p * (1 - c) / ((1 - p) * c)
        if x >= 1:
            return 0.0
        return self.hold_ms * math.exp(self.hold_sigma * _NORMAL.inv_cdf(1 - x))

    def wait_ms(self, score: Score | None) -> float:
        if score is not None and score.error is not None:
            wait = self.fallback_ms if self.fallback_ms is not None else self._no_evidence()
        elif score is None or score.p is None:
            if self.mode == "continuous":
                wait = self.hold_wait_ms(self.prior)
            else:
                wait = self._no_evidence()
        elif self.mode == "continuous":
            wait = self.hold_wait_ms(score.p)
        else:
            wait = self.min_wait_ms if score.p >= self.threshold else self.max_wait_ms
        return min(self.max_wait_ms, max(self.min_wait_ms, wait))

    def _no_evidence(self) -> float:
        return self.no_evidence_ms if self.no_evidence_ms is not None else self.max_wait_ms

    def reads_finished(self, p: float) -> bool:
        """The evidence leans to "done": p at the threshold (threshold mode),
        or at even odds (continuous mode, where p is a probability)."""
        return p >= (self.threshold if self.mode == "threshold" else 0.5)


@dataclass(slots=True)
class _Pause:
    speech_end: float  # the VAD's end of the speech this pause follows
    number: int
    score: Score | None = None
    text: str | None = None  # the words the score judged
    at: float = 0.0  # clock time of the last look
    cost_ms: float = 0.0  # what that look cost, as charged (measured / fixed / none)
    # Clock time at which every look charged so far has finished: the
    # looks run one after another on the host's one thread.
    ready_at: float = 0.0
    # The words the pause's eager signal went out for (None: none yet). New
    # words in the pause void that draft (the recogniser's last word written
    # after the first quiet frame), so they may send another.
    eager_text: str | None = None
    segment_waited: bool = False  # due, but waited for a segment's words


class Endpointing:
    """The pause state machine every detector runs (see the module doc).

    ``policy`` is a :class:`WaitPolicy`, or a function of the agent's last
    message and the turn's words so far returning one (patience profiles
    chosen by context). ``audio``
    holds the turn's audio for a scorer that hears it (``hears_audio``)."""

    def __init__(
        self,
        clock: Clock,
        scorer: Scorer | None,
        policy: WaitPolicy | Callable[[str, str], WaitPolicy],
        spec: str = "",
        compute: ComputeMode = "measured",
        describe: Callable[[str], str] | None = None,
    ) -> None:
        self.clock = clock
        self.scorer = scorer
        self._policy = policy
        self._policy_cache: tuple[tuple[str, str], WaitPolicy] | None = None
        self.spec = spec
        self.compute: ComputeMode = compute
        # The host's drafter, where it drafts replies on eager signals and
        # knows when a draft has its first token (see :meth:`_draft_holds`).
        self.drafts: EagerDrafter | None = None
        self._describe = describe
        hears = scorer is not None and scorer.hears_audio
        self._audio = (
            TurnAudio(getattr(scorer, "window_s", 8.0), getattr(scorer, "pre_speech_ms", 500.0))
            if hears
            else None
        )
        self.agent_text = ""
        self.history: list[dict[str, str]] = []  # the conversation so far (HISTORY_MESSAGES)
        self.fallbacks = 0  # commits the fallback wait decided (the scorer failed)
        self.scores = 0  # looks at the evidence
        self._scorer_failed = False
        self._recogniser: RecogniserKind | None = None  # what the host said it runs
        self.segment_wait_ms = SEGMENT_WAIT_MS  # see words_owed_by_segment
        self.segment_waits = 0  # commits that waited for a segment's words
        self.segment_timeouts = 0  # ...and were made at the wait's end without them
        self.late_ends = 0  # ...whose words came after, ended on them (_late_words)
        self.reset()

    # -- state ---------------------------------------------------------------
    def reset(self) -> None:
        self.turn_open = False  # the caller has spoken since the last commit
        self.signalled = False  # an eager/end went out for the open stretch
        self.transcript = ""
        self.spoken_until = 0.0  # end of the last word in the transcript
        self.decided_until = -1.0  # speech end at the last commit
        self._pause: _Pause | None = None
        self._pauses = 0
        self._quiet = False  # the last audio frame held no speech
        self._speech_end = 0.0
        self._early_at: float | None = None  # speech end an early eager went out for
        self._early_text = ""  # ... and the words it went out for
        self._last_word_start: float | None = None  # the transcript's last word's start
        self._stall_eager_text = ""  # the words a stall's eager signal went out for
        self._pre: _Pause | None = None  # a look taken in the VAD's hangover
        # Speech the VAD heard in the open turn since its words last changed
        # (ms; None: no words yet), for the stalled-words end.
        self._wordless_ms: float | None = None
        self._wordless_db: list[float] = []  # the levels of those frames
        # Levels of speech frames heard while the caller's words came: their
        # voice's level, against which a wordless sound is judged.
        self._voice_db: deque[float] = deque(maxlen=VOICE_FRAMES)
        # Speech frames (their middle's time, level) whose words may not be
        # written yet, and how far the words written so far were spoken.
        self._recent_db: deque[tuple[float, float]] = deque(maxlen=RECENT_FRAMES)
        self._voiced_until = 0.0
        # Does the recogniser write words mid-speech?
        self._streaming = StreamingWatch(declared=self._recogniser)
        self._timed = False  # does it give word times?
        # The agent has spoken since the last commit (or none yet): a turn
        # opened now is a new one, not the last one going on after a reply
        # it cancelled (whose words are the committed turn's).
        self._agent_since_commit = True
        self._lags: deque[float] = deque(maxlen=32)  # recogniser lag per update (ms)
        # Ended on stalled words: the sound goes on, and only the caller's
        # next words (or a real silence, STALL_CLEAR_MS) open a turn again.
        self._stalled = False
        self._stall_quiet_ms = 0.0
        # A turn opened by words the VAD did not hear: where they end (the
        # speech end its pause is timed from, until the VAD hears more).
        self._heard_end: float | None = None
        # The end of the speech the last commit followed, for a recogniser
        # that writes runs whole: words that come for it, the caller silent
        # since, end the turn again (:meth:`_late_words`).
        self._late_for: float | None = None
        if self._audio is not None:
            self._audio.clear()

    def set_agent_text(self, text: str) -> None:
        if self._heard_part(text.strip()):
            return
        self.agent_text = text
        text = text.strip()
        if text and not self._said_already(text):
            self._remember("assistant", text)
            self._agent_since_commit = True
            prewarm = getattr(self.scorer, "prewarm", None)
            if prewarm is not None:
                prewarm(self.history)

    def agent_started(self) -> None:
        """The agent began a reply whose text the host learns only later
        (LiveKit adds the reply to its chat context when it has played):
        the caller's next sound is a new turn, as once the text is set."""
        self._agent_since_commit = True

    def _heard_part(self, text: str) -> bool:
        """``text`` is the leading part of the agent's latest message (with
        only acknowledgements since): a host handing the words the caller
        heard of a reply it handed whole when it began (LiveKit's chat item
        for a cut reply, after a ``WordTimesAgent`` gave its text). The
        detector keeps the whole line, as the replay does."""
        latest = self._latest_reply()
        if not text or latest is None or latest == text:
            return False
        said, whole = normalize_text(text), normalize_text(latest)
        return bool(said) and whole.startswith(said + " ")

    def _latest_reply(self) -> str | None:
        for msg in reversed(self.history):
            if msg["role"] == "assistant":
                return msg["content"]
            if not is_backchannel(msg["content"]):
                return None
        return None

    def _said_already(self, text: str) -> bool:
        """``text`` is the agent's latest message in the history with only
        acknowledgements from the caller since: the same message handed
        again, not a new one. Hosts hand the agent's text at different
        moments (the replay and ``BargeInProcessor`` at the reply's start,
        the Pipecat strategy at each user turn start): a "yeah" said over
        the reply is a turn, and the Pipecat host then gave the reply again,
        so the history (an LLM judge's context) read it twice there and
        once elsewhere."""
        return self._latest_reply() == text

    def _remember(self, role: str, text: str) -> None:
        self.history.append({"role": role, "content": text})
        del self.history[:-HISTORY_MESSAGES]

    def policy(self) -> WaitPolicy:
        text = self.turn_text()
        # Asked on every quiet frame; it changes only with the context.
        key = (self.agent_text, text)
        if self._policy_cache is not None and self._policy_cache[0] == key:
            return self._policy_cache[1]
        policy = self._resolve_policy(text)
        self._policy_cache = (key, policy)
        return policy

    def _resolve_policy(self, text: str) -> WaitPolicy:
        p = self._policy
        policy = p if isinstance(p, WaitPolicy) else p(self.agent_text, text)
        floor, ceiling = policy.min_wait_ms, policy.max_wait_ms
        if policy.announce_floor_ms is not None and announces_more(self.agent_text, text):
            # A threshold detector's floor where "yes" announces the request.
            floor = max(floor, policy.announce_floor_ms)
        if in_digit_run(text) and not number_complete(self.agent_text, text):
            # The one exception to the ceiling, and a floor for threshold
            # detectors: a caller reading digits or spelling pauses between chunks.
            ceiling = max(ceiling, policy.digit_run_ms or 0.0)
            floor = max(floor, policy.digit_run_floor_ms or 0.0)
        elif ends_open(text):
            ceiling = max(ceiling, policy.open_frame_ms or 0.0)
        floor = min(floor, ceiling)
        if (floor, ceiling) == (policy.min_wait_ms, policy.max_wait_ms):
            return policy
        return policy.model_copy(update={"min_wait_ms": floor, "max_wait_ms": ceiling})

    def set_recogniser(self, kind: RecogniserKind, final_p99_ms: float | None = None) -> None:
        """What the host's recogniser is, where it knows: ``segmented``
        (Whisper behind a VAD) is then read so from the first turn instead
        of after three updates; ``streaming`` is still learnt from the
        updates (a streaming recogniser shows itself within a turn).
        ``final_p99_ms``: how long after a run of speech its words may take
        at most (p99; Pipecat's ``STTMetadataFrame.ttfs_p99_latency``), the
        longest a decision waits for them (:meth:`words_owed_by_segment`)."""
        self._recogniser = self._streaming.declared = kind
        if final_p99_ms is not None:
            self.segment_wait_ms = max(0.0, float(final_p99_ms))

    @property
    def writes_whole_runs(self) -> bool:
        """The recogniser writes each run of speech whole once its VAD
        closed it (:attr:`StreamingWatch.segmented`: declared, or learnt)."""
        return self._streaming.segmented

    def words_owed_by_segment(self) -> bool:
        """A recogniser that writes each run of speech whole once its VAD
        closed it (:attr:`StreamingWatch.segmented`) has not yet written the
        run this pause follows (:attr:`StreamingWatch.behind`). A decision
        made now is the turn's end with its last words missing, or with no
        words at all: a reply to the words before them, or none (Pipecat's
        aggregator runs no LLM for an empty turn: the caller's "Yes."
        written 0.5-1.4 s after a detector ended it went unanswered in 2 of
        8 turns of a live call). So every detector's end waits for those
        words — the reply needs them, whatever the evidence — for at most
        ``segment_wait_ms`` after the speech (the STT's p99), as Pipecat's
        own stop strategies do (``wait_for_transcript``)."""
        return self.writes_whole_runs and self._streaming.behind

    def turn_text(self) -> str:
        """The current turn's words: the transcript, unless its last word was
        spoken before the previous commit (the recogniser has not caught up)."""
        return self.transcript if self.spoken_until > self.decided_until else ""

    def judged_text(self) -> str:
        """The words a pause is judged on: :meth:`turn_text`, unless the
        recogniser gives no word times, writes each run of speech whole
        (:attr:`StreamingWatch.segmented`: the host says so, or three
        updates came and never two in one run) and has written nothing for
        the run this pause follows (:attr:`StreamingWatch.behind`). Such a
        recogniser (Whisper behind a VAD) writes a run only once the VAD
        has closed it, 0.3-0.7 s into the pause, so at the pause its
        transcript is the turn as it stood before that run: "the nine
        thirty" of "the nine thirty, | the nine thirty one is better" read
        unfinished at the turn's end, "hi" of "hi, | i want to book a
        flight" read as a greeting still to go on. No text is better
        evidence than the wrong text: the pause is judged on what the
        scorer hears, and afresh when the run's words come. With word times
        the owed-words rule waits for them instead."""
        text = self.turn_text()
        if text and not self._timed and self.words_owed_by_segment():
            return ""
        return text

    # -- evidence ------------------------------------------------------------
    async def on_transcript(self, frame: TranscriptFrame) -> list[SystemFrame]:
        text = frame.text.strip()
        changed = text != self.transcript
        self.transcript = text
        self.spoken_until = frame.spoken_until
        self._streaming.written(self.clock.now())
        if changed and text:
            # Word times say which speech the words cover (the owed-words
            # rule reads them); without them judged_text infers it.
            self._timed = bool(frame.words)
            self._last_word_start = frame.words[-1].start if frame.words else None
        if changed and frame.spoken_until > 0.0 and frame.at >= frame.spoken_until:
            # How late the recogniser writes a word after it is said.
            self._lags.append((frame.at - frame.spoken_until) * 1000)
        out: list[SystemFrame] = []
        if changed and text and self._are_late(frame):
            return self._late_words(frame)
        if changed and self.turn_text():
            self._wordless_ms = 0.0
            self._wordless_db = []
            self._learn_voice(frame.words)
            self._streaming.heard()
            if self._stalled:
                # The caller's own words after a stalled-words end: they went on.
                self._stalled = False
                out += self._open_on_words(frame, self.clock.now())
            elif self._unheard(frame):
                self._heard_end = frame.spoken_until
                log.debug("%s: words the VAD did not hear open the turn: %r", self.spec, frame.text)
                out += self._open_on_words(frame, frame.words[-1].start)
        return out + await self._maybe_early()

    def _are_late(self, frame: TranscriptFrame) -> bool:
        """New words from a recogniser that writes runs whole, with no speech
        since the last commit: they are that speech's (such a recogniser
        writes only what its VAD closed), which the commit was made without
        (the segmented wait ran out — by however much: a test harness's STT
        2 s slow against the 1 s default p99 — or an earlier run's words,
        landing in the pause, were taken for the last one's). With word
        times, words past the VAD's speech are not (:meth:`_unheard` opens a
        turn on them)."""
        speech_end = self._late_for
        if speech_end is None or self.turn_open:
            return False
        return not (
            self._timed and frame.words and frame.spoken_until - speech_end >= OWED_SPEECH_MS / 1000
        )

    def _late_words(self, frame: TranscriptFrame) -> list[SystemFrame]:
        """The words of speech a commit ended without them (:meth:`_are_late`:
        Whisper took 1.63 s for "Correct." against a 1.5 s p99 on a busy
        machine), the caller silent since: the turn went on in words, and
        ends on them at once — a resume (the reply on its way answers the
        words before them, or none: hosts drop it as when the caller goes
        on) and an end, which every host answers with the turn's words
        (:attr:`~turnkit.frames.TurnEndFrame.late_words`). Without it the
        words sat in the host's transcript until the caller's next turn:
        answered one turn late, or never. Judged on no evidence: the caller
        has been silent past the wait already."""
        now = self.clock.now()
        # Kept: each run of that speech is written on its own, and each
        # late one ends the turn again ("that's all | thank you", 2 s slow).
        speech_end = self._late_for
        assert speech_end is not None  # _are_late
        self.late_ends += 1
        text = frame.text.strip()
        if self.history and self.history[-1]["role"] == "user":
            self.history[-1] = {"role": "user", "content": text}  # the turn, whole
        else:
            self._remember("user", text)
        self._agent_since_commit = is_backchannel(text)
        # The words are this turn's: the next turn's transcript starts after them.
        self.decided_until = max(self.decided_until, min(self.spoken_until, now))
        self.signalled = True
        late_ms = (now - speech_end) * 1000
        return [
            TurnResumedFrame(at=now, detector=self.spec),
            TurnEndFrame(
                at=now,
                detector=self.spec,
                reason=(
                    f"the last speech's words, {late_ms:.0f} ms after it "
                    "(after the turn's end): the turn ended on them"
                ),
                speech_end=speech_end,
                late_words=True,
            ),
        ]

    def _open_on_words(self, frame: TranscriptFrame, start: float) -> list[SystemFrame]:
        """The caller's words open the turn (the audio model hears it from
        the first new word, else from ``start``); a draft or reply out for
        the last commit is void."""
        self.turn_open = True
        if self._audio is not None:
            new = [w.start for w in frame.words if w.end > self.decided_until]
            self._audio.turn_start = min(new) if new else start
        if not self.signalled:
            return []
        self.signalled = False
        return [TurnResumedFrame(at=self.clock.now(), detector=self.spec)]

    def _unheard(self, frame: TranscriptFrame) -> bool:
        """Words the VAD did not hear, which open the turn: no turn is open,
        the VAD hears no speech now, and the turn's words end
        :data:`OWED_SPEECH_MS` or more past its last speech end (a word the
        VAD heard ends before its speech end, ~80 ms, or just after). A
        quiet caller's "correct" on a faint line (the demo's telephone copy
        30 dB down: Silero heard no speech in 3 short answers of 66 turns)
        was never answered by any detector. Only with word times: a host
        that stamps ``spoken_until`` with a transcript's arrival (a
        recogniser that gives none) cannot tell, as a committed turn's late
        final always arrives past the VAD's end. Model detectors only:
        ``silence:*`` stays the plain VAD timer it is compared as."""
        return (
            self.scorer is not None
            and not self.turn_open
            and self._quiet
            and bool(frame.words)
            and frame.spoken_until - self._speech_end >= OWED_SPEECH_MS / 1000
        )

    @property
    def _reads_text(self) -> bool:
        """The scorer judges the transcript (a text model, fused, an LLM)."""
        return self.scorer is not None and self.scorer.reads_text

    def _wordless(self) -> bool:
        """A new turn (the agent has spoken since the last commit, or that
        commit ended on an acknowledgement alone) with no words yet, though
        the recogniser streams, or the call's first turn before the
        recogniser has written anything; a text scorer only (an audio
        scorer judges what it hears, words or not).

        The first turn: whatever the recogniser is, its first words are on
        their way, and a turn ended without them has nothing to answer. A
        streaming recogniser writes a word 0.2-0.5 s after it is said, so at
        the first pause of "Hi, | um, I'm calling about a charge" it has
        written nothing, and fused ended that turn on the audio alone
        (p_audio 0.94, 128 ms into the pause): the demo's billing call, and
        its six variants, with the words 300 ms late or with word ends that
        run to the next word (as many aligners write them)."""
        return (
            self._reads_text
            and (self._streaming.streams or self._first_words_due())
            and self._agent_since_commit
            and not self.turn_text()
        )

    def _first_words_due(self) -> bool:
        """No turn ended yet in the call and no words written: the
        recogniser's first words are still to come. Once a turn has ended
        without any, the host may give none (a detector fed no transcript
        judges on what it hears, as before). A recogniser known to write
        runs whole has its own wait for them (:meth:`words_owed_by_segment`)."""
        return (
            self.decided_until < 0.0 and self._streaming.total == 0 and not self.writes_whole_runs
        )

    def words_owed_ms(self, speech_end: float) -> float:
        """How long after ``speech_end`` the words for the speech up to it
        should have come (silence ms), when the transcript stops more than
        ``OWED_SPEECH_MS`` before it; 0 when nothing is owed or the
        recogniser's lag is unknown. Text scorers only: an audio scorer's
        evidence is complete."""
        if not self._reads_text or len(self._lags) < LAG_SAMPLES or self.spoken_until <= 0.0:
            return 0.0
        behind = speech_end - self.spoken_until
        if behind * 1000 <= OWED_SPEECH_MS:
            return 0.0
        lag = sorted(self._lags)[len(self._lags) // 2]
        # The owed words end by speech_end, so they are due ``lag`` after it
        # at the latest.
        return lag + LAG_MARGIN_MS

    def stalled(self) -> bool:
        """The open turn has words, the recogniser streams (at least
        ``STREAMED_WORDS`` updates so far came mid-speech: a recogniser that
        writes a segment only after the VAD stops never qualifies), and
        since they last changed the VAD has heard ``STALLED_SURE_MS`` of speech
        (its silences not counted: a long hold before the next word is the
        wait's business): a voice that is not the caller's, or a sound with
        no words in it. Model detectors only: ``silence:*`` stays the plain
        timer it is compared as."""
        if (
            self.scorer is None
            or not self.turn_open
            or self._wordless_ms is None
            or not self._streaming.streams
            or not self.turn_text()
        ):
            return False
        return self._wordless_ms >= STALLED_SURE_MS - 1e-6

    def _learn_voice(self, words: list[Word]) -> None:
        """The speech frames heard inside the words just written (by their
        times, however late the recogniser wrote them) are the caller's
        voice. Without word times nothing is learnt: the level stays
        unknown, and a stall is judged on the words alone."""
        new = [w for w in words if w.end > self._voiced_until]
        if not new:
            return
        until = max(w.end for w in new)
        while self._recent_db and self._recent_db[0][0] < until:
            at, db = self._recent_db.popleft()
            if any(w.start <= at <= w.end for w in new):
                self._voice_db.append(db)
        self._voiced_until = until

    def own_voice(self) -> bool:
        """The wordless sound since the words last changed is the caller's
        own voice (a drawn-out filler, a word the recogniser has not
        written yet): its level within :data:`OWN_VOICE_DB` of the caller's
        speech level. False while either level is unknown."""
        if len(self._voice_db) < VOICE_MIN_FRAMES or not self._wordless_db:
            return False
        voice = float(np.median(np.fromiter(self._voice_db, float)))
        return float(np.median(self._wordless_db)) >= voice - OWN_VOICE_DB

    async def _maybe_stall_draft(self) -> list[SystemFrame]:
        """An eager signal ahead of a stalled turn's end, so its draft is
        under way when the turn ends through the sound: the words have
        stopped for :data:`STALL_DRAFT_MS` of speech that is not the
        caller's voice (far under their level: a television, an office),
        they read finished (surely: the stall ends at
        :data:`STALLED_SURE_MS`; else, or a read-out run, at
        :data:`STALLED_MS`), and that end is due within the draft's time to
        its first token (audio). Without it the end found no draft
        and the reply waited for a fresh request (+500 ms on each such turn
        of the noisy variants; now ~310). Only where the caller's level is
        known and the sound is not theirs, and not sooner than
        :data:`STALL_DRAFT_MS`: under a caller still talking a signal would
        spend one of the turn's three drafts on words still coming. Once
        per words; the signal leaves the turn open (the VAD hears speech: no
        resume is owed for it)."""
        drafts = self.drafts
        if (
            drafts is None
            or not drafts.params.drafts_on_eager
            or drafts.hold_ms <= 0.0
            or not self._reads_text
            or not self.turn_open
            or self._wordless_ms is None
            or not self._streaming.streams
        ):
            return []
        text = self.turn_text()
        if not text or text == self._stall_eager_text or drafts.ready_at(text) is not None:
            return []
        if self._wordless_ms < STALL_DRAFT_MS or self._wordless_ms >= STALLED_MS:
            return []
        if len(self._voice_db) < VOICE_MIN_FRAMES or not self._wordless_db or self.own_voice():
            return []
        policy = self.policy()
        score = await self._ask(self._evidence(self._pauses + 1, self.clock.now(), True))
        if score.p is None:
            return []
        due, _ = self._stall_due(policy, score.p)
        if due >= STALLED_OPEN_MS or not due - drafts.hold_ms <= self._wordless_ms < due:
            return []
        self._stall_eager_text = text
        return [
            TurnEagerFrame(
                at=self.clock.now(), detector=self.spec, probability=score.p, compute_ms=0.0
            )
        ]

    async def _stall_verdict(self, policy: WaitPolicy) -> str | None:
        """Whether a stalled turn ends now (:meth:`stalled`): a reason's tail,
        or None to keep listening. A scorer that reads text judges the words
        alone: words that read surely finished (p at the policy's eager
        level) end it now, words that read finished, or that end in a run of
        digits or letters being read out, at :data:`STALLED_MS` of wordless
        speech, other words that read unfinished at :data:`STALLED_OPEN_MS`
        (:data:`STALLED_MS` when there is no text verdict)."""
        assert self._wordless_ms is not None
        if self._wordless_ms >= STALLED_OPEN_MS - 1e-6:
            return ""
        if self.own_voice():
            return None
        due, why = STALLED_MS, ""
        if self._reads_text:
            score = await self._ask(self._evidence(self._pauses + 1, self.clock.now(), True))
            due, why = self._stall_due(policy, score.p)
        return why if self._wordless_ms >= due - 1e-6 else None

    def _stall_due(self, policy: WaitPolicy, p: float | None) -> tuple[float, str]:
        """How much wordless speech ends a stalled turn whose words read
        ``p`` (the text scorer's, on the words alone; None: no verdict), and
        the reason's tail: :data:`STALLED_SURE_MS` for words that read surely
        finished (p at the policy's eager level), :data:`STALLED_MS` for
        words that read finished or end in a read-out run (and without a
        verdict), :data:`STALLED_OPEN_MS` for other words. Read by the end
        (:meth:`_stall_verdict`) and by the draft ahead of it
        (:meth:`_maybe_stall_draft`)."""
        if p is None:
            return STALLED_MS, ""
        if policy.eager is not None and p >= policy.eager:
            return STALLED_SURE_MS, f" (words read finished, p={p:.2f})"
        if policy.reads_finished(p):
            return STALLED_MS, f" (words read finished, p={p:.2f})"
        if in_digit_run(self.turn_text()):
            # A code of unknown length reads undecided at every chunk, its
            # last one too ("b as in boy seven two five": 0.27 to 0.56 over
            # three fine-tunes): its reading is no sign of a drawn-out filler,
            # and STALLED_MS is already past the digit run's own ceiling.
            return STALLED_MS, f" (a read-out run, p={p:.2f})"
        return STALLED_OPEN_MS, ""

    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        out: list[SystemFrame] = []
        frame_ms = 1000.0 * len(frame.audio) / frame.sample_rate
        # A frame with speech in it moves the VAD's speech end to its own end.
        speaking = vad.speech_end > frame.at + 1e-9
        self._streaming.audio(speaking, self.clock.now())
        if self._stalled:
            self._stall_quiet_ms = 0.0 if vad.speaking else self._stall_quiet_ms + frame_ms
            if self._stall_quiet_ms < STALL_CLEAR_MS - 1e-6:
                # The sound the turn was ended through goes on (with gaps):
                # not the caller, whose next words open the turn.
                if self._audio is not None:
                    self._audio.push(frame, vad, False)
                return out
            self._stalled = False
        if vad.speaking and self.turn_open and self._wordless_ms is not None:
            # Levels for the stalled-words rule: model detectors only; the
            # wordless sound's are read no further than STALLED_OPEN_MS,
            # where the rule ends the turn whatever they say.
            if self.scorer is not None:
                db = frame_energy_db(frame.audio, frame.sample_rate)
                if db > SILENT_DB:
                    self._recent_db.append((frame.at + frame_ms / 2000.0, db))
                    if self._wordless_ms < STALLED_OPEN_MS:
                        self._wordless_db.append(db)
            self._wordless_ms += frame_ms
        opening = vad.speaking and not self.turn_open
        if vad.speaking:
            self._late_for = None  # words still owed are the new turn's now
            if self.signalled:
                out.append(TurnResumedFrame(at=self.clock.now(), detector=self.spec))
                self.signalled = False
            self.turn_open = True
        if self._audio is not None:
            self._audio.push(frame, vad, opening)
        self._quiet = not speaking
        self._speech_end = vad.speech_end
        if self._early_at is not None and vad.speech_end > self._early_at + 1e-9:
            # The caller went on before the pause was confirmed.
            self._early_at = None
            if not self.signalled:
                out.append(TurnResumedFrame(at=self.clock.now(), detector=self.spec))
        if vad.speaking:
            self._pause = None  # speech again: the pending pause is void
            now = self.clock.now()
            out += await self._maybe_stall_draft()
            if self.stalled():
                policy = self.policy()
                verdict = await self._stall_verdict(policy)
                if verdict is not None:
                    stall = _Pause(speech_end=now, number=self._pauses + 1)
                    self._pauses += 1
                    self._stalled = True
                    self._stall_quiet_ms = 0.0
                    why = f"no new words in {self._wordless_ms:.0f} ms of speech{verdict}"
                    end = self._commit(
                        stall, 0.0, policy.max_wait_ms, policy, why=why, through_sound=True
                    )
                    # The caller's speech ended with their last word, not
                    # with the sound the turn was ended through (a crowd,
                    # a television): a host judging how long ago the
                    # caller spoke (an "uh-huh" over the agent's reply, is
                    # it owed an answer when the reply ends?) reads that.
                    if 0.0 < self.spoken_until < now:
                        end.speech_end = self.spoken_until
                    out.append(end)
                    return out
            out += await self._maybe_early()
            await self._maybe_prelook(vad)
            return out
        if not self.turn_open:
            return out
        now = self.clock.now()
        # The speech this pause follows ends at the VAD's speech end, or
        # later where words it did not hear opened the turn.
        speech_end = vad.speech_end
        if self._heard_end is not None:
            speech_end = max(speech_end, self._heard_end)
        pause = self._pause
        if pause is None or pause.speech_end != speech_end:
            pre, self._pre = self._pre, None
            if pre is not None and pre.speech_end == speech_end:
                # The hangover's look was at this very pause: its verdict
                # (and its cost, still running or done) stands.
                pause = self._pause = pre
            else:
                self._pauses += 1
                pause = self._pause = _Pause(speech_end=speech_end, number=self._pauses)
            if self._early_at is not None:
                # The early eager's draft is out for this pause.
                self._early_at = None
                pause.eager_text = self._early_text
                self.signalled = True
            if pause is not pre:
                await self._look(pause, now)
            elif self._reads_text and pause.text != self.judged_text():
                await self._look(pause, now)  # words arrived since the hangover's look
        elif self._reads_text and pause.text != self.judged_text():
            await self._look(pause, now)  # words arrived during the pause
        policy = self.policy()
        wait = policy.wait_ms(pause.score)
        silent_ms = (now - speech_end) * 1000
        owed = self.words_owed_ms(speech_end)
        if owed > 0 and silent_ms < policy.max_wait_ms - 1e-6:
            # The recogniser has not written the speech's last words yet:
            # "from chicago" judged as the turn while its "and" is on the
            # way. Wait for them (as late as the recogniser usually is),
            # within the ceiling; when they come the pause is looked at anew.
            wait = max(wait, min(owed, policy.max_wait_ms))
        if self._wordless():
            # A recogniser that writes the caller's words as they speak has
            # written none for this new turn: a held "ummm" it drops (most
            # do by default) before the words, a cough, a laugh. However
            # finished the audio sounds, that is not a turn the agent can
            # answer yet: the ceiling, as for any turn without text evidence.
            wait = max(wait, policy.max_wait_ms)
        segment_owed = self.words_owed_by_segment()
        if segment_owed:
            if silent_ms >= wait - 1e-6:
                pause.segment_waited = True  # due, but for the words
            # Its own ceiling, not the policy's: the words' time is the STT's.
            wait = max(wait, self.segment_wait_ms)
        p = pause.score.p if pause.score is not None else None
        # Whether this pause can still send its eager signal: a score, none
        # sent yet for these words, and not while the last speech's words
        # are owed.
        can_signal = not segment_owed and p is not None and self._may_signal(pause)
        # With a drafting host, a commit due before a draft sent now could
        # have its first token (due now included) drafts first: the reply
        # comes as soon, and the caller has that long to go on uncut. Only
        # where the signal that starts that draft goes out (below): a commit
        # put off for a draft never asked for never came.
        draft_first = can_signal and self._commit_due(wait - silent_ms)
        if (
            silent_ms >= wait - 1e-6
            and not draft_first
            and not self._draft_holds(now, frame_ms / 1000.0)
        ):
            waited = pause.segment_waited
            end = self._commit(pause, silent_ms, wait, policy)
            if waited:
                self.segment_waits += 1
                end.reason += " (waited for the last speech's words)"
            if segment_owed:
                self.segment_timeouts += 1
                end.reason += f" (no words for the last speech in {silent_ms:.0f} ms: STT p99)"
            out.append(end)
            return out
        if can_signal and (
            draft_first or (policy.eager is not None and p is not None and p >= policy.eager)
        ):
            pause.eager_text = self.judged_text()
            self.signalled = True  # speech after this yields TurnResumedFrame
            # Only the part of the look's cost still running delays the
            # signal (as for a commit): a look taken in the hangover is done.
            pending = max(0.0, (pause.ready_at - now) * 1000)
            out.append(
                TurnEagerFrame(at=now, detector=self.spec, probability=p, compute_ms=pending)
            )
        return out

    # -- internals -----------------------------------------------------------
    def _evidence(self, number: int, now: float, text_only: bool = False) -> Evidence:
        audio = None
        if self._audio is not None and not text_only:
            ring = self._audio
            audio = lambda: ring.turn_audio(now)  # noqa: E731 - read only if asked
        return Evidence(
            pause=number,
            text=self.judged_text(),
            agent_text=self.agent_text,
            audio=audio,
            text_only=text_only,
            history=list(self.history),
            timed=self.compute == "measured",
        )

    def _charge(self, score: Score) -> float:
        if self.compute == "none":
            return 0.0
        return score.fixed_ms if self.compute == "fixed" else score.compute_ms

    async def _look(self, pause: _Pause, now: float) -> None:
        pause.text = self.judged_text()
        pause.at = now
        if self.scorer is None:
            pause.score, pause.cost_ms = None, 0.0
            return
        self.scores += 1
        pause.score = await self._ask(self._evidence(pause.number, now))
        pause.cost_ms = self._charge(pause.score)
        pause.ready_at = max(pause.ready_at, now) + pause.cost_ms / 1000

    async def _maybe_prelook(self, vad: VADStep) -> None:
        """The first look at a pause, taken in the VAD's hangover
        (:data:`PRELOOK_MS` of silence, before the stop is confirmed) so the
        model's cost overlaps the hangover. Void if the caller goes on."""
        if self.scorer is None or not self.turn_open or not self._quiet:
            return
        pre = self._pre
        if pre is not None and pre.speech_end == vad.speech_end:
            return  # already looked at this silence
        now = self.clock.now()
        if (now - vad.speech_end) * 1000 < PRELOOK_MS - 1e-6:
            return
        # The number the pause will carry once confirmed (scorers cache on it).
        self._pauses += 1
        pre = self._pre = _Pause(speech_end=vad.speech_end, number=self._pauses)
        await self._look(pre, now)

    async def _ask(self, ev: Evidence) -> Score:
        """The scorer's verdict; a scorer that raises is a failed look (the
        fallback wait decides), never a pause left open for good."""
        assert self.scorer is not None
        try:
            return await self.scorer.score(ev)
        except Exception as exc:
            if not self._scorer_failed:
                self._scorer_failed = True
                log.warning(
                    "%s: scorer failed (%s: %s); deciding on silence",
                    self.spec,
                    type(exc).__name__,
                    exc,
                )
            return Score(None, error=f"{type(exc).__name__}: {exc}")

    async def _maybe_early(self) -> list[SystemFrame]:
        """An eager signal on the words alone, at the first quiet moment after
        the caller's last word, before the VAD's stop hysteresis confirms the
        pause and before any audio model has run."""
        scorer = self.scorer
        if (
            scorer is None
            or not scorer.reads_text
            or not self.turn_open
            or not self._quiet
            or self._pause is not None
            or self._early_at is not None
        ):
            return []
        policy = self.policy()
        text = self.judged_text()
        if not policy.early_eager or policy.eager is None or not text:
            return []
        score = await self._ask(self._evidence(self._pauses + 1, self.clock.now(), True))
        if score.p is None or score.p < policy.eager:
            return []
        self._early_at = self._speech_end
        self._early_text = text
        return [
            TurnEagerFrame(
                at=self.clock.now(),
                detector=self.spec,
                probability=score.p,
                compute_ms=self._charge(score),
            )
        ]

    def _may_signal(self, pause: _Pause) -> bool:
        """Whether ``pause`` may send an eager signal: none sent yet, or one
        sent for other words, where the last of them began before the pause
        (by its word times: the recogniser wrote the speech's last word
        after the first quiet frame, or after the pause's first look): that
        draft answers words the turn no longer ends on, and a commit with
        none out waits for a fresh request. A word begun after the pause's
        start is the caller going on (the VAD hears it a few frames later):
        it does not spend another of the turn's drafts; nor do words
        without times."""
        if pause.eager_text is None:
            return True
        if pause.eager_text == self.judged_text():
            return False
        start = self._last_word_start
        return start is not None and start < pause.speech_end

    def _draft_holds(self, now: float, frame_s: float = 0.0) -> bool:
        """A draft is out and has no first token yet (no first audio, with
        preemptive TTS): a commit now would bring the reply no sooner (its
        words come when they come), while a caller going on before then
        would be cut off. So the commit waits for it (a longer wait of the
        policy's stands).

        ``frame_s``: the host's frame, the step at which a commit can land.
        The commit lands on the last frame that ends by the draft's first
        token (audio), not the first one after it: a commit up to a frame
        before it brings the reply no later (it comes with the token), and
        one a frame after delays it by the rest of that frame (12 ms in the
        median on 32 ms frames)."""
        ready = self.drafts.ready_at(self.turn_text()) if self.drafts is not None else None
        if ready is None:
            return False
        if frame_s <= 0.0:
            return now < ready - 1e-9
        return now + frame_s <= ready + 1e-9

    def _commit_due(self, left_ms: float) -> bool:
        """The wait ends within a draft's time to its first token (audio): a draft
        sent now only brings that reply sooner (and one the caller talks
        over is dropped), so the pause sends its eager signal, where the host
        drafts on one (``DraftParams.drafts_on_eager``; LiveKit drafts on
        its own evidence, and a signal it ignores would only cost a frame)."""
        if self.drafts is None or not self.drafts.params.drafts_on_eager or not self.turn_text():
            return False
        if self.drafts.ready_at(self.turn_text()) is not None:
            return False  # a draft for these words is out (kept through a sound)
        lead = self.drafts.hold_ms
        return lead > 0.0 and left_ms <= lead + 1e-6

    def _commit(
        self,
        pause: _Pause,
        silent_ms: float,
        wait: float,
        policy: WaitPolicy,
        why: str | None = None,
        through_sound: bool = False,
    ) -> TurnEndFrame:
        score = pause.score
        # The scorer ran when the pause began (or when its words last
        # changed); only the part of its cost still running now delays the
        # decision — all of it right after, none when a timer fires later.
        pending = max(0.0, (pause.ready_at - self.clock.now()) * 1000)
        p = score.p if score is not None else None
        if why is not None:
            reason = why
        elif score is not None and score.error is not None:
            self.fallbacks += 1
            reason = f"fallback: {score.error} (after {silent_ms:.0f} ms silence)"
        elif p is None:
            what = getattr(self.scorer, "no_evidence", "") if self.scorer is not None else ""
            reason = (
                f"{what} after {silent_ms:.0f} ms silence"
                if what
                else f"{silent_ms:.0f} ms silence"
            )
        else:
            parts = ", ".join(f"{k}={v:.2f}" for k, v in score.parts.items()) if score else ""
            verdict = (
                ("complete" if p >= policy.threshold else "incomplete")
                if policy.mode == "threshold"
                else f"wait {wait:.0f} ms"
            )
            reason = f"p={p:.2f} {verdict}" + (f" ({parts})" if parts else "")
            reason += f" after {silent_ms:.0f} ms silence"
        if self._describe is not None:
            reason += self._describe(reason)
        if pause.cost_ms >= 0.5:
            reason += f" (model {pause.cost_ms:.0f} ms)"
        self.turn_open = False
        self.signalled = True
        # An acknowledgement ("yeah", "okay") does not take the floor: said
        # over the agent, the agent goes on, and the caller's next sound is
        # a new turn, not this one going on (a reply to it is the agent's
        # new text, which marks the same).
        self._agent_since_commit = is_backchannel(self.turn_text())
        if self.turn_text():
            self._remember("user", self.turn_text())
        # Words spoken up to here belong to the turn just ended; words that
        # arrive later (even within this frame) are the next turn's. "Here"
        # is the VAD's speech end, or the last word's end where the
        # recogniser stamps it later (a word's end runs past the VAD's by
        # tens of ms; words spread over a host VAD's span): no word of the
        # next turn can end before this commit, and a transcript left
        # reading as the next turn's words judged that turn's first pause
        # on this one's text.
        self.decided_until = max(pause.speech_end, min(self.spoken_until, self.clock.now()))
        # A recogniser that writes runs whole may still owe words of the
        # speech just decided (see _late_words).
        self._late_for = pause.speech_end if self.writes_whole_runs else None
        self._pause = None
        self._wordless_ms = None
        self._wordless_db = []
        self._heard_end = None
        if self._audio is not None:
            self._audio.turn_start = None
        return TurnEndFrame(
            at=self.clock.now(),
            detector=self.spec,
            probability=p,
            compute_ms=pending,
            reason=reason,
            speech_end=pause.speech_end,
            through_sound=through_sound,
        )
