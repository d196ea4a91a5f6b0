"""The replay's stand-in for a streaming recogniser: the manifest's words,
revealed as they are spoken plus a transcription delay.

Word times come from a turn's ``words`` where given; otherwise the words of
its ``text`` are placed over its speech spans as they were likely said
(:func:`_spread`: by how long each takes to say, a pause preferred at a
clause's end; a word never straddles a hold).

Two kinds of recogniser (``--stt``): ``streaming`` (Deepgram, a live interim
transcript) writes each word ``delay`` after it is said, with its times;
``segmented`` (Whisper behind a VAD: Pipecat's ``WhisperSTTService``, the
example agent's) writes each run of speech whole once the VAD has closed it
and the model has run (``delay``), with no word times: a host stamps such a
transcript with its arrival, as the replay then does. The runs are the ones
the session's VAD hears in the caller's audio (:func:`vad_runs`): where it
splits a labelled run at a short pause, each part's words come once that
part is closed, as a live recogniser behind it writes them. A number read
out and written as one token ("1223247942") is revealed digit by digit, as
a streaming recogniser writes it. Text is normalised as a streaming
recogniser emits it: lower case, no punctuation except in-word apostrophes
and hyphens.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

import numpy as np

from turnkit.audio import FRAME_SAMPLES, SAMPLE_RATE
from turnkit.audio.timeline import AudioTimeline
from turnkit.audio.vad import VADAnalyzer, VADParams
from turnkit.barge_in.echo import EchoFilter
from turnkit.clock import VirtualClock
from turnkit.frames import AudioInFrame, Frame, TranscriptFrame, Word
from turnkit.pipeline import FrameDirection, FrameProcessor
from turnkit.replay.recording import Recording
from turnkit.text.normalize import normalize_text, strip_annotations
from turnkit.text.numerals import READ_OUT_DIGITS, spoken_number
from turnkit.text.spoken_length import pause_units, word_units

__all__ = [
    "OracleTranscriber",
    "SpeechRun",
    "TimedWord",
    "normalize_text",
    "oracle_words",
    "schedule",
    "vad_runs",
]

# How far past a run's labelled end a VAD like the replay's (Silero, 0.5)
# hears it go on: a word's fading end. Median over the demo corpus's span
# ends, 142 of them: 0.092 s (p10 0.059, p90 0.144); the held-out
# telephone set's tuning half: 0.076 s. Only for words no VAD run holds
# (a murmur under the threshold): a recogniser behind the VAD closes their
# run its stop time after that, not after the label.
VAD_TRAIL_S = 0.09
# How far from a VAD run a word's middle may lie and still be in it: the
# VAD's edges trail or lead a word's labelled edges by a frame or a few
# (its onset needs ``start_ms`` of speech; a fading end goes on).
RUN_REACH_S = 0.25


@dataclass(frozen=True, slots=True)
class SpeechRun:
    """One run of speech as a segmenting VAD hears it: its onset, its last
    speech frame's end, and when the VAD closed it (``stop_ms`` of quiet
    later), which is when a recogniser behind it gets the run's audio."""

    start: float
    end: float
    closed: float


def vad_runs(
    rec: Recording, params: VADParams | None = None, echo: EchoFilter | None = None
) -> list[SpeechRun]:
    """The runs of speech a VAD with ``params`` hears in the caller's audio
    behind ``echo`` (the session's echo filter, its reference set), on the
    frames every host's replay reads: the replay's own VAD, run ahead (a
    live recogniser is behind that VAD). The line stays quiet past the
    file's end until a run still open closes."""
    timeline = AudioTimeline(VirtualClock(), echo=echo, vad=VADAnalyzer(params=params))
    runs: list[SpeechRun] = []
    frame_s = FRAME_SAMPLES / SAMPLE_RATE
    at = 0.0

    def step(chunk: np.ndarray) -> None:
        vad = timeline.step(chunk, at).vad
        assert vad is not None
        if vad.stopped:
            runs.append(SpeechRun(vad.speech_start, vad.speech_end, at + frame_s))

    for start, chunk in rec.caller_frames(SAMPLE_RATE, FRAME_SAMPLES):
        at = start / SAMPLE_RATE
        step(chunk)
    silence = np.zeros(FRAME_SAMPLES, dtype=np.float32)
    while timeline.vad.speaking:
        at += frame_s
        step(silence.copy())
    return runs


def _run_of(word: TimedWord, runs: list[SpeechRun], starts: list[float]) -> int | None:
    """The VAD run that holds ``word`` (its middle inside, or the nearest
    within :data:`RUN_REACH_S`); None where no run is that near."""
    mid = 0.5 * (word.start + word.end)
    i = bisect.bisect_right(starts, mid) - 1  # the last run begun by its middle
    best: int | None = None
    gap = RUN_REACH_S
    for j in (i, i + 1):
        if 0 <= j < len(runs):
            r = runs[j]
            d = max(r.start - mid, mid - r.end, 0.0)
            if d <= gap:
                best, gap = j, d
    return best


@dataclass(frozen=True, slots=True)
class TimedWord:
    """One word of the labelled transcript with the time it was spoken
    (placed over its speech spans where it has none), the utterance it
    belongs to, and whether it ends its span (a recogniser's final-segment
    boundary)."""

    text: str
    start: float
    end: float
    segment: int  # utterance index (a caller turn or a backchannel)
    last_in_span: bool
    # The text replaces the segment's last word: the same word grown (an
    # interim "19" of "1984").
    grows: bool = False


# A pause inside a turn falls at a clause's end (a comma, a full stop in the
# transcript) more often than inside one; worth this much duration misfit
# (see :func:`_groups`). On the transcripts of the demo corpus and the
# real-call variants with their word times hidden, 172 pauses: the words
# said before each pause found exactly at 58.7 % with words spread evenly,
# 74.4 % by their spoken length alone, 84.3 % with this; the held-out
# turn-taking set, 174 pauses: 80.5, 81.6, 89.7 %.
CLAUSE_END_BONUS = 1.0


def _tokens(text: str) -> tuple[list[str], list[bool]]:
    """The normalised words of ``text`` and, for each, whether a clause ends
    after it in the transcript as written (``, ; : . ! ?`` or an ellipsis;
    none where the text has no punctuation, or where word-by-word
    normalising reads it otherwise)."""
    words: list[str] = []
    ends: list[bool] = []
    for raw in strip_annotations(text).split():
        said = normalize_text(raw).split()
        words += said
        if said:
            # A clause ends where the punctuation asks for a pause (the
            # truncation's reading of the same marks).
            ends += [False] * (len(said) - 1) + [pause_units(raw) > 0]
    whole = normalize_text(text).split()
    if words != whole:
        return whole, [False] * len(whole)
    return words, ends


def _groups(
    units: list[float], ends: list[bool], spans: list[tuple[float, float]], reach: float = 3.0
) -> list[int]:
    """Where each span's words begin: the split of the words, in order, into
    one run per span that best fits the spans' lengths.

    Each span should hold its share of the words' spoken length (units at
    the turn's own rate); a misfit costs ``(got - want)² / want`` (a span's
    length varies with how much is said in it), and a split at a clause's
    end earns :data:`CLAUSE_END_BONUS`. Dynamic programming over the splits:
    a word never straddles a pause. A span is not offered more than
    ``reach`` times its share (a bound on the search, lifted if nothing
    fits within it)."""
    n, m = len(units), len(spans)
    total = sum(units)
    length = sum(e - s for s, e in spans)
    want = [(e - s) / length * total for s, e in spans]
    before = [0.0]
    for u in units:
        before.append(before[-1] + u)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(m + 1)]
    back = [[0] * (n + 1) for _ in range(m + 1)]
    best[0][0] = 0.0
    for j in range(1, m + 1):
        w = max(want[j - 1], 1e-6)
        for i in range(n + 1):
            bonus = CLAUSE_END_BONUS if j < m and 0 < i < n and ends[i - 1] else 0.0
            for k in range(i, -1, -1):
                got = before[i] - before[k]
                if got > reach * w + 4:
                    break
                if best[j - 1][k] == inf:
                    continue
                # An empty span (fewer words than spans) fits worst of all.
                cost = (got - w) ** 2 / w if got > 0 else 1e6 + w
                c = best[j - 1][k] + cost - bonus
                if c < best[j][i]:
                    best[j][i], back[j][i] = c, k
    if best[m][n] == inf:
        return _groups(units, ends, spans, reach=inf)
    firsts = [0] * m
    i = n
    for j in range(m, 0, -1):
        i = back[j][i]
        firsts[j - 1] = i
    return firsts


def _spread(
    words: list[str], spans: list[tuple[float, float]], ends: list[bool] | None = None
) -> list[tuple[str, float, float, int]]:
    """``words`` placed over ``spans``, in order; returns (word, start, end,
    span index). Each span gets the run of words that best fits its length
    (:func:`_groups`; ``ends``: a clause ends after the word), and inside a
    span each word lasts its spoken length (:func:`word_units`), stretched
    to fill the span: a transcript without word times, placed as it was
    most likely said."""
    if not words or sum(e - s for s, e in spans) <= 0:
        return []
    units = [max(word_units(w), 1e-3) for w in words]
    firsts = [*_groups(units, ends or [False] * len(words), spans), len(words)]
    out = []
    for j, (s, e) in enumerate(spans):
        lo, hi = firsts[j], firsts[j + 1]
        size = sum(units[lo:hi])
        t = s
        for k in range(lo, hi):
            step = (e - s) * units[k] / size
            out.append((words[k], t, min(e, t + step), j))
            t += step
    return out


def _read_out(
    digits: str, start: float, end: float, spans: list[tuple[float, float]]
) -> list[tuple[str, float, float, int]]:
    """A number read out digit by digit and written as one token
    ("1223247942" over 5 s, pauses between its groups): a streaming
    recogniser writes its digits as they are said, so they are revealed
    one by one, spread over the speech inside the token's time; revealed
    whole at its end, the caller would sound like speech without words for
    seconds (a stalled recogniser, which ends the turn) and the turn's text
    would not read as a digit run through the pauses between groups."""
    inside = [
        (max(s, start), min(e, end), i) for i, (s, e) in enumerate(spans) if s < end and e > start
    ]
    if not inside:
        return [(digits, start, end, len(spans) - 1)]
    spread = _spread(list(digits), [(s, e) for s, e, _ in inside])
    return [(d, s, e, inside[k][2]) for d, s, e, k in spread]


def _said_first(digits: str) -> tuple[float, str] | None:
    """A number of two to four digits said in more than one word ("1984":
    nineteen eighty four) as a streaming recogniser first writes it: the
    digits of its first part ("19") and the share of the number's words
    said by then; None for a number said in one word ("15") or not such a
    token. Written whole at its end, its first part's pause-free speech
    would have no words to show (the stalled-words rule ends a turn after
    0.8 s of that) and the turn's text would read as before the number."""
    if not (2 <= len(digits) <= 4 and digits.isdigit()) or digits[0] == "0":
        return None
    said = spoken_number(digits)
    if len(said) < 2:
        return None
    if len(digits) == 2:  # "45": forty | five
        part = digits[0] + "0"
    elif said[1] == "thousand":  # "2005": two | thousand five
        part = digits[0]
    else:  # "930": nine | thirty, "1984": nineteen | eighty four
        part = digits[: len(digits) - 2]
    first = len(spoken_number(part))
    return first / len(said), part


def oracle_words(rec: Recording) -> list[TimedWord]:
    """Every caller word with its time, caller turns and backchannels."""
    out: list[TimedWord] = []
    segment = 0
    for turn in rec.caller_turns:
        spans = turn.speech_spans()
        grown: set[int] = set()  # indices of words that grow the one before
        if turn.words:
            timed = []
            for w in turn.words:
                text = normalize_text(w.text)
                if not text:
                    continue
                # A word may reach past its turn (recording.WORD_REACH_S):
                # it is said inside it.
                start = min(max(w.start, turn.start), turn.end)
                if text.isdigit() and len(text) >= READ_OUT_DIGITS:
                    timed += _read_out(text, start, max(start, min(w.end, turn.end)), spans)
                    continue
                idx = next(
                    (i for i, (s, e) in enumerate(spans) if start < e + 1e-6), len(spans) - 1
                )
                # Said by the end of its span: the labels hold no speech in
                # the hold after it. Word times that run on to the next
                # word (as many aligners and recognisers write them) would
                # have the last word before a pause written only as the
                # caller goes on, at the pause's end.
                end = max(start, min(w.end, spans[idx][1]))
                head = _said_first(text)
                if head is not None:
                    share, part = head
                    timed.append((part, start, start + share * (end - start), idx))
                    grown.add(len(timed))
                timed.append((text, start, end, idx))
        else:
            said, ends = _tokens(turn.text)
            timed = _spread(said, spans, ends)
        for j, (text, s, e, span) in enumerate(timed):
            last = j == len(timed) - 1 or timed[j + 1][3] != span
            out.append(TimedWord(text, s, e, segment, last, j in grown))
        segment += 1
    for bc in rec.backchannels:
        timed = _spread(normalize_text(bc.text).split(), [(bc.start, bc.end)])
        for j, (text, s, e, _) in enumerate(timed):
            out.append(TimedWord(text, s, e, segment, j == len(timed) - 1))
        segment += 1
    out.sort(key=lambda w: (w.end, w.start))
    return out


class OracleTranscriber(FrameProcessor):
    """Emits a :class:`TranscriptFrame` once a word's ``end + delay`` has
    passed on the clock (checked as each audio frame goes by).

    Words of one segment revealed by the same audio frame go out in one
    frame (the latest text), as a streaming recogniser's interim result
    would carry them; a word that closes a speech span always gets its own
    final frame, and segments keep their order. One frame per word made a
    long turn quadratic: each frame carries the turn's whole text and word
    list, and a hostile 480 KB turn revealed thousands of words per audio
    frame."""

    def __init__(
        self,
        words: list[TimedWord],
        delay_s: float = 0.0,
        jitter_s: float = 0.0,
        seed: int = 0,
        *,
        segmented: bool = False,
        close_s: float = 0.0,
        runs: list[SpeechRun] | None = None,
    ) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.segmented = segmented
        self._words, self._due = schedule(
            words, delay_s, jitter_s, seed, segmented=segmented, close_s=close_s, runs=runs
        )
        self._next = 0
        # Per segment: its words and its text so far (extended, not rebuilt).
        self._text: dict[int, tuple[list[Word], str]] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await self.push_frame(frame, direction)
        if not isinstance(frame, AudioInFrame):
            return
        now = frame.end
        run: list[TimedWord] = []  # revealed, not yet sent: one segment's, in order
        due = 0.0
        while self._next < len(self._words) and self._due[self._next] <= now + 1e-9:
            w = self._words[self._next]
            if run and run[-1].segment != w.segment:
                await self._send(run, due)
                run = []
            due = self._due[self._next]
            self._next += 1
            run.append(w)
            if w.last_in_span and not self.segmented:
                await self._send(run, due)
                run = []
        if run:
            await self._send(run, due)

    async def _send(self, run: list[TimedWord], due: float) -> None:
        """One frame for ``run`` (consecutive words of one segment revealed
        by one audio frame), available when its last word was due."""
        last = run[-1]
        seg, text = self._text.get(last.segment, ([], ""))
        if any(w.grows for w in run):
            # A word grown (an interim "19" become "1984"): rebuilt, rare.
            for w in run:
                if w.grows and seg:
                    seg.pop()
                seg.append(Word(text=w.text, start=w.start, end=w.end))
            text = " ".join(w.text for w in seg)
        else:
            seg.extend(Word(text=w.text, start=w.start, end=w.end) for w in run)
            new = " ".join(w.text for w in run)
            text = f"{text} {new}" if text else new
        self._text[last.segment] = (seg, text)
        if self.segmented:
            # No word times: stamped with its arrival, as a host stamps it.
            frame = TranscriptFrame(at=due, text=text, is_final=True, spoken_until=due)
        else:
            frame = TranscriptFrame(
                at=due,
                text=text,
                is_final=last.last_in_span,
                spoken_until=last.end,
                words=list(seg),
            )
        await self.push_frame(frame)


def schedule(
    words: list[TimedWord],
    delay_s: float = 0.0,
    jitter_s: float = 0.0,
    seed: int = 0,
    *,
    segmented: bool = False,
    close_s: float = 0.0,
    runs: list[SpeechRun] | None = None,
) -> tuple[list[TimedWord], list[float]]:
    """``words`` in the order a recogniser writes them, and when each goes
    out: ``delay_s`` after it ends (``segmented``: after the VAD closed its
    run of speech, ``runs`` from :func:`vad_runs`; a run's words together),
    plus up to ``jitter_s`` more (a recogniser over a network: some results
    come late; seeded), never before the word ahead of it (results come in
    order). A segmented word no VAD run holds, or every word where ``runs``
    is None, goes out with its labelled run: its end as a VAD hears it
    (:data:`VAD_TRAIL_S` past the label) plus ``close_s``, the VAD's stop
    time. Every host's replay reveals the words by this one schedule."""
    ordered = sorted(words, key=lambda w: w.end + delay_s)
    rng = random.Random(seed)

    def late() -> float:
        return rng.uniform(0.0, jitter_s) if jitter_s > 0 else 0.0

    due: list[float] = []
    labelled = _runs(ordered) if segmented else None
    heard_runs = runs or []
    starts = [r.start for r in heard_runs]
    run_due: dict[tuple[int, int], float] = {}
    for i, w in enumerate(ordered):
        if labelled is None:
            at = w.end + delay_s + late()
        else:
            heard = _run_of(w, heard_runs, starts)
            if heard is not None:
                key: tuple[int, int] = (-1, heard)
                closed = heard_runs[heard].closed
            else:
                key, end = labelled[i]
                closed = end + VAD_TRAIL_S + close_s
            if key not in run_due:
                run_due[key] = closed + delay_s + late()
            at = run_due[key]
        due.append(max(at, due[-1]) if due else at)
    return ordered, due


def _runs(words: list[TimedWord]) -> list[tuple[tuple[int, int], float]]:
    """Per word (in ``words``' order), the run of speech it is in (its
    utterance and the run's number in it: words up to one that closes a
    span) and where that run ends."""
    order = sorted(range(len(words)), key=lambda i: (words[i].segment, words[i].start))
    key_of: dict[int, tuple[int, int]] = {}
    ends: dict[tuple[int, int], float] = {}
    open_run: dict[int, int] = {}  # utterance -> its open run
    for i in order:
        w = words[i]
        key = (w.segment, open_run.get(w.segment, 0))
        key_of[i] = key
        ends[key] = max(ends.get(key, w.end), w.end)
        if w.last_in_span:
            open_run[w.segment] = key[1] + 1
    return [(key_of[i], ends[key_of[i]]) for i in range(len(words))]
