"""Cache report: what share of prompt processing the engine's prefix cache served.

Three sources, one answer (:class:`CacheStats`: ``cached_share`` =
cached / (new + cached) prompt tokens):

- **an SGLang server log**: every ``Prefill batch. #new-seq: S, #new-token: N,
  #cached-token: M, ...`` line (also the ``Prefill batch(mixed #running-req:
  R).`` form; extra or reordered fields are fine). Batches of at most
  ``min_tokens`` total tokens (default 1000) are counted as ``skipped`` and
  left out: health checks and pings would otherwise dilute the share.
- **Prometheus metrics over a window**: counters scraped twice ``window_s``
  apart, deltas summed over all label sets. Known engines, first match wins:
  vLLM ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``
  (older ``vllm:gpu_prefix_cache_*``; queries include the hits), SGLang
  ``sglang:cached_tokens_total`` / ``sglang:prompt_tokens_total`` (prompt
  tokens include the cached ones), llama.cpp
  ``llamacpp:prompt_tokens_cached_total`` and ``llamacpp:prompt_tokens_total``
  (which, per its own help text, *excludes* cached tokens). ``prefills`` is
  the request count where the engine has one (vLLM, SGLang), else 0.
- **per-request usage**: a JSONL of responses (or their ``usage`` objects,
  or streamed chunks carrying ``usage``): ``usage.prompt_tokens`` and
  ``usage.prompt_tokens_details.cached_tokens`` (llama-server's
  ``timings.cache_n`` where that is larger); ``min_tokens`` applies per
  request.

A share under :data:`ALERT_BELOW` (90 %) earns an alert line: at that point
most of the prefill the engine does is work a stable prompt layout would
skip. Judge small prompts against the engine's block size (vLLM caches whole
blocks only: 16 tokens on GPU, 128 on its CPU backend).

Example::

    stats = parse_sglang_log(Path("sglang.log").read_text().splitlines())
    stats.cached_share, stats.prefills, stats.skipped
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnkit.net import FetchError, fetch

__all__ = [
    "ALERT_BELOW",
    "CacheStats",
    "ReportError",
    "VllmLogRate",
    "metrics_stats",
    "parse_prometheus",
    "parse_sglang_log",
    "parse_usage_lines",
    "parse_vllm_log",
    "scrape_metrics",
    "stats_from_file",
    "vllm_log_from_file",
    "window_stats",
]

ALERT_BELOW = 0.90
DEFAULT_MIN_TOKENS = 1000


class ReportError(ValueError):
    """A source that cannot be read as what it claims (one line: source and why)."""


@dataclass(slots=True)
class CacheStats:
    """Prefix-cache figures of one source (a log or a replayed run): prompt
    tokens computed anew vs served from the cache over the prefills counted
    (prefills of ``min_tokens`` or fewer are skipped), and the share cached."""

    source: str
    new_tokens: int = 0
    cached_tokens: int = 0
    prefills: int = 0
    skipped: int = 0
    engine: str = ""

    @property
    def cached_share(self) -> float | None:
        total = self.new_tokens + self.cached_tokens
        return self.cached_tokens / total if total else None

    def add(self, new: int, cached: int, min_tokens: int) -> None:
        if new + cached <= min_tokens:
            self.skipped += 1
            return
        self.prefills += 1
        self.new_tokens += new
        self.cached_tokens += cached

    def as_dict(self) -> dict[str, Any]:
        share = self.cached_share
        out: dict[str, Any] = {
            "source": self.source,
            "cached_share": None if share is None else round(share, 4),
            "prefills": self.prefills,
            "skipped": self.skipped,
            "new_tokens": self.new_tokens,
            "cached_tokens": self.cached_tokens,
        }
        if self.engine:
            out["engine"] = self.engine
        return out

    def alert(self, below: float = ALERT_BELOW) -> str | None:
        share = self.cached_share
        if share is None or share >= below:
            return None
        return (
            f"ALERT {self.source}: cached share {share:.1%} < {below:.0%} "
            f"({self.new_tokens} of {self.new_tokens + self.cached_tokens} prompt tokens "
            "computed; look for per-call values near the top: turnkit prompt-lint)"
        )


# -- SGLang log -----------------------------------------------------------------------

_PREFILL = re.compile(r"Prefill batch\b")
_NEW = re.compile(r"#new-token:\s*(\d+)")
_CACHED = re.compile(r"#cached-token:\s*(\d+)")


def parse_sglang_log(
    lines: Iterable[str], source: str = "log", min_tokens: int = DEFAULT_MIN_TOKENS
) -> CacheStats:
    """Stats from SGLang's ``Prefill batch`` lines; :class:`ReportError`
    when there are none."""
    stats = CacheStats(source=source, engine="sglang")
    seen = 0
    for line in lines:
        if not _PREFILL.search(line):
            continue
        new, cached = _NEW.search(line), _CACHED.search(line)
        if not new or not cached:
            continue  # e.g. a prefill line of a build that logs no token counts
        seen += 1
        stats.add(int(new.group(1)), int(cached.group(1)), min_tokens)
    if not seen:
        raise ReportError(
            f"{source}: no SGLang 'Prefill batch ... #new-token: N, #cached-token: M' lines"
        )
    return stats


# -- per-request usage ----------------------------------------------------------------


def _usage_of(obj: Any) -> tuple[int, int] | None:
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    if usage is None and "prompt_tokens" in obj:
        usage = obj  # a bare usage object
    if usage is None or not isinstance(usage.get("prompt_tokens"), int):
        return None
    prompt = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if isinstance(cached, int) else 0
    timings = obj.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = max(cached, timings["cache_n"])  # llama-server: see turnkit.llm.client
    return max(0, prompt - cached), min(cached, prompt)


def parse_usage_lines(
    lines: Iterable[str], source: str = "usage", min_tokens: int = DEFAULT_MIN_TOKENS
) -> CacheStats:
    """Stats from a JSONL of responses; :class:`ReportError` naming the first
    line that is not JSON, or when no line carries ``usage.prompt_tokens``."""
    stats = CacheStats(source=source, engine="usage")
    found = 0
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise ReportError(f"{source}:{n}: not JSON") from None
        got = _usage_of(obj)
        if got is not None:
            found += 1
            stats.add(got[0], got[1], min_tokens)
    if not found:
        raise ReportError(f"{source}: no line has usage.prompt_tokens")
    return stats


def stats_from_file(path: Path, min_tokens: int = DEFAULT_MIN_TOKENS) -> CacheStats:
    """A usage JSONL (first non-empty line is a JSON object) or an SGLang log."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if first.startswith("{"):
        return parse_usage_lines(lines, str(path), min_tokens)
    return parse_sglang_log(lines, str(path), min_tokens)


# -- vLLM log -------------------------------------------------------------------------

# "Engine 000: Avg prompt throughput: ..., Prefix cache hit rate: 87.5%" (capital P: the
# "External prefix cache hit rate" of a KV connector is another cache and not matched)
_VLLM_RATE = re.compile(r"\bPrefix cache hit rate: (\d+(?:\.\d+)?)%")


@dataclass(slots=True)
class VllmLogRate:
    """The ``Prefix cache hit rate`` vLLM logs every few seconds while busy. It is a
    share of *tokens* over the engine's most recent 1000 requests (vLLM's
    ``CachingMetrics`` window), not per interval, and the log carries no token
    counts: so the last line is the answer, and it sums with nothing else."""

    source: str
    rates: list[float]  # every logged rate, in order, as a share (0..1)
    engine: str = "vllm-log"

    @property
    def cached_share(self) -> float:
        return self.rates[-1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "engine": self.engine,
            "cached_share": round(self.cached_share, 4),
            "lines": len(self.rates),
            "max_share": round(max(self.rates), 4),
        }

    def alert(self, below: float = ALERT_BELOW) -> str | None:
        if self.cached_share >= below:
            return None
        return (
            f"ALERT {self.source}: vLLM prefix cache hit rate {self.cached_share:.1%} < "
            f"{below:.0%} over its last 1000 requests (look for per-call values near the "
            "top: turnkit prompt-lint)"
        )


def parse_vllm_log(lines: Iterable[str], source: str = "vllm log") -> VllmLogRate:
    """Every ``Prefix cache hit rate: X%`` in a vLLM server log; :class:`ReportError`
    when there is none (prefix caching off, log level above INFO, or an idle engine:
    vLLM logs its stats only while it serves)."""
    rates = [float(m.group(1)) / 100.0 for ln in lines if (m := _VLLM_RATE.search(ln))]
    if not rates:
        raise ReportError(
            f"{source}: no vLLM 'Prefix cache hit rate: N%' lines (prefix caching on? "
            "stats logging on? did it serve requests?)"
        )
    return VllmLogRate(source=source, rates=rates)


def vllm_log_from_file(path: Path) -> VllmLogRate:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return parse_vllm_log(text.splitlines(), str(path))


# -- Prometheus -----------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")

# (engine, cached counter, denominator counter, denominator includes cached, requests)
_FAMILIES: list[tuple[str, str, str, bool, str | None]] = [
    ("vllm", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", True,
     "vllm:request_success_total"),
    ("vllm-old", "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total",
     True, "vllm:request_success_total"),
    ("sglang", "sglang:cached_tokens_total", "sglang:prompt_tokens_total", True,
     "sglang:num_requests_total"),
    ("llama.cpp", "llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total", False,
     None),
]  # fmt: skip


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample values by metric name, summed over label sets (comments,
    ``_created`` series and unparsable values skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1).endswith("_created"):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


def metrics_stats(
    before: dict[str, float], after: dict[str, float], source: str = "metrics"
) -> CacheStats:
    """Counter deltas between two scrapes, for the first known engine family
    present; :class:`ReportError` when none is."""
    for engine, cached_name, denom_name, includes_cached, req_name in _FAMILIES:
        if cached_name not in after or denom_name not in after:
            continue
        d_cached = after[cached_name] - before.get(cached_name, 0.0)
        d_denom = after[denom_name] - before.get(denom_name, 0.0)
        if d_cached < 0 or d_denom < 0:
            raise ReportError(f"{source}: counters went down (engine restarted in the window?)")
        new = d_denom - d_cached if includes_cached else d_denom
        requests = 0
        if req_name and req_name in after:
            requests = int(after[req_name] - before.get(req_name, 0.0))
        return CacheStats(
            source=source,
            new_tokens=round(max(0.0, new)),
            cached_tokens=round(d_cached),
            prefills=requests,
            engine=engine,
        )
    known = ", ".join(f[1] for f in _FAMILIES)
    raise ReportError(f"{source}: no prefix-cache counters (looked for {known})")


async def scrape_metrics(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """One scrape, answered in full within ``timeout_s`` seconds in total
    (a server that trickles bytes cannot hold it longer); :class:`ReportError`
    (one line) otherwise."""
    try:
        resp = await fetch("GET", url, deadline_s=timeout_s)
    except FetchError as exc:
        raise ReportError(f"metrics did not answer: {exc}") from None
    if resp.status_code != 200:
        hint = " (llama-server needs --metrics)" if resp.status_code in (404, 501) else ""
        raise ReportError(f"{url}: metrics answered HTTP {resp.status_code}{hint}")
    return parse_prometheus(resp.text)


async def window_stats(url: str, window_s: float, timeout_s: float = 5.0) -> CacheStats:
    """Deltas over ``window_s`` seconds (0: totals since the engine started)."""
    before: dict[str, float] = {}
    if window_s > 0:
        before = await scrape_metrics(url, timeout_s)
        await asyncio.sleep(window_s)
    after = await scrape_metrics(url, timeout_s)
    return metrics_stats(before, after, source=url)


def metrics_url_for(base_url: str) -> str:
    """``/metrics`` at the root of an OpenAI ``/v1`` base URL."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    return f"{root}/metrics"
