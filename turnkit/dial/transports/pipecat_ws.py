"""Pipecat's websocket transport, client side: the frames Pipecat's
``ProtobufFrameSerializer`` speaks (the serializer of
``FastAPIWebsocketTransport`` / ``WebsocketServerTransport`` in
pipecat-ai's own websocket examples), over a plain websocket.

Out: each 20 ms microphone frame as a protobuf ``Frame{audio}`` (16 kHz mono
int16; the server's serializer makes it an ``InputAudioRawFrame``). In:
``audio`` (the bot's ``OutputAudioRawFrame``s), ``message`` (an
``OutputTransportMessageFrame``'s JSON) and ``interruption``.

The URL is the agent's websocket endpoint, e.g. ``ws://127.0.0.1:8765/ws``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import numpy as np
import websockets
from loguru import logger
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from turnkit.dial.transport import (
    SEND_RATE,
    AgentAudio,
    AgentEvent,
    AgentInterrupted,
    AgentMessage,
    DialError,
)

logger.disable("pipecat")  # its import banner is not the caller's business
import pipecat.frames.protobufs.frames_pb2 as pb  # noqa: E402  (the wire schema only)

__all__ = ["PipecatWebsocketConnection", "PipecatWebsocketTransport"]

# What an abnormal close code says when the agent gave no reason (RFC 6455
# and its registry). 1012 is what uvicorn (FastAPI's usual server) sends to
# every open websocket when it shuts down, i.e. when its process got SIGTERM
# or SIGINT: the agent was stopped, not a fault of the call.
_CLOSE_MEANING = {
    1011: "the agent hit an internal error",
    1012: "service restart: the agent's server is shutting down",
    1013: "try again later: the agent is overloaded",
}


class PipecatWebsocketConnection:
    """A call over Pipecat's websocket serializer: caller audio goes out as
    protobuf ``Frame.audio`` at 16 kHz; incoming frames become agent audio,
    messages and interruptions; a closed socket is the hang-up."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self._ws = ws

    async def send_audio(self, pcm16: bytes) -> None:
        frame = pb.Frame()  # type: ignore[attr-defined]
        frame.audio.audio = pcm16
        frame.audio.sample_rate = SEND_RATE
        frame.audio.num_channels = 1
        # A hang-up is reported by the receive side.
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(frame.SerializeToString())

    async def events(self) -> AsyncIterator[AgentEvent]:
        while True:
            try:
                data = await self._ws.recv()
            except ConnectionClosed as exc:
                if exc.rcvd is not None and exc.rcvd.code not in (1000, 1001):
                    why = exc.rcvd.reason or _CLOSE_MEANING.get(exc.rcvd.code, "")
                    raise DialError(
                        f"websocket closed by the agent with code {exc.rcvd.code}"
                        + (f" ({why})" if why else "")
                    ) from None
                return
            if isinstance(data, str):
                continue  # not the protobuf protocol (RTVI JSON etc.): ignored
            try:
                frame = pb.Frame.FromString(data)  # type: ignore[attr-defined]
            except Exception:
                raise DialError("the agent sent a frame that is not Pipecat protobuf") from None
            which = frame.WhichOneof("frame")
            if which == "audio":
                a = frame.audio
                pcm = np.frombuffer(a.audio, dtype="<i2").astype(np.float32) / 32768.0
                ch = max(1, a.num_channels)
                if ch > 1:
                    pcm = pcm[: len(pcm) // ch * ch].reshape(-1, ch)[:, 0]
                if a.sample_rate <= 0:
                    raise DialError("the agent sent audio without a sample rate")
                yield AgentAudio(pcm, a.sample_rate)
            elif which == "message":
                try:
                    msg = json.loads(frame.message.data)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    yield AgentMessage(msg)
            elif which == "interruption":
                yield AgentInterrupted()

    async def close(self) -> None:
        with contextlib.suppress(TimeoutError, ConnectionClosed, OSError):
            await asyncio.wait_for(self._ws.close(), 3.0)


class PipecatWebsocketTransport:
    """Connects to a Pipecat agent's websocket endpoint (protobuf frames)."""

    name = "websocket"

    async def connect(self, url: str, timeout_s: float) -> PipecatWebsocketConnection:
        try:
            ws = await asyncio.wait_for(
                websockets.connect(url, max_size=None, open_timeout=timeout_s, ping_interval=None),
                timeout_s,
            )
        except TimeoutError:
            raise DialError(f"{url}: no answer within {timeout_s:g} s") from None
        except InvalidURI as exc:
            raise DialError(f"{url}: not a websocket URL ({exc})") from None
        except InvalidHandshake as exc:
            raise DialError(f"{url}: not a websocket endpoint ({exc})") from None
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise DialError(f"{url}: nothing answers ({why})") from None
        return PipecatWebsocketConnection(ws)
