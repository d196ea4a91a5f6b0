"""turnkit for Pipecat 1.x: turnkit's end-of-turn detectors and barge-in
filters as user turn strategies (echo filter fed by the bot's played audio),
eager drafting through Pipecat's speculation path (its ends held for the
LLM's measured first token), function calls through
turnkit's tool gate, filler lines during slow calls, the context cut to what
the caller heard on interruption, per-turn stage metrics,
the bot's reply text to the detector as it starts to play, a
turnkit.recording/v1 call recorder, and offline replay of recorded calls
through Pipecat."""

from turnkit_pipecat.echo import EchoReferenceTap
from turnkit_pipecat.engine import EngineStep, TurnkitTurnEngine
from turnkit_pipecat.fillers import FillerProcessor
from turnkit_pipecat.first_token import FirstTokenObserver
from turnkit_pipecat.metrics import TurnMetrics, TurnMetricsObserver
from turnkit_pipecat.recorder import TurnkitRecorder
from turnkit_pipecat.reply_text import ReplyTextTap
from turnkit_pipecat.strategies import TurnkitUserTurnStartStrategy, TurnkitUserTurnStopStrategy
from turnkit_pipecat.tools import GatedFunctions
from turnkit_pipecat.truncation import HeardTruncation
from turnkit_pipecat.tts import EspeakTTSService

__all__ = [
    "EchoReferenceTap",
    "EngineStep",
    "EspeakTTSService",
    "FillerProcessor",
    "FirstTokenObserver",
    "GatedFunctions",
    "HeardTruncation",
    "ReplyTextTap",
    "TurnMetrics",
    "TurnMetricsObserver",
    "TurnkitRecorder",
    "TurnkitTurnEngine",
    "TurnkitUserTurnStartStrategy",
    "TurnkitUserTurnStopStrategy",
]
