"""The LLM side of a reply: which request's tokens reach the caller, and when.

:class:`Responder` turns turn signals into streamed LLM replies, with eager
drafting, discard-only tool gating and filler lines. It decides on the
evidence of the turn signals (eager / caller went on / confirmed end /
barge-in), the transcript, the engine's stream (tokens, tool calls, errors)
and the tool gate's answers:

* **Eager** (``on_eager``): the :class:`~turnkit.drafting.drafter.EagerDrafter`
  may allow a draft; its request starts now with a
  :class:`~turnkit.drafting.tools.DraftContext`, and its tokens are *held*
  (queued, not emitted). Read tools run inside it; writes are deferred.
  With ``emit_draft`` each held token also goes out as a
  :class:`~turnkit.frames.DraftTextFrame`, for a TTS to render ahead
  (preemptive TTS); nothing of it plays unless the draft is released.
* **The caller goes on** (``on_transcript`` with other words): the drafter
  voids the draft; its stream is closed (the engine aborts the request) and
  the gate discards it (none of its writes ever run). Sound without new
  words (``on_speech``: a breath, a voice behind the caller) leaves it.
* **Confirmed end** (``on_end``): the draft is *released* if it answers the
  same normalised words (held tokens go out at once, the rest as it streams;
  its deferred writes start, its reads are reused), else a fresh request
  starts. A reply still playing from the previous turn is superseded.
* **The agent is talking** (``on_agent_audio(True)`` until ``False``):
  caller speech that has not stopped it — the barge-in filters judged it an
  acknowledgement or echo — is not a turn: no draft starts for it, and its
  end (``on_end``) is ignored (``None``, counted in ``ignored_ends``). A real
  barge-in stops the agent first. The replay's agent applies the same rule.
* **No words yet** (``on_end`` with an empty transcript): the end waits for
  the caller's words rather than ask the LLM to answer nothing (counted in
  ``wordless_ends``); the words that come next (``on_transcript``, before
  the caller speaks again) are that turn's, and the host ends it with them.
  A sound whose words never come — a cough, a door, a recogniser that
  wrote nothing — gets no reply, as in Pipecat (no LLM run for an empty
  user turn) and LiveKit (no end of turn without a transcript).
* **Barge-in** (``on_interrupted``): the live reply's stream is closed, its
  in-flight reads cancelled, and no more text is emitted; a running write
  finishes (the gate shields it), a write still held after the commit is
  withdrawn (its tool message in the history says it was not carried out).
  A reply whose text was all out before the caller cut in (a draft released
  whole) is stopped the same way. When the caller's next words run on from
  the turn's (the detector's turn resumed), the history holds only the new
  ones after the reply as heard: the caller's words once.
* **Cancel-pending** (``on_cancel_pending``): the caller went on before any
  of the reply played — streaming, or with its text all out — so the end
  was premature: the reply is dropped as on a barge-in, the history
  forgets it and the turn's words so far, and the next confirmed end
  *continues* the same turn (same turn id: the gate's write ledger answers
  a write the dropped reply already started, so it never runs twice).
* **Engine failure**: a failed draft is dropped quietly (the confirmed turn
  makes a fresh request); a confirmed reply that fails before any of its
  text went out is retried up to ``retries`` times as a fresh request, and
  otherwise — or once text has gone out — ends with the ``apology`` line.
  Every path ends the reply with a ``final`` event: nothing hangs.
* **Tools**: the engine's tool calls go through the gate; in a released
  reply (a draft's call still running at its release, too, its threshold
  counted from the call's start) a slow tool gets a filler line
  (:class:`~turnkit.fillers.FillerScheduler`),
  and the tool results go back to the engine for the next round (at most
  ``max_tool_rounds``).

* **Spoken confirmation**: a ``confirm=True`` write waits in the gate for
  the caller's yes; the next confirmed turn's words decide it
  (:func:`spoken_yes`: a plain yes runs it, anything else declines it)
  before that turn begins. A draft never decides it.

Output goes to ``emit`` as :class:`~turnkit.frames.LLMTextFrame` events, in
order, for one reply at a time. ``history`` holds the conversation as OpenAI
chat messages (the system prompt first): the caller's words on a confirmed
turn, tool rounds, and the agent's reply. With a
:class:`~turnkit.barge_in.cursor.PlaybackCursor` (``cursor``), the reply in
the history is what the caller *heard*: the text emitted goes to the cursor,
the host reports playback to it (started, marks, stopped), and a reply that
is interrupted or superseded — while it streams or after its text is all
out but its audio still plays — is cut to the words heard
(:func:`~turnkit.barge_in.truncation.truncate_history`; a reply nothing of
which played is removed). Without a cursor it is the text emitted.

The engine is anything with :class:`ChatClient`'s ``stream`` (the
:class:`ChatEngine` protocol): the live client, or the replay's simulated
engine on the virtual clock (:mod:`turnkit.replay.engine`).

The host — :class:`ResponderProcessor` in turnkit's pipeline, or a Pipecat /
LiveKit plugin — only forwards signals. Example::

    responder = Responder(ChatClient(url), clock, emit=speak,
                          drafter=EagerDrafter(clock), gate=ToolGate(tools, clock))
    await responder.on_eager("a table for two at eight")   # draft starts, held
    await responder.on_end("a table for two at eight")     # released: no new request
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from turnkit.barge_in.cursor import PlaybackCursor
from turnkit.barge_in.truncation import truncate_history
from turnkit.clock import Clock
from turnkit.drafting.drafter import Draft, EagerDrafter
from turnkit.drafting.owed import AFTER_REPLY_S, OwedTurn
from turnkit.drafting.tools import DraftContext, ToolGate, Turn, withdrawn_text
from turnkit.fillers.scheduler import FillerGuard, FillerScheduler
from turnkit.frames import (
    AgentAudioStartedFrame,
    AgentAudioStoppedFrame,
    CancelFrame,
    DraftTextFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMTextFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
    VADSpeechStartedFrame,
    VADSpeechStoppedFrame,
)
from turnkit.llm.client import ChatClient, LLMError
from turnkit.pipeline import FrameDirection, FrameProcessor

__all__ = [
    "ChatEngine",
    "EngineStream",
    "Responder",
    "ResponderFrames",
    "ResponderParams",
    "ResponderProcessor",
    "ResponderStats",
    "spoken_yes",
]

log = logging.getLogger(__name__)

Emit = Callable[[LLMTextFrame], Awaitable[None] | None]
EmitDraft = Callable[[DraftTextFrame], Awaitable[None] | None]
STATS_KEEP = 1000  # per-request samples kept in ResponderStats


class _ToolCallLike(Protocol):
    id: str
    name: str
    arguments: str


@runtime_checkable
class EngineStream(Protocol):
    """One streamed answer, as :class:`~turnkit.llm.client.ChatStream` gives
    it: ``async with`` it (leaving closes it: the engine aborts), iterate
    the text deltas, then read ``tool_calls`` and ``ttft_ms``."""

    @property
    def ttft_ms(self) -> float | None: ...

    tool_calls: Sequence[_ToolCallLike]

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def __aiter__(self) -> AsyncIterator[str]: ...


@runtime_checkable
class ChatEngine(Protocol):
    """What :class:`Responder` uses of an engine: :meth:`ChatClient.stream`."""

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
    ) -> Any: ...


_YES = re.compile(
    r"^(?:yes|yeah|yep|yup|ya|sure|correct|right|ok|okay|absolutely|definitely|perfect|"
    r"please do|go ahead|do it|that works|sounds good|that's right|that is right|exactly)\b"
)
_NO = re.compile(
    r"\b(?:no|nope|not|don't|do not|dont|wait|cancel|stop|hold on|actually|never mind)\b"
)


def spoken_yes(text: str) -> bool:
    """Whether the caller's turn is a plain yes to a confirmation question.

    Evidence: the turn's words only. A yes word at the start ("yes", "yeah",
    "sure", "correct", "that works", ...) and no negation or hedge anywhere
    ("no", "not", "wait", "actually", "cancel", ...). Anything else is not a
    yes: a write that needs the caller's yes runs only on a clear one.

    Example::

        spoken_yes("Yeah Friday at nine is perfect for me.")  # True
        spoken_yes("Yes, but actually make it ten.")          # False
    """
    words = re.sub(r"[^\w' ]+", " ", text.lower().replace("’", "'"))
    words = re.sub(r"\s+", " ", words).strip()
    words = re.sub(r"^(?:um|uh|oh|well|so|hmm)\s+", "", words)
    return bool(_YES.match(words)) and not _NO.search(words)


class ResponderParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = Field(256, ge=1)
    temperature: float | None = 0.7
    max_tool_rounds: int = Field(4, ge=0, description="engine round trips for tool results")
    retries: int = Field(1, ge=0, description="fresh requests after an engine error")
    apology: str = "Sorry, I'm having trouble right now. Could you say that again?"
    history_turns: int | None = Field(
        64, ge=1, description="keep at most this many turns after the stable prefix (None: all)"
    )
    history_tokens: int | None = Field(
        None, ge=16, description="and at most about this many tokens of them (chars / 4)"
    )
    # Why 1.2 s: turnkit.drafting.owed.AFTER_REPLY_S.
    owed_after_reply_s: float = Field(
        AFTER_REPLY_S,
        ge=0,
        description=(
            "a caller turn whose speech ended this close to a reply's natural end, its end "
            "ignored while the agent talked, is answered when the reply ends (the caller spoke "
            "last: 'Okay' over the agent's last words)"
        ),
    )


@dataclass(slots=True)
class ResponderStats:
    turns: int = 0
    requests: int = 0  # HTTP streams opened: drafts, fresh, tool rounds, retries
    drafts_started: int = 0
    drafts_used: int = 0
    drafts_cancelled: int = 0
    engine_errors: int = 0
    apologies: int = 0
    interrupted: int = 0
    ignored_ends: int = 0  # turn ends while the agent kept talking
    wordless_ends: int = 0  # turn ends before any words came (answered when they do)
    cancelled_pending: int = 0  # replies dropped before any of them played
    history_trims: int = 0  # times old turns were dropped from the history
    # The latest STATS_KEEP first-token times (a long call must not grow it forever).
    ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_KEEP))


class _Request:
    """One reply being generated: a draft (held) or a released reply."""

    def __init__(self, reply_id: int, turn_id: int, text: str, ctx: DraftContext | Turn | None):
        self.reply_id = reply_id
        self.turn_id = turn_id
        self.text = text
        self.ctx = ctx
        self.draft: Draft | None = None
        self.released = asyncio.Event()
        self.out: asyncio.Queue[LLMTextFrame] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.pump: asyncio.Task[None] | None = None
        self.failed: str | None = None
        self.emitted: list[str] = []
        self.produced = False  # some text of it is queued or out
        self.messages: list[dict[str, Any]] = []  # this reply's own messages (tool rounds)
        # Its writes the gate deferred (a draft's): tool call id -> idempotency key.
        self.deferred: dict[str, str] = {}
        self.done = False
        self.played = False  # some of its audio (or a filler's) reached the caller


class Responder:
    """See the module docstring."""

    def __init__(
        self,
        client: ChatEngine | ChatClient,
        clock: Clock,
        *,
        emit: Emit,
        system_prompt: str = "You are a helpful phone agent. Answer in short spoken sentences.",
        drafter: EagerDrafter | None = None,
        gate: ToolGate | None = None,
        fillers: FillerScheduler | None = None,
        params: ResponderParams | None = None,
        cursor: PlaybackCursor | None = None,
        emit_draft: EmitDraft | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.emit = emit
        self.emit_draft = emit_draft
        self.drafter = drafter
        self.gate = gate
        self.fillers = fillers
        self.params = params or ResponderParams()
        self.cursor = cursor
        # The latest released reply and the turn it answers: its audio may
        # still play after its text is all out (cut to what was heard on a stop).
        self._spoken: _Request | None = None
        self._spoken_cut: int | None = None  # the reply already cut to what was heard
        self._continues = False  # the next end continues the current turn
        # The speech end of a turn that ended before any words came: the
        # next words are its (on_transcript), unless the caller speaks first.
        self._wordless_end: float | None = None
        self._turn_start: int | None = None  # history index of the turn's user message
        # After a barge-in on the reply to the current turn: the turn's words
        # so far (all in the history) and the user message that ends them
        # there (_add_user); the current turn's words as last ended.
        self._cut: tuple[str, str] | None = None
        self._turn_said = ""
        # The conversation, kept by the history policy (see _trim_history).
        self.history: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
        self._prefix_len: int | None = None  # the stable prefix, fixed at the first turn
        self.stats = ResponderStats()
        self._turn_id = 0
        self._reply_ids = 0
        self._drafts: dict[int, _Request] = {}  # drafter draft id -> request
        self._live: _Request | None = None  # the released reply
        self._tasks: set[asyncio.Task[None]] = set()
        self.agent_speaking = False
        # A turn end ignored while the agent talked, answered if owed once it stops.
        self.owed = OwedTurn(clock, self.params.owed_after_reply_s)

    # -- evidence --------------------------------------------------------------

    def on_agent_audio(self, playing: bool) -> None:
        """The agent's audio started (True) or stopped (False) playing."""
        self.agent_speaking = playing
        if playing:
            # The audio is the newest released reply's, streaming or with
            # its text all out.
            for req in (self._live, self._spoken):
                if req is not None:
                    req.played = True

    async def on_eager(self, text: str, sent_at: float | None = None) -> int | None:
        """The caller is probably done: maybe start a held draft. Returns the
        draft's reply id, or None when no draft started. ``sent_at``: when
        the draft's request leaves, where a host knows it leaves later than
        now (the replay: after the detector's compute, which its virtual
        clock does not spend); the hold on the commit counts from there."""
        if self.drafter is None or self.agent_speaking:
            return None
        self._reap()
        draft = self.drafter.on_eager(text, sent_at)
        self._reap()  # a superseded draft
        if draft is None:
            return None
        self.stats.drafts_started += 1
        turn_id = self._turn_id if self._continues else self._turn_id + 1
        ctx = self.gate.start_draft(turn_id, draft.id) if self.gate is not None else None
        req = self._new_request(turn_id, text, ctx)
        req.draft = draft
        self._drafts[draft.id] = req
        self._start(req)
        return req.reply_id

    def on_speech(self) -> None:
        """The caller speaks (again): an answer owed for speech the agent
        talked through is void, and so is a wait for the words of an end
        that had none (the next end carries them); a draft stays until new
        words void it (:meth:`on_transcript`)."""
        self.owed.caller_spoke()
        self._wordless_end = None
        if self.drafter is not None:
            self.drafter.on_speech()
        if self.gate is not None:
            self.gate.on_caller_speech(True)  # a write held after a commit waits

    def on_speech_stopped(self) -> None:
        """The caller's speech stopped (the VAD): a write held after the
        commit runs once they have been silent the gate's hold
        (:meth:`~turnkit.drafting.tools.ToolGate.on_caller_speech`)."""
        if self.gate is not None:
            self.gate.on_caller_speech(False)

    @property
    def awaits_words(self) -> bool:
        """A turn ended before any words came, and its reply waits for them
        (:meth:`on_end`; :meth:`on_transcript` says when they come)."""
        return self._wordless_end is not None

    def on_transcript(self, text: str) -> float | None:
        """New words: a draft for other words is void. Returns the speech
        end of a turn that ended before any words came (:meth:`on_end`)
        when these are its words, the caller silent since and the agent
        too: the host ends that turn now (``on_end(text, speech_end)``);
        otherwise None."""
        if self.drafter is not None:
            self.drafter.on_transcript(text)
            self._reap()
        waiting = self._wordless_end
        if waiting is None or not text.strip() or self.agent_speaking:
            return None
        self._wordless_end = None
        return waiting

    async def on_end(self, text: str, speech_end: float | None = None) -> int | None:
        """The turn is confirmed: release the matching draft or start a fresh
        request. Returns the reply id whose text will be emitted, or None when
        the agent is still talking (the speech was not a turn). ``speech_end``:
        where the caller's speech the decision follows ended (the detector's
        :attr:`~turnkit.frames.TurnEndFrame.speech_end`; default now), which
        :meth:`owed_end` reads."""
        if self.gate is not None:
            # An end is the detector's word that the caller stopped: a host
            # that reports no VAD stop (Deepgram Flux: StartOfTurn, then
            # EndOfTurn) ends the speech that holds a write here, an
            # acknowledgement over the reply included.
            self.gate.on_caller_speech(False)
        if self.agent_speaking:
            self.stats.ignored_ends += 1
            # Owed an answer if the agent stops for this speech before the
            # caller speaks again (see owed_end).
            self.owed.ignored(text, speech_end)
            if self.drafter is not None:
                self.drafter.on_ignored()
                self._reap()
            return None
        if not text.strip():
            # An answer to nothing is no answer: wait for the words
            # (on_transcript); a draft stays until they void or match it.
            self.stats.wordless_ends += 1
            self._wordless_end = self.clock.now() if speech_end is None else speech_end
            log.debug("turn end with no words yet: its reply waits for them")
            return None
        self._wordless_end = None  # an end with words answers the turn that waited
        self._continue_unheard(text)
        self._supersede()
        if self.gate is not None:
            asked = self.gate.current_turn
            if asked is not None and asked.awaiting_confirmation:
                # The caller's answer to "shall I ...?" decides the held writes.
                self.gate.confirm_spoken(asked, yes=spoken_yes(text))
        continues, self._continues = self._continues, False
        if not continues:
            self._turn_id += 1
            self.stats.turns += 1
        self._add_user(text)
        self._trim_history()
        self._turn_start = len(self.history) - 1
        if continues and self.gate is not None and self.gate.current_turn is not None:
            self.gate.reopen(self.gate.current_turn)
        req: _Request | None = None
        if self.drafter is not None:
            action, draft = self.drafter.on_end(text)
            if action == "use" and draft is not None:
                req = self._drafts.pop(draft.id, None)
                if req is not None and (req.failed is not None or req.turn_id != self._turn_id):
                    self._discard(req)
                    req = None
            self._reap()
        if req is not None:
            self.stats.drafts_used += 1
            if self.gate is not None and isinstance(req.ctx, DraftContext):
                self.gate.confirm_draft(req.ctx)
        else:
            ctx = self.gate.begin_turn(self._turn_id) if self.gate is not None else None
            req = self._new_request(self._turn_id, text, ctx)
            self._start(req)
        self._release(req)
        return req.reply_id

    def owed_end(self, completed: bool = False) -> str | None:
        """The words of a caller turn whose end came while the agent was
        still talking (ignored then: it looked like a backchannel), now that
        the agent's audio has stopped, with no caller speech since: the host
        should answer it now with :meth:`on_end`, or the caller, who has
        finished, gets no reply at all. Asked once: the answer is cleared.

        After a barge-in stop (``completed`` False) the agent stopped for that
        speech — a bid whose words arrived after its end (a late recogniser).
        After a reply that played to its end (``completed`` True) only a turn
        whose speech ended in its last ``owed_after_reply_s`` is owed: the
        caller spoke last, over the agent's closing words ("Okay" as it
        finishes), and the floor is theirs; a murmur from earlier in the
        reply is not a turn. The rule is :class:`~turnkit.drafting.owed.OwedTurn`'s
        (:attr:`owed`), which Pipecat's and LiveKit's hosts run without a Responder.
        Every host asks both (the replay's agent, :class:`ResponderProcessor`,
        the Deepgram host)."""
        if self.agent_speaking:
            return None
        return self.owed.take(completed)

    def on_interrupted(self) -> None:
        """Barge-in: the live reply stops here (and the history keeps what
        the caller heard of it, with a cursor)."""
        self.agent_speaking = False
        req, self._live = self._live, None
        if req is None or req.done:
            spoken = self._spoken
            if spoken is not None and spoken.done:
                self._cut_to_heard(spoken)  # its text was all out; its audio was not
                self._note_cut(spoken)
                # Its turn's tools stop as for a reply still streaming: a
                # draft released whole holds its writes after the commit.
                self._abort(spoken)
            return
        self.stats.interrupted += 1
        self._finish_history(req, interrupted=True)
        self._note_cut(req)
        self._abort(req)

    def _note_cut(self, req: _Request) -> None:
        """A barge-in cut the reply to the current turn: the caller's next
        words may run on from that turn's (:meth:`_add_user`)."""
        start = self._turn_start
        if req.turn_id == self._turn_id and start is not None and start < len(self.history):
            self._cut = (self._turn_said, str(self.history[start].get("content") or ""))

    def _add_user(self, text: str) -> None:
        """The caller's words into the history, once. After a barge-in on
        the reply to their turn, a host's transcript runs on from that
        turn's words when the caller was going on (the detector's turn
        resumed: "my number is four one five | five five five ..."): the
        new message holds only the words after them, after the reply as
        heard; where none of the reply was heard (it left the history) the
        turn's message becomes the words whole. Any other words are a new
        message as they are."""
        cut, self._cut = self._cut, None
        self._turn_said = text
        users = [i for i, m in enumerate(self.history) if m.get("role") == "user"]
        # (the history is cut to what was heard by copying it: found by its words)
        if cut is not None and users and self.history[users[-1]].get("content") == cut[1]:
            said = [_word(w) for w in cut[0].split()]
            words = text.split()
            if said and len(words) > len(said) and [_word(w) for w in words[: len(said)]] == said:
                if users[-1] == len(self.history) - 1:
                    # none of the reply was heard: one message, the words whole
                    self.history[-1] = {"role": "user", "content": text}
                else:
                    self.history.append({"role": "user", "content": " ".join(words[len(said) :])})
                    # a reply to it dropped unplayed continues the turn: the
                    # next end's words run on from the same words again
                    self._cut = cut
                return
        self.history.append({"role": "user", "content": text})

    def _abort(self, req: _Request) -> None:
        """Stop a reply the caller cut off: its turn's gated tools are
        interrupted (a running write finishes), its filler is dropped and
        its stream closed."""
        if self.gate is not None and isinstance(req.ctx, DraftContext | Turn):
            turn = req.ctx.turn if isinstance(req.ctx, DraftContext) else req.ctx
            if turn is not None:
                self.gate.interrupt(turn)
                self._tell_withdrawn(req)
        if self.fillers is not None:
            self.fillers.interrupt()
        self._cancel(req)

    def _tell_withdrawn(self, req: _Request) -> None:
        """The history said a write of ``req``'s would be carried out once
        the turn was confirmed; the gate withdrew it (the caller went on):
        the tool message now says it was not, so the LLM asks again if the
        caller still wants it, rather than take it as done."""
        if self.gate is None:
            return
        withdrawn = self.gate.withdrawn_keys
        gone = {cid: key for cid, key in req.deferred.items() if key in withdrawn}
        names = {
            c["id"]: c["function"]["name"]
            for m in req.messages
            for c in m.get("tool_calls") or []
        }
        for m in (*self.history, *req.messages):
            cid = m.get("tool_call_id")
            if m.get("role") == "tool" and cid in gone:
                m["content"] = withdrawn_text(names.get(cid, "the action"))

    def superseded(self, reply_id: int) -> bool:
        """A stop the host sent for reply ``reply_id`` (0: none named) finds
        a newer reply live: the caller's turn was answered again before the
        stop came back (a detector's ``late_words`` end right after its
        resume reaches the Responder before the barge-in controller's cancel
        of the reply to the words before them), and the new reply stays."""
        live = self._live
        return bool(reply_id) and live is not None and live.reply_id != reply_id

    def on_stop(self, reply_id: int, *, pending: bool) -> bool:
        """A host's stop of reply ``reply_id`` (0: the live one), as the
        barge-in controller decided it: ``pending`` (the caller went on
        before any of it played) drops it and the turn continues
        (:meth:`on_cancel_pending`); otherwise a barge-in cut it
        (:meth:`on_interrupted`). A stop for a reply already superseded is
        ignored (:meth:`superseded`). True: a turn that ended while the
        agent talked is now owed an answer (:meth:`owed_end`), and the host
        ends it. For the hosts on frames (:class:`ResponderFrames`); the
        replay's agent, which executes the controller's actions itself,
        calls the same two methods."""
        if self.superseded(reply_id):
            return False
        if pending:
            self.on_cancel_pending()
            return False
        self.on_interrupted()
        return self.owed_end() is not None

    def on_cancel_pending(self) -> None:
        """The caller went on before any of the live reply played: drop it
        (see the module docstring); the next end continues this turn."""
        self.agent_speaking = False
        req = self._live if self._live is not None else self._unplayed()
        self._live = None
        if req is None:
            return
        self.stats.cancelled_pending += 1
        # Its text may be all out (a draft's, released whole), its turn's
        # writes still held: they are withdrawn as on a barge-in.
        self._abort(req)
        if self._turn_start is not None and req.turn_id == self._turn_id:
            del self.history[self._turn_start :]
            self._turn_start = None
            self._continues = True
        self._spoken = None

    async def idle(self) -> None:
        """Wait until every request and output pump has finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        """Cancel everything (end of call) and wait for it to unwind."""
        for req in list(self._drafts.values()):
            self._discard(req)
        self._drafts.clear()
        if self._live is not None:
            self._cancel(self._live)
            self._live = None
        await self.idle()

    @property
    def pending_tasks(self) -> int:
        return len(self._tasks)

    # -- requests ----------------------------------------------------------------

    def _new_request(self, turn_id: int, text: str, ctx: DraftContext | Turn | None) -> _Request:
        self._reply_ids += 1
        return _Request(self._reply_ids, turn_id, text, ctx)

    def _spawn(self, coro: Awaitable[None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _start(self, req: _Request) -> None:
        req.task = self._spawn(self._generate(req), f"reply-{req.reply_id}")

    def _release(self, req: _Request) -> None:
        self._live = req
        self._spoken = req
        req.released.set()
        req.pump = self._spawn(self._pump(req), f"pump-{req.reply_id}")

    def _reap(self) -> None:
        """Close the requests of drafts the drafter has voided."""
        for draft_id, req in list(self._drafts.items()):
            if req.draft is not None and req.draft.state == "cancelled":
                del self._drafts[draft_id]
                self._discard(req)

    def _discard(self, req: _Request) -> None:
        self.stats.drafts_cancelled += 1
        if self.gate is not None and isinstance(req.ctx, DraftContext):
            self.gate.discard_draft(req.ctx)
        self._cancel(req)

    def _cancel(self, req: _Request) -> None:
        req.done = True
        for task in (req.task, req.pump):
            if task is not None and not task.done():
                task.cancel()

    def _continue_unheard(self, text: str) -> None:
        """An end that finds this turn's reply live with none of it played,
        for words that go on from the turn's (the same words, ended again
        by a detector's late end; or more, the caller went on), continues
        the turn (:meth:`on_cancel_pending`): the barge-in controller cancels
        that reply on the caller's speech, but a host that runs on frames
        hears the cancel only after this end, and the history would hold
        the turn's words twice."""
        req = self._unplayed()
        if req is None or self._turn_start is None:
            return
        said = _norm(str(self.history[self._turn_start].get("content") or ""))
        if said and _norm(text).startswith(said):
            self.on_cancel_pending()

    def _unplayed(self) -> _Request | None:
        """The released reply of this turn none of whose audio has played:
        the live one, or one whose text was all out before its audio began
        (a draft released whole). None: there is none, or it played."""
        req = self._live if self._live is not None else self._spoken
        if req is None or req.played or req.turn_id != self._turn_id:
            return None
        return req

    def _supersede(self) -> None:
        req, self._live = self._live, None
        if req is not None and not req.done:
            self._finish_history(req, interrupted=True)
            self._cancel(req)
        spoken, self._spoken = self._spoken, None
        if spoken is not None and self.cursor is not None and spoken.reply_id in self.cursor:
            playing = self.cursor.reply(spoken.reply_id).stop_reason is None
            if playing or spoken is req:
                self._cut_to_heard(spoken)

    def _trim_history(self) -> None:
        """Apply the history policy (``history_turns`` / ``history_tokens``).

        The stable prefix — the system prompt and whatever the host put
        before the first caller turn — always stays; a turn (a ``user``
        message and everything up to the next one: tool rounds, the reply)
        is kept or dropped whole, oldest first, and the newest turn always
        stays. Over a limit, the history is cut to three quarters of it, so
        the prompt's start stays the same for the next quarter of turns
        between cuts (an engine's prefix cache keeps serving it) instead of
        shifting by one turn every turn."""
        p = self.params
        if p.history_turns is None and p.history_tokens is None:
            return
        if self._prefix_len is None:
            self._prefix_len = next(
                (i for i, m in enumerate(self.history) if m.get("role") == "user"),
                len(self.history),
            )
        starts = [
            i
            for i in range(self._prefix_len, len(self.history))
            if self.history[i].get("role") == "user"
        ]
        if not starts:
            return
        size = [_approx_tokens(m) for m in self.history[starts[0] :]]

        def tokens_from(k: int) -> int:
            return sum(size[starts[k] - starts[0] :])

        over_turns = p.history_turns is not None and len(starts) > p.history_turns
        over_tokens = p.history_tokens is not None and tokens_from(0) > p.history_tokens
        if not (over_turns or over_tokens):
            return
        keep_from = 0
        if p.history_turns is not None:
            keep = max(1, (p.history_turns * 3) // 4) if over_turns else p.history_turns
            keep_from = max(0, len(starts) - keep)
        if p.history_tokens is not None:
            budget = (p.history_tokens * 3) // 4 if over_tokens else p.history_tokens
            while keep_from < len(starts) - 1 and tokens_from(keep_from) > budget:
                keep_from += 1
        if keep_from == 0:
            return
        del self.history[self._prefix_len : starts[keep_from]]
        self.stats.history_trims += 1

    def _messages(self, req: _Request) -> list[dict[str, Any]]:
        if req.released.is_set():
            # history already holds this turn's user message
            return [*self.history, *req.messages]
        return [*self.history, {"role": "user", "content": req.text}, *req.messages]

    async def _generate(self, req: _Request) -> None:
        """Stream the reply (and its tool rounds) into ``req.out``."""
        attempts = 0
        rounds = 0
        while True:
            try:
                tool_calls = await self._stream_once(req)
            except LLMError as exc:
                self.stats.engine_errors += 1
                log.warning("reply %d: engine error: %s", req.reply_id, exc)
                if not req.released.is_set():
                    req.failed = str(exc)  # a draft: the confirmed turn asks afresh
                    return
                if not req.produced and not req.messages and attempts < self.params.retries:
                    attempts += 1
                    continue
                self.stats.apologies += 1
                apology = LLMTextFrame(
                    at=self.clock.now(), reply_id=req.reply_id, text=self.params.apology
                )
                apology.apology = True
                await req.out.put(apology)
                break
            if not tool_calls or rounds >= self.params.max_tool_rounds:
                break
            rounds += 1
            await self._run_tools(req, tool_calls)
        await req.out.put(LLMTextFrame(at=self.clock.now(), reply_id=req.reply_id, final=True))
        await self._draft_text(req, "", final=True)

    async def _draft_text(self, req: _Request, text: str, final: bool = False) -> None:
        """A held draft's text, out for a TTS to render ahead (``emit_draft``)."""
        if self.emit_draft is None or req.released.is_set() or req.draft is None:
            return
        out = self.emit_draft(
            DraftTextFrame(at=self.clock.now(), reply_id=req.reply_id, text=text, final=final)
        )
        if inspect.isawaitable(out):
            await out

    async def _stream_once(self, req: _Request) -> list[Any]:
        tools = self.gate.specs() if self.gate is not None and self.gate.tools else None
        self.stats.requests += 1
        stream = self.client.stream(
            self._messages(req),
            max_tokens=self.params.max_tokens,
            temperature=self.params.temperature,
            tools=tools,
        )
        async with stream:  # leaving (also by cancellation) closes it: the engine aborts
            async for delta in stream:
                req.produced = True
                await req.out.put(
                    LLMTextFrame(at=self.clock.now(), reply_id=req.reply_id, text=delta)
                )
                await self._draft_text(req, delta)
        if stream.ttft_ms is not None:
            self.stats.ttft_ms.append(stream.ttft_ms)
            if self.drafter is not None:
                self.drafter.on_first_token(stream.ttft_ms)
        return list(stream.tool_calls)

    async def _run_tools(self, req: _Request, calls: list[Any]) -> None:
        assert self.gate is not None and req.ctx is not None
        req.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            try:
                args = json.loads(c.arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("arguments are not an object")
            except ValueError as exc:
                content = f"Invalid arguments for {c.name}: {exc}"
            else:
                filler = _ToolFiller(self.fillers, req, c.name, self.clock.now())
                try:
                    result = await self.gate.call(req.ctx, c.name, args)
                finally:
                    filler.stop()
                content = result.for_llm()
                if result.deferred and result.idempotency_key is not None:
                    req.deferred[c.id] = result.idempotency_key
            req.messages.append({"role": "tool", "tool_call_id": c.id, "content": content})

    async def _pump(self, req: _Request) -> None:
        """Emit a released reply's text in order: held tokens at once, then
        the rest as it comes."""
        while True:
            frame = await req.out.get()
            if frame.text:
                req.emitted.append(frame.text)
                if self.cursor is not None:
                    self.cursor.on_text(req.reply_id, "".join(req.emitted), append=False)
            if frame.final:
                req.done = True
                if self._live is req:
                    self._live = None
                    self._finish_history(req, interrupted=False)
            out = self.emit(frame)
            if inspect.isawaitable(out):
                await out
            if frame.final:
                return

    def _finish_history(self, req: _Request, *, interrupted: bool) -> None:
        """The reply's tool rounds and the text emitted go into the history;
        a stopped reply is then cut to what the caller heard (cursor)."""
        self.history.extend(req.messages)
        text = "".join(req.emitted)
        if text or not interrupted:
            self.history.append({"role": "assistant", "content": text})
        if interrupted:
            self._cut_to_heard(req)

    def _cut_to_heard(self, req: _Request) -> None:
        """Cut ``req``'s text in the history to the words the caller heard,
        by the cursor's evidence. Only the newest reply can be cut (a later
        caller turn means it ended before that turn began)."""
        if self.cursor is None or not req.emitted or self._spoken_cut == req.reply_id:
            return
        if self.history and self.history[-1].get("role") == "user":
            return
        heard = self.cursor.heard(req.reply_id)
        if heard.complete:
            return
        self.history = truncate_history(self.history, heard, self.cursor.config)
        self._spoken_cut = req.reply_id


class _ToolFiller:
    """The filler for one tool call of ``req``: guarded from the call's
    start in a released reply; in a draft, from the draft's release if the
    call still runs then (its threshold counted from the call's start). A
    draft's slow read left the caller in silence for the rest of it: the
    demo's 1.8 s order lookup, begun in a draft just before the caller's
    "Yes." was confirmed, was answered 2.3 s after the decision with no
    filler (a reply that began it after the decision played one at 1.2 s)."""

    def __init__(
        self, fillers: FillerScheduler | None, req: _Request, tool: str, started: float
    ) -> None:
        self.guard: FillerGuard | None = None
        self._wait: asyncio.Task[None] | None = None
        if fillers is None:
            return
        if req.released.is_set():
            self.guard = fillers.start(tool)
            return

        async def on_release() -> None:
            await req.released.wait()
            self.guard = fillers.start(tool, started)

        self._wait = asyncio.ensure_future(on_release())

    def stop(self) -> None:
        """The call returned (or was cancelled)."""
        if self._wait is not None and not self._wait.done():
            self._wait.cancel()
        if self.guard is not None:
            self.guard.stop()


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _word(word: str) -> str:
    """A word as two transcripts of the same speech agree on it (case and
    the punctuation a recogniser puts at a pause aside)."""
    return re.sub(r"[^\w']", "", word.lower())


def _approx_tokens(message: dict[str, Any]) -> int:
    """About 4 characters a token, over the content and any tool calls."""
    n = len(str(message.get("content") or ""))
    if message.get("tool_calls"):
        n += len(json.dumps(message["tool_calls"]))
    return n // 4 + 4


class ResponderFrames:
    """Which :class:`Responder` call each of turnkit's frames is, for every
    host that runs on frames (:class:`ResponderProcessor`, the Deepgram
    host): a VAD start or resume is caller speech; a transcript, the words
    so far (:attr:`text`), and the end of a turn that ended before any
    came; an eager signal, a draft; an end, a confirmed turn; the agent's
    audio starting and stopping, whether it talks (a reply played to its
    end answers a turn said over its last words); an
    interruption, the barge-in controller's stop (:meth:`Responder.on_stop`:
    a barge-in, then a turn owed an answer, or a pending reply cancelled).
    Hosts override :meth:`eager` and :meth:`end` to record what they did."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.text = ""

    async def handle(self, frame: Frame) -> None:
        """Forward one frame's evidence (others pass unseen)."""
        r = self.responder
        if isinstance(frame, TranscriptFrame):
            self.text = frame.text
            speech_end = r.on_transcript(frame.text)
            if speech_end is not None:
                await self.end(frame.at, speech_end)  # the words of an end that had none
        elif isinstance(frame, TurnEagerFrame):
            await self.eager()
        elif isinstance(frame, TurnResumedFrame | VADSpeechStartedFrame):
            r.on_speech()
        elif isinstance(frame, VADSpeechStoppedFrame):
            r.on_speech_stopped()
        elif isinstance(frame, TurnEndFrame):
            await self.end(frame.at, frame.speech_end)
        elif isinstance(frame, AgentAudioStartedFrame):
            r.on_agent_audio(True)
        elif isinstance(frame, AgentAudioStoppedFrame):
            r.on_agent_audio(False)
            if frame.reason == "completed" and r.owed_end(completed=True) is not None:
                await self.end(frame.at)  # the caller spoke over its last words
        elif isinstance(frame, InterruptionFrame) and r.on_stop(
            frame.reply_id, pending=frame.cancels_pending
        ):
            await self.end(frame.at)  # the turn that ended while the agent talked

    async def eager(self) -> int | None:
        """An eager signal: a draft on the words so far, if the drafter allows."""
        return await self.responder.on_eager(self.text)

    async def end(self, at: float, speech_end: float | None = None) -> int | None:
        """A confirmed end at ``at`` of speech that ended at ``speech_end``:
        the Responder answers it (``None``: not now; the agent talks, or
        no words came yet)."""
        return await self.responder.on_end(self.text, speech_end)


class ResponderProcessor(FrameProcessor):
    """Hosts a :class:`Responder` in turnkit's pipeline: turn signals,
    transcripts, VAD starts and interruptions in (:class:`ResponderFrames`);
    :class:`LLMTextFrame` out (downstream, towards the TTS), and a held
    draft's text as :class:`DraftTextFrame` for the TTS to render ahead."""

    def __init__(self, responder_factory: Callable[[Emit], Responder]) -> None:
        super().__init__("Responder")
        self.responder = responder_factory(self._emit)
        if self.responder.emit_draft is None:
            # A held draft's text goes on to the TTS, which renders ahead.
            self.responder.emit_draft = self._emit_draft
        self.frames = ResponderFrames(self.responder)

    @property
    def transcript(self) -> str:
        """The caller's words so far, as the recogniser last wrote them."""
        return self.frames.text

    async def _emit(self, frame: LLMTextFrame) -> None:
        await self.push_frame(frame)

    async def _emit_draft(self, frame: DraftTextFrame) -> None:
        await self.push_frame(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, EndFrame | CancelFrame):
            await self.responder.aclose()
        else:
            await self.frames.handle(frame)
        await self.push_frame(frame, direction)
