"""Barge-in: whether caller sound while the agent speaks takes the floor.

Echo filter (the agent's own voice in the caller's microphone), the one
barge-in controller that decides (keep, pause, stop, resume, confirm,
cancel a pending reply) from caller audio, words and the agent's playback,
the processors that execute its actions on agent playback, and the playback
cursor + history truncation (the LLM's history holds what the caller heard).
"""

from turnkit.barge_in.controller import Action, BargeInController, BargeInParams
from turnkit.barge_in.cursor import PlaybackCursor, WordTimestampsFrame
from turnkit.barge_in.echo import EchoFilter, EchoParams, EchoStep, EchoTranscriptCheck
from turnkit.barge_in.history_processor import HistoryTruncator
from turnkit.barge_in.truncation import (
    Heard,
    ReplyProgress,
    TruncationConfig,
    heard_prefix,
    realtime_truncate_event,
    truncate_history,
)
from turnkit.text.lexicon import is_backchannel

__all__ = [
    "Action",
    "BargeInController",
    "BargeInParams",
    "EchoFilter",
    "EchoParams",
    "EchoStep",
    "EchoTranscriptCheck",
    "Heard",
    "HistoryTruncator",
    "PlaybackCursor",
    "ReplyProgress",
    "TruncationConfig",
    "WordTimestampsFrame",
    "heard_prefix",
    "is_backchannel",
    "realtime_truncate_event",
    "truncate_history",
]
