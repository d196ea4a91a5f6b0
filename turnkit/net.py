"""Where turnkit may connect, and how long a request may take.

Every command that talks to a server — ``replay --llm-url``, the
``llm-eou`` detector's ``base_url``, ``cache-report --metrics-url``,
``prompt-lint --base-url``, ``loadtest --base-url`` — goes through the same
two rules.

**Target policy** (:func:`check_target`). A URL's host is normalised first
(case, trailing dots, ``[IPv6]`` brackets and zone ids, IPv4-mapped IPv6
``::ffff:a.b.c.d``, and the decimal / octal / hex / short IPv4 forms
``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1`` that the C resolver
accepts), then resolved, and *every* address it resolves to must pass:

- allowed by default: loopback (``127.0.0.0/8``, ``::1``) and the private
  ranges of RFC 1918 (``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16``)
  and their IPv6 counterpart, unique-local ``fc00::/7`` (RFC 4193);
- only with ``allow_remote`` (``--allow-remote``: "this is my own engine"):
  everything else — public addresses, link-local ``169.254.0.0/16`` and
  ``fe80::/10``, CGNAT ``100.64.0.0/10``, benchmarking ``198.18.0.0/15``,
  reserved ``240.0.0.0/4``, documentation and other special ranges;
- never: the unspecified address (``0.0.0.0``, ``::``), multicast and
  broadcast, and the cloud metadata endpoints (``169.254.169.254``,
  ``fd00:ec2::254``, ``100.100.100.200``): not an engine, whoever asks;
- ``forbid_third_party`` (``loadtest``): known third-party API hosts are
  refused even with ``allow_remote`` — load-testing them is not the user's
  to do.

A name that does not resolve is refused unless ``allow_remote`` (then the
connection itself reports it). The check resolves the name once; the connection
resolves it again, so a DNS server that answers differently the second time
(rebinding) is outside what this guards — it keeps careless targets out, it
is not a sandbox.

**Deadlines** (:func:`fetch`, :func:`fetch_sync`). httpx's timeouts bound
each socket read, so a server that sends one byte every 2 s never trips
them. :func:`fetch` puts one *total* deadline over connect, headers and body
(and caps the body at ``max_bytes``); :class:`~turnkit.llm.client.ChatClient`
keeps its own total deadline per stream.

Example::

    check_target("http://127.0.0.1:8080/v1")                 # fine
    check_target("http://169.254.169.254/latest")            # TargetRefused
    resp = await fetch("GET", "http://127.0.0.1:8080/metrics", deadline_s=5)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = [
    "DEFAULT_DEADLINE_S",
    "THIRD_PARTY_APIS",
    "FetchError",
    "FetchResult",
    "TargetRefused",
    "check_target",
    "fetch",
    "fetch_sync",
    "normalise_host",
]

DEFAULT_DEADLINE_S = 10.0
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
RESOLVE_TIMEOUT_S = 5.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_ALLOWED = tuple(
    ipaddress.ip_network(n)
    for n in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7")
)
_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
# Third-party APIs: load-testing them is not the user's to do.
THIRD_PARTY_APIS = (
    "openai.com", "anthropic.com", "groq.com", "together.xyz", "together.ai",
    "fireworks.ai", "deepinfra.com", "openrouter.ai", "googleapis.com", "mistral.ai",
    "cohere.com", "cohere.ai", "perplexity.ai", "x.ai", "deepseek.com",
)  # fmt: skip


class TargetRefused(ValueError):
    """A URL turnkit will not connect to; the message is one line naming it."""


def normalise_host(host: str) -> str:
    """Lower case, no ``[]``, no IPv6 zone id, no trailing dots."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    h = h.split("%", 1)[0]
    return h.rstrip(".")


def _literal(host: str) -> IPAddress | None:
    """``host`` as an address if it is one in any form the resolver takes."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if ":" in host:
            return None
        try:  # 2130706433, 0177.0.0.1, 0x7f.1, 127.1 (what inet_aton accepts)
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    return ip


def _unmap(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _resolve(host: str, port: int) -> list[IPAddress]:
    def lookup() -> list[Any]:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        infos = pool.submit(lookup).result(timeout=RESOLVE_TIMEOUT_S)
    finally:
        pool.shutdown(wait=False)
    out: list[IPAddress] = []
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]
        out.append(_unmap(ipaddress.ip_address(addr)))
    return out


def _verdict(ip: IPAddress) -> str:
    """``"ok"``, ``"remote"`` (needs allow_remote) or ``"never"``."""
    ip = _unmap(ip)
    if ip in _METADATA:
        return "never"
    if ip.is_unspecified or ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
        return "never"
    if any(ip in net for net in _ALLOWED if net.version == ip.version):
        return "ok"
    return "remote"


def check_target(
    url: str,
    allow_remote: bool = False,
    *,
    what: str = "",
    forbid_third_party: bool = False,
) -> None:
    """Raise :class:`TargetRefused` (one line, naming ``what`` and the URL)
    unless ``url`` may be connected to under the policy in the module
    docstring. ``what`` is the option or field the URL came from
    (``"--llm-url"``, ``"llm-eou base_url"``)."""
    label = f"{what} {url}" if what else url
    try:
        parts = urlsplit(url)
        port = parts.port
        raw = parts.hostname or ""
    except ValueError as exc:
        raise TargetRefused(f"{label}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused(f"{label}: expected an http:// or https:// URL")
    host = normalise_host(raw)
    if not host:
        raise TargetRefused(f"{label}: no host in the URL")
    if forbid_third_party and any(host == d or host.endswith("." + d) for d in THIRD_PARTY_APIS):
        raise TargetRefused(f"{label}: a third-party API; loadtest only your own engines")
    literal = _literal(host)
    if literal is not None:
        addrs = [_unmap(literal)]
    else:
        try:
            addrs = _resolve(host, port or (443 if parts.scheme == "https" else 80))
        except (OSError, UnicodeError, ValueError, concurrent.futures.TimeoutError) as exc:
            if allow_remote:
                return  # the user's own name; connecting will say what is wrong with it
            why = str(exc) or f"no answer within {RESOLVE_TIMEOUT_S:g} s"
            raise TargetRefused(
                f"{label}: cannot resolve {host!r} ({why}); without --allow-remote only "
                "loopback and private (RFC 1918) addresses"
            ) from None
    for ip in addrs:
        v = _verdict(ip)
        via = "" if str(ip) == host else f" ({host} is {ip})"
        if v == "never":
            raise TargetRefused(
                f"{label}: an unspecified, multicast, broadcast or cloud-metadata address{via}; "
                "turnkit never connects there"
            )
        if v == "remote" and not allow_remote:
            raise TargetRefused(
                f"{label}: not a loopback or private (RFC 1918) address{via}; pass "
                "--allow-remote if it is your own endpoint"
            )


# -- requests with a total deadline ---------------------------------------------------


class FetchError(RuntimeError):
    """No complete answer: ``kind`` is ``"timeout"``, ``"connect"`` or ``"too_large"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class FetchResult:
    """An HTTP answer as read in full: status code, body bytes and headers
    (``text`` decodes the body as UTF-8, replacing what is not)."""

    status_code: int
    content: bytes
    headers: dict[str, str]

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        import json

        return json.loads(self.content)


async def fetch(
    method: str,
    url: str,
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
    json: Any = None,
    headers: dict[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    client: httpx.AsyncClient | None = None,
) -> FetchResult:
    """One request, answered in full within ``deadline_s`` seconds from now
    (connect, headers and body together), else :class:`FetchError`."""
    t0 = time.perf_counter()
    own = client is None
    http = client or httpx.AsyncClient(timeout=httpx.Timeout(deadline_s))
    try:
        async with asyncio.timeout(deadline_s):
            async with http.stream(method, url, json=json, headers=headers) as resp:
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise FetchError(
                            "too_large", f"{url}: answer larger than {max_bytes} bytes"
                        )
                    chunks.append(chunk)
                return FetchResult(resp.status_code, b"".join(chunks), dict(resp.headers))
    except TimeoutError:
        raise FetchError(
            "timeout", f"{url}: no complete answer within {deadline_s:g} s"
        ) from None
    except httpx.TimeoutException:
        spent = time.perf_counter() - t0
        raise FetchError(
            "timeout", f"{url}: no complete answer within {deadline_s:g} s ({spent:.1f} s)"
        ) from None
    except FetchError:
        raise
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
        raise FetchError("connect", f"{url}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # e.g. an OverflowError for port 99999 inside anyio's group
        why = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else exc
        raise FetchError("connect", f"{url}: {type(why).__name__}: {why}") from None
    finally:
        if own:
            await http.aclose()


def fetch_sync(
    method: str,
    url: str,
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
    json: Any = None,
    headers: dict[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> FetchResult:
    """:func:`fetch` from synchronous code (its own event loop; a worker
    thread when the caller already runs one)."""

    def run() -> FetchResult:
        return asyncio.run(
            fetch(
                method, url, deadline_s=deadline_s, json=json, headers=headers, max_bytes=max_bytes
            )
        )

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()
