"""Whether the caller is owed an answer once the agent's audio stops.

While the agent talks, a caller turn that ends without stopping it (the
barge-in filters judged it an acknowledgement, or the agent talked on) is
not answered then: it is kept. When the agent's audio stops it may still be
the caller's turn, and if nobody answers it the caller, who has finished,
waits in silence:

* after a **barge-in stop**, the agent stopped for that speech (a bid whose
  words came after it ended: a late recogniser) — it is owed;
* after a reply that **played to its end**, only speech that ended in the
  reply's last :attr:`OwedTurn.after_reply_s` is owed: the caller spoke last,
  over the agent's closing words ("Okay" as it finishes), and the floor is
  theirs. A murmur from earlier in the reply ("mm-hm" with a phrase still to
  come) acknowledged that phrase, and the caller takes the floor after the
  reply themselves: answering it would talk over them.

Caller speech after the kept turn clears it (they went on: their next turn
is answered on its own end). Evidence: the kept turn's words and where its
speech ended, caller speech onsets, and how the agent's audio stopped.

One object for every host: the :class:`~turnkit.drafting.Responder` (and so
``turnkit replay`` and turnkit's own pipeline), Pipecat's turn strategies
and LiveKit's barge-in filter each feed it and answer what it returns.
"""

from __future__ import annotations

from turnkit.clock import Clock

__all__ = ["AFTER_REPLY_S", "OwedTurn"]

# Measured from the caller's speech end, not from the detector's decision:
# whether the caller spoke over the reply's close is a fact of the call, and
# a slower detector must not turn a murmur into a turn. An "Okay" said over
# the reply's last words ends within a second of it (the real-call variants:
# 0.45 and 0.95 s, an "Okay" begun 0.8 and 1.3 s early); an "mm-hm" with a
# phrase of the reply still to come (1.2 s is ~18 characters at the agent's
# 15 a second: "dollar charge on May fifth.") acknowledged that phrase's
# start, and the caller takes the floor after the reply, not before:
# answered, its reply met the caller's next turn (1.46 and 1.66 s before the
# end: the agent talked over "Right so that one..." 60 ms after it began).
AFTER_REPLY_S = 1.2


class OwedTurn:
    """Keeps the caller turn whose end came while the agent talked, and says
    whether it is owed an answer when the agent's audio stops (see the
    module docstring)."""

    def __init__(self, clock: Clock, after_reply_s: float = AFTER_REPLY_S) -> None:
        self.clock = clock
        self.after_reply_s = after_reply_s
        self._text: str | None = None
        self._speech_end = 0.0

    @property
    def kept(self) -> str | None:
        """The words of the turn kept, if any."""
        return self._text

    def ignored(self, text: str, speech_end: float | None = None) -> None:
        """A caller turn ended while the agent talked and was not answered
        (``speech_end``: where its speech ended, clock time; default now)."""
        self._text = text
        self._speech_end = self.clock.now() if speech_end is None else speech_end

    def caller_spoke(self) -> None:
        """The caller speaks again: the kept turn is theirs to go on with."""
        self._text = None

    def take(self, completed: bool) -> str | None:
        """The agent's audio has stopped (``completed``: the reply played to
        its end; else a barge-in stopped it): the kept turn's words if it is
        owed an answer now, else None. Asked once: the turn is cleared."""
        text, self._text = self._text, None
        if (
            text is not None
            and completed
            and self.clock.now() - self._speech_end > self.after_reply_s
        ):
            return None
        return text
