"""Call-shaped load: what TTFT callers see when N calls share one engine.

A request-rate benchmark (``vllm bench serve``) sends independent prompts; a
voice deployment sends *calls*: each call is a chain of requests against one
agent's prompt that grows by a turn at a time, with the caller speaking
(think time) between the agent's replies. Whether those requests hit the
prefix cache decides the TTFT far more than raw throughput does. This module
plans and runs such load and reports it in calls:

- ``calls`` calls arrive staggered (Poisson or uniform gaps of mean
  ``stagger_s``; never all at once), at most ``concurrency`` in progress;
- each picks one of ``agents`` agent prompts (synthetic, about
  ``prompt_tokens`` tokens each, laid out by
  :class:`~turnkit.llm.prompt.PromptLayout`: stable part, conversation,
  per-call block with the caller's name, number and time);
- ``turns`` turns: the caller's words, then the request mix — a reply; on
  ``tool_share`` of turns a tool call (the reply request, then a follow-up
  after the tool result); on ``background_share`` a background request (a
  summary, not waited on);
- ``context="changing"``: a live-status block in the middle of the stable part
  changes on half the turns (a real cause of misses: queue lengths, open
  slots), each change new to that call; ``"stable"`` keeps it fixed;
- ``run_id`` (random per run unless given) goes into each call's first words
  and every changed block, so a run never finds an earlier run's calls in the
  engine's cache: llama-server keeps prompts in host memory (``--cache-ram``,
  8 GiB by default) and restores them into a slot, so without it a re-run of
  the same seed got its whole conversations and "new" blocks from the cache
  (the agents' stable parts and greetings stay shared, as in production);
- ``prewarm``: at call setup, one :func:`~turnkit.llm.prewarm.prewarm` of the
  first request's shape while the greeting plays.

Every request of a call carries the call's routing headers
(:mod:`turnkit.llm.routing`). The report (:meth:`LoadReport.summary`) gives
TTFT p50/p90/p99 over the caller-facing requests and per turn index (the
turn's first request), SLO attainment and goodput (caller-facing requests
within ``slo_ttft_ms`` per second, ``request_goodput`` as in ``vllm bench
serve``), the cached share of prompt tokens and uncached prompt tokens per
second. The run is bounded by ``max_requests`` and ``max_duration_s``: no
request starts after the deadline, and the run ends at most
``HARD_STOP_GRACE_S`` (2 s) after it, requests still in flight then cut and
counted failed (an engine that never answers cannot hold it longer). It only
targets what :func:`turnkit.net.check_target` allows (loopback/private
addresses unless ``allow_remote`` says the endpoint is the user's own; never
a known third-party API).

Example::

    cfg = LoadConfig(base_url="http://127.0.0.1:8080/v1", calls=8, concurrency=4)
    report = await run_load(cfg)
    report.summary()["p90_ttft_ms"]
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnkit.clock import Clock, RealClock
from turnkit.llm.client import ChatClient, LLMError
from turnkit.llm.prewarm import prewarm as send_prewarm
from turnkit.llm.prompt import CallPrompt, PromptLayout
from turnkit.llm.routing import routing_headers, routing_key
from turnkit.net import TargetRefused
from turnkit.net import check_target as _check

__all__ = [
    "CallPlan",
    "LoadConfig",
    "LoadReport",
    "RemoteURLRefused",
    "RequestRecord",
    "TurnPlan",
    "agent_layout",
    "arrival_times",
    "check_target",
    "plan_calls",
    "run_load",
]

log = logging.getLogger(__name__)

CALLER_FACING = ("reply", "tool_call", "tool_followup")
# The run ends at most this long after max_duration_s (in-flight requests cut).
HARD_STOP_GRACE_S = 2.0
# The shared target policy (turnkit.net); loadtest also refuses third-party APIs.
RemoteURLRefused = TargetRefused


def check_target(base_url: str, allow_remote: bool = False) -> None:
    """:func:`turnkit.net.check_target` for ``--base-url``: loopback and
    private addresses; another host only with ``allow_remote`` (the user's
    own endpoint); a known third-party API never."""
    _check(base_url, allow_remote, what="--base-url", forbid_third_party=True)


class LoadConfig(BaseModel):
    """One load run (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    model: str = ""
    api_key: str | None = None
    calls: int = Field(8, ge=1, le=10_000)
    concurrency: int = Field(4, ge=1, le=1_000)
    arrival: Literal["poisson", "uniform"] = "poisson"
    stagger_s: float = Field(1.0, gt=0)
    agents: int = Field(2, ge=1, le=100)
    turns: int = Field(4, ge=1, le=100)
    think_s: float = Field(2.0, ge=0)
    context: Literal["stable", "changing"] = "stable"
    prewarm: bool = False
    prompt_tokens: int = Field(400, ge=20, le=100_000)
    reply_tokens: int = Field(16, ge=1, le=4096)
    tool_share: float = Field(0.25, ge=0, le=1)
    background_share: float = Field(0.25, ge=0, le=1)
    slo_ttft_ms: float = Field(1000.0, gt=0)
    max_requests: int = Field(500, ge=1)
    max_duration_s: float = Field(300.0, gt=0)
    request_timeout_s: float = Field(120.0, gt=0)
    seed: int = 0
    run_id: str | None = None  # None: a fresh random one per run (see the module docstring)
    allow_remote: bool = False

    @model_validator(mode="after")
    def _target(self) -> LoadConfig:
        check_target(self.base_url, self.allow_remote)
        return self


# -- the plan ---------------------------------------------------------------------------


def arrival_times(n: int, mean_gap_s: float, kind: str, rng: random.Random) -> list[float]:
    """Offsets of ``n`` call arrivals: the first at 0, then gaps of
    ``mean_gap_s`` (uniform: exactly; poisson: exponential)."""
    t, out = 0.0, []
    for i in range(n):
        if i:
            t += mean_gap_s if kind == "uniform" else rng.expovariate(1.0 / mean_gap_s)
        out.append(t)
    return out


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """One planned caller turn of a load-test call: what the caller says,
    how long it thinks first, whether the reply needs a tool call or a
    background request, and the live-status block's version it sees."""

    user_text: str
    think_s: float
    tool: bool
    background: bool
    context_version: int  # the live-status block's version for this turn


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One planned load-test call: which agent prompt it uses, when it
    arrives, the per-call values filled into the prompt, and its turns."""

    index: int
    agent: int
    arrival_s: float
    values: dict[str, str]
    turns: tuple[TurnPlan, ...]


_USER_LINES = (
    "Hi, I'd like to book a cleaning for next week if you have anything.",
    "Tuesday afternoon would be best for me, around three.",
    "Can you tell me what the cancellation policy is?",
    "Actually, could we make it Thursday instead?",
    "Do you take my insurance? It's through my employer.",
    "Great, and how early should I arrive?",
    "Is there parking near the office?",
    "Okay, thank you, that's everything.",
)
_NAMES = ("Dana Reyes", "Eli Park", "Sam Okafor", "Mia Novak", "Ravi Shah", "Lena Berg")
_WORD_TEXT = (
    "appointment booking caller schedule insurance clinic office hours confirm politely "
    "details patient cleaning checkup dentist hygienist reschedule cancellation policy "
    "arrive early parking payment card referral emergency weekend holiday reminder text "
    "message voicemail transfer manager records privacy consent address available slots"
)
_WORDS = tuple(_WORD_TEXT.split())


def agent_layout(
    agent: int, prompt_tokens: int, context_version: int | str | None
) -> PromptLayout:
    """Agent ``agent``'s synthetic prompt of about ``prompt_tokens`` tokens;
    ``context_version`` is the live-status block in its middle (``None``:
    no block)."""
    rng = random.Random(1000 + agent)
    budget_chars = prompt_tokens * 4  # ~4 chars a token for English text

    def sentences(chars: int) -> list[str]:
        out, n = [], 0
        while n < chars:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 14))]
            s = " ".join(words).capitalize() + "."
            out.append(s)
            n += len(s) + 1
        return out

    persona = (
        f"You are Agent {agent}, the phone receptionist of clinic number {agent}. "
        "Speak briefly and warmly; greet the caller as {caller_name}."
    )
    rules = sentences(int(budget_chars * 0.25))
    reference = " ".join(sentences(int(budget_chars * 0.65)))
    status = ""
    if context_version is not None:
        slots = 3 + int(hashlib.sha256(str(context_version).encode()).hexdigest(), 16) % 11
        status = f"Live status (update {context_version}): {slots} open slots today."
    return PromptLayout(
        persona=persona,
        rules=rules,
        call_flow=status,
        reference=reference,
        tools=[_BOOK_TOOL],
        placeholders=("caller_name", "caller_number", "call_time"),
    )


_BOOK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "book_appointment",
        "description": "Book an appointment for the caller.",
        "parameters": {
            "type": "object",
            "properties": {"day": {"type": "string"}, "time": {"type": "string"}},
            "required": ["day"],
        },
    },
}


def plan_calls(cfg: LoadConfig) -> list[CallPlan]:
    """The whole run's calls, deterministic for ``cfg.seed``."""
    rng = random.Random(cfg.seed)
    arrivals = arrival_times(cfg.calls, cfg.stagger_s, cfg.arrival, rng)
    plans = []
    for i, at in enumerate(arrivals):
        # "changing": exactly half the turns (rounded down), chosen at random,
        # move the status block to a new version.
        changes = set(rng.sample(range(cfg.turns), cfg.turns // 2))
        version, turns = 0, []
        for t in range(cfg.turns):
            if cfg.context == "changing" and t in changes:
                version += 1
            turns.append(
                TurnPlan(
                    user_text=_USER_LINES[(i + t) % len(_USER_LINES)],
                    think_s=cfg.think_s * rng.uniform(0.5, 1.5),
                    tool=rng.random() < cfg.tool_share,
                    background=rng.random() < cfg.background_share,
                    context_version=version,
                )
            )
        values = {
            "caller_name": _NAMES[i % len(_NAMES)],
            "caller_number": f"+1 555 01{i % 100:02d} {1000 + i:04d}",
            "call_time": f"2025-03-04 {9 + i % 8:02d}:{(7 * i) % 60:02d}",
        }
        plans.append(CallPlan(i, i % cfg.agents, at, values, tuple(turns)))
    return plans


# -- running it ---------------------------------------------------------------------------


@dataclass(slots=True)
class RequestRecord:
    """One request the load test made (prewarm, reply, tool call, tool
    follow-up, background): when it started, its TTFT and total time, its
    prompt and cached tokens, or its error; ``ok`` when it produced a token."""

    call: int
    agent: int
    turn: int  # -1 for the prewarm
    kind: str  # prewarm, reply, tool_call, tool_followup, background
    start_s: float
    ttft_ms: float | None = None
    total_ms: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_ms is not None


@dataclass(slots=True)
class LoadReport:
    """What one load-test run measured: every request's record, how long
    it ran and why it stopped early; :meth:`summary` gives the figures
    (caller-facing TTFT percentiles, SLO attainment, cache share)."""

    config: LoadConfig
    records: list[RequestRecord] = field(default_factory=list)
    duration_s: float = 0.0
    stopped: str = ""  # why the run stopped early, if it did
    calls_done: int = 0
    run_id: str = ""  # what made this run's calls new to the engine (LoadConfig.run_id)

    def summary(self) -> dict[str, Any]:
        """The figures (see the module docstring); keys follow ``vllm bench
        serve`` where they overlap."""
        cfg = self.config
        facing = [r for r in self.records if r.kind in CALLER_FACING]
        ok = [r for r in facing if r.ok]
        ttfts = np.array([r.ttft_ms for r in ok], dtype=float)
        within = int(np.sum(ttfts <= cfg.slo_ttft_ms)) if len(ttfts) else 0
        dur = max(self.duration_s, 1e-9)
        calls_reqs = [r for r in self.records if r.kind != "prewarm" and r.ok]
        prompt = sum(r.prompt_tokens or 0 for r in calls_reqs)
        cached = sum(min(r.cached_tokens or 0, r.prompt_tokens or 0) for r in calls_reqs)
        pre = [r for r in self.records if r.kind == "prewarm" and r.ok]

        def pct(a: np.ndarray, q: float) -> float | None:
            return round(float(np.percentile(a, q)), 2) if len(a) else None

        per_turn: dict[str, dict[str, Any]] = {}
        firsts: dict[tuple[int, int], RequestRecord] = {}
        for r in ok:
            key = (r.call, r.turn)
            if key not in firsts or r.start_s < firsts[key].start_s:
                firsts[key] = r
        for t in sorted({k[1] for k in firsts}):
            a = np.array([r.ttft_ms for k, r in firsts.items() if k[1] == t], dtype=float)
            per_turn[str(t)] = {
                "n": len(a),
                "p50_ttft_ms": pct(a, 50),
                "p90_ttft_ms": pct(a, 90),
                "p99_ttft_ms": pct(a, 99),
            }
        return {
            "duration": round(self.duration_s, 3),
            "calls": cfg.calls,
            "calls_completed": self.calls_done,
            "completed": len(calls_reqs),
            "failed": sum(1 for r in self.records if not r.ok),
            "caller_facing_requests": len(facing),
            "background_requests": sum(1 for r in self.records if r.kind == "background"),
            "request_throughput": round(len(calls_reqs) / dur, 4),
            "mean_ttft_ms": round(float(ttfts.mean()), 2) if len(ttfts) else None,
            "median_ttft_ms": pct(ttfts, 50),
            "p50_ttft_ms": pct(ttfts, 50),
            "p90_ttft_ms": pct(ttfts, 90),
            "p99_ttft_ms": pct(ttfts, 99),
            "per_turn": per_turn,
            "slo_ttft_ms": cfg.slo_ttft_ms,
            "slo_attainment": round(within / len(facing), 4) if facing else None,
            "request_goodput": round(within / dur, 4),
            "total_input_tokens": prompt,
            "cached_tokens": cached,
            "cached_share": round(cached / prompt, 4) if prompt else None,
            "uncached_prompt_tokens_per_s": round((prompt - cached) / dur, 2),
            "prewarm_requests": len(pre),
            "context": cfg.context,
            "prewarm": cfg.prewarm,
            "concurrency": cfg.concurrency,
            "run_id": self.run_id or None,
            "stopped": self.stopped or None,
        }


class _Budget:
    """Shared bounds: requests left and the deadline."""

    def __init__(self, cfg: LoadConfig, clock: Clock) -> None:
        self.left = cfg.max_requests
        self.deadline = clock.now() + cfg.max_duration_s
        self.clock = clock
        self.stopped = ""

    def take(self) -> bool:
        if self.stopped:
            return False
        if self.left <= 0:
            self.stopped = "max_requests reached"
            return False
        if self.clock.now() >= self.deadline:
            self.stopped = "max_duration_s reached"
            return False
        self.left -= 1
        return True


async def _request(
    client: ChatClient,
    rec: RequestRecord,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    max_tokens: int,
    headers: dict[str, str],
) -> str:
    try:
        r = await client.complete(messages, max_tokens=max_tokens, tools=tools, headers=headers)
    except LLMError as exc:
        rec.error = str(exc)
        return ""
    rec.ttft_ms = r.ttft_ms
    rec.total_ms = r.total_ms
    rec.prompt_tokens = r.usage.get("prompt_tokens")
    rec.cached_tokens = r.cached_tokens
    if r.ttft_ms is None:
        rec.error = f"no token (finish_reason={r.finish_reason})"
    return r.text


async def _run_call(
    cfg: LoadConfig,
    plan: CallPlan,
    client: ChatClient,
    clock: Clock,
    budget: _Budget,
    report: LoadReport,
    layouts: dict[tuple[int, int | str], PromptLayout],
    t0: float,
    run_id: str,
) -> None:
    def layout(version: int) -> PromptLayout:
        # A changed block is this call's own news at this moment: unique per
        # (run, call, change), so no other call, nor an earlier run of the
        # same plan, can have cached it.
        label: int | str = f"{run_id}.{plan.index}.{version}" if version else 0
        key = (plan.agent, label if cfg.context == "changing" else 0)
        if key not in layouts:
            layouts[key] = agent_layout(plan.agent, cfg.prompt_tokens, key[1])
        return layouts[key]

    base = layout(0)
    headers = routing_headers(routing_key(f"agent{plan.agent}", base.stable_hash))
    conversation: list[dict[str, Any]] = [
        {"role": "assistant", "content": f"Clinic {plan.agent}, this is the front desk."}
    ]
    background: list[asyncio.Task[str]] = []

    def call_prompt(version: int) -> CallPrompt:
        cp = layout(version).start_call(plan.values)
        for m in conversation:
            cp.append(m)
        return cp

    def record(turn: int, kind: str) -> RequestRecord:
        rec = RequestRecord(plan.index, plan.agent, turn, kind, clock.now() - t0)
        report.records.append(rec)
        return rec

    if cfg.prewarm and budget.take():
        rec = record(-1, "prewarm")
        res = await send_prewarm(client, call_prompt(0).request(), headers=headers)
        if res.ok:
            shot = res.shots[-1]
            rec.ttft_ms, rec.total_ms = shot.ttft_ms, shot.total_ms
            rec.prompt_tokens, rec.cached_tokens = shot.prompt_tokens, shot.cached_tokens
        else:
            rec.error = res.error
    for t, turn in enumerate(plan.turns):
        await clock.sleep(turn.think_s)  # the caller speaks
        # The first words name the run's call: from here on the prompt is new
        # to the engine even if it served this plan before (see run_id).
        words = f"(Call {run_id}-{plan.index}.) {turn.user_text}" if t == 0 else turn.user_text
        conversation.append({"role": "user", "content": words})
        if not budget.take():
            break
        req = call_prompt(turn.context_version).request()
        kind = "tool_call" if turn.tool else "reply"
        text = await _request(
            client, record(t, kind), req.messages, req.tools, cfg.reply_tokens, headers
        )
        if turn.background and budget.take():
            # A summary of the call so far, off the caller's path.
            msgs = [
                {"role": "system", "content": "Summarize the call in one line."},
                {"role": "user", "content": "\n".join(str(m["content"]) for m in conversation)},
            ]
            background.append(
                asyncio.create_task(
                    _request(client, record(t, "background"), msgs, None, 8, headers)
                )
            )
        if turn.tool:
            call_id = f"call_{plan.index}_{t}"
            conversation.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "book_appointment",
                                "arguments": '{"day": "Thursday"}',
                            },
                        }
                    ],
                }
            )
            conversation.append(
                {"role": "tool", "tool_call_id": call_id, "content": '{"booked": true}'}
            )
            if not budget.take():
                break
            req = call_prompt(turn.context_version).request()
            text = await _request(
                client, record(t, "tool_followup"), req.messages, req.tools,
                cfg.reply_tokens, headers,
            )  # fmt: skip
        conversation.append({"role": "assistant", "content": text or "Okay."})
    else:
        report.calls_done += 1
    try:
        if background:
            await asyncio.gather(*background)
    finally:
        for task in background:  # cut at the hard stop: none left running
            task.cancel()


async def run_load(cfg: LoadConfig, clock: Clock | None = None) -> LoadReport:
    """Run ``cfg`` against its engine; never raises for engine errors (they
    are recorded per request)."""
    clock = clock or RealClock()
    run_id = cfg.run_id if cfg.run_id is not None else secrets.token_hex(4)
    plans = plan_calls(cfg)
    report = LoadReport(config=cfg, run_id=run_id)
    budget = _Budget(cfg, clock)
    places = asyncio.Semaphore(cfg.concurrency)
    layouts: dict[tuple[int, int | str], PromptLayout] = {}
    t0 = clock.now()
    async with ChatClient(
        cfg.base_url,
        model=cfg.model,
        api_key=cfg.api_key,
        timeout_s=cfg.request_timeout_s,
        first_token_timeout_s=cfg.request_timeout_s,
        max_connections=max(8, cfg.concurrency * 3),
    ) as client:

        async def one(plan: CallPlan) -> None:
            await clock.sleep(plan.arrival_s - (clock.now() - t0))
            async with places:
                if budget.stopped:
                    return
                await _run_call(cfg, plan, client, clock, budget, report, layouts, t0, run_id)

        tasks = [asyncio.create_task(one(p)) for p in plans]
        # Hard stop HARD_STOP_GRACE_S after the deadline: requests still in
        # flight (an engine that never answers) are cut and counted failed.
        grace = min(cfg.request_timeout_s, HARD_STOP_GRACE_S)
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), cfg.max_duration_s + grace)
        except TimeoutError:
            report.stopped = "max_duration_s reached (in-flight requests cut)"
            for rec in report.records:
                if rec.error is None and rec.ttft_ms is None:
                    rec.error = (
                        f"no answer before the hard stop ({cfg.max_duration_s:g} s "
                        f"+ {grace:g} s)"
                    )
    report.duration_s = clock.now() - t0
    report.stopped = report.stopped or budget.stopped
    return report
