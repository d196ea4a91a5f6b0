"""Playback cursor: how much of each agent reply actually reached the caller.

The LLM and TTS run ahead of the speaker, so "generated" is not "heard". The
cursor keeps, per reply, the evidence of what played:

* **sample positions** the output reports (:class:`~turnkit.frames.PlaybackMarkFrame`
  ``played_s``, audio seconds of that reply, not wall time: pauses do not
  count). These are the authority; the largest one reported wins, so a late
  or repeated mark never moves the cursor back.
* ``text_offset`` on those marks: a point where the output knows which text
  the audio so far covers (e.g. a streaming TTS's sentence boundary); kept
  as anchors for the word estimate (:mod:`turnkit.barge_in.truncation`).
* **word timestamps** from the TTS (:class:`WordTimestampsFrame`), and the
  reply's total audio length when known.
* the **clock**, as a fallback for outputs that report nothing: time between
  :class:`~turnkit.frames.AgentAudioStartedFrame` and
  :class:`~turnkit.frames.AgentAudioStoppedFrame`, summed over resumed
  stretches. It may count audio still in a device buffer; marks fix that.

Between two marks, audio keeps playing: at a stop the cursor adds the clock
time since the last mark, at most ``max_extrapolate_s`` (one mark interval is
the most it can have missed), and only if the marks were moving (a paused
output reports the same position again).

Example::

    cursor = PlaybackCursor(clock)
    cursor.on_started(7)
    cursor.on_text(7, "Sure, seven o'clock for two.")
    cursor.on_mark(7, played_s=0.80, text_offset=0)
    cursor.on_stopped(7, "interrupted")
    cursor.heard(7).text   # words whose end had played by then
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from turnkit.barge_in.truncation import (
    Heard,
    TruncationConfig,
    align_timestamps,
    heard_prefix,
    tokens,
)
from turnkit.clock import Clock
from turnkit.frames import SystemFrame, Word

__all__ = ["PlaybackCursor", "ReplyPlayback", "WordTimestampsFrame"]


@dataclass(slots=True, kw_only=True)
class WordTimestampsFrame(SystemFrame):
    """Word timings a TTS gave for (part of) a reply's audio.

    ``words`` are seconds from the first sample of ``reply_id``'s audio
    (a TTS that times each chunk from 0 adds the audio already sent before
    the chunk). Frames for one reply accumulate in order.
    """

    reply_id: int = 0
    words: list[Word] = field(default_factory=list)
    audio_s: float | None = None  # the reply's whole audio length, once known
    # A TTS without word timings still knows where each chunk's audio ends:
    # the reply's first ``anchor_offset`` characters take ``anchor_s`` seconds
    # (an anchor for the word estimate; None: no anchor).
    anchor_s: float | None = None
    anchor_offset: int = 0


@dataclass(slots=True)
class ReplyPlayback:
    """Everything known about one reply's playback."""

    reply_id: int
    text: str = ""
    words: list[Word] | None = None
    duration_s: float | None = None
    played_s: float = 0.0  # largest sample position reported
    anchors: list[tuple[float, int]] = field(default_factory=list)
    marks: int = 0
    last_mark_at: float | None = None
    moving: bool = False  # the last mark advanced on the one before
    playing_since: float | None = None  # clock time the current stretch began
    clock_played_s: float = 0.0  # finished stretches, by the clock
    stop_reason: str | None = None
    extrapolated_s: float = 0.0  # added at the stop, from the clock
    # progress(): (evidence, played_s window [lo, hi), offset) while it holds
    progress_cache: tuple[tuple[object, ...], float, float, int] | None = field(
        default=None, repr=False
    )

    @property
    def started(self) -> bool:
        return self.playing_since is not None or self.clock_played_s > 0 or self.marks > 0


class PlaybackCursor:
    """Tracks what played of each reply and maps it to heard words.

    Decides nothing by itself; :meth:`heard` answers "which words did the
    caller hear of reply N", from the evidence above.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        config: TruncationConfig | None = None,
        max_extrapolate_s: float = 0.2,
        keep_replies: int = 64,
    ) -> None:
        self.clock = clock
        self.config = config or TruncationConfig()
        self.max_extrapolate_s = max_extrapolate_s
        self.keep_replies = keep_replies
        self._replies: dict[int, ReplyPlayback] = {}

    # -- evidence ---------------------------------------------------------
    def reply(self, reply_id: int) -> ReplyPlayback:
        r = self._replies.get(reply_id)
        if r is None:
            r = self._replies[reply_id] = ReplyPlayback(reply_id)
            while len(self._replies) > self.keep_replies:
                self._replies.pop(next(iter(self._replies)))
        return r

    def __contains__(self, reply_id: int) -> bool:
        return reply_id in self._replies

    def on_started(self, reply_id: int) -> None:
        """Audio of the reply reached the speaker (again, after a resume)."""
        r = self.reply(reply_id)
        if r.playing_since is None:
            r.playing_since = self.clock.now()
        r.stop_reason = None
        r.extrapolated_s = 0.0

    def on_text(self, reply_id: int, text: str, *, append: bool = True) -> None:
        """The reply's text (``append``: a streamed chunk added to it)."""
        r = self.reply(reply_id)
        if append and r.text:
            sep = "" if r.text[-1:].isspace() or text[:1].isspace() else " "
            r.text = f"{r.text}{sep}{text}"
        else:
            r.text = text

    def on_words(
        self, reply_id: int, words: Sequence[Word], audio_s: float | None = None
    ) -> None:
        """TTS word timestamps (seconds from the reply's first sample);
        ``audio_s``: the reply's whole audio length, once known."""
        r = self.reply(reply_id)
        if words:
            r.words = [*(r.words or []), *words]
        if audio_s is not None:
            r.duration_s = audio_s

    def on_anchor(self, reply_id: int, audio_s: float, text_offset: int) -> None:
        """The reply's first ``text_offset`` characters take its first
        ``audio_s`` seconds of audio (a TTS's chunk boundary)."""
        r = self.reply(reply_id)
        if text_offset > 0 and not any(c == text_offset for _, c in r.anchors):
            r.anchors.append((audio_s, text_offset))

    def on_timestamps(self, frame: WordTimestampsFrame) -> None:
        """A :class:`WordTimestampsFrame`: its words, length and anchor."""
        self.on_words(frame.reply_id, frame.words, frame.audio_s)
        if frame.anchor_s is not None:
            self.on_anchor(frame.reply_id, frame.anchor_s, frame.anchor_offset)

    def progress(self, reply_id: int) -> int:
        """How far into the reply's text the caller has heard: the offset
        after the last word heard so far (0: none, or nothing known)."""
        r = self._replies.get(reply_id)
        if r is None:
            return 0
        # Asked after every played frame: with word timestamps the answer
        # holds until the next word's end plays, so it is kept that long.
        played = self.played_s(reply_id)
        key = (len(r.text), len(r.words or ()), len(r.anchors), r.duration_s, r.stop_reason)
        c = r.progress_cache
        if c is not None and c[0] == key and c[1] <= played < c[2]:
            return c[3]
        heard = self.heard(reply_id)
        r.progress_cache = None
        if heard.method == "timestamps" and self.config.min_word_fraction >= 1.0 and r.words:
            timed = align_timestamps(r.text, r.words)
            nxt = timed[heard.words_kept] if heard.words_kept < len(timed) else None
            # heard_prefix counts a word once played_s >= its end - 1e-6.
            hi = nxt.end - 1e-6 if nxt is not None else math.inf
            if r.duration_s is not None:
                hi = min(hi, r.duration_s - 1e-6)
            lo = heard.audio_end_s - 1e-6 if heard.words_kept else -math.inf
            r.progress_cache = (key, lo, hi, heard.cut)
        return heard.cut

    def on_duration(self, reply_id: int, seconds: float) -> None:
        """The reply's whole audio is this long (the TTS finished it)."""
        self.reply(reply_id).duration_s = seconds

    def on_mark(self, reply_id: int, played_s: float, text_offset: int = 0) -> None:
        """The output reports ``played_s`` seconds of the reply played,
        covering at least ``text_offset`` characters (0: unknown)."""
        r = self.reply(reply_id)
        now = self.clock.now()
        r.moving = played_s > r.played_s + 1e-9
        if played_s >= r.played_s:
            r.played_s = played_s
            r.last_mark_at = now
        r.marks += 1
        if text_offset > 0 and not any(c == text_offset for _, c in r.anchors):
            # The first mark that reports an offset is the closest to where
            # that text's audio ended (later ones only repeat it).
            r.anchors.append((played_s, text_offset))
        if r.playing_since is None and r.stop_reason is None:
            r.playing_since = now

    def on_stopped(self, reply_id: int, reason: str = "completed") -> None:
        """Playback of the reply stopped (``completed`` or ``interrupted``)."""
        r = self.reply(reply_id)
        now = self.clock.now()
        if r.playing_since is None and r.stop_reason is not None:
            # Already stopped (a pause, then its confirmation): only the
            # reason changes; the audio stopped at the first stop.
            r.stop_reason = reason
            return
        if r.playing_since is not None:
            r.clock_played_s += max(0.0, now - r.playing_since)
            r.playing_since = None
        r.extrapolated_s = 0.0
        if r.marks and r.moving and r.last_mark_at is not None:
            r.extrapolated_s = min(max(0.0, now - r.last_mark_at), self.max_extrapolate_s)
        r.stop_reason = reason

    def on_flush(self) -> None:
        """All queued agent audio was thrown away: every reply still playing
        stopped where it was."""
        for r in self._replies.values():
            if r.playing_since is not None:
                self.on_stopped(r.reply_id, "interrupted")

    # -- answers ----------------------------------------------------------
    def played_s(self, reply_id: int) -> float:
        """Seconds of the reply's audio the caller heard, best evidence first."""
        r = self._replies.get(reply_id)
        if r is None:
            return 0.0
        if r.marks:
            played = r.played_s + r.extrapolated_s
            if r.playing_since is not None and r.moving and r.last_mark_at is not None:
                since = self.clock.now() - r.last_mark_at
                played = r.played_s + min(max(0.0, since), self.max_extrapolate_s)
        else:
            played = r.clock_played_s
            if r.playing_since is not None:
                played += max(0.0, self.clock.now() - r.playing_since)
        if r.duration_s is not None:
            played = min(played, r.duration_s)
        return played

    def heard(self, reply_id: int) -> Heard:
        """The words of the reply the caller heard (see
        :func:`~turnkit.barge_in.truncation.heard_prefix`). A reply that
        stopped ``completed`` was heard whole."""
        r = self.reply(reply_id)
        if r.stop_reason == "completed":
            n = len(tokens(r.text))
            played = self.played_s(reply_id)
            return Heard(r.text, len(r.text.rstrip()), n, n, played, played, "completed")
        return heard_prefix(
            r.text,
            self.played_s(reply_id),
            timestamps=r.words,
            anchors=r.anchors,
            duration_s=r.duration_s,
            config=self.config,
        )
