"""Text-to-speech engines behind one small protocol (:class:`TTS`).

Example::

    tts = EspeakTTS(voice="en-us")
    pcm = await tts.synthesize("One moment, let me check that.")
"""

from turnkit.tts.base import TTS, TTSError, TTSUnavailable, WordTimedAudio, WordTimedTTS
from turnkit.tts.espeak import EspeakTTS
from turnkit.tts.processor import TTSProcessor

__all__ = [
    "TTS",
    "EspeakTTS",
    "TTSError",
    "TTSProcessor",
    "TTSUnavailable",
    "WordTimedAudio",
    "WordTimedTTS",
]
