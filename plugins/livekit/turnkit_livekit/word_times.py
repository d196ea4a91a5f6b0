"""The STT's word times, from the agent's STT node to turnkit's detector.

LiveKit tells the session only a transcript's text (``user_input_transcribed``,
which :func:`turnkit_livekit.attach` feeds the detector); when each word was
said rides in the STT's ``SpeechEvent`` (``SpeechData.words``: LiveKit's
``TimedString`` with ``start_time``/``end_time``, seconds of the session's
audio input), which only the agent's ``stt_node`` sees. Without them the
stream stamps each transcript with the VAD's last speech end, and the
detector's word-time rules (words the recogniser still owes at a pause,
words the VAD missed opening a turn, the caller's own voice level behind the
stalled-words rule; docs/endpointing.md) do not run, as they do in
``turnkit replay`` and in Pipecat with Deepgram.

The agent's reply text, too, reaches the session only late: LiveKit adds a
reply to its chat context once it has played (or was cut), so a caller's
turn said over the reply ("uh-huh", an answer to a question the agent is
still finishing) was judged against the agent's *previous* line, where
``turnkit replay`` hands the detector each reply's text as it starts.
:class:`WordTimesAgent`'s ``transcription_node`` (or :func:`reply_text`
around an agent's own) notes each reply's whole text when the LLM (or the
TTS's aligned transcript) has given all of it, usually before or soon after
its first audio; :func:`turnkit_livekit.attach` hands it to the detector
once the reply is playing (a reply cut before its first audio never is).

:class:`WordTimesAgent` is an ``Agent`` whose ``stt_node`` passes the STT's
events through unchanged and notes each transcript's words for the
session's turnkit detector stream (:meth:`TurnkitDetectorStream.note_words`);
the transcript event that follows picks them up. For an agent with its own
``stt_node``, :func:`stt_words` does the same around any event iterator.
The stream puts the times on its audio clock
(:class:`turnkit.text.word_clock.WordClock`). :func:`turnkit_livekit.recorder.record_session`
listens too, so a recorded call keeps its words' times (``words`` in
``call.json``) and replays with the same rules.

Example::

    class Booking(WordTimesAgent):
        def __init__(self) -> None:
            super().__init__(instructions="You take bookings.")

    attach(session, detector)
    await session.start(Booking())
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from typing import Any

from livekit import rtc
from livekit.agents import Agent, AgentSession, stt
from livekit.agents.voice.agent import ModelSettings

from turnkit_livekit.detectors import TurnkitStreamingDetector

__all__ = [
    "WordTimesAgent",
    "add_listener",
    "add_reply_listener",
    "detector_of",
    "register",
    "reply_text",
    "stt_words",
]

# Who reads each session's word times: its turnkit detector (attach()) and
# its recorder (record_session), keyed by role (weak: a closed session goes).
WordsListener = Callable[[str, bool, Sequence[Any]], None]
_LISTENERS: weakref.WeakKeyDictionary[AgentSession, dict[str, WordsListener]] = (
    weakref.WeakKeyDictionary()
)
# Who is told each reply's whole text (attach()'s TurnMetrics), keyed by role.
ReplyListener = Callable[[str], None]
_REPLY_LISTENERS: weakref.WeakKeyDictionary[AgentSession, dict[str, ReplyListener]] = (
    weakref.WeakKeyDictionary()
)
_TRANSCRIPTS = {
    stt.SpeechEventType.INTERIM_TRANSCRIPT: False,
    stt.SpeechEventType.FINAL_TRANSCRIPT: True,
}


def add_listener(session: AgentSession, role: str, listener: WordsListener) -> None:
    """``listener(text, is_final, words)`` is called with each transcript's
    timed words the session's STT node notes (one listener per ``role``)."""
    _LISTENERS.setdefault(session, {})[role] = listener


def add_reply_listener(session: AgentSession, role: str, listener: ReplyListener) -> None:
    """``listener(text)`` is called with each reply's whole text once the
    session's transcription node has passed all of it (one per ``role``)."""
    _REPLY_LISTENERS.setdefault(session, {})[role] = listener


_DETECTORS: weakref.WeakKeyDictionary[AgentSession, TurnkitStreamingDetector] = (
    weakref.WeakKeyDictionary()
)


def detector_of(session: AgentSession) -> TurnkitStreamingDetector | None:
    """The turnkit detector :func:`attach` gave ``session``, if any."""
    return _DETECTORS.get(session)


def register(session: AgentSession, detector: TurnkitStreamingDetector) -> None:
    """``detector`` reads ``session``'s transcripts (:func:`attach` calls this)."""
    _DETECTORS[session] = detector

    def to_stream(text: str, final: bool, words: Sequence[Any]) -> None:
        if detector.streams:
            detector.streams[-1].note_words(text, final, words)

    add_listener(session, "detector", to_stream)


async def stt_words(
    session: AgentSession, events: AsyncIterable[stt.SpeechEvent]
) -> AsyncIterator[stt.SpeechEvent]:
    """``events`` unchanged, each transcript's word times noted for the
    session's turnkit detector stream and recorder on the way."""
    async for ev in events:
        final = _TRANSCRIPTS.get(ev.type) if isinstance(ev, stt.SpeechEvent) else None
        listeners = _LISTENERS.get(session)
        if final is not None and ev.alternatives and listeners:
            alt = ev.alternatives[0]
            for listener in list(listeners.values()):
                listener(alt.text, final, alt.words)
        yield ev


async def reply_text(session: AgentSession, text: AsyncIterable[Any]) -> AsyncIterator[Any]:
    """``text`` (a reply's transcription stream) unchanged; once all of it
    has passed, its whole text to the session's reply listeners. A stream
    closed early (the reply was cut) tells nobody: LiveKit's chat item then
    holds the words that were heard."""
    parts: list[str] = []
    async for delta in text:
        parts.append(str(delta))
        yield delta
    whole = "".join(parts).strip()
    listeners = _REPLY_LISTENERS.get(session)
    if whole and listeners:
        for listener in list(listeners.values()):
            listener(whole)


async def _stream_of(node: Any) -> Any:
    # A node may return its iterator, or a coroutine giving it (or None).
    return await node if asyncio.iscoroutine(node) else node


class WordTimesAgent(Agent):
    """An ``Agent`` whose STT node hands each transcript's word times to the
    session's turnkit detector, and whose transcription node hands it each
    reply's text before LiveKit's chat context has it (see the module
    docstring)."""

    async def stt_node(  # type: ignore[override]
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> AsyncIterator[stt.SpeechEvent]:
        node = await _stream_of(super().stt_node(audio, model_settings))
        if node is None:
            return
        async for ev in stt_words(self.session, node):
            yield ev

    async def transcription_node(  # type: ignore[override]
        self, text: AsyncIterable[Any], model_settings: ModelSettings
    ) -> AsyncIterator[Any]:
        node = await _stream_of(super().transcription_node(text, model_settings))
        if node is None:
            return
        async for delta in reply_text(self.session, node):
            yield delta
