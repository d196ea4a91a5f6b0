"""turnkit for Pipecat 1.x: turn strategies, drafting, tool gating, fillers,
metrics and a call recorder. See the README of turnkit for the snippet."""

from turnkit_pipecat.engine import EngineStep, TurnkitTurnEngine
from turnkit_pipecat.strategies import TurnkitUserTurnStartStrategy, TurnkitUserTurnStopStrategy

__all__ = [
    "EngineStep",
    "TurnkitTurnEngine",
    "TurnkitUserTurnStartStrategy",
    "TurnkitUserTurnStopStrategy",
]
