"""Filler lines for long tool calls: pre-rendered, never repeated back to back,
started within one audio frame of a threshold, cancelled by an early result.

Example::

    bank = FillerBank(DEFAULT_LINES, EspeakTTS("en-us"), sample_rate=16000)
    await bank.prerender()
    fillers = FillerScheduler(bank, clock, sink=output.push, threshold_s=1.0)
    async with fillers.guard("lookup_order"):
        result = await lookup_order(order_id)
"""

from turnkit.fillers.bank import (
    DEFAULT_LINES,
    FillerBank,
    FillerLine,
    default_cache_dir,
    filler_key,
    trim_silence,
)
from turnkit.fillers.scheduler import FillerGuard, FillerRecord, FillerScheduler, ToolFillerStats

__all__ = [
    "DEFAULT_LINES",
    "FillerBank",
    "FillerGuard",
    "FillerLine",
    "FillerRecord",
    "FillerScheduler",
    "ToolFillerStats",
    "default_cache_dir",
    "filler_key",
    "trim_silence",
]
