"""The bot speaking where a recorded call's agent did, for tests that feed
Pipecat's user aggregator a recorded call (no TTS: the frames alone)."""

from __future__ import annotations

from collections.abc import Callable

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
)


def with_bot(
    frames: list[Frame],
    turns: list[tuple[float, float]],
    on_start: Callable[[int], list[Frame]] | None = None,
) -> list[Frame]:
    """``frames`` (a recorded call's audio and words) with
    ``BotStarted/StoppedSpeakingFrame`` around each ``(start, end)`` span of
    caller audio time; ``on_start(i)`` adds frames after the i-th start."""
    out: list[Frame] = []
    t, i, speaking = 0.0, 0, False
    for f in frames:
        if isinstance(f, InputAudioRawFrame):
            if i < len(turns) and not speaking and t >= turns[i][0]:
                out.append(BotStartedSpeakingFrame())
                speaking = True
                if on_start is not None:
                    out.extend(on_start(i))
            if speaking and t >= turns[i][1]:
                out.append(BotStoppedSpeakingFrame())
                speaking, i = False, i + 1
            t += f.num_frames / f.sample_rate
        out.append(f)
    return out
