"""Whether the recogniser streams: writes the caller's words while they speak.

A streaming recogniser (Deepgram, a live interim transcript) sends new words
mid-speech; one that writes a segment only once the VAD stops (Whisper
behind a VAD), or only finals at its own endpoint, sends none there. Only
with the first does long speech with no new word mean something: another
voice behind the caller (a television, an office) or a sound with no words.
The endpointing (its stalled-words end) and the barge-in controller (no
confirm by length alone) both read it from :class:`StreamingWatch`; each
host object says what counts as "mid-speech" and "new words" for it.
"""

from __future__ import annotations

__all__ = ["STREAMED_WORDS", "StreamingWatch"]

# Updates with new words heard mid-speech before the recogniser counts as
# streaming.
STREAMED_WORDS = 3


class StreamingWatch:
    """Counts the recogniser's updates that brought new words mid-speech;
    :attr:`streams` once ``STREAMED_WORDS`` have."""

    def __init__(self) -> None:
        self.updates = 0

    def heard(self, mid_speech: bool) -> None:
        """An update with new words came; ``mid_speech``: the caller was speaking."""
        if mid_speech:
            self.updates += 1

    @property
    def streams(self) -> bool:
        return self.updates >= STREAMED_WORDS
