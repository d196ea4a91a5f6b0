"""The replay's LLM engine on the virtual clock, and the recorded tools.

:class:`~turnkit.drafting.responder.Responder` is the replay's reply path,
as it is every host's; it needs an engine. :class:`SimulatedEngine` is one
with :class:`~turnkit.llm.client.ChatClient`'s ``stream`` interface whose
time is the virtual clock and whose answers come from the recording or, with
``--llm-url``, from a live engine:

* **when**: a request's first token comes its TTFT after the request left,
  the TTFT from a :class:`~turnkit.replay.llm_source.TTFTSource` — the
  latency model (``--llm-ttft-ms``), or the live engine's measured TTFT
  (``--llm-url``); the pipeline waits for a live measurement (:meth:`idle`).
  A request that leaves at the instant of an end-of-turn decision leaves
  after the detector's compute (:meth:`send_after`): the live agent sends
  it only once the model has decided.
* **what**, latency model: the answer to the caller turn the request is made
  in (the latest begun by then, as
  :class:`~turnkit.replay.simulator.LabelPlanner` attributes replies): the
  recorded agent reply, word by word, all at the first-token instant.
* **what**, live engine (:class:`~turnkit.replay.llm_source.LiveEngine`):
  a text request goes to the engine with the messages the Responder sent
  (its history: what the caller heard); the engine's own deltas are the
  answer, each at ``sent + its measured arrival`` on the virtual clock. The
  clock does not move while the replay waits for the engine
  (:class:`HeldClock`), so a stream the Responder leaves early (a discarded
  draft, a barge-in, a superseded reply) is closed while the engine still
  generates it: the engine aborts it (counted). A failed live request falls
  back to the latency model and the recorded reply (counted).
* **tools**: where the recording has ``tool_call`` events for the turn, the
  first round answers with those tool calls instead (no text), and the round
  after the tool results with the reply text, as a tool-using engine does —
  with a live engine too (its TTFT measured there): a small model would not
  call the recorded tools.

In both modes the replay takes each reply's audio length from the recording
(the reply plays until the end of the original ``agent_turn``), so the pace
of later tokens and the live text's length change no barge-in or echo figure.

:func:`replay_tools` turns the recording's ``tool_call`` events into
:class:`~turnkit.drafting.tools.Tool` objects whose backend takes the
recorded ``duration_s`` on the virtual clock and returns the recorded
``result``; they run through the real :class:`~turnkit.drafting.tools.ToolGate`.
:class:`ToolLog` records every execution, so the replay can check that no
discarded draft's write ran and each write ran once.

:class:`TimedTTS` renders filler lines for the replay as audio of the
length a voice would take (no TTS engine: the replay plays no audio, only
its timing counts).

Example::

    engine = SimulatedEngine(clock, planner, ModelTTFT(LatencyModel.parse("350"), rng))
    responder = Responder(engine, clock, emit=agent.on_llm_text, drafter=EagerDrafter(clock))
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from turnkit.clock import Clock, VirtualClock, settle
from turnkit.drafting.tools import WITHDRAWN_REASON, Tool, canonical_args
from turnkit.fillers.bank import DEFAULT_LINES, FillerBank
from turnkit.fillers.scheduler import FillerScheduler, Sink
from turnkit.llm.client import LLMError, ToolCall
from turnkit.replay.llm_source import LiveEngine, LiveRequest, LiveStream, TTFTSource
from turnkit.replay.recording import Recording, ToolCallEvent

__all__ = [
    "EngineRequest",
    "HeldClock",
    "ReplyScript",
    "SimulatedEngine",
    "SimulatedStream",
    "TimedTTS",
    "ToolExecution",
    "ToolLog",
    "replay_fillers",
    "replay_tools",
]

_WORD = re.compile(r"\S+\s*")
_REPLY_TASK = re.compile(r"reply-(\d+)")
_T = TypeVar("_T")
CHARS_PER_SECOND = 15.0


class ReplyScript(Protocol):
    """What the recording says the agent answered."""

    def turn_for(self, decision_at: float) -> int | None: ...

    def reply_text(self, turn: int | None, at: float | None = None) -> str:
        """The recorded answer to caller turn ``turn`` for a request at ``at``."""
        ...


@dataclass(slots=True)
class EngineRequest:
    """One request the engine answered (the replay's own record of it)."""

    opened_at: float
    sent_at: float  # opened_at + the detector's compute, if it left on a decision
    turn: int | None
    kind: str  # "tools" (answered with tool calls) or "text"
    ttft_ms: float | None = None
    first_at: float | None = None
    closed_early: bool = False  # the client left before the answer was complete
    # The Responder's reply id the request was made for (its task's name), if known.
    reply_id: int | None = None
    text: str = ""  # the text deltas handed to the client
    tokens: int = 0  # how many
    live: LiveRequest | None = None  # the live engine's record (--llm-url)
    fallback: bool = False  # the live engine failed: latency model + recorded reply


class SimulatedStream:
    """One answer of :class:`SimulatedEngine` (the :class:`ChatStream` surface
    :class:`Responder` uses)."""

    def __init__(
        self,
        engine: SimulatedEngine,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        req: EngineRequest,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
    ) -> None:
        self._engine = engine
        self._messages = messages
        self._tools = tools
        self.request = req
        self.tool_calls: list[ToolCall] = []
        self._chunks: list[str] | None = None
        self._done = False
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._live: LiveStream | None = None

    @property
    def ttft_ms(self) -> float | None:
        return self.request.ttft_ms if self.request.first_at is not None else None

    async def __aenter__(self) -> SimulatedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._done:
            self.request.closed_early = True
        self._done = True
        if self._live is not None:
            await self._live.close()  # the engine aborts what it still generates

    def __aiter__(self) -> SimulatedStream:
        return self

    async def __anext__(self) -> str:
        if self._chunks is None:
            await self._first()
        if self._live is not None:
            return await self._next_live()
        assert self._chunks is not None
        if not self._chunks:
            self._done = True
            raise StopAsyncIteration
        return self._took(self._chunks.pop(0))

    def _took(self, delta: str) -> str:
        self.request.text += delta
        self.request.tokens += 1
        return delta

    async def _at(self, ms_after_send: float) -> None:
        """Sleep on the virtual clock until ``ms_after_send`` after the send."""
        e = self._engine
        wait = self.request.sent_at + ms_after_send / 1000 - e.clock.now()
        if wait > 0:
            await e.clock.sleep(wait)

    async def _next_live(self) -> str:
        """The live engine's next delta, at its measured arrival."""
        assert self._live is not None
        item = await self._engine.hold(self._live.next())
        if item is None:
            end = self._live.request.end_ms
            if end is not None:
                await self._at(end)
            self._done = True
            raise StopAsyncIteration
        delta, at_ms = item
        await self._at(at_ms)
        return self._took(delta)

    async def _open_live(self, live: LiveEngine) -> float | None:
        """Send the request to the live engine; its TTFT (ms), or None if it
        failed (counted there; the latency model answers)."""
        self._live = live.open(
            self._messages, max_tokens=self._max_tokens, temperature=self._temperature
        )
        self.request.live = self._live.request
        try:
            return await self._engine.hold(self._live.first())
        except LLMError:
            await self._live.close()
            self._live = None
            return None

    async def _first(self) -> None:
        """Wait for the first token (TTFT after the request left), then
        decide the whole answer: tool calls, the live engine's deltas, or
        the recorded reply's words."""
        e, req = self._engine, self.request
        live = e.live if req.kind == "text" else None
        ttft = None if live is None else await self._open_live(live)
        if live is not None and ttft is None:
            req.fallback = True
            ttft = await live.fallback.ttft_ms(self._messages)
        elif ttft is None:
            ttft = await e.measure(self._messages)
        req.ttft_ms = ttft
        wait = req.sent_at + ttft / 1000 - e.clock.now()
        if wait > 0:
            await e.clock.sleep(wait)
        req.first_at = e.clock.now()
        if req.kind == "tools":
            self._chunks = []
            for i, ev in enumerate(e.pending_calls(req.turn, self._messages)):
                self.tool_calls.append(
                    ToolCall(
                        index=i,
                        id=f"call_{req.turn}_{i}",
                        name=ev.name,
                        arguments=json.dumps(ev.arguments, sort_keys=True),
                    )
                )
        elif self._live is not None:
            self._chunks = []  # the engine's deltas come one by one (_next_live)
        else:
            self._chunks = _WORD.findall(e.script.reply_text(req.turn, req.opened_at))


class SimulatedEngine:
    """An engine on the virtual clock whose answers are the recording's, or
    a live engine's with ``--llm-url`` (see the module docstring). Decides
    nothing about the conversation: the :class:`Responder` driving it does."""

    def __init__(
        self,
        clock: Clock,
        script: ReplyScript,
        ttft: TTFTSource,
        tool_calls: list[ToolCallEvent] | None = None,
    ) -> None:
        self.clock = clock
        self.script = script
        self.ttft = ttft
        self._calls: dict[int, list[ToolCallEvent]] = {}
        for ev in tool_calls or []:
            self._calls.setdefault(ev.turn, []).append(ev)
        self.requests: list[EngineRequest] = []
        self._delay_at: float | None = None
        self._delay_s = 0.0
        self._measuring: set[asyncio.Task[Any]] = set()
        if isinstance(clock, HeldClock):
            clock.holds.append(self.idle)

    @property
    def live(self) -> LiveEngine | None:
        """The live engine whose tokens answer text requests (``--llm-url``)."""
        return self.ttft if isinstance(self.ttft, LiveEngine) else None

    def recorded_calls(self, turn: int | None) -> list[ToolCallEvent]:
        return [] if turn is None else list(self._calls.get(turn, []))

    def pending_calls(
        self, turn: int | None, messages: list[dict[str, Any]]
    ) -> list[ToolCallEvent]:
        """The turn's recorded tool calls that the conversation does not
        already hold a result for (an engine does not ask twice for what its
        context shows was done: a turn answered again after a barge-in),
        where the result does not say the write was withdrawn (an engine
        reading that asks again)."""
        asked: dict[str, tuple[str, str]] = {}
        done: set[tuple[str, str]] = set()
        for m in messages:
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                try:
                    args = canonical_args(json.loads(fn.get("arguments") or "{}"))
                except (ValueError, TypeError, AttributeError):
                    continue
                asked[str(c.get("id"))] = (str(fn.get("name")), args)
            withdrawn = WITHDRAWN_REASON in str(m.get("content") or "")
            if m.get("role") == "tool" and str(m.get("tool_call_id")) in asked and not withdrawn:
                done.add(asked[str(m.get("tool_call_id"))])
        return [
            ev
            for ev in self.recorded_calls(turn)
            if (ev.name, canonical_args(ev.arguments)) not in done
        ]

    def send_after(self, seconds: float) -> None:
        """Requests opened at this very instant leave ``seconds`` later (the
        end-of-turn model's compute before the decision was known)."""
        self._delay_at = self.clock.now()
        self._delay_s = max(0.0, seconds)

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
        **_: Any,
    ) -> SimulatedStream:
        now = self.clock.now()
        delay = self._delay_s if self._delay_at == now else 0.0
        turn = self.script.turn_for(now)
        answered = bool(messages) and messages[-1].get("role") == "tool"
        todo = self.pending_calls(turn, messages)
        kind = "tools" if tools and not answered and todo else "text"
        req = EngineRequest(opened_at=now, sent_at=now + delay, turn=turn, kind=kind)
        task = asyncio.current_task()
        m = _REPLY_TASK.fullmatch(task.get_name()) if task is not None else None
        req.reply_id = int(m.group(1)) if m else None
        self.requests.append(req)
        return SimulatedStream(self, messages, tools, req, max_tokens, temperature)

    async def measure(self, messages: list[dict[str, Any]]) -> float:
        """The request's TTFT (ms) from the source; :meth:`idle` waits for it."""
        task = asyncio.ensure_future(self.ttft.ttft_ms(messages))
        self._measuring.add(task)
        try:
            return await asyncio.shield(task)
        finally:
            self._measuring.discard(task)

    async def hold(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Await the live engine (``coro``) with the virtual clock held:
        :meth:`idle` waits for it. If the waiter is cancelled (the Responder
        left the stream), the engine wait is cancelled too."""
        task: asyncio.Task[_T] = asyncio.ensure_future(coro)
        self._measuring.add(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.wait([task])
            raise
        finally:
            self._measuring.discard(task)

    async def idle(self) -> None:
        """Let every request opened at this instant reach its TTFT wait (a
        live engine's measurement included) before the virtual clock moves.
        With nothing ready to run and nothing measured pending, that has
        happened: no settling round trip (one per replayed frame)."""
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        while True:
            if ready is not None and not ready and not self._measuring:
                return
            await settle()
            pending = [t for t in self._measuring if not t.done()]
            if not pending:
                return
            await asyncio.wait(pending)

    async def aclose(self) -> None:
        await self.ttft.aclose()


class HeldClock(VirtualClock):
    """A :class:`VirtualClock` that does not move while the replay waits for
    a live engine: before each wake, and before it reaches ``t``, every
    ``holds`` callable is awaited (a :class:`SimulatedEngine` on it adds its
    :meth:`~SimulatedEngine.idle`). With ``--llm-url`` each token's virtual
    arrival is then exactly ``sent + its measured arrival``, and the engine
    runs at most one token ahead of the replay."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__(start)
        self.holds: list[Callable[[], Awaitable[None]]] = []

    async def _held(self) -> None:
        for hold in self.holds:
            await hold()


# -- tools ------------------------------------------------------------------


@dataclass(slots=True)
class ToolExecution:
    """One run of a replayed tool's backend: which tool, read or write, its
    arguments, when it started and finished (virtual clock), a write's
    idempotency key (what shows each write ran once) and the caller turn
    of the recorded call it answers (what shows a write waited for that
    turn's end)."""

    name: str
    effect: str
    args: dict[str, Any]
    started_at: float
    key: str | None = None  # a write's idempotency key
    finished_at: float | None = None
    turn: int | None = None  # the caller turn whose recorded call it answers


@dataclass(slots=True)
class ToolLog:
    """Every execution of a replayed tool's backend, in start order."""

    executions: list[ToolExecution] = field(default_factory=list)

    @property
    def writes(self) -> list[ToolExecution]:
        return [x for x in self.executions if x.effect == "write"]


def replay_tools(
    rec: Recording, clock: Clock, log: ToolLog, *, timeout_s: float = 10.0
) -> list[Tool]:
    """One :class:`Tool` per tool name in the recording's ``tool_call``
    events: its effect and ``confirm`` as recorded; its backend sleeps the
    recorded ``duration_s`` for those arguments on ``clock`` (an unrecorded
    call: the name's first recorded duration) and returns the recorded
    ``result``. Every execution goes to ``log``."""
    by_name: dict[str, list[ToolCallEvent]] = {}
    for ev in rec.tool_calls:
        by_name.setdefault(ev.name, []).append(ev)
    tools: list[Tool] = []
    for name, evs in by_name.items():
        first = evs[0]
        longest = max(ev.duration_s for ev in evs)
        tools.append(
            Tool(
                name=name,
                fn=_backend(name, first.effect, evs, clock, log),
                effect=first.effect,
                confirm=any(ev.confirm for ev in evs),
                timeout_s=max(timeout_s, 2 * longest),
                description=f"recorded tool {name}",
            )
        )
    return tools


def _backend(
    name: str, effect: str, evs: list[ToolCallEvent], clock: Clock, log: ToolLog
) -> Callable[..., Awaitable[Any]]:
    recorded = {canonical_args(ev.arguments): ev for ev in evs}

    async def run(idempotency_key: str | None = None, **args: Any) -> Any:
        ev = recorded.get(canonical_args(args), evs[0])
        x = ToolExecution(name, effect, args, clock.now(), key=idempotency_key, turn=ev.turn)
        log.executions.append(x)
        if ev.duration_s > 0:
            await clock.sleep(ev.duration_s)
        x.finished_at = clock.now()
        return ev.result if ev.result is not None else "done"

    return run


class TimedTTS:
    """Filler "audio" for the replay: a quiet tone as long as the line would
    take at 15 characters a second. The replay plays nothing; a filler's
    start and length are what it measures."""

    identity = "turnkit-replay-timed/1"
    voice = ""

    def __init__(self, sample_rate: int = 16000) -> None:
        self.sample_rate = sample_rate

    async def synthesize(self, text: str) -> np.ndarray:
        n = max(1, math.ceil(len(text) / CHARS_PER_SECOND * self.sample_rate))
        t = np.arange(n, dtype=np.float32) / self.sample_rate
        return (0.1 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)


async def replay_fillers(
    clock: Clock, sink: Sink, *, threshold_s: float = 1.0, frame_s: float = 0.032
) -> FillerScheduler:
    """The filler scheduler a replayed reply uses for slow tools: the
    default lines (timed, see :class:`TimedTTS`), ``threshold_s`` before a
    line plays, frames of the replay's 32 ms."""
    bank = FillerBank(DEFAULT_LINES, TimedTTS(), sample_rate=16000, disk_cache=False)
    await bank.prerender()
    return FillerScheduler(bank, clock, sink, threshold_s=threshold_s, frame_s=frame_s)
