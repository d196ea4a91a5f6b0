"""Replay a recorded Flux stream through turnkit's drafting on a virtual clock.

A recorded stream is JSONL: one message per line, each exactly as Flux sent
it (the SDK's ``ListenV2TurnInfo``, ``ListenV2Connected``, ... serialised),
plus an optional ``received_at`` (seconds since the stream's first audio
sample, when the message arrived; without it a ``TurnInfo`` counts as
arriving at its ``audio_window_end``). Lines are parsed and validated with
the SDK's own pydantic models; a bad line is reported as one line naming
``file:line`` and the field, and the rest of the stream is still replayed.

:func:`replay_flux` advances a :class:`~turnkit.clock.VirtualClock` to each
message, maps it with :class:`~turnkit_deepgram.flux.FluxTurnMapper` and
feeds the frames to a :class:`~turnkit_deepgram.host.DraftingHost` — the
:class:`~turnkit.drafting.responder.Responder` every host runs — over an
engine: by default :class:`StandInEngine` (first token ``ttft_s`` after the
request on the virtual clock, the caller's words as the answer, optional
tool calls). The result counts drafts started, used and cancelled, and when
each turn was decided.

Example::

    result = await replay_flux("call-17.flux.jsonl", FluxThresholds(eager_eot_threshold=0.5))
    print(result.stats.used, "of", result.stats.started, "drafts used")

CLI: ``turnkit-flux-replay FILE.jsonl [...] [--eager-eot-threshold 0.5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgram.listen.v2.types import (
    ListenV2ConfigureFailure,
    ListenV2ConfigureSuccess,
    ListenV2Connected,
    ListenV2FatalError,
    ListenV2TurnInfo,
    ListenV2Warning,
)
from pydantic import ValidationError

from turnkit.clock import Clock, VirtualClock, settle
from turnkit.drafting import DraftStats, ToolGate
from turnkit.llm.client import ToolCall
from turnkit_deepgram.flux import FluxThresholds, FluxTurnMapper
from turnkit_deepgram.host import DraftingHost, HostTurn

__all__ = [
    "FluxMessage",
    "FluxReplayResult",
    "FluxStreamError",
    "StandInEngine",
    "load_flux_jsonl",
    "main",
    "replay_flux",
]

# The server messages of listen v2, by their ``type`` field (the SDK's union
# ``V2SocketClientResponse``, keyed for exact validation: the SDK's own
# socket parser ``construct_type`` does not validate).
MESSAGE_TYPES: dict[str, Any] = {
    "Connected": ListenV2Connected,
    "TurnInfo": ListenV2TurnInfo,
    "ConfigureSuccess": ListenV2ConfigureSuccess,
    "ConfigureFailure": ListenV2ConfigureFailure,
    "Warning": ListenV2Warning,
    "Error": ListenV2FatalError,
}


class FluxStreamError(ValueError):
    """A recorded Flux stream that cannot be read at all (missing, not text)."""


@dataclass(slots=True)
class FluxMessage:
    """One recorded message: the SDK model and when it arrived (stream seconds)."""

    line: int
    at: float
    message: Any


@dataclass(slots=True)
class FluxReplayResult:
    path: str
    messages: int
    errors: list[str]
    turns: list[HostTurn]
    stats: DraftStats
    gate: ToolGate | None = None
    replies: list[Any] = field(default_factory=list)


def _field_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(message)"
    return f"{loc}: {err['msg']}"


def load_flux_jsonl(path: str | Path) -> tuple[list[FluxMessage], list[str]]:
    """Parse a recorded stream. Returns the good messages and one error line
    (``file:line: field: problem``) per bad line. Raises
    :class:`FluxStreamError` when the file cannot be read."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FluxStreamError(f"{p}: cannot read: {exc}") from None
    out: list[FluxMessage] = []
    errors: list[str] = []
    last = 0.0
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{p}:{n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{where}: expected a JSON object, got {type(obj).__name__}")
            continue
        kind = obj.get("type")
        model = MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
        if model is None:
            errors.append(
                f"{where}: type: unknown message type {kind!r} (known: {', '.join(MESSAGE_TYPES)})"
            )
            continue
        received = obj.pop("received_at", None)
        if received is not None and (
            isinstance(received, bool)
            or not isinstance(received, int | float)
            or not math.isfinite(received)
            or received < 0
        ):
            errors.append(f"{where}: received_at: expected seconds >= 0, got {received!r}")
            continue
        try:
            msg = model.model_validate(obj)
        except ValidationError as exc:
            errors.append(f"{where}: {_field_error(exc)}")
            continue
        at = float(received) if received is not None else None
        if at is None and isinstance(msg, ListenV2TurnInfo):
            at = float(msg.audio_window_end)
        at = last if at is None else at
        if at < last - 1e-9:
            errors.append(
                f"{where}: received_at: {at:g} s is before the previous message ({last:g} s)"
            )
            continue
        last = at
        out.append(FluxMessage(line=n, at=at, message=msg))
    return out, errors


ToolsFor = Callable[[str], list[tuple[str, dict[str, Any]]]]


class StandInEngine:
    """The replay's stand-in LLM on a (virtual) clock, with the ``stream``
    interface :class:`~turnkit.drafting.responder.Responder` uses: the first
    token comes ``ttft_s`` after the request; the answer is the caller's
    last words back. With ``tools_for`` (and tools offered), the first round
    asks for the calls ``tools_for(words)`` names, and the round after their
    results answers."""

    def __init__(self, clock: Clock, ttft_s: float = 0.35, tools_for: ToolsFor | None = None):
        self.clock = clock
        self.ttft_s = ttft_s
        self.tools_for = tools_for
        self.requests = 0

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        tools: list[dict[str, Any]] | None = None,
        **_: Any,
    ) -> _StandInStream:
        self.requests += 1
        return _StandInStream(self, messages, bool(tools))


class _StandInStream:
    def __init__(self, engine: StandInEngine, messages: list[dict[str, Any]], tools: bool) -> None:
        self._e = engine
        self._messages = messages
        self._tools = tools
        self.tool_calls: list[ToolCall] = []
        self.ttft_ms: float | None = None
        self._chunks: list[str] | None = None

    async def __aenter__(self) -> _StandInStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> _StandInStream:
        return self

    async def __anext__(self) -> str:
        if self._chunks is None:
            await self._e.clock.sleep(self._e.ttft_s)
            self.ttft_ms = self._e.ttft_s * 1000
            words = next(
                (str(m.get("content") or "") for m in reversed(self._messages) if m.get("role") == "user"),
                "",
            )
            answered = bool(self._messages) and self._messages[-1].get("role") == "tool"
            calls = self._e.tools_for(words) if self._e.tools_for and self._tools else []
            if calls and not answered:
                self._chunks = []
                self.tool_calls = [
                    ToolCall(index=i, id=f"call_{i}", name=name, arguments=json.dumps(args))
                    for i, (name, args) in enumerate(calls)
                ]
            else:
                self._chunks = [words] if words else []
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)


async def replay_flux(
    path: str | Path,
    thresholds: FluxThresholds | None = None,
    *,
    engine: Any | None = None,
    gate: ToolGate | None = None,
    clock: VirtualClock | None = None,
    ttft_s: float = 0.35,
) -> FluxReplayResult:
    """Replay one recorded stream (see the module docstring)."""
    messages, errors = load_flux_jsonl(path)
    clock = clock if clock is not None else VirtualClock()
    mapper = FluxTurnMapper(clock, thresholds)
    host = DraftingHost(clock, engine or StandInEngine(clock, ttft_s), gate=gate)
    for m in messages:
        await clock.advance_to(max(clock.now(), m.at))
        for frame in mapper.map(m.message):
            await host.handle(frame)
        await settle()
    # Let the last replies finish on the virtual clock.
    while (deadline := clock.next_deadline()) is not None:
        await clock.advance_to(deadline)
    await host.aclose()
    replies = [host.replies[t.reply_id] for t in host.turns if t.reply_id in host.replies]
    return FluxReplayResult(
        path=str(path),
        messages=len(messages),
        errors=errors,
        turns=host.turns,
        stats=host.drafter.stats,
        gate=gate,
        replies=replies,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``turnkit-flux-replay``: one line per turn, then draft totals."""
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(
        prog="turnkit-flux-replay",
        description="Replay recorded Deepgram Flux streams (JSONL) through turnkit's drafting.",
    )
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--eot-threshold", type=float, default=None)
    ap.add_argument("--eager-eot-threshold", type=float, default=None)
    ap.add_argument("--ttft", type=float, default=0.35, help="stand-in LLM first-token delay (s)")
    args = ap.parse_args(argv)
    out, err = Console(), Console(stderr=True)
    thresholds = None
    if args.eot_threshold is not None or args.eager_eot_threshold is not None:
        try:
            thresholds = FluxThresholds(
                eot_threshold=args.eot_threshold if args.eot_threshold is not None else 0.7,
                eager_eot_threshold=args.eager_eot_threshold,
            )
        except ValidationError as exc:
            err.print(f"[red]error:[/red] thresholds: {_field_error(exc)}", highlight=False)
            return 2
    table = Table("stream", "turn", "decided (s)", "drafted", "draft lead (ms)", "text")
    failed = False
    for path in args.paths:
        try:
            result = asyncio.run(replay_flux(path, thresholds, ttft_s=args.ttft))
        except FluxStreamError as exc:
            err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            failed = True
            continue
        for line in result.errors:
            err.print(f"[red]error:[/red] {line}", highlight=False, soft_wrap=True)
        failed |= bool(result.errors)
        for t in result.turns:
            lead = (
                ""
                if t.draft_started_at is None
                else f"{(t.decided_at - t.draft_started_at) * 1000:.0f}"
            )
            table.add_row(
                path.name,
                str(t.turn_id),
                f"{t.decided_at:.2f}",
                "yes" if t.drafted else "no",
                lead,
                t.text,
            )
        s = result.stats
        table.add_row(
            path.name,
            "all",
            "",
            f"{s.used}/{s.started} used",
            f"{s.cancelled} cancelled",
            "",
            end_section=True,
        )
    out.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
