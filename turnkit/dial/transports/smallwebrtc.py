"""Pipecat's SmallWebRTC transport, client side: a real WebRTC peer (aiortc),
signalled the way Pipecat's own clients and dev runner do it.

Signalling: ``POST {url}`` (the agent's offer endpoint, e.g.
``http://127.0.0.1:8765/api/offer``) with ``{"sdp", "type": "offer"}``; the
answer comes back as ``{"sdp", "type", "pc_id"}``. Pipecat's
``SmallWebRTCRequestHandler`` answers it. Media: one audio track each way
(Opus; the caller's 20 ms frames at 16 kHz go out as they are sent, the
agent's audio comes back decoded, paced in real time by the agent's side, so
nothing needs flushing on an interruption). A data channel carries the
agent's app messages (JSON), e.g. its stage metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

from turnkit.dial.transport import (
    SEND_RATE,
    AgentAudio,
    AgentEvent,
    AgentMessage,
    DialError,
)

__all__ = ["SmallWebRTCConnection", "SmallWebRTCTransport"]

FRAME = 320  # 20 ms at 16 kHz


class _CallerTrack(MediaStreamTrack):
    """The caller's microphone: yields each frame when the caller sends it."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pts = 0

    async def recv(self) -> AudioFrame:
        data = await self.queue.get()
        if data is None:
            self.stop()
            raise MediaStreamError
        n = len(data) // 2
        frame = AudioFrame(format="s16", layout="mono", samples=n)
        frame.planes[0].update(data)
        frame.sample_rate = SEND_RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, SEND_RATE)
        self._pts += n
        return frame


class SmallWebRTCConnection:
    """A call over Pipecat's SmallWebRTC transport (aiortc): the caller's
    frames feed an outgoing audio track; the agent's track is queued as
    agent audio (at its own sample rate); a failed peer connection is a
    :class:`DialError`, a closed one the hang-up."""

    def __init__(self, pc: RTCPeerConnection, mic: _CallerTrack) -> None:
        self._pc = pc
        self._mic = mic
        self._events: asyncio.Queue[AgentEvent | BaseException | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "audio":
                self._tasks.append(asyncio.ensure_future(self._pump(track)))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState == "failed":
                self._events.put_nowait(DialError("WebRTC connection failed"))
            elif pc.connectionState == "closed":
                self._events.put_nowait(None)

    def attach_channel(self, channel: Any) -> None:
        @channel.on("message")
        def on_message(message: Any) -> None:
            if isinstance(message, str) and not message.startswith("ping"):
                with contextlib.suppress(ValueError):
                    msg = json.loads(message)
                    if isinstance(msg, dict):
                        self._events.put_nowait(AgentMessage(msg))

        @channel.on("close")
        def on_close() -> None:
            self._events.put_nowait(None)

    async def _pump(self, track: Any) -> None:
        try:
            while True:
                frame = await track.recv()
                pcm = frame.to_ndarray()
                ch = len(frame.layout.channels)
                if pcm.dtype == np.int16:
                    pcm = pcm.astype(np.float32) / 32768.0
                pcm = pcm.reshape(-1)
                if ch > 1:  # packed s16: interleaved samples
                    pcm = pcm[: len(pcm) // ch * ch].reshape(-1, ch)[:, 0]
                self._events.put_nowait(AgentAudio(pcm.astype(np.float32), frame.sample_rate))
        except MediaStreamError:
            self._events.put_nowait(None)

    async def send_audio(self, pcm16: bytes) -> None:
        self._mic.queue.put_nowait(pcm16)

    async def events(self) -> AsyncIterator[AgentEvent]:
        while True:
            ev = await self._events.get()
            if ev is None:
                return
            if isinstance(ev, BaseException):
                raise ev
            yield ev

    async def close(self) -> None:
        self._mic.queue.put_nowait(None)
        for t in self._tasks:
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._pc.close(), 5.0)


class SmallWebRTCTransport:
    """Connects to a Pipecat agent's SmallWebRTC offer endpoint."""

    name = "webrtc"

    async def connect(self, url: str, timeout_s: float) -> SmallWebRTCConnection:
        pc = RTCPeerConnection()
        mic = _CallerTrack()
        pc.addTrack(mic)
        conn = SmallWebRTCConnection(pc, mic)
        conn.attach_channel(pc.createDataChannel("messages"))
        connected = asyncio.Event()

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState == "connected":
                connected.set()

        try:
            async with asyncio.timeout(timeout_s):
                await pc.setLocalDescription(await pc.createOffer())
                offer = {"sdp": pc.localDescription.sdp, "type": pc.localDescription.type}
                async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
                    r = await client.post(url, json=offer)
                if r.status_code != 200:
                    raise DialError(f"{url}: the offer was answered with HTTP {r.status_code}")
                try:
                    answer = r.json()
                    desc = RTCSessionDescription(sdp=answer["sdp"], type=answer["type"])
                except (ValueError, KeyError, TypeError):
                    raise DialError(f"{url}: the answer is not an SDP answer") from None
                await pc.setRemoteDescription(desc)
                await connected.wait()
        except TimeoutError:
            await conn.close()
            raise DialError(f"{url}: no WebRTC connection within {timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            await conn.close()
            raise DialError(f"{url}: nothing answers ({exc})") from None
        except httpx.HTTPError as exc:
            await conn.close()
            raise DialError(f"{url}: signalling failed ({type(exc).__name__}: {exc})") from None
        except DialError:
            await conn.close()
            raise
        return conn
