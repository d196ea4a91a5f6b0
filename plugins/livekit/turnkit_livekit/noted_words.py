"""Word times noted from the STT node, taken by the transcript event that follows.

LiveKit hands a transcript to the session in two places: the agent's
``stt_node`` sees the STT's ``SpeechEvent`` with its words' times, the
session's ``user_input_transcribed`` event (what turnkit's detector stream
and the recorder listen to) only its text. :class:`NotedWords` bridges the
two: the node notes each transcript's words, and the event takes the first
noted entry with the same text and finality (LiveKit passes the STT's events
to the session in order, so what precedes the match was never delivered and
is dropped).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

__all__ = ["NotedWords"]


class NotedWords:
    """Timed words waiting for their transcript event (see the module docstring)."""

    def __init__(self, finals_only: bool = False, maxlen: int = 32) -> None:
        self.finals_only = finals_only
        self._noted: deque[tuple[str, bool, list[Any]]] = deque(maxlen=maxlen)

    def note(self, text: str, is_final: bool, words: Sequence[Any] | None) -> None:
        """The STT wrote ``text`` with these timed words."""
        if words and (is_final or not self.finals_only):
            self._noted.append((text.strip(), is_final, list(words)))

    def take(self, text: str, is_final: bool) -> list[Any] | None:
        """The words noted for this transcript, if any."""
        key = text.strip()
        for i, (t, f, ws) in enumerate(self._noted):
            if t == key and f == is_final:
                for _ in range(i + 1):
                    self._noted.popleft()
                return ws
        return None
