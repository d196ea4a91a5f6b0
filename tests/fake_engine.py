"""A fake OpenAI-compatible engine for fast tests of error paths the real
engine cannot be made to show on demand (5xx, stalls, mid-stream
disconnects, tool calls). Named fake on purpose: every behaviour it fakes
also has a real-engine test (tests/engine.py) where one is possible.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import threading
import time
from collections.abc import AsyncIterator

import httpx


def chunk(content: str | None = None, finish: str | None = None, **extra: object) -> bytes:
    delta: dict[str, object] = {}
    if content is not None:
        delta["content"] = content
    body: dict[str, object] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    body.update(extra)
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = (
    b"data: "
    + json.dumps(
        {
            "id": "chatcmpl-fake",
            "choices": [],
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": 3,
                "total_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
            "timings": {"cache_n": 5},
        }
    ).encode()
    + b"\n\n"
)
DONE = b"data: [DONE]\n\n"


class FakeEngine:
    """A tiny OpenAI-compatible SSE server in a thread. The first path
    segment picks the behaviour (``{base}/<mode>/v1``):

    * ``ok``: role chunk, "Hel" "lo" "!", finish, usage, [DONE];
    * ``fail<N>``: HTTP 503 for the first N requests of this engine, then ``ok``;
    * ``cut``: two tokens, then the connection drops (no final chunk);
    * ``cutfirst``: headers, then the connection drops before any token;
    * ``stall``: headers, then nothing until the engine stops;
    * ``endless``: a token every 5 ms until the client goes away;
    * ``tools``: a tool call streamed in three deltas;
    * ``agent``: ``tools`` until the request carries a tool result, then ``ok``
      (an agent's tool round trip).

    ``bodies`` keeps every request body (parsed JSON), in arrival order.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.bodies: list[dict] = []
        self.disconnects = 0  # endless streams the client closed
        self.stop = threading.Event()
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _start(self, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()

            def _send(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _end(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                engine.requests += 1
                with contextlib.suppress(ValueError):
                    engine.bodies.append(json.loads(raw or b"{}"))
                mode = self.path.strip("/").split("/")[0]
                if mode == "agent":
                    msgs = engine.bodies[-1].get("messages", []) if engine.bodies else []
                    mode = "ok" if any(m.get("role") == "tool" for m in msgs) else "tools"
                with contextlib.suppress(OSError):
                    self._serve(mode)
                self.close_connection = True

            def _serve(self, mode: str) -> None:
                if mode.startswith("fail"):
                    if engine.requests <= int(mode[4:]):
                        body = b'{"error": "overloaded"}'
                        self.send_response(503)
                        self.send_header("Content-Length", str(len(body)))
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    mode = "ok"
                self._start()
                self._send(chunk(None))
                if mode == "ok":
                    for t in ("Hel", "lo", "!"):
                        self._send(chunk(t))
                    self._send(chunk(finish="stop"))
                    self._send(USAGE)
                    self._send(DONE)
                    self._end()
                elif mode == "cut":
                    self._send(chunk("a"))
                    self._send(chunk("b"))
                    self.wfile.write(b"40\r\ndata: {")  # half a chunk, then gone
                    self.wfile.flush()
                elif mode == "cutfirst":
                    pass
                elif mode == "stall":
                    engine.stop.wait(30)
                elif mode == "endless":
                    try:
                        while not engine.stop.is_set():
                            self._send(chunk("x"))
                            time.sleep(0.005)
                    except OSError:
                        engine.disconnects += 1
                elif mode == "tools":
                    # The first tool the request offers (else "book"), {"party": 2}.
                    offered = engine.bodies[-1].get("tools") if engine.bodies else None
                    name = offered[0]["function"]["name"] if offered else "book"
                    calls = [
                        {"index": 0, "id": "call_1", "function": {"name": name, "arguments": ""}},
                        {"index": 0, "function": {"arguments": '{"party": '}},
                        {"index": 0, "function": {"arguments": "2}"}},
                    ]
                    for c in calls:
                        body = {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [c]}}]}
                        self._send(b"data: " + json.dumps(body).encode() + b"\n\n")
                    self._send(chunk(finish="tool_calls"))
                    self._send(DONE)
                    self._end()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{mode}/v1"

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


class EndlessBody(httpx.AsyncByteStream):
    """An endless SSE body for :func:`mock_transport` that counts its closes."""

    def __init__(self, stats: dict[str, int]) -> None:
        self.stats = stats

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield chunk(None)
        while True:
            yield chunk("x")
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        self.stats["closed"] += 1


def mock_transport(stats: dict[str, int]) -> httpx.MockTransport:
    """FakeEngine's ``endless`` mode in-process (no sockets, no threads)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        stats["opened"] += 1
        return httpx.Response(
            200, headers={"Content-Type": "text/event-stream"}, stream=EndlessBody(stats)
        )

    return httpx.MockTransport(handler)
