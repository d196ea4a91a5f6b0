"""What ``turnkit dial`` needs from a transport: a :class:`Transport` that
connects to an agent and gives a :class:`Connection` over which the caller
sends its microphone and receives what the agent plays.

The core knows no framework. A transport turns the framework's wire format
into three things: 16 kHz mono int16 PCM out (:meth:`Connection.send_audio`),
and :class:`AgentAudio` / :class:`AgentMessage` / :class:`AgentInterrupted`
in (:meth:`Connection.events`). The iterator ends when the agent closes the
connection; a transport failure raises :class:`DialError` (one line).

Adding a transport: write a class with ``name`` and ``async connect(url,
timeout_s) -> Connection`` in a module that imports its framework itself
(so ``import turnkit.dial`` stays framework-free), and add it to
:data:`TRANSPORTS` as ``"module:Class"``.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "TRANSPORTS",
    "AgentAudio",
    "AgentEvent",
    "AgentInterrupted",
    "AgentMessage",
    "Connection",
    "DialError",
    "Transport",
    "get_transport",
]

SEND_RATE = 16000


class DialError(RuntimeError):
    """A call that could not go on; the message is one line saying why."""


@dataclass(slots=True)
class AgentAudio:
    """Audio the agent sent: mono float32 in [-1, 1] at ``sample_rate``."""

    pcm: np.ndarray
    sample_rate: int


@dataclass(slots=True)
class AgentMessage:
    """A data message the agent sent (JSON), e.g. its stage metrics."""

    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class AgentInterrupted:
    """The agent says it was interrupted: a client flushes what it has not
    played yet."""


AgentEvent = AgentAudio | AgentMessage | AgentInterrupted


class Connection(Protocol):
    """One live call to an agent: sends the caller's microphone frames and
    yields what the agent sends back (audio, messages, interruptions) until
    it hangs up."""

    async def send_audio(self, pcm16: bytes) -> None:
        """One frame of the caller's microphone: 16 kHz mono int16 bytes."""
        ...

    def events(self) -> AsyncIterator[AgentEvent]:
        """What the agent sends, as it arrives; ends when the agent hangs up."""
        ...

    async def close(self) -> None: ...


class Transport(Protocol):
    """A way of reaching an agent (``name``: ``websocket``, ``webrtc``):
    opens a :class:`Connection` to a URL or raises :class:`DialError`."""

    name: str

    async def connect(self, url: str, timeout_s: float) -> Connection:
        """Connect within ``timeout_s`` or raise :class:`DialError`."""
        ...


TRANSPORTS: dict[str, str] = {
    "websocket": "turnkit.dial.transports.pipecat_ws:PipecatWebsocketTransport",
    "webrtc": "turnkit.dial.transports.smallwebrtc:SmallWebRTCTransport",
}


def get_transport(name: str) -> Transport:
    """The transport registered as ``name`` (its framework imported now)."""
    if name not in TRANSPORTS:
        raise ValueError(f"unknown transport {name!r} (known: {', '.join(TRANSPORTS)})")
    module, cls = TRANSPORTS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise DialError(
            f"transport {name!r} needs a package that is not installed ({exc.name}): "
            "pip install 'turnkit[dial]'"
        ) from None
    transport: Transport = getattr(mod, cls)()
    return transport
