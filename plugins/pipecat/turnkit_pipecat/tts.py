"""espeak-ng as a Pipecat TTS service that reports word timestamps.

:class:`EspeakWordTTSService` renders each sentence with
:meth:`turnkit.tts.EspeakTTS.synthesize_words` (offline; a subprocess per
word) and reports each word's start through Pipecat's own
``TTSService.add_word_timestamps``, as the cloud services with word
timestamps do (Cartesia, ElevenLabs). Pipecat then stamps each word's
``TTSTextFrame`` with a ``pts``, the output transport releases it as the word
starts playing, and :class:`~turnkit_pipecat.truncation.HeardTruncation`
reads the words heard from them.

Timestamps are seconds from the start of the turn's audio context (Pipecat
times them from the context's first audio chunk), so each sentence's words
are offset by the audio already rendered for that context.

Example::

    tts = EspeakWordTTSService("en-us")
    pipeline = Pipeline([..., llm, tts, transport.output(), HeardTruncation(), assistant])
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import numpy as np
from pipecat.frames.frames import Frame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from turnkit.tts.espeak import EspeakTTS

__all__ = ["EspeakWordTTSService"]


class EspeakWordTTSService(TTSService):
    """espeak-ng with exact word timings, as a Pipecat TTS service.

    Decides nothing: it renders, and says where each word starts in the
    audio (espeak-ng's word-by-word rendering makes them exact, see
    :meth:`~turnkit.tts.EspeakTTS.synthesize_words`)."""

    def __init__(self, voice: str = "en-us", **kwargs: Any) -> None:
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(model=None, voice=voice, language=None),
            **kwargs,
        )
        self._espeak = EspeakTTS(voice)
        self._context_s: dict[str, float] = {}  # audio rendered so far, per context

    def can_generate_metrics(self) -> bool:
        return True

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        if not text.strip():
            return
        timed = await self._espeak.synthesize_words(text)
        offset = self._context_s.get(context_id, 0.0)
        self._context_s = {context_id: offset + timed.duration}  # older contexts are over
        # Queued in the audio context before the audio: Pipecat times them
        # once the context's first chunk plays.
        await self.add_word_timestamps(
            [(w.text, offset + w.start) for w in timed.words], context_id
        )
        data = (np.clip(timed.audio, -1, 1) * 32767).astype("<i2").tobytes()

        async def chunks() -> AsyncIterator[bytes]:
            step = self.chunk_size
            for i in range(0, len(data), step):
                yield data[i : i + step]

        async for frame in self._stream_audio_frames_from_iterator(
            chunks(), in_sample_rate=timed.sample_rate, context_id=context_id
        ):
            await self.stop_ttfb_metrics()
            yield frame
