"""The recorded agent track fed to the echo filter a frame at a time.

A replay's echo filter compares each microphone frame with what the
loudspeaker played (``agent.wav``) up to that frame's last sample, looking
back at most its delay search window (0.8 s). Handing it the whole track
(``EchoFilter.set_reference``) costs the track's length in memory, twice
over while it is aligned: about 1 GB for a 2-hour call. :class:`ReferenceFeeder`
reads ``agent.wav`` in blocks instead and pushes each stretch into the
filter's live reference buffer (``EchoFilter.push_reference``, the path a
live agent uses) just before the microphone frame that needs it, so memory
stays flat with the call's length.

It decides nothing; the echo filter sees the same samples either way: the
track resampled to the microphone's rate in one stream, cut at the caller
audio's length, silence past its end (as ``align_reference`` pads it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from turnkit.audio.wav import iter_wav_blocks
from turnkit.barge_in.echo import EchoFilter
from turnkit.frames import AudioInFrame, Frame
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["ReferenceFeeder"]


class ReferenceFeeder(FrameProcessor):
    """Pushes ``path`` (the agent track) into ``echo`` up to the end of each
    :class:`~turnkit.frames.AudioInFrame` before passing the frame on; put it
    in front of the echo gate. Raises ``AudioError`` (failing the frame, and
    a replay's call) on a bad block of the track."""

    def __init__(
        self,
        echo: EchoFilter,
        path: Path,
        n_samples: int,
        rate: int = 16000,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.echo = echo
        self.path = path
        self.rate = rate
        self.n_samples = n_samples
        self._blocks: Iterator[np.ndarray] | None = None
        self._pending = np.zeros(0, dtype=np.float32)  # read, not yet pushed
        self._pushed = 0  # samples handed to the echo filter
        self._exhausted = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, AudioInFrame):
            self.feed_until(round(frame.at * self.rate) + len(frame.audio))
        await self.push_frame(frame, direction)

    def feed_until(self, end: int) -> None:
        """Push the track up to sample ``end`` (exclusive), at most
        ``n_samples``; past the track's end the filter reads silence."""
        end = min(end, self.n_samples)
        if self._blocks is None:
            self._blocks = iter_wav_blocks(self.path, self.rate)
        while self._pushed < end:
            if not len(self._pending):
                if self._exhausted:
                    return
                block = next(self._blocks, None)
                if block is None:
                    self._exhausted = True
                    return
                self._pending = block
            take = min(end - self._pushed, len(self._pending))
            self.echo.push_reference(self._pending[:take], self._pushed / self.rate)
            self._pending = self._pending[take:]
            self._pushed += take
