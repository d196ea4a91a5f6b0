"""Stable-prefix prompt layout (turnkit.llm.prompt) and routing keys.

Unit tests of the order and the guards, and one on the real engine
(llama-server + SmolLM2, tests/engine.py): the second call of an agent finds
the whole stable part in the engine's prefix cache when per-call values are
last, and almost nothing when the same values are put at the top.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from engine import running_llama_server

from turnkit.llm.client import ChatClient
from turnkit.llm.prompt import ChatRequest, LayoutError, PromptLayout, fill_placeholders
from turnkit.llm.routing import routing_headers, routing_key

TOOL = {
    "type": "function",
    "function": {
        "name": "book",
        "description": "Book a visit.",
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
    },
}


def layout(**kw: object) -> PromptLayout:
    base: dict[str, object] = {
        "persona": "You are Ava, the receptionist at Acme Dental.",
        "rules": ["Greet the caller as {caller_name}.", "Never give medical advice."],
        "call_flow": "Ask what they need, offer two slots, confirm, book.",
        "reference": "Open Monday to Friday, 8 to 5. Cleanings take 45 minutes.",
        "tools": [TOOL],
    }
    base.update(kw)
    return PromptLayout(**base)  # type: ignore[arg-type]


def test_order_stable_conversation_then_per_call_block() -> None:
    lay = layout()
    call = lay.start_call({"caller_name": "Dana", "caller_number": "+1 555 0100"})
    call.add("assistant", "Acme Dental, this is Ava.")
    call.add("user", "I need a cleaning.")
    req = call.request()
    assert [m["role"] for m in req.messages] == ["system", "assistant", "user", "system"]
    system = req.messages[0]["content"]
    for section in ("You are Ava", "Rules:", "Call flow:", "Reference:"):
        assert section in system
    assert system.index("Rules:") < system.index("Call flow:") < system.index("Reference:")
    assert "{caller_name}" in system and "Dana" not in system
    assert req.messages[-1]["content"] == (
        "Call details:\ncaller_name: Dana\ncaller_number: +1 555 0100"
    )
    assert req.tools == [TOOL]
    body = req.body(max_tokens=5)
    assert body["tools"] == [TOOL] and body["max_tokens"] == 5


def test_stable_part_byte_identical_across_calls_and_turns() -> None:
    lay = layout()
    a = lay.start_call({"caller_name": "Dana"})
    b = lay.start_call({"caller_name": "Eli"})
    a.add("user", "hi")
    first = a.request()
    a.add("assistant", "Hello!")
    a.add("user", "book me")
    second = a.request()
    other = b.request()
    assert first.messages[0] == second.messages[0] == other.messages[0]
    assert first.tools == other.tools
    # Append-only: turn 2's request starts with turn 1's conversation.
    assert second.messages[: len(first.messages) - 1] == first.messages[:-1]
    # Mutating a returned request never leaks into the layout.
    first.messages[0]["content"] = "tampered"
    first.tools[0]["function"]["name"] = "tampered"
    assert a.request().messages[0]["content"] != "tampered"
    assert a.request().tools == [TOOL]


def test_after_stable_position() -> None:
    lay = layout(per_call_position="after_stable")
    call = lay.start_call({"caller_name": "Dana"})
    call.add("user", "hi")
    req = call.request()
    assert [m["role"] for m in req.messages] == ["system", "system", "user"]
    assert req.messages[1]["content"].startswith("Call details:")


def test_guards() -> None:
    lay = layout()
    with pytest.raises(LayoutError, match="caller_name"):
        lay.start_call({})  # a placeholder without a value
    with pytest.raises(LayoutError, match="appears in the stable part"):
        layout(reference="VIP caller Dana Smith today.").start_call({"caller_name": "Dana Smith"})
    with pytest.raises(ValueError, match="not declared"):
        layout(placeholders=("caller_number",))
    with pytest.raises(ValueError):
        PromptLayout(persona="  ")
    with pytest.raises(LayoutError):
        lay.start_call({"caller_name": "x"}).append({"content": "no role"})
    assert fill_placeholders("Hi {caller_name} {other}", {"caller_name": "Dana"}) == (
        "Hi Dana {other}"
    )


def test_stable_hash_tracks_the_stable_part_only() -> None:
    a, b = layout(), layout()
    assert a.stable_hash == b.stable_hash
    assert layout(reference="Open weekends too.").stable_hash != a.stable_hash
    assert layout(tools=[]).stable_hash != a.stable_hash


def test_routing_key_and_headers() -> None:
    h = "ab" * 32
    assert routing_key("dental", h) == "dental:" + h[:12]
    keys = {routing_key("dental", h, call_id=f"c{i}", spread=3) for i in range(60)}
    assert len(keys) == 3  # spread over exactly three buckets
    assert routing_key("dental", h, call_id="c7", spread=3) == routing_key(
        "dental", h, call_id="c7", spread=3
    )
    assert routing_headers("k1") == {"x-smg-routing-key": "k1", "X-Session-ID": "k1"}
    assert routing_headers(None) == {}
    with pytest.raises(ValueError):
        routing_key("dental", h, spread=2)  # no call id
    with pytest.raises(ValueError):
        routing_key("")


# --------------------------------------------------------------------------
# Real engine


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with running_llama_server() as base_url:
        yield base_url


def _long_layout(agent: str) -> PromptLayout:
    reference = " ".join(
        f"Policy {i}: confirm the caller's appointment details before booking anything."
        for i in range(14)
    )
    return layout(persona=f"You are {agent}, the receptionist at Acme Dental.", reference=reference)


async def _first_turn(client: ChatClient, req: ChatRequest) -> tuple[int, int]:
    r = await client.complete(req.messages, tools=req.tools, max_tokens=1)
    return r.usage["prompt_tokens"], r.cached_tokens or 0


def test_second_call_reuses_the_stable_part_on_the_engine(engine: str) -> None:
    lay = _long_layout("Ava")

    def first_request(name: str, number: str, top: bool) -> ChatRequest:
        call = lay.start_call({"caller_name": name, "caller_number": number})
        call.add("user", "Hi, I'd like to book a cleaning.")
        req = call.request()
        if not top:
            return req
        # The anti-pattern: the same per-call block moved to the very top.
        msgs = [req.messages[-1], *req.messages[:-1]]
        return ChatRequest(messages=msgs, tools=req.tools)

    async def run() -> dict[str, tuple[int, int]]:
        async with ChatClient(engine, timeout_s=120, first_token_timeout_s=120) as c:
            out = {}
            await _first_turn(c, first_request("Dana", "+1 555 0100", top=False))
            out["end"] = await _first_turn(c, first_request("Eli", "+1 555 0199", top=False))
            await _first_turn(c, first_request("Dana", "+1 555 0100", top=True))
            out["top"] = await _first_turn(c, first_request("Eli", "+1 555 0199", top=True))
            return out

    got = asyncio.run(run())
    prompt, cached = got["end"]
    assert prompt > 150
    # Everything but the user's words and the call details came from the cache.
    assert cached >= prompt - 40, got
    _, cached_top = got["top"]
    assert cached_top < 20, got  # diverges within the first message
