"""The TTS stage of turnkit's pipeline: reply text in, timed agent audio out.

:class:`TTSProcessor` sits between the reply's text source
(:class:`~turnkit.drafting.responder.ResponderProcessor`, which emits
:class:`~turnkit.frames.LLMTextFrame`) and the output that plays audio
(:class:`~turnkit.barge_in.processors.BargeInProcessor`). For each reply it
renders the text sentence by sentence (a sentence is spoken as soon as its
end arrives; the rest at the reply's ``final`` frame) and pushes downstream,
per sentence:

1. :class:`~turnkit.frames.AgentTextFrame` — the sentence (chunks of one
   ``reply_id`` extend the reply's text, joined by one space);
2. :class:`~turnkit.barge_in.cursor.WordTimestampsFrame` — where each of its
   words lies in the reply's audio (seconds from the reply's first sample).
   With a :class:`~turnkit.tts.base.WordTimedTTS` (espeak-ng:
   :meth:`~turnkit.tts.espeak.EspeakTTS.synthesize_words`) these are the
   engine's exact word timings; with a plain :class:`~turnkit.tts.base.TTS`
   there are none, and the frame carries an *anchor* instead (the reply's
   first N characters take its first T seconds: the sentence's audio end),
   from which the playback cursor estimates word times inside the sentence
   (:func:`~turnkit.barge_in.truncation.estimate_word_timings`; its error
   is measured in ``benchmarks/bench_truncation.py``: with sentence anchors
   86 % of cuts exact and 99.9 % within one word on the corpus replies,
   espeak-ng word renders as the truth). The choice costs: espeak-ng's word
   timings come from rendering word by word (one subprocess per distinct
   word, fixed pauses between them), measured at 361 ms to render an
   11-word sentence against 39 ms whole, and 5.1 s of audio against 3.5 s
   (each word at its own citation pace); ``word_timings=False`` renders
   whole sentences and uses the anchors;
3. :class:`~turnkit.frames.AudioOutFrame` s of ``frame_s`` each, tagged with
   the reply id, at ``sample_rate``.

The output turns these into :class:`~turnkit.frames.PlaybackMarkFrame` s as
the samples actually play; the cursor maps marks to words heard.

**Preemptive TTS.** A held draft's text (:class:`~turnkit.frames.DraftTextFrame`,
from the Responder before its turn is confirmed) is rendered ahead, its
first sentence only, in the background, and nothing of it is pushed: if the
draft is released, its first sentence comes again as reply text and is
spoken from that render (``prerendered`` counts them), so the reply's first
audio is out as soon as its text is, instead of a render later; a draft
voided is dropped unheard (renders of replies older than a released one,
and all but the latest ``MAX_DRAFTS``). Give the drafter this TTS's time to
first audio — ``DraftParams(first_audio_ms=...)``, or
``learn_first_audio=True`` with ``on_render=drafter.on_first_audio`` here
(each sentence's measured render time) — and the detector holds a commit
until the draft could be heard, at no cost in latency (a caller who goes on
inside that time is not cut off).

It decides what audio a reply's text becomes and where its words lie; not
whether it plays. An :class:`~turnkit.frames.InterruptionFrame` (either
direction) ends every reply seen so far: their unspoken text is dropped and
any later text of theirs is ignored (the caller took the floor).

Example::

    tts = TTSProcessor(EspeakTTS("en-us"), clock, sample_rate=16000)
    pipe = Pipeline([timeline, stt, detector, responder, tts,
                     BargeInProcessor(clock, controller, echo), history, output])
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from turnkit.audio.wav import resample
from turnkit.barge_in.cursor import WordTimestampsFrame
from turnkit.clock import Clock
from turnkit.frames import (
    AgentTextFrame,
    AudioOutFrame,
    CancelFrame,
    DraftTextFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMTextFrame,
)
from turnkit.frames import Word as TimedWord
from turnkit.pipeline import FrameDirection, FrameProcessor
from turnkit.tts.base import TTS, TTSError, WordTimedTTS

__all__ = ["TTSProcessor"]

log = logging.getLogger(__name__)

# A sentence ends at . ! ? (closing quotes/brackets allowed) followed by space.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]»”’]*\s+")


# Drafts whose first sentence is kept rendered: a turn has at most three
# (DraftParams.max_drafts), and only the latest can still be released.
MAX_DRAFTS = 3

_Render = tuple[np.ndarray, int, list[Any]]  # audio, its rate, the engine's word times


@dataclass(slots=True)
class _Reply:
    pending: str = ""  # text not yet spoken
    text: str = ""  # text spoken so far (sentences joined by one space)
    audio_s: float = 0.0  # audio pushed so far


@dataclass(slots=True)
class _Draft:
    pending: str = ""  # the draft's text so far, until its first sentence ends
    sentence: str = ""  # its first sentence, once rendering
    render: asyncio.Task[_Render | None] | None = None


def _spoken(sentence: str) -> str:
    """The sentence as rendered (whitespace collapsed), or "" if it has no word to say."""
    sentence = " ".join(sentence.split())
    return sentence if re.search(r"\w", sentence) else ""


class TTSProcessor(FrameProcessor):
    """Renders each reply's text to audio with word timings (see the module
    docstring). ``rendered`` counts sentences rendered, ``failed`` those the
    engine could not render (logged; the reply goes on without them)."""

    def __init__(
        self,
        tts: TTS,
        clock: Clock | None = None,
        *,
        sample_rate: int = 16000,
        frame_s: float = 0.02,
        word_timings: bool = True,
        on_render: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__()
        if frame_s <= 0:
            raise ValueError(f"frame_s must be positive, got {frame_s}")
        self.tts = tts
        self.clock = clock  # stamps the frames' ``at`` (0.0 without one)
        self.sample_rate = sample_rate
        self.frame_s = frame_s
        # Use the engine's word timings when it has them (False: anchors only,
        # as a plain TTS gives).
        self.word_timings = word_timings and isinstance(tts, WordTimedTTS)
        self.rendered = 0
        self.failed = 0
        self.prerendered = 0  # first sentences spoken from a draft's render
        # Each sentence's render time (wall ms) goes here: a learning
        # drafter's on_first_audio, for the hold of preemptive TTS.
        self.on_render = on_render
        self._replies: dict[int, _Reply] = {}
        self._dead: set[int] = set()
        self._drafts: dict[int, _Draft] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, LLMTextFrame) and direction is FrameDirection.DOWNSTREAM:
            await self._on_text(frame)
            return
        if isinstance(frame, DraftTextFrame):
            self._on_draft(frame)
            return
        if isinstance(frame, EndFrame | CancelFrame):
            for rid in list(self._drafts):
                self._drop_draft(rid)
        if isinstance(frame, InterruptionFrame):
            # Every reply seen so far is over: nothing more of it is spoken.
            for rid in self._replies:
                self._end(rid)
            self._replies.clear()
        await self.push_frame(frame, direction)

    def _on_draft(self, frame: DraftTextFrame) -> None:
        """A held draft's text: render its first sentence ahead, push nothing."""
        rid = frame.reply_id
        if rid in self._dead or rid in self._replies:
            return
        draft = self._drafts.get(rid)
        if draft is None:
            draft = self._drafts[rid] = _Draft()
            for old in sorted(self._drafts)[:-MAX_DRAFTS]:
                self._drop_draft(old)
        if draft.render is not None:
            return
        draft.pending += frame.text
        m = _SENTENCE_END.search(draft.pending)
        if m is None and not frame.final:
            return
        draft.sentence = _spoken(draft.pending[: m.end()] if m is not None else draft.pending)
        if draft.sentence:
            draft.render = asyncio.create_task(self._render(rid, draft.sentence, count=False))

    def _drop_draft(self, rid: int) -> None:
        draft = self._drafts.pop(rid, None)
        if draft is not None and draft.render is not None:
            draft.render.cancel()

    async def _prerendered(self, rid: int, sentence: str) -> _Render | None:
        """The draft's render of ``sentence`` if this reply was that draft
        and this is its first sentence; drafts older than it are void."""
        for older in [k for k in self._drafts if k < rid]:
            self._drop_draft(older)
        draft = self._drafts.pop(rid, None)
        if draft is None or draft.render is None:
            return None
        if draft.sentence != sentence:
            draft.render.cancel()
            return None
        done = await draft.render
        if done is not None:
            self.prerendered += 1
        return done

    async def _on_text(self, frame: LLMTextFrame) -> None:
        rid = frame.reply_id
        if rid in self._dead:
            return
        reply = self._replies.setdefault(rid, _Reply())
        reply.pending += frame.text
        while True:
            m = _SENTENCE_END.search(reply.pending)
            if m is None:
                break
            sentence, reply.pending = reply.pending[: m.end()], reply.pending[m.end() :]
            await self._speak(rid, reply, sentence)
        if frame.final:
            if reply.pending.strip():
                await self._speak(rid, reply, reply.pending)
            self._replies.pop(rid, None)
            self._end(rid)  # a late frame of a finished reply is not spoken

    def _end(self, rid: int) -> None:
        self._dead.add(rid)
        if len(self._dead) > 256:  # reply ids only grow: the oldest go
            self._dead.discard(min(self._dead))

    async def _render(self, rid: int, sentence: str, *, count: bool = True) -> _Render | None:
        """One sentence's audio, its rate and word timings (None: the engine
        failed). A draft's pre-render is not counted (``count=False``): its
        reply renders the sentence again, and that failure counts, whether the
        draft failed before its release or while the reply waited for it."""
        t0 = time.perf_counter()
        try:
            if self.word_timings:
                timed = await self.tts.synthesize_words(sentence)  # type: ignore[attr-defined]
                done: _Render = (timed.audio, timed.sample_rate, list(timed.words))
            else:
                done = (await self.tts.synthesize(sentence), self.tts.sample_rate, [])
        except (TTSError, ValueError) as exc:
            if count:
                self.failed += 1
                log.warning("TTS failed for reply %d (%r): %s", rid, sentence[:40], exc)
            return None
        if self.on_render is not None:
            self.on_render((time.perf_counter() - t0) * 1000)
        return done

    async def _speak(self, rid: int, reply: _Reply, sentence: str) -> None:
        sentence = _spoken(sentence)
        if not sentence:
            return
        done = await self._prerendered(rid, sentence) if not reply.text else None
        if done is None:
            done = await self._render(rid, sentence)
        if done is None:
            return
        audio, rate, words = done
        if rid in self._dead:  # interrupted while it rendered
            return
        audio = resample(np.asarray(audio, np.float32), int(rate), self.sample_rate)
        self.rendered += 1
        base = reply.audio_s
        reply.text = f"{reply.text} {sentence}" if reply.text else sentence
        reply.audio_s = base + len(audio) / self.sample_rate
        now = self.clock.now() if self.clock is not None else 0.0
        await self.push_frame(AgentTextFrame(at=now, reply_id=rid, text=sentence))
        if words:
            stamps = WordTimestampsFrame(
                at=now,
                reply_id=rid,
                words=[
                    TimedWord(text=w.text, start=base + w.start, end=base + w.end) for w in words
                ],
            )
        else:
            stamps = WordTimestampsFrame(
                at=now, reply_id=rid, anchor_s=reply.audio_s, anchor_offset=len(reply.text)
            )
        await self.push_frame(stamps)
        n = max(1, round(self.frame_s * self.sample_rate))
        for i in range(0, len(audio), n):
            if rid in self._dead:
                return
            await self.push_frame(
                AudioOutFrame(
                    at=now, audio=audio[i : i + n], sample_rate=self.sample_rate, reply_id=rid
                )
            )
