"""espeak-ng as a Pipecat TTS service, with word timestamps.

:class:`EspeakTTSService` renders each sentence with turnkit's
:class:`~turnkit.tts.EspeakTTS` (offline, a subprocess; GPL, never
imported). With ``word_timings`` (the default) it renders word by word
(:meth:`~turnkit.tts.EspeakTTS.synthesize_words`) and reports each word's
start through Pipecat's own ``TTSService.add_word_timestamps``, as the cloud
services with word timestamps do (Cartesia, ElevenLabs): Pipecat stamps each
word's ``TTSTextFrame`` with a ``pts``, the output transport releases it as
the word starts playing, and :class:`~turnkit_pipecat.truncation.HeardTruncation`
reads the words heard from them. Without (``word_timings=False``) it renders
whole sentences (natural sentence prosody, one subprocess each) and Pipecat
releases each sentence's text as its audio starts.

Timestamps are seconds from the start of the turn's audio context (Pipecat
times them from the context's first audio chunk), so each sentence's words
are offset by the audio already rendered for that context.

Example::

    tts = EspeakTTSService("en-us")
    pipeline = Pipeline([..., llm, tts, transport.output(), HeardTruncation(), assistant])
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from pipecat.frames.frames import Frame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from turnkit.audio.wav import to_pcm16
from turnkit.tts.espeak import EspeakTTS

__all__ = ["EspeakTTSService"]


class EspeakTTSService(TTSService):
    """espeak-ng as a Pipecat TTS service, optionally with exact word
    timestamps (see the module docstring). Decides nothing: it renders, and
    says where each word starts in the audio."""

    def __init__(self, voice: str = "en-us", *, word_timings: bool = True, **kwargs: Any) -> None:
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            # With word timestamps the words are the text frames (as
            # Cartesia and ElevenLabs do); else each sentence goes out whole.
            push_text_frames=not word_timings,
            settings=TTSSettings(model=None, voice=voice, language=None),
            **kwargs,
        )
        self._espeak = EspeakTTS(voice)
        self.word_timings = word_timings
        self._context_s: dict[str, float] = {}  # audio rendered so far, per context

    def can_generate_metrics(self) -> bool:
        return True

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        if not text.strip():
            return
        if self.word_timings:
            timed = await self._espeak.synthesize_words(text)
            pcm, rate = timed.audio, timed.sample_rate
            offset = self._context_s.get(context_id, 0.0)
            self._context_s = {context_id: offset + timed.duration}  # older contexts are over
            # Queued in the audio context before the audio: Pipecat times
            # them once the context's first chunk plays.
            await self.add_word_timestamps(
                [(w.text, offset + w.start) for w in timed.words], context_id
            )
        else:
            pcm, rate = await self._espeak.synthesize(text), self._espeak.sample_rate
        data = to_pcm16(pcm).tobytes()

        async def chunks() -> AsyncIterator[bytes]:
            step = self.chunk_size
            for i in range(0, len(data), step):
                yield data[i : i + step]

        async for frame in self._stream_audio_frames_from_iterator(
            chunks(), in_sample_rate=rate, context_id=context_id
        ):
            await self.stop_ttfb_metrics()
            yield frame
