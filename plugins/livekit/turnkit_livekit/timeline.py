"""The session's one :class:`~turnkit.audio.timeline.AudioTimeline` in front of LiveKit.

LiveKit 1.8 reads ``session.input.audio`` in one task
(``AgentSession._forward_audio_task``) and hands each frame, the same
object, to its VAD, its STT and the turn detector stream
(``AgentActivity.push_audio`` → ``AudioRecognition._push_audio``:
``self._vad_ch.send_nowait(frame)`` … ``self._turn_detector_stream.push_audio(frame)``).
:class:`TimelineInput` wraps that input, so the frames every consumer gets
are the timeline's: each 32 ms of caller audio is converted to 16 kHz,
echo-filtered and judged by the session's one Silero VAD on the audio clock
*once*, before LiveKit hears it. The frame LiveKit receives carries that
verdict (``AudioFrame.userdata``, read back with :func:`judged`), so the
turnkit detector stream uses it as it is instead of judging again: the
barge-in controller and the turn detector see the same frames, in the same
order, with the same speech edges.

It decides nothing; it says, per frame, what the caller's microphone holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from livekit import rtc
from livekit.agents.voice.io import AudioInput

from turnkit.audio.timeline import SAMPLE_RATE, AudioTimeline
from turnkit.audio.wav import to_pcm16
from turnkit.frames import AudioInFrame

__all__ = ["Judged", "TimelineInput", "judged"]

KEY = "turnkit.timeline"  # the AudioFrame.userdata key a judged frame carries


@dataclass(frozen=True, slots=True)
class Judged:
    """A LiveKit frame's turnkit verdict: the timeline that judged it and
    the judged 32 ms frame (echo-suppressed audio, ``vad``, ``at``)."""

    timeline: AudioTimeline
    frame: AudioInFrame


def judged(frame: rtc.AudioFrame) -> Judged | None:
    """The verdict a :class:`TimelineInput` attached to ``frame`` (None: no
    timeline judged it, e.g. LiveKit's own flush silence)."""
    j = frame.userdata.get(KEY)
    return j if isinstance(j, Judged) else None


class TimelineInput(AudioInput):
    """``session.input.audio`` through the session's timeline.

    Each source frame (any rate, any channel count, any length) goes into
    ``timeline.push``; every 32 ms frame it completes is passed to
    ``on_frame`` (the barge-in controller, on the timeline's clock, which
    is at that frame's end) and then handed to LiveKit as 512 samples of
    16 kHz mono int16 — the echo-suppressed audio — tagged with its
    :class:`Judged` verdict. ``before`` is called with the audio time the
    source frame will reach, before it is judged (the echo reference is
    brought up to it).
    """

    def __init__(
        self,
        source: AudioInput,
        timeline: AudioTimeline,
        *,
        on_frame: Callable[[AudioInFrame], None] | None = None,
        before: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(label="turnkit-timeline", source=source)
        self.timeline = timeline
        self.on_frame = on_frame
        self.before = before
        self.frames = 0  # 32 ms frames judged and handed to LiveKit
        self._out: deque[rtc.AudioFrame] = deque()

    @property
    def echo_frames(self) -> int:
        """Frames the echo filter judged the agent's echo alone."""
        return self.timeline.echo_frames

    async def __anext__(self) -> rtc.AudioFrame:
        while not self._out:
            frame = await super().__anext__()
            if self.before is not None:
                self.before(self.timeline.now + frame.duration)
            pcm = np.frombuffer(frame.data, dtype=np.int16)
            for af in await self.timeline.push(pcm, frame.sample_rate, frame.num_channels):
                self.frames += 1
                if self.on_frame is not None:
                    self.on_frame(af)
                self._out.append(self._livekit(af))
        return self._out.popleft()

    def _livekit(self, af: AudioInFrame) -> rtc.AudioFrame:
        pcm = to_pcm16(af.audio)
        return rtc.AudioFrame(
            pcm.tobytes(),
            SAMPLE_RATE,
            1,
            len(pcm),
            userdata={KEY: Judged(self.timeline, af)},
        )
