"""A pipeline stage that keeps the chat history true to what the caller heard.

:class:`HistoryTruncator` holds the OpenAI-format message list the LLM is
prompted with. It records the caller's turns and the agent's replies from the
frames that pass, feeds playback evidence to a
:class:`~turnkit.barge_in.cursor.PlaybackCursor`, and when a reply stops
before its end (barge-in, flush, a newer reply superseding it) rewrites that
reply's messages to the words heard (:func:`~turnkit.barge_in.truncation.truncate_history`).

Frames it reads (either direction; all are passed on unchanged):

* :class:`~turnkit.frames.TranscriptFrame` + :class:`~turnkit.frames.TurnEndFrame`
  — the caller's turn, appended as a ``user`` message (``record_user``);
* :class:`~turnkit.frames.AgentTextFrame` — reply text, chunks of one
  ``reply_id`` extend one ``assistant`` message (``record_replies``; with
  it off, the host writes the messages and the reply is the assistant
  messages after the last user message);
* :class:`~turnkit.barge_in.cursor.WordTimestampsFrame`,
  :class:`~turnkit.frames.PlaybackMarkFrame`,
  :class:`~turnkit.frames.AgentAudioStartedFrame` — playback evidence;
* :class:`~turnkit.frames.AgentAudioStoppedFrame` — ``completed`` keeps (or
  restores) the whole reply; any other reason cuts it;
* :class:`~turnkit.frames.InterruptionFrame` — every reply not completed is
  cut where it is (one whose audio never started is unheard).

A cut is redone from the reply's original text whenever better evidence
arrives (a final mark after the stop), and undone when the reply resumes
(a false interruption): the history always reflects the latest evidence.

Example::

    history = HistoryTruncator(clock, messages=[{"role": "system", "content": "..."}])
    pipe = Pipeline([vad, detector, history, agent_output])
    ...
    llm.chat(history.messages)  # the last reply cut to what was heard
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from turnkit.barge_in.cursor import PlaybackCursor, WordTimestampsFrame
from turnkit.barge_in.truncation import Heard, TruncationConfig, reply_span, truncate_history
from turnkit.clock import Clock
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    AgentTextFrame,
    Frame,
    InterruptionFrame,
    PlaybackMarkFrame,
    TranscriptFrame,
    TurnEndFrame,
)
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = ["HistoryTruncator"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Reply:
    originals: list[dict[str, Any]] = field(default_factory=list)  # as written
    current: list[dict[str, Any]] = field(default_factory=list)  # objects in the history
    where: int = 0  # where the reply sat when its messages were all removed
    heard: Heard | None = None  # the cut in force, None when whole
    completed: bool = False


class HistoryTruncator(FrameProcessor):
    """Holds the chat history; cuts each interrupted reply to the words heard.

    Decides which words of a reply stay in the history, on the evidence the
    :class:`~turnkit.barge_in.cursor.PlaybackCursor` holds (TTS word
    timestamps, the output's sample positions, else an estimate); the
    wording of the cut follows ``config``.
    """

    def __init__(
        self,
        clock: Clock,
        messages: list[dict[str, Any]] | None = None,
        *,
        config: TruncationConfig | None = None,
        record_user: bool = True,
        record_replies: bool = True,
        max_extrapolate_s: float = 0.2,
        on_truncated: Callable[[int, Heard], None] | None = None,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.messages: list[dict[str, Any]] = messages if messages is not None else []
        self.config = config or TruncationConfig()
        self.cursor = PlaybackCursor(
            clock, config=self.config, max_extrapolate_s=max_extrapolate_s
        )
        self.record_user = record_user
        self.record_replies = record_replies
        self.on_truncated = on_truncated
        self.cuts: list[tuple[int, Heard]] = []
        self._replies: dict[int, _Reply] = {}
        self._transcript = ""
        self._user_msg: dict[str, Any] | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        try:
            self._observe(frame)
        finally:
            await self.push_frame(frame, direction)

    # -- frames -----------------------------------------------------------
    def _observe(self, frame: Frame) -> None:
        if isinstance(frame, TranscriptFrame):
            self._transcript = frame.text
        elif isinstance(frame, TurnEndFrame):
            self._on_turn_end()
        elif isinstance(frame, AgentTextFrame):
            self._on_text(frame.reply_id, frame.text)
        elif isinstance(frame, WordTimestampsFrame):
            self.cursor.on_timestamps(frame)
        elif isinstance(frame, PlaybackMarkFrame):
            self.cursor.on_mark(frame.reply_id, frame.played_s, frame.text_offset)
            reply = self._replies.get(frame.reply_id)
            if reply is not None and reply.heard is not None:
                self._cut(frame.reply_id)  # better evidence after the stop
        elif isinstance(frame, AgentAudioStartedFrame):
            self.cursor.on_started(frame.reply_id)
            reply = self._replies.get(frame.reply_id)
            if reply is not None and reply.heard is not None:
                self._restore(frame.reply_id)  # resumed: it may yet play whole
        elif isinstance(frame, AgentAudioStoppedFrame):
            self.cursor.on_stopped(frame.reply_id, frame.reason)
            if frame.reason == "completed":
                reply = self._replies.get(frame.reply_id)
                if reply is not None:
                    reply.completed = True
                    if reply.heard is not None:
                        self._restore(frame.reply_id)
            else:
                self._cut(frame.reply_id)
        elif isinstance(frame, InterruptionFrame):
            self.cursor.on_flush()
            for rid, reply in list(self._replies.items()):
                if not reply.completed:
                    self._cut(rid)

    def _on_turn_end(self) -> None:
        text = self._transcript.strip()
        if not self.record_user or not text:
            return
        last = self.messages[-1] if self.messages else None
        if last is self._user_msg and last is not None and text.startswith(last["content"]):
            # The same caller turn went on after an early end decision.
            last["content"] = text
            return
        self._user_msg = {"role": "user", "content": text}
        self.messages.append(self._user_msg)

    def _on_text(self, reply_id: int, text: str) -> None:
        self.cursor.on_text(reply_id, text)
        if not self.record_replies:
            return
        reply = self._replies.get(reply_id)
        if reply is None or not reply.current:
            msg = {"role": "assistant", "content": self.cursor.reply(reply_id).text}
            self.messages.append(msg)
            self._replies[reply_id] = _Reply(originals=[copy.deepcopy(msg)], current=[msg])
            return
        full = self.cursor.reply(reply_id).text
        reply.originals[-1]["content"] = full
        if reply.heard is None:
            reply.current[-1]["content"] = full
        else:
            self._cut(reply_id)

    # -- cutting ----------------------------------------------------------
    def _capture(self, reply_id: int) -> _Reply | None:
        """The reply's messages: recorded, or (host-written history) the
        assistant messages after the last user message."""
        reply = self._replies.get(reply_id)
        if reply is not None:
            return reply
        if self.record_replies:
            return None
        idx = reply_span(self.messages)
        if not idx:
            return None
        # From the reply's first assistant message on: tool messages between
        # its parts stay in place.
        current = [m for m in self.messages[idx[0] :] if not self._owned(m)]
        if not current:
            return None
        reply = _Reply(originals=copy.deepcopy(current), current=current)
        self._replies[reply_id] = reply
        return reply

    def _owned(self, msg: dict[str, Any]) -> bool:
        return any(any(m is msg for m in r.current) for r in self._replies.values())

    def _cut(self, reply_id: int) -> None:
        reply = self._capture(reply_id)
        if reply is None or reply_id not in self.cursor:
            return
        heard = self.cursor.heard(reply_id)
        if heard.complete:
            if reply.heard is not None:
                self._restore(reply_id)
            return
        span = [i for i, m in enumerate(reply.originals) if m.get("role") == "assistant"]
        new = truncate_history(reply.originals, heard, self.config, span=span)
        self._replace(reply, new)
        reply.heard = heard
        self.cuts.append((reply_id, heard))
        log.debug(
            "reply %d cut to %d/%d words (%s, %.3f s played)",
            reply_id,
            heard.words_kept,
            heard.words_total,
            heard.method,
            heard.played_s,
        )
        if self.on_truncated is not None:
            self.on_truncated(reply_id, heard)

    def _restore(self, reply_id: int) -> None:
        reply = self._replies[reply_id]
        self._replace(reply, copy.deepcopy(reply.originals))
        reply.heard = None

    def _replace(self, reply: _Reply, new: list[dict[str, Any]]) -> None:
        ids = {id(m) for m in reply.current}
        at = next((i for i, m in enumerate(self.messages) if id(m) in ids), None)
        if at is None:
            at = min(reply.where, len(self.messages))
        self.messages[:] = [m for m in self.messages if id(m) not in ids]
        self.messages[at:at] = new
        reply.current = new
        reply.where = at
