"""A real loopback TCP server that misbehaves on purpose, for deadline tests.

Modes (every request, whatever its path):

- ``"never"``: reads the request, then sends nothing and keeps the
  connection open;
- ``"trickle-head"``: sends a status line and then header bytes one at a
  time, every ``interval_s``, never ending the headers;
- ``"trickle-body"``: sends complete ``200`` headers (chunked, SSE content
  type), then one SSE comment line (``": x\\n"``) every ``interval_s``,
  never ending the body.

Each byte/line arrives well inside any per-read timeout, so only a total
deadline ends a client's wait. Runs in a thread; :meth:`close` (or leaving
``with``) stops it and drops every connection.

Example::

    with HostileServer("trickle-head", interval_s=0.5) as srv:
        subprocess.run([..., "--metrics-url", srv.url("/metrics")])
"""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Any


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        srv = self.server
        sock: socket.socket = self.request
        sock.settimeout(0.2)
        data = b""
        while b"\r\n\r\n" not in data and not srv.stop.is_set():
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            data += chunk
        srv.requests += 1
        try:
            if srv.mode == "never":
                srv.stop.wait()
            elif srv.mode == "trickle-head":
                sock.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not srv.stop.wait(srv.interval_s):
                    sock.sendall(b"a")
            elif srv.mode == "trickle-body":
                sock.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                while not srv.stop.wait(srv.interval_s):
                    sock.sendall(b"4\r\n: x\n\r\n")
        except OSError:
            return  # the client gave up: what we wait for


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str, interval_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.requests = 0


class HostileServer:
    MODES = ("never", "trickle-head", "trickle-body")

    def __init__(self, mode: str, interval_s: float = 0.5) -> None:
        if mode not in self.MODES:
            raise ValueError(f"mode {mode!r} not in {self.MODES}")
        self._srv = _Server(mode, interval_s)
        self.port = self._srv.server_address[1]
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()

    @property
    def requests(self) -> int:
        """Requests read so far (a client that gave up early still counts)."""
        return self._srv.requests

    def url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._srv.stop.set()
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
