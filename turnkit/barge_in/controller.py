"""The barge-in controller: one decision, every host.

While the agent talks (or is about to), is caller sound a bid for the floor?
:class:`BargeInController` answers with a typed :class:`Action` that the host
only executes (turnkit's :class:`~turnkit.barge_in.processors.BargeInProcessor`,
the replay's agent, the Pipecat and LiveKit plugins):

==================  ==========================================================
``keep``            nothing to do (no caller speech, an acknowledgement, echo)
``pause``           hold the agent's audio (or duck it): caller speech that
                    looks like a bid, no deciding word yet
``stop``            stop and flush the agent's audio: a bid, decided at once
``resume``          the pause was a false interruption: play on from where it
                    stopped
``confirm``         the paused bid is real: stop for good (flush the held
                    audio, stop generation)
``cancel_pending``  the caller spoke before the pending reply's first audio:
                    drop that reply (the caller went on)
==================  ==========================================================

Evidence, per caller speech segment (a VAD onset to its end, on audio that has
passed the echo filter, :class:`~turnkit.barge_in.echo.EchoFilter`):

* **audio, before words** (each 32 ms frame: :meth:`on_frame`): how long the
  speech has gone on (merging pauses under ``merge_gap_s`` inside a phrase);
  its energy against the caller's own speech level, learnt from their turns
  (far softer: a murmur, a breath, residual echo); its pitch contour
  (falling: an acknowledgement's shape); whether the VAD heard it break
  ("uh-huh"); where it falls in the agent's sentence (by the playback
  cursor's text offset, :meth:`on_agent_progress`, else elapsed time at a
  speaking rate): acknowledgements come at the agent's phrase boundaries,
  bids anywhere (:meth:`bid_score`). The sound's length counts from where
  its level rose over the line's (up to ``onset_back_s`` before the VAD's
  onset: a telephone band cuts off the consonant the VAD would have heard
  first). Speech of ``pause_after_s`` (0.2 s)
  that scores as a bid starts a *speculative* pause of at most ``hold_s``
  (0.12 s, under the 150 ms that is heard as the agent stopping; not
  taken when the caller's words typically come too late for it to wait
  for them, :attr:`BargeInParams.hold_word_lag_s`, learnt from their
  onsets by :class:`~turnkit.text.recogniser.WordLag`): quiet
  (``quiet_resume_s`` of it, inside this early hold: a closure begun
  before, the "ct" of "actually", is not the sound's end; or quiet at the
  hold's end) resumes; speech still going at
  its end, longer than a backchannel so far, makes the pause stand for the
  words to decide. Speech again after a held sound ("Sorry, | can I", or a
  doubled "yes | yes") holds again once it is ``restart_after_s`` long; speech
  past ``max_backchannel_s`` holds whatever the score (backchannels are
  0.2-0.6 s); each such hold stands only if the speech goes on through it,
  and after ``max_holds`` released holds only words decide. A short sound
  said well above the caller's typical pitch (learnt from their turns), or
  (``loud_db``, off by default) that many dB above their speech level, off
  the agent's phrase boundaries, keeps its first hold for the words
  (:meth:`raised`, :meth:`loud`: "Sorry, | ..." said up; an acknowledgement
  is said low, under the agent). A
  *faint* sound (:meth:`faint`: its voiced frames ``faint_db`` under the
  caller's level: residual echo the filter left, a murmur) gets its early
  hold only: no hold by its length, no confirm by length; its words
  decide. Once the words so
  far are acknowledgement words ("yes" of "yes yes", "oh" of "oh okay"),
  the audio no longer pauses: the next word decides.
* **words** (:meth:`on_transcript`, the recogniser's text of the caller's
  turn so far) confirm or clear it: any word outside the language's
  acknowledgement lexicon (:mod:`~turnkit.text.lexicon`) is a bid (a
  ``stop`` while talking, a ``confirm`` while paused), except a streaming
  prefix of a lexicon phrase ("i" of "i see", "got" of "got it"), which
  waits for the next word; more than
  ``max_backchannel_words`` lexicon words is a bid (unless one phrase:
  "thank you very much"); a lexicon word that
  answers a yes/no question the agent has already asked is a bid; lexicon
  words alone ("uh-huh", "okay") or a run of the agent's own recent words
  (:class:`~turnkit.barge_in.echo.EchoTranscriptCheck`) are not (``resume``
  if paused). Except at the agent's first audio: speech begun within
  ``launch_s`` of it was begun before the caller could hear the agent,
  most likely their own turn going on ("yeah | friday at nine"), so its
  acknowledgement words, arriving with the speech still going, pause the
  agent; ``launch_more_s`` more voiced speech confirms that pause as the
  stop, a frame the VAD hears as quiet releases it.
* **silence after a standing pause**: speech past ``confirm_after_s`` is a
  bid without words (``confirm``: no recogniser, or a language it cannot
  write), unless the recogniser streams (:attr:`streams`: it has written
  the caller's words as they spoke, so none in all that speech means
  another voice behind the caller: ``resume``); speech that ended with no
  deciding word for ``word_wait_s`` resumes (a cough, a long "mmm").
* **pending reply**: a speech onset while the host has a reply decided but
  not yet audible (:meth:`on_reply_pending`), or the detector saying the
  caller went on (:meth:`on_turn_resumed`): ``cancel_pending`` — unless the
  sound's voiced frames so far sit ``pending_faint_db`` under the caller's
  last committed turn (a television, an office under the line: speech to
  the VAD, not the caller going on).

``BargeInParams(filters=False)`` is the raw VAD baseline every stack ships
(``turnkit replay --no-filters``): any VAD speech onset while the agent talks
is a ``stop``; no pause, no resume, words ignored.

All times come from the injected clock; the controller keeps no threads and
no framework objects.

Example::

    ctl = BargeInController(clock, language="en")
    ctl.on_agent_started("Your order ships Friday.", at=clock.now())
    act = ctl.on_frame(frame.vad, frame.audio)   # each caller frame
    act = ctl.on_transcript(transcript)          # each transcript update
    if act is Action.PAUSE: hold_playback()
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from turnkit.audio.level import frame_energy_db
from turnkit.audio.vad import VADStep
from turnkit.barge_in.echo import EchoTranscriptCheck
from turnkit.clock import Clock
from turnkit.text.lexicon import (
    backchannel_phrases,
    is_answer,
    is_backchannel_prefix,
    tokens,
)
from turnkit.text.recogniser import StreamingWatch, WordLag

__all__ = ["Action", "BargeInController", "BargeInParams", "Evidence"]

# Voiced frames a turn needs before its level counts (0.16 s).
TURN_LEVEL_FRAMES = 5
# Frames kept to read where a sound rose (BargeInParams.onset_rise_db), and
# the least of them before it that give the line's level.
ONSET_FRAMES = 12
ONSET_LINE_FRAMES = 4
# A gap in the agent's audio this long or longer is heard as the agent
# stopping: the controller's early hold stays under it, and the replay's
# score counts a pause resumed after it as a stop (metrics.RESUMED_GAP_S).
HEARD_GAP_S = 0.15
CHARS_PER_SECOND = 15.0  # the agent's speaking rate when no playback marks arrive
# How far past the played position the echo check still looks: a playback
# mark comes at a word's start, the nominal rate drifts (one long word).
ECHO_SLACK_CHARS = 12
# An acknowledgement word begun this close before the end of the agent's
# yes/no question answers it (see BargeInController._question_asked).
ANSWER_PROJECTION_S = 0.3
_WORDISH = re.compile(r"[\w'’-]", re.UNICODE)
_BOUNDARY = re.compile(r"[,.;:?!]")


class Action(StrEnum):
    KEEP = "keep"
    PAUSE = "pause"
    STOP = "stop"
    RESUME = "resume"
    CONFIRM = "confirm"
    CANCEL_PENDING = "cancel_pending"


@dataclass(frozen=True, slots=True)
class BargeInParams:
    """The controller's configuration (see the module docstring)."""

    filters: bool = True  # False: the raw VAD baseline
    # Audio evidence: the earliest pause, and the bid score it needs.
    pause_after_s: float = 0.2
    bid_threshold: float = 0.5
    # An early pause is a speculative hold of at most this long (a gap under
    # 150 ms is not heard as the agent stopping): speech still going at its
    # end commits it (the caller is past a backchannel's length), else the
    # agent resumes.
    hold_s: float = 0.12
    # The early hold waits for the words to decide: taken only while the
    # caller's first words typically (median of their onsets so far) arrive
    # within this long of the onset: the hold's end (``pause_after_s +
    # hold_s``) and a gap under 150 ms, which is not heard as the agent
    # stopping. A recogniser later than that turns each backchannel held
    # into a gap the caller hears, for a bid stop no sooner than its words
    # (held-out barge-in set's tuning half, words 150 / 300 ms late:
    # backchannels stopped 4 of 24 with the hold, 0 / 1 without; bid stop
    # p50 466 / 613 against 498 / 632 ms). On time, a caller's first words
    # (their first word's length) come 0.13-0.38 s after the onset. None:
    # taken however late the words come.
    hold_word_lag_s: float | None = 0.47
    # How long after a word ends the recogniser writes it, where the host
    # knows (its STT's typical delay; `turnkit replay` gives its
    # --stt-delay-ms plus half the jitter). A sound still going at the early
    # hold's end has its word come that long after the sound's end: the hold
    # stands until then, a gap of at least hold_s plus the delay, heard as
    # the agent stopping once over 150 ms. So with hold_s + word_delay_s
    # over 150 ms no early hold is taken. The onsets' lag (hold_word_lag_s)
    # misses this: a turn's first word is short ("I", "so"), a
    # backchannel's is the whole sound. Held-out barge-in set, tuning half
    # (24 backchannels), words 100 / 150 ms late: backchannels stopped
    # 4 -> 1 / 4 -> 0 of 24 (telephone 3 -> 1 / 3 -> 0), bid stop p50
    # 427 -> 451 / 466 -> 498 ms. None: not known, learnt from the caller's
    # turns (WordLag.after_s: how long after the VAD heard a run end its
    # last words came, from the first turn; a live host's case). Learnt, on
    # the report half at 150 / 300 ms it stops the same backchannels and
    # bids as told; at 100 ms (words ~40 ms after the VAD's end, within a
    # frame of "in time") 3-4 of 24 against 0-2 told.
    word_delay_s: float | None = None
    # Speech this long without a deciding word pauses whatever the score
    # (acknowledgements are mostly 0.2-0.6 s: "uh-huh", "okay").
    max_backchannel_s: float = 0.45
    # Speech this long while paused is a bid without words.
    confirm_after_s: float = 1.2
    # More lexicon words than this is a bid ("yes yes yes yes", "okay perfect
    # thank you very much": a caller wrapping up, not murmuring), unless they
    # are one phrase ("thank you very much").
    max_backchannel_words: int = 3
    # A short sound this many semitones above the caller's typical pitch
    # (off the agent's phrase boundaries) keeps its hold for the words.
    raised_pitch_st: float = 2.0
    # A short sound at least this many dB above the caller's speech level
    # (median of its voiced frames), off the agent's phrase boundaries,
    # keeps its hold for the words too ("Sorry, | actually" said up). None:
    # off (the default). On the held-out set's tuning half 8 dB stopped no
    # more backchannels (6 dB did), but on its report half it stopped 4 more
    # of 24 with the recogniser 250 ms late, wideband and telephone, for no
    # gain in stop latency: backchannels there are said as loud as bids
    # against the caller's level. Left as an option for callers whose bids
    # are said up (the demo corpus: "Sorry, | actually..." ~12 dB over).
    loud_db: float | None = None
    # A sound whose voiced frames sit (median) this many dB or more under
    # the caller's speech level is residual echo the filter left, a murmur,
    # a line sound: no hold from its audio and no confirm by its length;
    # its words decide. Bids on the tuning half: -12.5 dB at the lowest;
    # leaked echo: -18 to -23 dB.
    faint_db: float = 15.0
    # Speech again after a held sound holds again once it is this long.
    restart_after_s: float = 0.2
    # Caller speech begun this soon after the agent's first audio was begun
    # before the caller could have heard the agent (a listener needs ~0.2 s
    # to react to a sound's onset): a simultaneous start, likely the caller
    # going on with their own turn ("... Friday morning. | Yeah Friday at
    # nine"), whose first word may be an acknowledgement word. Such words
    # arriving with the speech still going hold the agent; ``launch_more_s``
    # more of voiced speech makes them a bid (the stop counts from the
    # hold), a frame the VAD hears as quiet releases it. None: off.
    launch_s: float | None = 0.25
    launch_more_s: float = 0.096
    # A sound's onset is where its level rose this many dB over the line's
    # level before it, up to ``onset_back_s`` before the VAD's onset. On a
    # telephone band the VAD hears a word from its vowel: the nasal or
    # fricative before it ("No", "Excuse me") is mostly cut off by the band,
    # and its onset came 40-80 ms later than on wideband (p75-p90, held-out
    # barge-in development set's tuning half), up to 0.3 s for "Excuse me";
    # its level already rose there. The sound's length (the early hold at
    # ``pause_after_s``, ``max_backchannel_s``) counts from there, as it does
    # on wideband. None: the VAD's onset.
    onset_rise_db: float | None = 10.0
    onset_back_s: float = 0.096
    # Speculative holds on one segment; after these, its words decide.
    max_holds: int = 2
    # Held speculatively, the caller went quiet this long (counted from the
    # early hold: a closure begun before it is not the end): resume (a dip
    # of one frame between two words is not the end).
    quiet_resume_s: float = 0.096
    # Speech again within this gap continues the segment (a pause inside a
    # phrase: median 0.2 s, p75 0.31 s in real calls).
    merge_gap_s: float = 0.3
    # Paused past max_backchannel_s: after the speech ends, words may still come.
    word_wait_s: float = 0.6
    # Caller speech this long before a reply's first audio cancels it (0: the onset).
    pending_cancel_s: float = 0.0
    # ...if it can be the caller's voice: not this many dB under the level of
    # the turn just committed (its louder frames, the 83rd percentile). A
    # television or an office under the line is speech to the VAD; taken for
    # the caller going on, its onsets cancelled one reply after another (the
    # noisy variants' talk calls: replies 2-3 s late, with words 300 ms late
    # 4 of 15 turns never answered). Measured on the development corpora
    # (demo, real-call, noisy, drawl, fillhold variants; fused, words on
    # time): background onsets that cancelled a reply sat 14-18 dB under the
    # caller's last turn, the caller's own returns 10 dB under it at the
    # softest. None: any speech cancels.
    pending_faint_db: float | None = 12.0
    # A frame below this VAD probability is quiet (Silero's negative threshold),
    # and so is one this many dB below the segment's median level.
    quiet_prob: float = 0.35
    end_drop_db: float = 12.0


@dataclass(slots=True)
class Evidence:
    """What the controller knows about the current caller segment."""

    onset: float
    last_speech: float
    speaking: bool = True
    voiced_s: float = 0.0  # its voiced audio so far
    energy_db: list[float] = field(default_factory=list)
    pitch_hz: list[float] = field(default_factory=list)  # 0: unvoiced frame
    quiet_since: float | None = None
    words: list[str] = field(default_factory=list)
    acknowledged: bool = False  # lexicon words only so far
    at_boundary: bool = False  # fell at a phrase boundary of the agent's text
    score: float | None = None  # bid score when it was judged
    probs: list[float] = field(default_factory=list)  # VAD probability per frame
    held: bool = False  # a speculative hold on it ended in a resume
    holds: int = 0  # speculative holds on it so far
    restart: float | None = None  # speech again after a held sound, since
    long_held: bool = False  # the hold past max_backchannel_s was spent
    lexical: bool = False  # its words so far are acknowledgement words
    early_hold: bool = False  # the hold now running is the early one (bid score)
    launch: bool = False  # begun with the agent's first audio (BargeInParams.launch_s)
    # ...where it stood when its acknowledgement words arrived with the
    # speech still going, the agent held to see whether the caller talks on
    # past them (BargeInParams.launch_s)
    launch_voiced_s: float | None = None

    @property
    def duration(self) -> float:
        return self.last_speech - self.onset

    def vad_quiet(self, quiet_prob: float) -> bool:
        """The VAD hears no speech in it now (stopped, or its last frame
        under ``quiet_prob``); a dip in level alone is not that."""
        return not self.speaking or self.probs[-1] < quiet_prob


def frame_pitch_hz(audio: np.ndarray, rate: int = 16000) -> float:
    """Fundamental frequency of a voiced frame by normalised autocorrelation
    (70-400 Hz); 0.0 for an unvoiced or silent one."""
    n = len(audio)
    lo, hi = int(rate / 400), int(rate / 70)
    if n < 2 * lo or n <= lo + 2:
        return 0.0
    x = audio.astype(np.float64) - float(np.mean(audio))
    e = float(np.dot(x, x))
    if e < 1e-8:
        return 0.0
    size = 1 << (2 * n - 1).bit_length()
    spec = np.fft.rfft(x, size)
    ac = np.fft.irfft(spec * np.conj(spec), size)[:n]
    hi = min(hi, n - 2)
    # Normalise by the overlap so long lags are not penalised.
    lags = np.arange(lo, hi + 1)
    norm = ac[lo : hi + 1] / (e * (n - lags) / n)
    k = int(np.argmax(norm))
    if norm[k] < 0.45:
        return 0.0
    return rate / float(lags[k])


class BargeInController:
    """Decides, from caller audio, words and the agent's playback, whether
    caller sound takes the floor; returns :class:`Action` values that hosts
    execute (see the module docstring for the evidence and the rules)."""

    def __init__(
        self,
        clock: Clock,
        language: str = "en",
        params: BargeInParams | None = None,
        echo_check: EchoTranscriptCheck | None = None,
        sample_rate: int = 16000,
    ) -> None:
        self.clock = clock
        self.language = language
        self.params = params or BargeInParams()
        self.echo_check = echo_check if echo_check is not None else EchoTranscriptCheck()
        self.sample_rate = sample_rate
        self.reason = ""
        self.caller_level_db: float | None = None  # the caller's speech level (turns)
        self._pitch_st: float | None = None  # the caller's typical pitch (semitones, turns)
        # The last non-keep actions (when, action, reason), for logs and tests.
        self.log: deque[tuple[float, Action, str]] = deque(maxlen=256)
        # Words judged an acknowledgement while the agent talked (when, text):
        # the agent went on; a host may drop them from the caller's turn.
        # ``ack_count`` counts them all (the deque keeps the last ones).
        self.acknowledgements: deque[tuple[float, str]] = deque(maxlen=64)
        self.ack_count = 0
        # Does the recogniser write the caller's words while they speak,
        # and how long after their speech begins do its words come?
        self._streaming = StreamingWatch()
        self._word_lag = WordLag()
        self._vad_speaking = False
        # The latest frames' (start, level), cleared at each reply's start:
        # where a sound's level rose before the VAD heard it
        # (BargeInParams.onset_rise_db), for a segment's length and WordLag.
        self._levels: deque[tuple[float, float]] = deque(maxlen=ONSET_FRAMES)
        # The level of the caller's last committed turn (its louder frames),
        # from the voiced frames heard while the agent was silent since the
        # commit before: what a pending reply's cancelling sound is held to.
        self._turn_db: list[float] = []
        self._turn_level: float | None = None
        self._worded = 0  # of those frames, the ones heard by the turn's last new words
        self.commits = 0  # caller turns the host committed (on_turn_end)
        self.reset()

    @classmethod
    def raw_vad(cls, clock: Clock) -> BargeInController:
        """The raw VAD baseline: any speech onset stops the agent."""
        return cls(clock, params=BargeInParams(filters=False))

    @property
    def filters(self) -> bool:
        return self.params.filters

    def reset(self) -> None:
        self.agent_text = ""
        self._agent_start: float | None = None
        self._played_chars: int | None = None
        self._paused = False
        self._paused_at: float | None = None
        self._hold_until: float | None = None  # a speculative pause's end
        self._hold_quiet = False  # a quiet frame came during the hold
        self._floor = False  # the caller took the floor: the rest of this segment is theirs
        self._pending = False
        self._pending_onset: float | None = None
        self._background = False  # the sound now heard over a pending reply is not the caller's
        # The detector ended the last turn through a sound it takes for not
        # the caller's; only its word-based resume says the caller went on.
        self._through_sound = False
        self._onset_db: list[float] = []  # the latest sound's voiced levels (agent silent)
        self._no_audio = False  # ...heard without audio (the host gives the VAD only)
        self._seg: Evidence | None = None
        self._tok_text = ""
        self._tok_words: list[str] = []
        self._base_n = 0  # transcript words before the current segment
        self._base_words: list[str] = []

    # -- agent side -------------------------------------------------------------
    @property
    def agent_speaking(self) -> bool:
        """The agent's audio is playing (not paused by the controller)."""
        return self._agent_start is not None and not self._paused

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def through_sound(self) -> bool:
        """The detector ended the last turn through a sound it takes for not
        the caller's and has not said since that they went on
        (:meth:`on_turn_end`, :meth:`on_turn_resumed`)."""
        return self._through_sound

    def on_reply_pending(self, pending: bool = True) -> None:
        """The host has a reply decided whose audio has not started (False:
        it started, or was dropped)."""
        self._pending = pending
        if not pending:
            self._pending_onset = None

    def on_agent_started(self, text: str, at: float | None = None) -> None:
        """The reply's first audio played (``text``: what it says, as far as known)."""
        at = self.clock.now() if at is None else at
        self.agent_text = text
        self._agent_start = at
        self._levels.clear()  # the line under this reply, not before it
        self._played_chars = None
        self._pending = False
        self._pending_onset = None
        self._through_sound = False
        self._paused = False
        self._floor = False
        self.echo_check.agent_said(text, at)
        if self._seg is not None and self._seg.onset < at - 1e-9:
            # Speech already going when the agent began is not a barge-in
            # (the turn detector answered early: that is its business).
            self._seg = None

    def on_agent_text(self, text: str) -> None:
        """The whole text of the reply now playing, once known."""
        if text and text != self.agent_text:
            self.agent_text = text
            self.echo_check.agent_said(text, self.clock.now())

    def on_agent_progress(self, text_offset: int) -> None:
        """The first ``text_offset`` characters have played (a playback mark)."""
        self._played_chars = text_offset

    def on_agent_stopped(self, at: float | None = None, *, completed: bool = False) -> None:
        """The agent's audio ended (completed, stopped or flushed by the
        host). ``completed``: it played to its end, so all of its text can
        still come back as echo (a late recogniser writes the tail while the
        next reply plays); otherwise it is cut where it stopped."""
        if self._agent_start is not None and not completed:
            # What it did not say of its text cannot come back as echo; the
            # played position is a mark or the nominal rate, which a reply
            # that played to its end has run past.
            now = self.clock.now() if at is None else at
            self.echo_check.agent_stopped(self._agent_start, self._played_for_echo(now))
        self._agent_start = None
        self._paused = False
        self._paused_at = None
        self._hold_until = None

    # -- caller side ------------------------------------------------------------
    def on_turn_end(self, through_sound: bool = False) -> Action:
        """The end-of-turn detector committed a caller turn (``through_sound``:
        while a sound it takes for not the caller's went on, see
        :attr:`~turnkit.frames.TurnEndFrame.through_sound`). While the
        agent's audio is paused for a bid whose words have not come (a
        recogniser running late), that commit is the evidence: the caller
        spoke a whole turn, so the pause is confirmed as a stop — otherwise
        the agent would be "talking" (paused) when the turn ends, the host
        would ignore the end, and the caller would get no answer. Where the
        held sound's words have come and are acknowledgement words only, the
        commit is the detector taking a long "mhm" for a turn: ``resume``."""
        self.commits += 1
        self._through_sound = through_sound
        # Up to the turn's last new words, where it had some: a turn the
        # detector ended for words that stopped under a television is the
        # television's after them (most of its frames, and its level).
        heard = (
            self._turn_db[: max(self._worded, TURN_LEVEL_FRAMES)] if self._worded else self._turn_db
        )
        if len(heard) >= TURN_LEVEL_FRAMES:
            self._turn_level = float(np.percentile(heard, 83))
        self._turn_db = []
        self._worded = 0
        if self._paused:
            seg = self._seg
            if seg is not None and seg.lexical and not self._floor:
                # The words came and are an acknowledgement ("mhm" said
                # long, past a backchannel's usual length): the detector
                # took it for a turn, but it is no bid, and the agent goes
                # on rather than answering "mhm".
                return self._resume(f"acknowledgement: {' '.join(seg.words)!r}, not a turn")
            self._floor = True
            return self._act(Action.CONFIRM, "the caller's turn ended while the agent was paused")
        return Action.KEEP

    def on_turn_resumed(self) -> Action:
        """The end-of-turn detector says the caller went on: unless the sound
        it heard is, by its level so far, not the caller's voice
        (:meth:`on_frame`, which hosts feed each frame before the detector's
        verdict on it) — or, after a turn it ended through a sound
        (:meth:`on_turn_end`), whatever that sound: the detector's own verdict
        on it (words came)."""
        through, self._through_sound = self._through_sound, False
        if self._pending and (through or not self._background):
            return self._act(Action.CANCEL_PENDING, "caller went on before the reply played")
        return Action.KEEP

    def on_frame(self, vad: VADStep, audio: np.ndarray | None = None) -> Action:
        """One caller frame (after the echo filter) and its VAD verdict."""
        now = self.clock.now()
        self._vad_speaking = vad.speaking and vad.prob >= self.params.quiet_prob
        self._streaming.audio(self._vad_speaking)
        quiet = vad.prob < self.params.quiet_prob
        level: float | None = None
        if not self._agent_start and audio is not None and vad.speaking and not quiet:
            # The caller's own turns set the level a bid is judged against.
            level = frame_energy_db(audio, self.sample_rate)
            self._learn_level(level)
            self._learn_pitch(frame_pitch_hz(audio, self.sample_rate))
            self._turn_db.append(level)
        if vad.started:
            self._onset_db = []
            self._no_audio = audio is None
        if level is not None and vad.speaking:
            self._onset_db.append(level)
        # Where a sound the VAD confirms now rose over the line (read below
        # for a segment's length), and each frame's level for the next one
        # (an FFT, once).
        frame_db: float | None = None
        rise: float | None = None
        if (
            self.params.filters
            and audio is not None
            and len(audio)
            and self.params.onset_rise_db is not None
        ):
            # (The raw VAD baseline reads no level: it stops at any onset.)
            if vad.started:
                rise = self._rise_onset(vad.speech_start)
            frame_db = level if level is not None else frame_energy_db(audio, self.sample_rate)
            self._levels.append((now - len(audio) / self.sample_rate, frame_db))
        onset = vad.speech_start if rise is None else rise
        # The words' lag counts from the same onset as the early hold that
        # waits for them.
        self._word_lag.audio(vad.started, onset, vad.speaking, vad.speech_end, now)
        # A reply decided but not audible yet: caller speech makes it stale.
        if self._pending and self._agent_start is None:
            if vad.started:
                self._pending_onset = vad.speech_start
                self._background = False
            if vad.speaking and self._pending_onset is not None:
                if vad.speech_end - self._pending_onset >= self.params.pending_cancel_s - 1e-9:
                    if self.callers_voice():
                        self._pending_onset = None
                        return self._act(Action.CANCEL_PENDING, "caller spoke before the reply")
                    self._background = True
            elif not vad.speaking:
                self._pending_onset = None
                self._background = False
        if self._agent_start is None:
            self._seg = None
            return Action.KEEP
        if not self.params.filters:
            if vad.started and not self._paused:
                return self._act(Action.STOP, "caller speech (raw VAD)")
            return Action.KEEP
        if vad.started:
            self._open(onset)
        seg = self._seg
        if seg is None:
            return Action.KEEP
        seg.probs.append(vad.prob)
        if vad.speaking:
            seg.last_speech = max(seg.last_speech, vad.speech_end)
        if vad.stopped:
            seg.speaking = False
            seg.last_speech = vad.speech_end
        # The level of a frame the VAD calls voiced, once (an FFT): read for
        # the end below and kept with the segment.
        voiced = audio is not None and len(audio) > 0 and not quiet
        db = None
        if voiced:
            db = frame_db if frame_db is not None else frame_energy_db(audio, self.sample_rate)
        if db is not None and seg.energy_db:
            # The voice fell well below the segment's own level: it ended
            # (the VAD's probability trails the audio by a frame or two).
            quiet = db < float(np.median(seg.energy_db)) - self.params.end_drop_db
        if not quiet and vad.speaking:
            seg.quiet_since = None
            if audio is not None and db is not None:
                seg.voiced_s += len(audio) / self.sample_rate
                seg.energy_db.append(db)
                seg.pitch_hz.append(frame_pitch_hz(audio, self.sample_rate))
        elif seg.quiet_since is None:
            seg.quiet_since = now
        if self._floor:
            if not seg.speaking:
                self._close()
            return Action.KEEP
        if self._paused:
            return self._while_paused(seg, now, quiet)
        # Talking: judge the segment on its audio so far.
        if seg.held and seg.speaking and not quiet:
            # Speech again right after a held sound: a bid going on ("Wait,
            # | that's not") or a doubled acknowledgement ("yes | yes").
            seg.held = False
            seg.restart = seg.last_speech
        if not seg.speaking:
            # Ended short of a pause: an acknowledgement or a noise, unless
            # late words say otherwise (they may trail the audio).
            if seg.acknowledged or now - seg.last_speech > self.params.word_wait_s:
                self._close()
            return Action.KEEP
        p = self.params
        if seg.acknowledged or seg.lexical:
            # The words so far are acknowledgement words ("yes", "oh" of
            # "oh okay"): the next word decides, not the audio.
            return Action.KEEP
        if seg.score is not None and self.faint(seg):
            # Judged once already (the early hold below) and far under the
            # caller's own voice (residual echo the filter left, a murmur):
            # no hold by its length; its words decide. The early hold itself
            # is not gated: a polite bid can start soft ("Sorry, | not...").
            return Action.KEEP
        if seg.holds >= p.max_holds:
            # Held (and released) enough times: no more gaps in the agent's
            # audio for this sound; its words decide, or its length (no
            # recogniser, or a language it cannot write).
            if seg.duration >= p.confirm_after_s - 1e-9 and not self.streams:
                return self._pause(f"speech past {p.confirm_after_s:.2f} s")
            return Action.KEEP
        if seg.restart is not None:
            # The second part holds again once it is ``restart_after_s``
            # long (a doubled acknowledgement's second word is shorter than
            # that and the hold that follows).
            if seg.last_speech - seg.restart >= p.restart_after_s - 1e-9:
                seg.restart = None
                return self._pause("speech going on after a held sound", speculative=True)
            return Action.KEEP
        dur = seg.duration
        if dur >= p.max_backchannel_s - 1e-9 and not seg.long_held:
            # Past a backchannel's usual length: hold, and the pause stands
            # if the speech goes on through the hold.
            seg.long_held = True
            return self._pause(f"speech past {p.max_backchannel_s:.2f} s", speculative=True)
        if not seg.acknowledged and dur >= self.params.pause_after_s - 1e-9 and seg.score is None:
            seg.score = self.bid_score(seg)
            if seg.score >= self.params.bid_threshold and not self.words_late:
                return self._pause(
                    f"audio evidence of a bid (score {seg.score:.2f})",
                    speculative=True,
                    early=True,
                )
        return Action.KEEP

    @property
    def words_late(self) -> bool:
        """The caller's first words typically come too late for an early
        hold to wait for them (:attr:`BargeInParams.hold_word_lag_s`)."""
        p = self.params
        delay = p.word_delay_s if p.word_delay_s is not None else self._word_lag.after_s
        if delay is not None and p.hold_s + delay > HEARD_GAP_S + 1e-9:
            return True
        limit = p.hold_word_lag_s
        lag = self._word_lag.lag_s
        return limit is not None and lag is not None and lag > limit

    @property
    def streams(self) -> bool:
        """The recogniser writes the caller's words while they speak (at
        least ``STREAMED_WORDS`` updates brought new words with the VAD
        hearing speech): then long speech with no word is not the caller's."""
        return self._streaming.streams

    def on_transcript(self, text: str) -> Action:
        """The recogniser's transcript of the caller's current turn so far."""
        n_before, old = len(self._tok_words), self._tok_words
        words = self._tokens(text)
        # (``_tokens`` extends the list in place when the text only grew.)
        if words and (len(words) > n_before or (words is not old and words != old)):
            self._word_lag.words(self.clock.now())
        if len(words) > n_before:
            self._streaming.heard()
            self._worded = len(self._turn_db)
        seg = self._seg
        n = self._base_n
        start = n if self._base_words is words or words[:n] == self._base_words[:n] else 0
        if seg is None and self.agent_speaking and self.params.filters and len(words) > start:
            # Words while the agent talks and the VAD heard no onset (double
            # talk the echo filter held down): the words open the segment.
            now = self.clock.now()
            seg = self._seg = Evidence(onset=now, last_speech=now, speaking=False)
        if seg is None or self._agent_start is None or not self.params.filters:
            self._base_words, self._base_n = words, len(words)
            return Action.KEEP
        seg.words = words[start:]
        if not seg.words or self._floor:
            return Action.KEEP
        return self._judge_words(seg)

    # -- features ---------------------------------------------------------------
    def bid_score(self, seg: Evidence) -> float:
        """How much the segment's audio so far looks like a bid (0-1),
        judged once it is ``pause_after_s`` long (0.5 or more pauses): its
        energy against the caller's own speech level (at or above it: more
        bid-like; 15 dB below: a murmur, a breath, residual echo), its pitch
        contour (rising or level: bid-like; falling: an acknowledgement's
        shape), whether the VAD already heard it break (two syllables with
        a gap: "uh-huh"), and whether it falls at a phrase boundary of the
        agent's text (where acknowledgements go). The length so far is the
        gate itself, and the speculative hold (``hold_s``) settles what the
        score cannot: speech that goes on through it is longer than a
        backchannel.

        On the demo corpus these weights are hand-set, not fitted: its
        bids and backchannels come from one synthetic voice, and their
        energy and pitch overlap there (see benchmarks/bench_barge_in.py)."""
        score = 0.6
        if seg.energy_db:
            level = self.caller_level_db if self.caller_level_db is not None else -26.0
            rel = float(np.median(seg.energy_db)) - level
            # At or above the caller's own level: bid-like; far softer
            # (a breath, a murmur, residual echo): not.
            score += 0.1 * max(-1.0, min(1.0, rel / 6.0)) if rel > 0 else 0.0
            if rel < -15.0:
                score -= 0.2
        voiced = [f for f in seg.pitch_hz if f > 0]
        if len(voiced) >= 3:
            st = 12.0 * np.log2(np.asarray(voiced) / voiced[0])
            slope = float(np.polyfit(np.arange(len(st)), st, 1)[0])  # semitones per frame
            # Rising or level: bid-like; falling fast: an acknowledgement's contour.
            score += 0.1 * max(-1.0, min(0.5, slope / 0.5))
        if seg.probs and min(seg.probs) < self.params.quiet_prob:
            score -= 0.1  # broken by a quiet frame: "uh-huh"'s two syllables
        if seg.at_boundary:
            score -= 0.15
        return max(0.0, min(1.0, score))

    def _learn_level(self, db: float) -> None:
        if db < -60.0:
            return
        if self.caller_level_db is None:
            self.caller_level_db = db
        else:
            # A slow tracker leaning to the louder frames (the voice, not its tails).
            a = 0.05 if db > self.caller_level_db else 0.01
            self.caller_level_db += a * (db - self.caller_level_db)

    def _learn_pitch(self, hz: float) -> None:
        if hz <= 0:
            return
        st = 12.0 * math.log2(hz)
        if self._pitch_st is None:
            self._pitch_st = st
        else:
            # A slow tracker of the caller's typical pitch (semitones).
            self._pitch_st += 0.02 * (st - self._pitch_st)

    @property
    def caller_pitch_hz(self) -> float | None:
        """The caller's typical pitch, learnt from their turns (None: not yet)."""
        return None if self._pitch_st is None else 2.0 ** (self._pitch_st / 12.0)

    def raised(self, seg: Evidence) -> bool:
        """The segment is said higher than the caller's typical pitch (by
        ``raised_pitch_st`` semitones or more, median of its voiced frames)
        and not at a phrase boundary of the agent's text: the prosody of a
        competitive incoming ("Sorry, ...", "Wait, ..."), where an
        acknowledgement is said low, at the agent's boundaries."""
        voiced = [f for f in seg.pitch_hz if f > 0]
        if self._pitch_st is None or len(voiced) < 3 or seg.at_boundary:
            return False
        st = 12.0 * math.log2(float(np.median(voiced))) - self._pitch_st
        return st >= self.params.raised_pitch_st

    def _rel_db(self, seg: Evidence) -> float | None:
        """The segment's level (median of its voiced frames) against the
        caller's speech level; None before either is known."""
        if self.caller_level_db is None or not seg.energy_db:
            return None
        return float(np.median(seg.energy_db)) - self.caller_level_db

    def loud(self, seg: Evidence) -> bool:
        """The segment is said at ``loud_db`` or more above the caller's
        speech level (median of its voiced frames) and not at a phrase
        boundary of the agent's text: a competitive incoming is said up
        ("No, | ...", "Sorry, | ..."); an acknowledgement is said under the
        agent, at its boundaries."""
        rel = self._rel_db(seg)
        loud = self.params.loud_db
        return loud is not None and rel is not None and not seg.at_boundary and rel >= loud

    def faint(self, seg: Evidence) -> bool:
        """The segment's voiced frames sit (median) ``faint_db`` or more
        under the caller's speech level: residual echo of the agent, a
        murmur, a line sound; not a bid by its audio (its words may still
        be one). Nothing is faint before the caller's level is known."""
        rel = self._rel_db(seg)
        return rel is not None and rel <= -self.params.faint_db

    def callers_voice(self) -> bool:
        """The sound since the VAD's latest onset (the agent silent) can be
        the caller going on: its voiced frames (median) not
        ``pending_faint_db`` under their last committed turn's level. Before
        a turn's level is known, any voiced frame; where the host gives no
        audio, the VAD's word; the raw VAD baseline (``filters=False``): any
        onset. Hosts that start a user turn on an onset (Pipecat) ask it over
        a reply on its way."""
        if not self.params.filters:
            return True
        if self._through_sound:
            # The detector ended the turn through a sound it takes for not
            # the caller's, and has not said since that they went on: the
            # sound's next onsets (a television's) must not drop the reply
            # the detector will not decide again (the noisy variants, words
            # 300 ms late: a turn never answered). Its verdict stands with
            # or without the audio here.
            return False
        if self._no_audio:
            return True
        if not self._onset_db:
            return False  # nothing voiced yet: the VAD's hangover, a click
        limit = self.params.pending_faint_db
        if limit is None or self._turn_level is None:
            return True
        return float(np.median(self._onset_db)) > self._turn_level - limit

    def _at_boundary(self, at: float) -> bool:
        """The agent is at (or just past) a phrase boundary of its text."""
        text = self.agent_text
        if not text or self._agent_start is None:
            return False
        played = self._played_at(at)
        lo = max(0, played - int(0.6 * CHARS_PER_SECOND))
        hi = played + int(0.15 * CHARS_PER_SECOND)
        return _BOUNDARY.search(text, lo, max(lo, min(len(text), hi))) is not None

    # -- internals --------------------------------------------------------------
    def _tokens(self, text: str) -> list[str]:
        prev = self._tok_text
        if (
            prev
            and text.startswith(prev)
            and (len(text) == len(prev) or not _WORDISH.match(text[len(prev)]))
        ):
            self._tok_words.extend(tokens(text[len(prev) :]))
        else:
            self._tok_words = tokens(text)
        self._tok_text = text
        return self._tok_words

    def _open(self, onset: float) -> None:
        seg = self._seg
        if seg is not None and (
            self._paused
            or self._floor
            or (not seg.acknowledged and onset - seg.last_speech <= self.params.merge_gap_s)
        ):
            # Still inside a paused bid (or the floor is the caller's), or
            # speech again after a pause inside a phrase ("Wait, | that's
            # not..."): the same segment goes on.
            seg.speaking = True
            return
        if self._agent_start is not None and onset < self._agent_start - 1e-9:
            return
        self._base_words = self._tok_words
        self._base_n = len(self._tok_words)
        start, within = self._agent_start, self.params.launch_s
        launch = start is not None and within is not None and onset - start < within - 1e-9
        self._seg = Evidence(
            onset=onset,
            last_speech=onset,
            at_boundary=self._at_boundary(onset),
            launch=launch,
        )

    def _rise_onset(self, onset: float) -> float:
        """Where the sound the VAD heard from ``onset`` rose over the line's
        level: up to ``onset_back_s`` earlier, through frames each
        ``onset_rise_db`` over the median of the frames before them."""
        p = self.params
        assert p.onset_rise_db is not None
        before = [(t, db) for t, db in self._levels if t < onset - 1e-9]
        back = [x for x in before if x[0] >= onset - p.onset_back_s - 1e-9]
        line = before[: len(before) - len(back)]
        if len(line) < ONSET_LINE_FRAMES or not back:
            return onset
        floor = float(np.median([db for _, db in line]))
        rose = onset
        for t, db in reversed(back):
            if db < floor + p.onset_rise_db:
                break
            rose = t
        return rose

    def _close(self) -> None:
        self._seg = None
        self._floor = False
        self._base_words = self._tok_words
        self._base_n = len(self._tok_words)

    def _question_asked(self, at: float) -> bool:
        """The agent's question had been heard when the caller began
        speaking (``at``), or was within :data:`ANSWER_PROJECTION_S` of its
        end: answers to a yes/no question start around its end, a few
        hundred ms early at most (Stivers et al. 2009: within ±200 ms in ten
        languages), never a second ahead. So "okay" said during "Wednesday
        afternoon. | Same address as before?" acknowledges what was said; it
        does not answer a question still to come."""
        if "?" not in self.agent_text or self._agent_start is None:
            return False
        now = self.clock.now()
        played = self._played_at(now)
        # Where playback was at the onset (the words arrive later than that).
        then = played - (now - at) * CHARS_PER_SECOND
        heard = int(then + ANSWER_PROJECTION_S * CHARS_PER_SECOND)
        return self.agent_text.rfind("?", 0, max(0, heard)) >= 0

    def _played_at(self, at: float) -> int:
        """How much of the reply's text has played by ``at``: the latest
        playback mark, else time since its first audio at a nominal rate."""
        assert self._agent_start is not None
        if self._played_chars is not None:
            return self._played_chars
        return int((at - self._agent_start) * CHARS_PER_SECOND)

    def _played_for_echo(self, now: float) -> int:
        """:meth:`_played_at` with a little past it: marks and the nominal
        rate trail the audio by up to a word."""
        return self._played_at(now) + ECHO_SLACK_CHARS

    def _judge_words(self, seg: Evidence) -> Action:
        text = " ".join(seg.words)
        now = self.clock.now()
        start = self._agent_start
        played = self._played_for_echo(now) if start is not None else None
        if self.echo_check.is_echo(text, now, start, played):
            seg.words = []
            if self._paused:
                return self._resume(f"echo of the agent's words: {text!r}")
            return Action.KEEP
        bid = None
        phrases = backchannel_phrases(text, self.language)  # None: not a backchannel
        if phrases is None:
            if is_backchannel_prefix(text, self.language):
                # "i" of "i see", "got" of "got it": the next word decides
                # (the audio may still hold: "i think..." is a bid).
                return Action.KEEP
            bid = f"words: {text!r}"
        elif len(seg.words) > self.params.max_backchannel_words and phrases != 1:
            bid = f"many words: {text!r}"
        elif self._question_asked(seg.onset) and is_answer(text, self.language):
            bid = f"answer to the agent's question: {text!r}"
        if bid is not None:
            self._floor = True
            if self._paused:
                return self._act(Action.CONFIRM, bid)
            return self._act(Action.STOP, bid)
        seg.lexical = True
        if not seg.acknowledged:
            seg.acknowledged = True
            self.acknowledgements.append((self.clock.now(), text))
            self.ack_count += 1
        if self._paused:
            if seg.launch and seg.speaking and seg.launch_voiced_s is None:
                # Held already by its audio, begun with the agent's first
                # audio and still going: the same test as below, whether
                # the caller talks on past the words ("okay | great and
                # how long...": a caller going on with their own turn as
                # the reply launched was released by its "okay" and
                # stopped the agent only at "and", 0.7 s in).
                seg.launch_voiced_s = seg.voiced_s
                self.reason = f"acknowledgement begun with the agent's first audio: {text!r}"
            if seg.launch_voiced_s is not None:
                return Action.KEEP  # held to see whether the caller talks on past them
            if (
                seg.duration < self.params.max_backchannel_s
                or not seg.speaking
                or seg.quiet_since is not None
            ):
                # Short, or over (the VAD may hang on residual echo after
                # the voice fell quiet): the acknowledgement releases it.
                # Said before the VAD has heard the speech end (a dip
                # between words is no end), the words after it are judged
                # with it: "okay | perfect thank you very much" is a caller
                # wrapping up (many words), not five murmurs.
                kept = seg if seg.speaking else None
                return self._resume(f"acknowledgement: {text!r}", kept=kept)
            return Action.KEEP
        if seg.launch and seg.speaking:
            # Begun before the caller could hear the agent, and still going:
            # hold while the next frames tell "yeah" of "yeah friday at
            # nine" (their own turn going on) from a lone "yeah".
            seg.launch_voiced_s = seg.voiced_s
            return self._pause(f"acknowledgement begun with the agent's first audio: {text!r}")
        self.reason = f"acknowledgement: {text!r}"
        return Action.KEEP

    def _while_paused(self, seg: Evidence, now: float, quiet: bool) -> Action:
        p = self.params
        if seg.launch_voiced_s is not None and seg.lexical:
            # Acknowledgement words begun with the agent's first audio, the
            # speech still going when they came. Talked on past them: the
            # caller's own turn. A frame the VAD hears as quiet says they
            # were said alone (not one quiet by its level: the "f" of "yeah
            # | friday" is one, and Silero hears speech through it).
            said = " ".join(seg.words)
            if seg.voiced_s - seg.launch_voiced_s >= p.launch_more_s - 1e-9:
                self._floor = True
                return self._act(
                    Action.CONFIRM,
                    f"speech going on past {said!r}, begun with the agent's first audio",
                )
            if seg.vad_quiet(p.quiet_prob):
                return self._resume(f"acknowledgement said alone: {said!r}")
            if self._paused_at is not None and now - self._paused_at >= p.word_wait_s - 1e-9:
                # Neither: a sound the VAD hears with no voice in it (breath,
                # a line noise) after the words. They were said alone.
                return self._resume(f"acknowledgement, then no voice: {said!r}")
            return Action.KEEP
        if self._hold_until is not None:
            # A speculative hold: quiet resumes (the sound was short: a
            # backchannel's length); speech that goes on through the hold,
            # or is back at its end, makes the pause stand, for words to decide.
            if quiet or seg.quiet_since is not None:
                self._hold_quiet = True
            # The early hold comes 0.2 s into the sound, inside its first
            # word: quiet there counts from the hold, as a stop consonant's
            # closure begun before it (the "ct" of "actually", ~0.1 s) is
            # not the end. A later hold (for length, or speech again) comes
            # after a stretch of sound, and a quiet before it ended that
            # stretch ("oh | okay"): it counts.
            quiet_from = seg.quiet_since
            if quiet_from is not None and seg.early_hold:
                quiet_from = max(quiet_from, self._paused_at or 0.0)
            ended = self._hold_quiet and (
                quiet_from is not None and now - quiet_from >= p.quiet_resume_s - 1e-9
            )
            if not ended and now >= self._hold_until - 1e-9:
                ended = self._hold_quiet and (quiet or seg.quiet_since is not None)
            if ended and seg.holds <= 1 and not seg.lexical:
                # A short sound said high or loud, off the agent's
                # boundaries ("Sorry, | ...", "No, | that's"): the pause
                # stands for the words.
                why = "raised pitch" if self.raised(seg) else "loudness" if self.loud(seg) else ""
                if why:
                    self._hold_until = None
                    self.reason = f"short sound with a bid's {why}: the pause stands"
                    return Action.KEEP
            # Before the hold's end, an early hold's sound has ended only on
            # a frame the VAD hears as quiet now: a dip in level alone, or a
            # one-frame VAD dip it is back from, is a stop consonant's
            # closure as often as an end ("ac|tually" on a telephone line,
            # whose band leaves out the voicing under the closure). The
            # hold's end judges those (a backchannel is over by then).
            early_end = seg.vad_quiet(p.quiet_prob) or not seg.early_hold
            if ended and now < self._hold_until - 1e-9 and early_end:
                return self._resume("short sound, no bid: agent goes on", held=seg)
            if now >= self._hold_until - 1e-9:
                if ended:
                    return self._resume("speech broke off within the hold: agent goes on", held=seg)
                if not seg.early_hold and self.faint(seg):
                    return self._resume("faint sound through the hold: agent goes on", held=seg)
                self._hold_until = None
                self.reason = "speech past a backchannel's length: the pause stands"
            return Action.KEEP
        if not seg.words and seg.duration >= p.max_backchannel_s - 1e-9 and self.faint(seg):
            # A standing early hold on a sound that stayed far under the
            # caller's voice, past a backchannel's length, no word: residual
            # echo of the agent (it can go on for seconds), not a bid.
            return self._resume("faint sound, no words: agent goes on")
        if (
            seg.duration >= p.confirm_after_s - 1e-9
            and seg.quiet_since is None
            and not self.faint(seg)
        ):
            if self.streams and not seg.words:
                # A recogniser that writes the caller's words as they speak
                # wrote none in all this: another voice behind the caller (a
                # television, an office), or a sound with no words in it.
                return self._resume(
                    f"speech past {p.confirm_after_s:.2f} s with no words from a streaming recogniser"
                )
            # Long and still voiced now (not residual echo the VAD hangs on).
            self._floor = True
            return self._act(Action.CONFIRM, f"speech past {p.confirm_after_s:.2f} s")
        if seg.lexical and (
            not seg.speaking
            or (seg.quiet_since is not None and now - seg.quiet_since >= p.quiet_resume_s - 1e-9)
        ):
            # Acknowledgement words, and the sound is over: nothing more is
            # coming to decide on ("mhm" outlasting the hold, its word
            # arriving while the voice still hummed).
            return self._resume(f"acknowledgement over: {' '.join(seg.words)!r}")
        if not seg.speaking and now - seg.last_speech >= p.word_wait_s - 1e-9:
            return self._resume("false interruption: no words followed")
        return Action.KEEP

    def _pause(self, reason: str, speculative: bool = False, early: bool = False) -> Action:
        self._paused = True
        self._paused_at = self.clock.now()
        self._hold_until = self._paused_at + self.params.hold_s if speculative else None
        if self._seg is not None:
            self._seg.early_hold = early
            if speculative:
                self._seg.holds += 1
        self._hold_quiet = False
        return self._act(Action.PAUSE, reason)

    def _resume(
        self, reason: str, held: Evidence | None = None, kept: Evidence | None = None
    ) -> Action:
        """Play on. ``held``: a speculative hold ended by quiet; its segment
        stays open, so speech again within ``merge_gap_s`` holds again at once.
        ``kept``: the segment stays open, its words judged with those to come
        (acknowledgement words said with the voice still going)."""
        self._paused = False
        self._paused_at = None
        self._hold_until = None
        self._seg = held or kept
        if held is not None:
            # The segment goes on, and so do its words: "i" heard before the
            # hold ended and "see" after it are one "i see", not a bid "see".
            held.held = True
        elif kept is None:
            self._base_words = self._tok_words
            self._base_n = len(self._tok_words)
        return self._act(Action.RESUME, reason)

    def _act(self, action: Action, reason: str) -> Action:
        self.reason = reason
        self.log.append((self.clock.now(), action, reason))
        return action
