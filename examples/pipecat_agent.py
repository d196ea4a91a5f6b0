"""A Pipecat voice agent that takes turns with turnkit, on self-hosted models.

What turnkit does here (all in Pipecat's own places):

* decides when the caller is done: a turnkit detector as the user turn *stop*
  strategy (``TURNKIT_DETECTOR``, default ``fused``), with eager drafting
  through Pipecat's speculation path (a draft kept when the words did not
  change, withdrawn otherwise);
* decides barge-ins: the user turn *start* strategy with turnkit's echo
  filter (reference: the bot audio the output played, fed back by
  ``EchoReferenceTap``) and acknowledgement filter ("uh-huh" does not stop
  the bot, "wait" does);
* gates the tools: ``order_status`` (read) may be prefetched by a draft,
  ``cancel_order`` (write) runs once per confirmed turn, never in a draft;
* plays a filler line (pre-rendered by espeak-ng) when a tool runs long;
* keeps an interrupted reply in the context as the words the caller heard;
* logs turnkit's per-turn stage metrics, and records each call as
  ``turnkit.recording/v1`` when ``TURNKIT_RECORD_DIR`` is set (replay it with
  ``turnkit replay`` or ``examples/pipecat_replay.py``).

Models (self-hosted, OpenAI-compatible):

    TURNKIT_LLM_BASE_URL   vLLM / SGLang / llama-server  (default http://127.0.0.1:8000/v1)
    TURNKIT_LLM_MODEL      the served model name         (default: the first the engine lists)
    TURNKIT_STT_BASE_URL   Whisper behind /v1/audio/transcriptions (e.g. speaches)
                                                         (default http://127.0.0.1:8001/v1)
    TURNKIT_TTS_BASE_URL   a /v1/audio/speech server (e.g. Kokoro-FastAPI)
                                                         (default http://127.0.0.1:8880/v1)

Run (``pip install -e . -e plugins/pipecat``):

    python examples/pipecat_agent.py selfcheck [CALL]  # a recorded call through the agent's
                                                       # turn-taking + the real LLM; prints, exits
    python examples/pipecat_agent.py serve             # websocket transport on 127.0.0.1:8765
                                                       # (Pipecat protobuf frames, 16 kHz PCM)
    python examples/pipecat_agent.py local             # local mic/speaker (needs pyaudio)

No request leaves the machine except to the three base URLs above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import httpx
from loguru import logger
from pipecat.frames.frames import EndFrame, LLMTextFrame, TranscriptionFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from turnkit_pipecat import (
    EchoReferenceTap,
    FillerProcessor,
    GatedFunctions,
    HeardTruncation,
    TurnkitRecorder,
    TurnkitTurnEngine,
    TurnkitUserTurnStartStrategy,
    TurnkitUserTurnStopStrategy,
    TurnMetricsObserver,
)
from turnkit_pipecat.replay import feed_frames, recording_frames

from turnkit.barge_in.echo import EchoFilter
from turnkit.clock import RealClock
from turnkit.drafting.drafter import EagerDrafter
from turnkit.drafting.tools import tool
from turnkit.fillers.bank import FillerBank
from turnkit.fillers.scheduler import FillerScheduler
from turnkit.replay.recording import load_recording
from turnkit.tts.espeak import EspeakTTS

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = (
    "You are the phone assistant of an online shop. Answer in one or two short "
    "sentences. Use order_status to look an order up; cancel_order only when the "
    "caller asks to cancel."
)
OUT_RATE = 24000


@tool(effect="read", timeout_s=3.0)
async def order_status(order: str) -> dict[str, str]:
    """Where an order is."""
    await asyncio.sleep(1.2)  # a slow backend: a filler line covers it
    return {"order": order, "status": "shipped", "arrives": "Friday"}


@tool(effect="write", timeout_s=5.0)
async def cancel_order(order: str, idempotency_key: str = "") -> dict[str, str]:
    """Cancel an order that has not shipped."""
    return {"order": order, "cancelled": "yes", "reference": idempotency_key[-8:]}


def _model(base_url: str) -> str:
    name = os.environ.get("TURNKIT_LLM_MODEL")
    if name:
        return name
    models = httpx.get(f"{base_url}/models", timeout=5.0).json()
    return str(models["data"][0]["id"])


def build(engine: TurnkitTurnEngine, *, vad_frames: bool) -> dict[str, Any]:
    """The turnkit parts and Pipecat's aggregators and LLM, wired."""
    base_url = os.environ.get("TURNKIT_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    functions = GatedFunctions([order_status, cancel_order], engine.clock, session_id="agent")
    context = LLMContext(tools=functions.tools_schema())
    llm = OpenAILLMService(
        api_key=os.environ.get("TURNKIT_LLM_API_KEY", "none"),
        base_url=base_url,
        settings=OpenAILLMService.Settings(
            model=_model(base_url), system_instruction=SYSTEM, max_tokens=80
        ),
    )
    functions.register(llm)
    stop = TurnkitUserTurnStopStrategy(
        engine, drafter=EagerDrafter(engine.clock), context=context, functions=functions
    )
    user, assistant = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(
                start=[TurnkitUserTurnStartStrategy(engine, vad_frames=vad_frames)], stop=[stop]
            ),
        ),
    )
    return {"llm": llm, "user": user, "assistant": assistant, "context": context, "stop": stop}


async def _fillers() -> FillerProcessor:
    bank = FillerBank(
        ["One moment, let me check that.", "Just a second, I'm looking."],
        EspeakTTS("en-us"),
        sample_rate=OUT_RATE,
    )
    await bank.prerender()  # once; cached on disk afterwards
    return FillerProcessor(FillerScheduler(bank, RealClock(), sink=lambda f: None, threshold_s=0.8))


async def live(mode: str) -> None:
    from pipecat.services.openai.stt import OpenAISTTService
    from pipecat.services.openai.tts import OpenAITTSService

    engine = TurnkitTurnEngine(os.environ.get("TURNKIT_DETECTOR", "fused"), echo=EchoFilter())
    parts = build(engine, vad_frames=True)  # Whisper is a segmented STT: it needs VAD edges
    stt = OpenAISTTService(
        api_key="none",
        base_url=os.environ.get("TURNKIT_STT_BASE_URL", "http://127.0.0.1:8001/v1"),
        settings=OpenAISTTService.Settings(model="whisper-1"),
    )
    tts = OpenAITTSService(
        api_key="none",
        base_url=os.environ.get("TURNKIT_TTS_BASE_URL", "http://127.0.0.1:8880/v1"),
        sample_rate=OUT_RATE,
    )
    if mode == "local":
        from pipecat.transports.local.audio import LocalAudioTransport, LocalAudioTransportParams

        transport: Any = LocalAudioTransport(
            LocalAudioTransportParams(audio_in_enabled=True, audio_out_enabled=True)
        )
    else:
        from pipecat.serializers.protobuf import ProtobufFrameSerializer
        from pipecat.transports.websocket.server import (
            SingleClientWebsocketServerParams,
            SingleClientWebsocketServerTransport,
        )

        transport = SingleClientWebsocketServerTransport(
            SingleClientWebsocketServerParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                serializer=ProtobufFrameSerializer(),
            ),
            host="127.0.0.1",
            port=8765,
        )
    processors: list[FrameProcessor] = [
        transport.input(),
        stt,
        parts["user"],
        parts["llm"],
        tts,
        await _fillers(),
        transport.output(),
        EchoReferenceTap(engine),
        truncation := HeardTruncation(),
    ]
    record = os.environ.get("TURNKIT_RECORD_DIR")
    if record:
        processors.append(TurnkitRecorder(Path(record) / "call", engine=engine))
    processors.append(parts["assistant"])
    truncation.attach(parts["assistant"], parts["context"])
    task = PipelineTask(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=16000, audio_out_sample_rate=OUT_RATE),
        observers=[
            TurnMetricsObserver(on_turn=lambda m: print("turn metrics:", m.as_dict()), engine=engine)
        ],
    )
    await PipelineRunner().run(task)


class _Printer(FrameProcessor):
    """selfcheck: prints each confirmed reply's text as it completes."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self.replies: list[str] = []

    async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame):
            self.text += frame.text
        elif type(frame).__name__ == "LLMFullResponseEndFrame" and self.text.strip():
            self.replies.append(self.text.strip())
            print(f"  agent: {self.text.strip()}")
            self.text = ""
        elif isinstance(frame, TranscriptionFrame):
            pass
        await self.push_frame(frame, direction)


async def selfcheck(call: str) -> int:
    """A recorded call's audio and words through the agent's turn-taking and
    the real LLM (no STT/TTS/transport): prints turns and replies."""
    rec = load_recording(ROOT / "recordings" / call)
    engine = TurnkitTurnEngine(os.environ.get("TURNKIT_DETECTOR", "fused"))
    parts = build(engine, vad_frames=False)
    printer = _Printer()
    task = PipelineTask(
        Pipeline([parts["user"], parts["llm"], printer]),
        params=PipelineParams(audio_in_sample_rate=16000),
        cancel_on_idle_timeout=False,
    )

    @parts["user"].event_handler("on_user_turn_stopped")
    async def _turn(_agg: Any, _strategy: Any, message: Any) -> None:
        print(f"caller ({engine.now:.2f}s): {message.content}")

    async def feed() -> None:
        await feed_frames(task, engine, recording_frames(rec))
        for _ in range(300):  # the engine answers the last turn
            if len(printer.replies) >= len(engine.decisions):
                break
            await asyncio.sleep(0.1)
        await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    await asyncio.gather(runner.run(), feed())
    stop = parts["stop"]
    print(
        f"selfcheck: {len(engine.decisions)} turn ends, {len(printer.replies)} replies, "
        f"speculations {stop.speculations} (kept {stop.kept}, withdrawn {stop.withdrawn})"
    )
    return 0 if printer.replies else 1


def main() -> int:
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_LOG_LEVEL", "WARNING"))
    logging.basicConfig(level=logging.WARNING)
    mode = sys.argv[1] if len(sys.argv) > 1 else "selfcheck"
    if mode == "selfcheck":
        return asyncio.run(selfcheck(sys.argv[2] if len(sys.argv) > 2 else "easy-order-status-01"))
    if mode in ("serve", "local"):
        asyncio.run(live(mode))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
