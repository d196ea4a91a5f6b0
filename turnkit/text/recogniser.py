"""Whether the recogniser streams: writes the caller's words while they speak.

A streaming recogniser (Deepgram, a live interim transcript) sends new words
mid-speech; one that writes a segment only once the VAD stops (Whisper
behind a VAD), or only finals at its own endpoint, sends none there. Only
with the first does long speech with no new word mean something: another
voice behind the caller (a television, an office) or a sound with no words.
The endpointing (its stalled-words end, its wordless new turn) and the
barge-in controller (no confirm by length alone) both read it from
:class:`StreamingWatch`; each host object says what counts as "speaking"
and "new words" for it. The endpointing also reads whether a recogniser
that writes whole runs has written the latest one yet (``segmented``,
``behind``): until it has, the transcript is the turn as it stood before
that run.

:class:`WordLag` says how long after the caller's speech begins its first
words arrive (the first word's length plus the recogniser's delay), and how
long after a run of speech ends its last words do (the delay itself): the
barge-in controller takes its early hold, which waits for the words, only
while they come in time for it.

The evidence is two updates with new words inside one run of speech (no
pause between them), not one update that merely lands while the caller
speaks: a segment recogniser's words arrive some 0.3-0.6 s after the pause
that closed their segment, and a caller who paused only briefly is by then
speaking again (a live Pipecat agent with faster-whisper counted three such
updates in its first two turns and then ended a caller's turn for "no new
words" 1.2 s into their next sentence). Such a recogniser sends at most one
update per segment, so at most one per run of speech.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

__all__ = ["STREAMED_WORDS", "RecogniserKind", "StreamingWatch", "WordLag"]

RecogniserKind = Literal["streaming", "segmented"]

# Updates with new words, in runs of speech with more than one, before the
# recogniser counts as streaming (or, none in such a run, as writing whole runs).
STREAMED_WORDS = 3
# A write landing in the pause after a run, with the run before it unwritten
# too, sooner after that run's end than this share of the quickest write
# learnt so far, is the run before's: no recogniser that writes runs whole
# wrote the run just closed that fast ("No, | thanks.": "no" written 0.8 s
# after it, 0.07 s after the short "thanks" ended, was taken for its words).
EARLY_WRITE_SHARE = 0.5
# Writes timed against the one run they can be for, before that rule applies.
WRITE_SAMPLES = 2


class StreamingWatch:
    """Counts the recogniser's updates that brought new words in a run of
    speech that brought words in more than one update (the run's first
    update counts once the second comes); :attr:`streams` once
    ``STREAMED_WORDS`` have."""

    def __init__(self, declared: RecogniserKind | None = None) -> None:
        self.updates = 0
        self.total = 0  # updates with new words, wherever they came
        self._speaking = False
        self._run = 0  # runs of speech so far
        self._heard_in: int | None = None  # the run the last update came in
        self._alone = False  # ...and it was that run's only one so far
        self._written = 0  # runs the updates so far can have written
        self.declared = declared  # what the host says it runs
        self._run_end: float | None = None  # when the latest run ended (host's clock)
        self._write_s: deque[float] = deque(maxlen=16)  # run end to its write (s)

    def audio(self, speaking: bool, at: float | None = None) -> None:
        """The host's verdict on the caller's latest frame (``at``: its time,
        on the clock :meth:`written` is given)."""
        if speaking and not self._speaking:
            self._run += 1
        if not speaking and self._speaking:
            self._run_end = at
        self._speaking = speaking

    def written(self, at: float | None = None) -> None:
        """An update came, new words or not (a final repeating its interim);
        ``at``: when (the clock :meth:`audio` is given)."""
        # Landing inside a run, it is the runs before (a recogniser that
        # writes only once the VAD stops cannot have written the one going on).
        upto = self._run - 1 if self._speaking else self._run
        since = None if at is None or self._run_end is None else at - self._run_end
        if not self._speaking and since is not None:
            if self._run - self._written == 1:
                self._write_s.append(since)  # the one run it can be for
            elif self._run - self._written >= 2 and self._early(since):
                upto = self._run - 1
        self._written = max(self._written, upto)

    def _early(self, since: float) -> bool:
        """A write this soon after the latest run ended is too soon to be
        that run's (:data:`EARLY_WRITE_SHARE` of the quickest learnt)."""
        if len(self._write_s) < WRITE_SAMPLES:
            return False
        return since < EARLY_WRITE_SHARE * min(self._write_s)

    def heard(self) -> None:
        """An update with new words came."""
        self.total += 1
        if not self._speaking:
            self._heard_in = None
            return
        if self._heard_in == self._run:
            # The run's first update counts too, now that it has company.
            self.updates += 2 if self._alone else 1
            self._alone = False
        else:
            self._heard_in, self._alone = self._run, True

    @property
    def streams(self) -> bool:
        return self.updates >= STREAMED_WORDS

    @property
    def segmented(self) -> bool:
        """The recogniser writes a run once the VAD closed it (Whisper behind
        a VAD): the host said so, or ``STREAMED_WORDS`` updates have brought
        words and never two in one run of speech. Not once it streams."""
        if self.streams:
            return False
        return self.declared == "segmented" or (self.total >= STREAMED_WORDS and self.updates == 0)

    @property
    def behind(self) -> bool:
        """The latest run of speech has had no words written for it: none
        came in the pause after it, and one that came while it went on was,
        for a recogniser that writes only once the VAD stops, the runs
        before."""
        return self._written < self._run


# Onsets timed before :class:`WordLag` says how late words come.
LAG_SAMPLES = 3
# A sound no words came for within this long after it ended (a cough, a
# line noise, words the recogniser dropped) times nothing.
LAG_GIVE_UP_S = 1.5
# A run of speech followed by at least this much quiet times how late its
# last words came after it ended (WordLag.after_s); one the caller went on
# from sooner does not (its last words may come after the next onset, among
# the next run's). Caller turns and backchannels are followed by more.
AFTER_QUIET_S = 0.6
# Words written this soon after the VAD closed their run came in time: the
# VAD's verdicts and a host's transcripts both land on its 32 ms frames.
IN_TIME_S = 0.04


class WordLag:
    """How long after the caller's speech begins the recogniser's first
    words for it arrive: the median over their latest onsets (a streaming
    recogniser on the wire: the first word's length plus its delay; one that
    writes whole runs: the run plus the model's time). Read where a decision
    waits for words (the barge-in controller's early hold)."""

    def __init__(self, keep: int = 15) -> None:
        self._lags: deque[float] = deque(maxlen=keep)
        self._after: deque[float] = deque(maxlen=keep)
        self._onset: float | None = None  # the oldest onset no words came for yet
        self._last_speech: float | None = None
        # The latest run of speech: its end once the VAD closed it, and when
        # words last came since its onset.
        self._run_open = False
        self._run_end: float | None = None
        self._run_words: float | None = None

    def audio(self, started: bool, onset: float, speaking: bool, speech_end: float, now: float) -> None:
        """One VAD verdict: ``started`` confirms speech from ``onset``."""
        if started:
            self._end_run(onset)
            self._run_open, self._run_end, self._run_words = True, None, None
        if started and self._onset is None:
            self._onset = onset
        if self._run_open and not speaking and self._run_end is None:
            self._run_end = speech_end
        if self._run_end is not None and now - self._run_end > LAG_GIVE_UP_S:
            self._end_run(None)
        if speaking:
            self._last_speech = speech_end
        elif (
            self._onset is not None
            and self._last_speech is not None
            and now - self._last_speech > LAG_GIVE_UP_S
        ):
            self._onset = None

    def words(self, now: float) -> None:
        """New words came."""
        if self._onset is not None:
            self._lags.append(max(0.0, now - self._onset))
            self._onset = None
        if self._run_open:
            self._run_words = now

    def _end_run(self, next_onset: float | None) -> None:
        """The latest run is over for timing (``next_onset``: speech again,
        else given up): its last words' delay after its end, where words
        came for it and the quiet after it was long enough."""
        end, words = self._run_end, self._run_words
        quiet = next_onset is None or (end is not None and next_onset - end >= AFTER_QUIET_S)
        if self._run_open and end is not None and words is not None and quiet:
            # Words written before the VAD closed the run, or within a
            # frame of it, came in time (0).
            late = words - end
            self._after.append(late if late > IN_TIME_S else 0.0)
        self._run_open, self._run_end, self._run_words = False, None, None

    @property
    def lag_s(self) -> float | None:
        """The median lag, once :data:`LAG_SAMPLES` onsets have been timed."""
        if len(self._lags) < LAG_SAMPLES:
            return None
        return float(sorted(self._lags)[len(self._lags) // 2])

    @property
    def after_s(self) -> float | None:
        """How long after a run of speech ends (where the VAD heard it end)
        its last words come: the recogniser's delay on a word, less the
        VAD's trail past the word's end. The lower median over the latest
        runs followed by quiet (a caller's turn, a backchannel), from the
        first (most calls have one turn before the agent's first reply);
        None before. Lower: a run the VAD closed early (a soft last
        syllable) times words later than they came, never sooner."""
        if not self._after:
            return None
        return float(sorted(self._after)[(len(self._after) - 1) // 2])
