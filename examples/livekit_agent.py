"""A LiveKit voice agent that takes turns with turnkit, on self-hosted models.

What turnkit does here:

* decides when the caller is done: a turnkit detector as LiveKit's turn
  detector (``TURNKIT_DETECTOR``, default ``semantic-text``; ``smart-turn`` /
  ``fused`` / ``silence:stop_ms=600`` use LiveKit's streaming audio protocol);
* gates the tools: ``find_slots`` (read) runs freely, ``book_table`` (write)
  runs once per turn and never twice for a retried turn, ``charge_deposit``
  (write, confirm) waits for the caller's spoken yes;
* writes its per-turn evidence into each user ``ChatMessage.metrics``;
* hands the STT's word times to the detector (``WordTimesAgent``), where the
  STT gives them;
* decides barge-ins: the caller's mic goes through turnkit's echo filter
  before LiveKit's VAD/STT, "uh-huh" / "okay" over the agent is let through,
  a real bid stops it, and an interrupted reply is stored as the words heard.

Models (all self-hosted, OpenAI-compatible, through livekit-plugins-openai):

    TURNKIT_LLM_BASE_URL   vLLM / SGLang / llama-server   (default http://127.0.0.1:8000/v1)
    TURNKIT_LLM_MODEL      the served model name          (default: the first the engine lists)
    TURNKIT_STT_BASE_URL   Whisper behind an OpenAI-compatible /v1/audio/transcriptions
                           (e.g. speaches)                (default http://127.0.0.1:8001/v1)
    TURNKIT_TTS_BASE_URL   a /v1/audio/speech server (e.g. Kokoro-FastAPI)
                                                          (default http://127.0.0.1:8880/v1)

Run (``pip install -e . -e plugins/livekit livekit-plugins-openai livekit-plugins-silero``):

    python examples/livekit_agent.py console     # local mic/speaker, no LiveKit server
    python examples/livekit_agent.py dev         # joins rooms of LIVEKIT_URL (LIVEKIT_API_KEY/SECRET)
    python examples/livekit_agent.py selfcheck   # builds everything, prints it, exits

No request leaves the machine except to the three base URLs above (and to
LIVEKIT_URL in dev mode).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import httpx
from livekit.agents import Agent, AgentServer, AgentSession, JobContext, cli, stt
from livekit.plugins import openai, silero
from turnkit_livekit import (
    WordTimesAgent,
    attach,
    filter_barge_in,
    gated_tools,
    interruption_options,
    turn_detector,
)

from turnkit.clock import RealClock
from turnkit.drafting import ToolGate, tool

log = logging.getLogger("turnkit.example")

LLM_URL = os.environ.get("TURNKIT_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
STT_URL = os.environ.get("TURNKIT_STT_BASE_URL", "http://127.0.0.1:8001/v1")
TTS_URL = os.environ.get("TURNKIT_TTS_BASE_URL", "http://127.0.0.1:8880/v1")
DETECTOR = os.environ.get("TURNKIT_DETECTOR", "semantic-text")
NO_KEY = "not-needed"  # self-hosted engines ignore it; the client wants one


_STR = {"type": "string"}


@tool(
    effect="read",
    timeout_s=2,
    parameters={"type": "object", "properties": {"day": _STR}, "required": ["day"]},
)
async def find_slots(day: str) -> list[str]:
    """Free table times on a day."""
    return ["18:00", "19:30", "21:00"]


@tool(
    effect="write",
    timeout_s=5,
    parameters={
        "type": "object",
        "properties": {"day": _STR, "time": _STR, "people": {"type": "integer"}},
        "required": ["day", "time", "people"],
    },
)
async def book_table(day: str, time: str, people: int, idempotency_key: str = "") -> str:
    """Book a table. Only after the caller has said day, time and party size."""
    log.info("booking %s %s for %d (key %s)", day, time, people, idempotency_key)
    return f"booked {day} {time} for {people}"


@tool(
    effect="write",
    timeout_s=5,
    confirm=True,
    parameters={
        "type": "object",
        "properties": {"amount_eur": {"type": "integer"}},
        "required": ["amount_eur"],
    },
)
async def charge_deposit(amount_eur: int, idempotency_key: str = "") -> str:
    """Charge the deposit for a large party. Ask the caller first."""
    return f"charged {amount_eur} EUR"


TOOLS = [find_slots, book_table, charge_deposit]


def served_model(base_url: str) -> str:
    """The engine's first model name (vLLM / SGLang / llama-server list theirs)."""
    name = os.environ.get("TURNKIT_LLM_MODEL")
    if name:
        return name
    try:
        data = httpx.get(f"{base_url.rstrip('/')}/models", timeout=5).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise SystemExit(
            f"cannot list models at {base_url}/models ({exc}); set TURNKIT_LLM_MODEL"
        ) from None


def build(session_id: str = "console") -> tuple[AgentSession, Agent, Any, Any]:
    """The session, agent, detector and gated tools (nothing started)."""
    vad = silero.VAD.load(min_silence_duration=0.3)
    detector = turn_detector(DETECTOR)
    streaming = not hasattr(detector, "predict_end_of_turn")
    gate = ToolGate(TOOLS, RealClock(), session_id=session_id)
    gated = gated_tools(gate)
    session = AgentSession(
        vad=vad,
        stt=stt.StreamAdapter(stt=openai.STT(base_url=STT_URL, api_key=NO_KEY), vad=vad),
        llm=openai.LLM(base_url=LLM_URL, api_key=NO_KEY, model=served_model(LLM_URL)),
        tts=openai.TTS(base_url=TTS_URL, api_key=NO_KEY, model="kokoro", voice="af_heart"),
        turn_handling={
            "turn_detection": detector,
            # the detector decides; LiveKit's own delay only adds to it
            "endpointing": {"min_delay": 0.2 if streaming else 0.4, "max_delay": 3.0},
            # turnkit decides barge-ins (filter_barge_in below): LiveKit stands down
            "interruption": interruption_options(),
        },
    )
    gated.bind(session)
    # WordTimesAgent: an STT that gives word times (Deepgram, AssemblyAI, ...)
    # hands them to the detector; LiveKit's transcript events carry text only.
    agent = WordTimesAgent(
        instructions=(
            "You are a restaurant's phone host. Keep answers short and spoken. Use the "
            "tools to look up times and to book; never say a booking is done before "
            "the tool says so."
        ),
        tools=gated.tools,
    )
    return session, agent, detector, gated


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session, agent, detector, _ = build(session_id=ctx.room.name or "console")
    metrics = attach(session, detector)

    @session.on("close")
    def _report(_: Any) -> None:
        for i, m in enumerate(metrics.turns, 1):
            log.info("turn %d: %s", i, m)

    await session.start(agent, room=ctx.room)
    # echo + acknowledgement filters on the interruption path; an interrupted
    # reply is stored as the words the caller heard
    barge_in = filter_barge_in(session, language="en")

    @session.on("close")
    def _barge_ins(_: Any) -> None:
        log.info(
            "barge-ins: %d stops %s, %d acknowledgements let through, %d replies cut",
            barge_in.stops,
            barge_in.reasons,
            len(barge_in.acknowledgements),
            len(barge_in.truncations),
        )

    # the greeting also lets the echo filter learn the echo path
    await session.generate_reply(instructions="Greet the caller and ask how you can help.")


if __name__ == "__main__":
    if sys.argv[1:2] == ["selfcheck"]:
        s, a, d, g = build()
        print(f"detector: {type(d).__name__}({d.spec})")
        print(f"llm: {LLM_URL}  stt: {STT_URL}  tts: {TTS_URL}")
        print(f"tools: {[t.info.name for t in g.tools]}")
        sys.exit(0)
    cli.run_app(server)
