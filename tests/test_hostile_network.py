"""Hostile servers and targets: every network call ends by its total
deadline, and every command that connects obeys one target policy.

The servers are real loopback TCP servers (tests/hostile_server.py) that
never answer or trickle one byte / one SSE comment line every 0.5 s, inside
any per-read timeout. Bounds are generous ("within the deadline + 20 s"):
they catch a hang, not a slow machine.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_server import HostileServer

from turnkit.llm.client import ChatClient, LLMTimeout
from turnkit.net import FetchError, TargetRefused, check_target, fetch, fetch_sync, normalise_host

ROOT = Path(__file__).resolve().parents[1]
TURNKIT = [sys.executable, "-m", "turnkit.cli"]
SLACK_S = 20.0  # process start, imports, a loaded machine
MODES = ("never", "trickle-head", "trickle-body")


def run_cli(*args: str, limit_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [*TURNKIT, *args], capture_output=True, text=True, cwd=ROOT, timeout=limit_s + 60
    )
    return p, time.monotonic() - t0


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- target policy -----------------------------------------------------------------------

ALLOWED = [
    "http://127.0.0.1:8080/v1",
    "http://127.9.9.9/v1",
    "http://localhost:8080/v1",
    "http://LOCALHOST.:8080/v1",  # case and trailing dot
    "http://[::1]:8080/v1",
    "http://[::ffff:127.0.0.1]:8080/v1",  # IPv4-mapped IPv6
    "http://2130706433:8080/v1",  # decimal 127.0.0.1
    "http://0177.0.0.1:8080/v1",  # octal
    "http://0x7f.1/v1",  # hex, short form
    "http://127.1/v1",
    "http://10.1.2.3:8000/v1",  # RFC 1918
    "http://172.16.0.5/v1",
    "http://192.168.1.20/v1",
    "http://[fd12:3456::1]/v1",  # IPv6 unique-local
]
NEEDS_REMOTE = [
    "http://8.8.8.8/v1",
    "http://169.254.1.1/v1",  # link-local
    "http://[fe80::1]/v1",
    "http://100.64.0.1/v1",  # CGNAT
    "http://198.18.0.1/v1",  # benchmarking
    "http://240.0.0.1/v1",  # reserved
    "http://172.32.0.1/v1",  # just outside 172.16/12
    "http://[::ffff:8.8.8.8]/v1",
    "http://134744072/v1",  # 8.8.8.8 in decimal
]
NEVER = [
    "http://169.254.169.254/latest/meta-data",
    "http://169.254.169.254./latest",
    "http://0251.0376.0251.0376/",  # the metadata address in octal
    "http://2852039166/",  # ... in decimal
    "http://[::ffff:169.254.169.254]/",
    "http://[fd00:ec2::254]/",
    "http://0.0.0.0:8080/v1",
    "http://[::]:8080/v1",
    "http://224.0.0.1/v1",
    "http://255.255.255.255/v1",
]


@pytest.mark.parametrize("url", ALLOWED)
def test_policy_allows_loopback_and_private(url: str) -> None:
    check_target(url)


@pytest.mark.parametrize("url", NEEDS_REMOTE)
def test_policy_other_addresses_need_allow_remote(url: str) -> None:
    with pytest.raises(TargetRefused, match="--allow-remote"):
        check_target(url, what="--llm-url")
    check_target(url, allow_remote=True)


@pytest.mark.parametrize("url", NEVER)
def test_policy_never_metadata_unspecified_multicast(url: str) -> None:
    for allow in (False, True):
        with pytest.raises(TargetRefused, match="never connects"):
            check_target(url, allow)


@pytest.mark.parametrize(
    "url",
    ["https://api.openai.com/v1", "https://API.OpenAI.com./v1", "https://x.api.groq.com../v1"],
)
def test_policy_third_party_refused_when_forbidden(url: str) -> None:
    with pytest.raises(TargetRefused, match="third-party"):
        check_target(url, True, forbid_third_party=True)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "http:///v1", "127.0.0.1:8080", "http://[::1/"])
def test_policy_refuses_non_http_urls(url: str) -> None:
    with pytest.raises(TargetRefused):
        check_target(url)


def test_policy_unresolvable_name() -> None:
    with pytest.raises(TargetRefused, match=r"cannot resolve.*--allow-remote"):
        check_target("http://engine.invalid:8000/v1")
    check_target("http://engine.invalid:8000/v1", allow_remote=True)  # connecting will say


def test_normalise_host() -> None:
    assert normalise_host("[FE80::1%eth0]") == "fe80::1"
    assert normalise_host("Api.OpenAI.COM..") == "api.openai.com"


def test_message_names_option_and_resolved_address() -> None:
    with pytest.raises(TargetRefused) as exc:
        check_target("http://134744072/v1", what="--metrics-url")
    msg = str(exc.value)
    assert msg.startswith("--metrics-url http://134744072/v1:") and "8.8.8.8" in msg
    assert "\n" not in msg


# -- total deadlines, in process -----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_fetch_ends_by_its_deadline(mode: str) -> None:
    with HostileServer(mode, interval_s=0.3) as srv:
        t0 = time.monotonic()
        with pytest.raises(FetchError, match=r"within 1\.5 s") as exc:
            fetch_sync("GET", srv.url("/metrics"), deadline_s=1.5)
        assert exc.value.kind == "timeout"
        assert time.monotonic() - t0 < 1.5 + SLACK_S
        assert srv.requests >= 1


def test_fetch_caps_the_body() -> None:
    async def main() -> None:
        with HostileServer("trickle-body", interval_s=0.01) as srv:
            with pytest.raises(FetchError, match="larger than") as exc:
                await fetch("GET", srv.url(), deadline_s=30, max_bytes=64)
            assert exc.value.kind == "too_large"

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_chat_client_total_deadline(mode: str) -> None:
    async def main() -> float:
        with HostileServer(mode, interval_s=0.3) as srv:
            async with ChatClient(srv.url(), timeout_s=1.5, first_token_timeout_s=None) as c:
                t0 = time.monotonic()
                with pytest.raises(LLMTimeout):
                    await c.complete([{"role": "user", "content": "hi"}], max_tokens=4)
                return time.monotonic() - t0

    assert asyncio.run(main()) < 1.5 + SLACK_S


# -- total deadlines, through the commands ------------------------------------------------


@pytest.fixture(scope="module")
def trickle() -> HostileServer:
    with HostileServer("trickle-head", interval_s=0.5) as srv:
        yield srv


def test_replay_llm_url_models_check_has_a_deadline(trickle: HostileServer) -> None:
    p, took = run_cli("replay", "recordings/", "--llm-url", trickle.url(), limit_s=5 + SLACK_S)
    assert p.returncode == 2
    line = one_error_line(p.stderr)
    assert "--llm-url" in line and "/models" in line and "within 5 s" in line
    assert took < 5 + SLACK_S


def test_cache_report_metrics_url_has_a_deadline(trickle: HostileServer, tmp_path: Path) -> None:
    usage = tmp_path / "usage.jsonl"
    usage.write_text(
        json.dumps({"usage": {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1500}}})
        + "\n"
    )
    p, took = run_cli(
        "cache-report", str(usage), "--metrics-url", trickle.url("/metrics"), "--window-s", "0",
        "--json", limit_s=5 + SLACK_S,
    )  # fmt: skip
    assert p.returncode == 1
    line = one_error_line(p.stderr)
    assert "/metrics" in line and "within 5 s" in line
    assert json.loads(p.stdout)["sources"][0]["source"] == str(usage)  # the rest still reported
    assert took < 5 + SLACK_S


def test_prompt_lint_base_url_has_a_deadline(trickle: HostileServer, tmp_path: Path) -> None:
    bodies = []
    for i in range(2):
        f = tmp_path / f"r{i}.json"
        msgs = [{"role": "system", "content": "You are the front desk."}]
        msgs.append({"role": "user", "content": f"question {i}"})
        f.write_text(json.dumps({"messages": msgs}))
        bodies.append(str(f))
    p, took = run_cli(
        "prompt-lint", *bodies, "--base-url", trickle.url(), "--json", limit_s=10 + SLACK_S
    )
    assert p.returncode == 1
    line = one_error_line(p.stderr)
    assert "within 10 s" in line and "measuring in chars" in line
    assert json.loads(p.stdout)["unit"] == "chars"  # still linted
    assert took < 10 + SLACK_S


@pytest.mark.parametrize("mode", ["never", "trickle-body"])
def test_loadtest_never_answered_one_line_exit_1(mode: str) -> None:
    with HostileServer(mode, interval_s=0.5) as srv:
        p, took = run_cli(
            "loadtest", "--base-url", srv.url(), "--max-duration-s", "3", "--calls", "2",
            "--stagger-s", "0.1", "--think-s", "0.1", limit_s=3 + 2 + SLACK_S,
        )  # fmt: skip
        assert srv.requests >= 1
    assert p.returncode == 1
    line = one_error_line(p.stderr)
    assert "no request answered" in line and "--base-url" in line
    assert took < 3 + 2 + SLACK_S


# -- the policy, through the commands ------------------------------------------------------


def test_commands_refuse_metadata_and_remote_targets(tmp_path: Path) -> None:
    body = tmp_path / "r.json"
    body.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    cases = [
        (["replay", "recordings/", "--llm-url", "http://169.254.169.254/v1"], 2, "never connects"),
        (["replay", "recordings/", "--llm-url", "http://8.8.8.8/v1"], 2, "--allow-remote"),
        (["prompt-lint", str(body), "--base-url", "http://[::ffff:8.8.8.8]/v1"], 2, "--allow-remote"),
        (["loadtest", "--base-url", "https://api.openai.com./v1", "--allow-remote"], 2, "third-party"),
        (["loadtest", "--base-url", "http://0251.0376.0251.0376/v1"], 2, "never connects"),
    ]
    for args, rc, text in cases:
        p, _ = run_cli(*args, limit_s=SLACK_S)
        assert p.returncode == rc, (args, p.stderr)
        assert text in one_error_line(p.stderr), (args, p.stderr)
    usage = tmp_path / "usage.jsonl"
    usage.write_text(json.dumps({"usage": {"prompt_tokens": 2000}}) + "\n")
    p, _ = run_cli(
        "cache-report", str(usage), "--metrics-url", "http://169.254.169.254/metrics", "--json",
        limit_s=SLACK_S,
    )  # fmt: skip
    assert p.returncode == 1
    assert "never connects" in one_error_line(p.stderr)
    assert len(json.loads(p.stdout)["sources"]) == 1  # the file still reported
