"""Eager drafting: start the reply before the turn is confirmed, and let a
draft do only work that can be thrown away."""

from turnkit.drafting.drafter import Draft, DraftParams, DraftStats, EagerDrafter
from turnkit.drafting.owed import OwedTurn
from turnkit.drafting.responder import (
    Responder,
    ResponderFrames,
    ResponderParams,
    ResponderProcessor,
    ResponderStats,
)
from turnkit.drafting.tools import (
    WRITE_HOLD_S,
    Confirmed,
    DraftContext,
    Tool,
    ToolGate,
    ToolResult,
    Turn,
    WriteRecord,
    canonical_args,
    tool,
)

__all__ = [
    "WRITE_HOLD_S",
    "Confirmed",
    "Draft",
    "DraftContext",
    "DraftParams",
    "DraftStats",
    "EagerDrafter",
    "OwedTurn",
    "Responder",
    "ResponderFrames",
    "ResponderParams",
    "ResponderProcessor",
    "ResponderStats",
    "Tool",
    "ToolGate",
    "ToolResult",
    "Turn",
    "WriteRecord",
    "canonical_args",
    "tool",
]
