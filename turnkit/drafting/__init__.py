"""Eager drafts, cancel on resume, and discard-only tool gating."""

from turnkit.drafting.tools import (
    Confirmed,
    Draft,
    Tool,
    ToolGate,
    ToolResult,
    Turn,
    WriteRecord,
    canonical_args,
    tool,
)

__all__ = [
    "Confirmed",
    "Draft",
    "Tool",
    "ToolGate",
    "ToolResult",
    "Turn",
    "WriteRecord",
    "canonical_args",
    "tool",
]
