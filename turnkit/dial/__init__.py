"""``turnkit dial``: a recorded caller calls a live agent over a real
transport; the live call is written as ``turnkit.recording/v1`` and scored
with the replay's metrics (see :mod:`turnkit.dial.caller`,
:mod:`turnkit.dial.live`, :mod:`turnkit.dial.transport`)."""

from turnkit.dial.caller import DialConfig, LiveCall, dial_call
from turnkit.dial.live import agent_runs, live_replies, score_live, write_live_recording
from turnkit.dial.transport import TRANSPORTS, DialError, Transport, get_transport

__all__ = [
    "TRANSPORTS",
    "DialConfig",
    "DialError",
    "LiveCall",
    "Transport",
    "agent_runs",
    "dial_call",
    "get_transport",
    "live_replies",
    "score_live",
    "write_live_recording",
]
