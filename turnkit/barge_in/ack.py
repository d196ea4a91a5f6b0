"""Acknowledgement filter: while the agent speaks, is the caller bidding for
the floor, or only acknowledging ("uh-huh", "okay", "vale")?

:class:`AckFilter` decides per caller speech segment (a VAD onset to its
end) from:

* **words** that have arrived for the segment: any word outside the
  language's backchannel lexicon is a bid, at once ("wait", "the", "no");
  more than ``max_backchannel_words`` lexicon words is a bid too; a
  lexicon word that answers a yes/no question ("okay", "yes") is a bid when
  the agent has already asked one in what it played;
* **duration**: speech still going ``max_listen_s`` after onset with no
  deciding word is a bid (backchannels are short; the recogniser reveals a
  word only once it is spoken, so the decision cannot wait for words);
* **echo**: a transcript that is a run of the agent's own recent words is
  not the caller (:class:`~turnkit.barge_in.echo.EchoTranscriptCheck`).

Until it decides, the agent keeps talking (a host may duck it). A stop
decided by duration alone is provisional: if no words come within
``false_interruption_s`` the host resumes where it stopped.

Example::

    ack = AckFilter(clock, language="en")
    ack.agent_started("Your total is sixty dollars. Shall I charge it?")
    d = ack.on_vad(frame.vad)            # each caller frame while speaking
    d = ack.on_transcript("okay")        # each transcript update
    if d is Decision.STOP: stop_playback()
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from turnkit.audio.vad import VADStep
from turnkit.barge_in.echo import EchoTranscriptCheck
from turnkit.barge_in.lexicon import is_answer, is_backchannel, tokens
from turnkit.clock import Clock

_WORDISH = re.compile(r"[\w'’-]", re.UNICODE)  # a character lexicon.tokens keeps in a word

__all__ = ["AckFilter", "AckParams", "Decision"]

CHARS_PER_SECOND = 15.0  # speaking rate used when no playback marks arrive


class Decision(StrEnum):
    KEEP = "keep"  # nothing to act on (no caller speech, or an acknowledgement)
    LISTEN = "listen"  # caller speech, undecided: keep talking (duck if you like)
    STOP = "stop"  # a bid for the floor: stop and flush the agent's audio
    RESUME = "resume"  # the last stop was a false interruption: resume playback


@dataclass(frozen=True, slots=True)
class AckParams:
    # Speech this long without a deciding word is a bid: backchannels are
    # mostly under half a second ("uh-huh", "okay": 0.2-0.4 s).
    max_listen_s: float = 0.45
    max_backchannel_words: int = 3
    word_wait_s: float = 0.8  # after a short segment, words may still arrive
    false_interruption_s: float = 1.5  # no words this long after a provisional stop: resume


class AckFilter:
    """Bid-for-floor vs acknowledgement, per caller segment, while the agent
    speaks. All times come from the injected clock."""

    def __init__(
        self,
        clock: Clock,
        language: str = "en",
        params: AckParams | None = None,
        echo_check: EchoTranscriptCheck | None = None,
    ) -> None:
        self.clock = clock
        self.language = language
        self.params = params or AckParams()
        self.echo_check = echo_check if echo_check is not None else EchoTranscriptCheck()
        self.reason = ""
        self.reset()

    def reset(self) -> None:
        self.agent_text = ""
        self._agent_start: float | None = None
        self._played_chars: int | None = None
        self._onset: float | None = None  # current segment's speech onset
        self._seg_end: float | None = None  # the segment's speech ended then
        self._speaking = False
        # The transcript's words are kept as one list extended in place while
        # the transcript only grows (see _tokens); the words before the
        # current segment are base_src[:base_n], the segment's
        # seg_src[seg_start:]: no per-word copies of a long turn.
        self._tok_text = ""
        self._tok_words: list[str] = []
        self._base_src: list[str] = []
        self._base_n = 0
        self._seg_src: list[str] = []
        self._seg_start = 0
        self._stopped_at: float | None = None
        self._provisional = False

    # -- agent side -----------------------------------------------------------
    @property
    def provisional(self) -> bool:
        """The last stop was made on speech without words yet: words will
        confirm it, silence will resume the agent."""
        return self._provisional

    @property
    def agent_speaking(self) -> bool:
        return self._agent_start is not None

    def agent_started(self, text: str, at: float | None = None) -> None:
        at = self.clock.now() if at is None else at
        self.agent_text = text
        self._agent_start = at
        self._played_chars = None
        self.echo_check.agent_said(text, at)

    def agent_progress(self, text_offset: int) -> None:
        """The first ``text_offset`` characters have been played (playback mark)."""
        self._played_chars = text_offset

    def agent_stopped(self) -> None:
        self._agent_start = None

    def _question_asked(self) -> bool:
        """The agent has already played a question (by playback marks, else
        estimated from elapsed time at a typical speaking rate)."""
        if "?" not in self.agent_text or self._agent_start is None:
            return False
        played = self._played_chars
        if played is None:
            played = int((self.clock.now() - self._agent_start) * CHARS_PER_SECOND)
        # The question counts once its last words are out (within ~1 s).
        q = self.agent_text.rfind("?", 0, max(0, played) + int(CHARS_PER_SECOND))
        return q >= 0

    # -- caller side ----------------------------------------------------------
    def on_vad(self, vad: VADStep) -> Decision:
        """One caller frame's VAD verdict (call for every frame)."""
        now = self.clock.now()
        if vad.started:
            self._open(vad.speech_start)
        if vad.stopped and self._onset is not None:
            self._speaking = False
            self._seg_end = vad.speech_end
        if self._stopped_at is not None:
            return self._after_stop(now)
        if self._onset is None or self._agent_start is None:
            return Decision.KEEP
        if self._onset < self._agent_start - 1e-9:
            # Speech already going when the agent began is not a barge-in
            # (the turn detector answered early; that is its business).
            return Decision.KEEP
        # Speech so far, onset to the last frame the VAD called speech (not
        # its hangover); judged after the words of the same instant arrived.
        if self._speaking and vad.speech_end - self._onset >= self.params.max_listen_s - 1e-9:
            decided = self._judge_words()
            if decided is not None:
                return decided
            return self._stop(
                "speech longer than a backchannel", provisional=not self._has_words()
            )
        if (
            not self._speaking
            and self._seg_end is not None
            and now - self._seg_end > self.params.word_wait_s
        ):
            self._close()
            return Decision.KEEP
        return Decision.LISTEN

    def on_transcript(self, text: str) -> Decision:
        """The recogniser's transcript of the caller's current turn so far."""
        words = self._tokens(text)
        if self._onset is None:
            self._base_src, self._base_n = words, len(words)
            return Decision.KEEP
        # Only what came since the segment began belongs to it.
        n = self._base_n
        # (the same growing list: the base is its prefix, nothing to compare)
        start = n if self._base_src is words or words[:n] == self._base_src[:n] else 0
        self._seg_src, self._seg_start = words, start
        if self._stopped_at is not None:
            if self._provisional and self._has_words():
                self._provisional = False  # words came: the stop stands
                self.reason += " (words followed)"
            return Decision.KEEP
        if not self.agent_speaking:
            return Decision.KEEP
        decided = self._judge_words()
        return decided if decided is not None else Decision.LISTEN

    # -- internals ------------------------------------------------------------
    def _tokens(self, text: str) -> list[str]:
        """``tokens(text)``, only the new part tokenised when ``text``
        extends the previous transcript at a word boundary (a growing
        transcript would otherwise be re-tokenised whole on every word)."""
        prev = self._tok_text
        if (
            prev
            and text.startswith(prev)
            and (len(text) == len(prev) or not _WORDISH.match(text[len(prev)]))
        ):
            self._tok_words.extend(tokens(text[len(prev) :]))
        else:
            self._tok_words = tokens(text)  # a new list: older views keep theirs
        self._tok_text = text
        return self._tok_words

    def _has_words(self) -> bool:
        return len(self._seg_src) > self._seg_start

    def _absorb(self) -> None:
        """The segment's words join the base; the segment is empty again."""
        if self._has_words():
            if self._seg_src is self._base_src and self._seg_start == self._base_n:
                self._base_n = len(self._seg_src)
            else:
                merged = self._base_src[: self._base_n] + self._seg_src[self._seg_start :]
                self._base_src, self._base_n = merged, len(merged)
        self._seg_src, self._seg_start = [], 0

    def _judge_words(self) -> Decision | None:
        if not self._has_words():
            return None
        seg = self._seg_src[self._seg_start :]
        text = " ".join(seg)
        if self.echo_check.is_echo(text, self.clock.now()):
            return Decision.KEEP
        if not is_backchannel(text, self.language):
            return self._stop(f"words: {text!r}")
        if len(seg) > self.params.max_backchannel_words:
            return self._stop(f"many words: {text!r}")
        if self._question_asked() and is_answer(text, self.language):
            return self._stop(f"answer to the agent's question: {text!r}")
        if not self._speaking:
            self.reason = f"acknowledgement: {text!r}"
            self._close()
            return Decision.KEEP
        return None

    def _open(self, onset: float) -> None:
        if self._stopped_at is not None:
            return  # still inside a stop: the same bid goes on
        self._onset = onset
        self._speaking = True
        self._seg_end = None
        self._absorb()

    def _close(self) -> None:
        self._onset = None
        self._seg_end = None
        self._absorb()

    def _stop(self, reason: str, provisional: bool = False) -> Decision:
        self.reason = reason
        self._stopped_at = self.clock.now()
        self._provisional = provisional
        return Decision.STOP

    def _after_stop(self, now: float) -> Decision:
        if (
            self._provisional
            and not self._speaking
            and now - (self._stopped_at or now) >= self.params.false_interruption_s
        ):
            self.reason = "false interruption: no words followed"
            self._stopped_at = None
            self._provisional = False
            self._close()
            return Decision.RESUME
        if not self._provisional and not self._speaking:
            # A confirmed bid: the caller has the floor; the next agent
            # reply starts a fresh watch.
            self._stopped_at = None
            self._close()
        return Decision.KEEP

    def confirm(self) -> None:
        """The host handed the floor to the caller: drop any resume."""
        self._stopped_at = None
        self._provisional = False
        self._close()
