"""When a reply's text becomes the detector's context: from its first audio.

``turnkit replay`` hands the detector each agent line as it starts to play.
A live host learns a reply's whole text earlier (the LLM has given all of it)
or later (LiveKit's and Pipecat's contexts hold it once it has played). A
host that sees the text early hands it through :class:`ReplyTextGate`, the
one rule for both hosts: text that comes while the agent is audible is
context at once; text that comes before the reply's audio waits for it, and
is dropped if the reply is cut first (the caller never heard it).

Example::

    gate = ReplyTextGate()
    gate.text("Can I have the order number?")  # None: nothing plays yet
    gate.started()                             # the text, to set_agent_text()
"""

from __future__ import annotations

__all__ = ["ReplyTextGate"]


class ReplyTextGate:
    """Holds a reply's whole text until the agent is audible (see the module
    docstring). The host says when the agent's audio starts and stops and
    when a reply is cut before its audio; each method returns the text to
    hand the detector now, if any."""

    def __init__(self) -> None:
        self.playing = False
        self._pending: str | None = None

    def text(self, text: str) -> str | None:
        """A reply's whole text is known: it, while the agent is audible;
        otherwise kept for the reply's first audio."""
        text = text.strip()
        if not text:
            return None
        if self.playing:
            return text
        self._pending = text
        return None

    def started(self) -> str | None:
        """The agent's audio began: the text kept for it, if any."""
        self.playing = True
        pending, self._pending = self._pending, None
        return pending

    def stopped(self) -> None:
        """The agent is not audible: a reply whose audio has not begun is
        one the host dropped before it played."""
        self.playing = False
        self._pending = None

    def cancel(self) -> None:
        """A reply not yet audible was cut (the caller took the floor)."""
        self._pending = None
