"""Routing keys for engines behind a gateway: keep an agent's prompt where it is cached.

turnkit has no router of its own. Several engines behind the SGLang Model
Gateway or the vLLM router each keep their own prefix cache; a request only
skips prefill on the engine that already holds its prefix. Both gateways can
pin requests that carry the same key to the same engine:

- SGLang Model Gateway, ``--policy manual`` (or ``consistent_hashing``):
  header ``x-smg-routing-key``;
- vLLM router, ``--policy consistent_hash``: header ``X-Session-ID``
  (first in its key order, before ``X-User-ID`` and the body).

:func:`routing_key` decides the key from the agent and the hash of its stable
prompt part (a new prompt version gets a new key, so it does not inherit a
cache that no longer matches), optionally spread over ``spread`` buckets by
call id when one agent's calls are too many for one engine; every request of
a call (prewarm included) carries the same key. See ``docs/serving.md``.

Example::

    key = routing_key("dental-reception", layout.stable_hash, call_id="c-42", spread=2)
    await client.complete(messages, headers=routing_headers(key))
"""

from __future__ import annotations

import hashlib

__all__ = ["SGLANG_ROUTING_HEADER", "VLLM_ROUTING_HEADER", "routing_headers", "routing_key"]

SGLANG_ROUTING_HEADER = "x-smg-routing-key"
VLLM_ROUTING_HEADER = "X-Session-ID"


def routing_key(
    agent: str, prefix_hash: str = "", *, call_id: str = "", spread: int = 1
) -> str:
    """``agent[:prefix12][:bucket]``: one key per agent prompt version; with
    ``spread > 1``, calls are split over ``spread`` keys by a stable hash of
    ``call_id`` (the same call always gets the same bucket)."""
    if not agent:
        raise ValueError("routing_key needs an agent name")
    if spread < 1:
        raise ValueError(f"spread must be >= 1, got {spread}")
    key = agent
    if prefix_hash:
        key += f":{prefix_hash[:12]}"
    if spread > 1:
        if not call_id:
            raise ValueError("spread > 1 needs a call_id to pick the bucket")
        # sha256, not hash(): Python salts str hashes per process.
        bucket = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big") % spread
        key += f":{bucket}"
    return key


def routing_headers(key: str | None) -> dict[str, str]:
    """Both gateways' headers for ``key`` (each ignores the other's);
    empty for ``None``/``""``."""
    if not key:
        return {}
    return {SGLANG_ROUTING_HEADER: key, VLLM_ROUTING_HEADER: key}
