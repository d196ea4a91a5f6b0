"""LLM end of turn: a language model reads the caller's words and says
whether the message is over.

:class:`LLMEouDetector` (``llm-eou``) decides at each pause in the caller's
speech, on the evidence of the transcript so far and the agent's last
message, by asking an OpenAI-compatible engine (llama-server, vLLM, SGLang)
for P(end-of-turn token right after the caller's words) — see
:mod:`turnkit.llm.eou` — plus the VAD's silence timing. It hears no audio
beyond the VAD.

Example::

    det = create_detector("llm-eou:base_url=http://127.0.0.1:8080/v1,threshold=0.5", clock)
    signals = await det.on_audio(frame, vad_step)
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from turnkit.clock import Clock
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector, check_spec_target
from turnkit.detectors.endpointing import (
    ANNOUNCE_FLOOR_MS,
    CEILING_MS,
    DIGIT_RUN_FLOOR_MS,
    DIGIT_RUN_MS,
    OPEN_FRAME_MS,
    Evidence,
    Score,
    WaitPolicy,
)
from turnkit.detectors.registry import register
from turnkit.llm.eou import (
    MAX_HISTORY_TOKENS,
    MAX_HISTORY_TURNS,
    LLMEndOfTurn,
    TemplateError,
    calibration_for,
    resolve_template,
)
from turnkit.llm.logprobs import EngineError

__all__ = ["LLMEouDetector", "LLMEouParams"]

log = logging.getLogger(__name__)


def _calibrated_threshold(model: str) -> float:
    """The threshold stored for ``model`` (turnkit.llm.eou.CALIBRATION), else 0.5."""
    cal = calibration_for(model)
    return cal.threshold if cal is not None else 0.5


class LLMEouParams(DetectorParams):
    """Options of ``llm-eou``: the engine it asks (``base_url``, ``model``,
    ``timeout_ms``), the P(end) ``threshold`` read from its next-token
    logprobs, the waits for a complete or incomplete verdict, and the silence
    that ends a turn when the engine fails (``fallback_ms``)."""

    base_url: str = Field("http://127.0.0.1:8080/v1", description="OpenAI-compatible API root")
    allow_remote: bool = Field(
        False, description="base_url may be outside loopback and private networks"
    )
    model: str = Field("", description="model name to send; empty: the engine's default")
    threshold: float = Field(
        _calibrated_threshold(""),
        gt=0,
        lt=1,
        description="P(end) at or above which the caller is done "
        "(default: calibrated for the model, see turnkit.llm.eou.CALIBRATION)",
        json_schema_extra={"sweep": [0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7]},
    )
    timeout_ms: float = Field(300.0, gt=0, le=60_000, description="total deadline per request")
    min_wait_ms: float = Field(
        0.0, ge=0, le=60_000, description="silence before ending when the model says complete"
    )
    max_wait_ms: float = Field(
        CEILING_MS,
        ge=0,
        le=60_000,
        description="silence before ending when the model says incomplete: the ceiling",
    )
    fallback_ms: float = Field(
        800.0, ge=0, le=60_000, description="silence that ends a turn when the engine fails"
    )
    top_k: int = Field(20, ge=1, le=100, description="logprobs requested (vLLM caps at 20)")
    punct: bool | None = Field(
        None,
        description="count sentence-final punctuation next as end "
        "(default: as calibrated for the model; see turnkit.llm.eou)",
    )
    history_turns: int = Field(
        MAX_HISTORY_TURNS, ge=1, le=64, description="messages of the conversation the model reads"
    )
    max_tokens: int = Field(
        MAX_HISTORY_TOKENS, ge=16, le=8192, description="left-truncate the prompt to ~this many"
    )
    eot_token: str = Field("", description="end-of-turn token text (default: after {content})")
    template: str = Field(
        "chatml",
        description="chat template: built-in name or a message format with {role}, {content}",
    )
    system: str | None = Field(
        None,
        description="system message (default: the model's calibrated one; see turnkit.llm.eou)",
    )

    @model_validator(mode="before")
    @classmethod
    def _threshold_for_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and "threshold" not in data and data.get("model"):
            data = {**data, "threshold": _calibrated_threshold(str(data["model"]))}
        return data

    @field_validator("template")
    @classmethod
    def _known_template(cls, v: str, info: Any) -> str:
        try:
            resolve_template(v, info.data.get("eot_token", ""))
        except TemplateError as exc:
            raise PydanticCustomError("template", str(exc)) from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> LLMEouParams:
        if self.min_wait_ms > self.max_wait_ms:
            raise ValueError("min_wait_ms must not exceed max_wait_ms")
        check_spec_target(self.base_url, self.allow_remote)
        return self


def _make_scorer(p: LLMEouParams) -> LLMEndOfTurn:
    return LLMEndOfTurn(
        p.base_url,
        model=p.model,
        template=p.template,
        eot_token=p.eot_token,
        system=p.system,
        top_k=p.top_k,
        count_punct=p.punct,
        history_turns=p.history_turns,
        max_tokens=p.max_tokens,
        timeout_ms=p.timeout_ms,
    )


class _TextScorer:
    """What ``eot-score`` / ``eot-eval`` use: blocking P(end) and the threshold."""

    def __init__(self, scorer: LLMEndOfTurn, threshold: float) -> None:
        self.scorer = scorer
        self.threshold = threshold

    def predict(
        self, text: str, agent_text: str = "", context: list[dict[str, str]] | None = None
    ) -> float:
        return self.scorer.predict_sync(text, agent_text, context)


# One ask of llama.cpp's server (xllamacpp) with SmolLM2-135M, its prefix
# cache warm (the conversation prewarmed; only the caller's words computed),
# idle 2-core machine, 2026-12-01: p50 21.6 ms, p95 25.5 ms over 57 asks.
# What `--compute fixed` charges per ask.
FIXED_COST_MS = 22.0


class LLMEouScorer:
    """P(end) from an engine's end-of-turn token after the caller's words
    (:class:`~turnkit.llm.eou.LLMEndOfTurn`). Reads words only; asks once per
    (pause, words). An engine failure is a score with ``error``: the
    endpointing's fallback wait decides, and it is counted here."""

    hears_audio = False
    reads_text = True
    no_evidence = "no transcript"

    def __init__(self, eou: LLMEndOfTurn) -> None:
        self.eou = eou
        self.requests = 0
        self.engine_errors = 0
        self.last_cached_tokens: int | None = None
        self._warned = False
        self._cache: tuple[tuple[int, str, str, int], Score] | None = None
        self._prewarms: set[asyncio.Task[bool]] = set()

    async def score(self, ev: Evidence) -> Score:
        if not ev.text:
            return Score(None)
        c = self._cache
        key = (ev.pause, ev.text, ev.agent_text, len(ev.history))
        if c is not None and c[0] == key:
            return Score(c[1].p, parts=dict(c[1].parts), error=c[1].error)
        self.requests += 1
        t0 = time.perf_counter()
        try:
            res = await self.eou.score(
                ev.text, ev.agent_text, ev.history or None, deadline=ev.timed
            )
        except EngineError as exc:
            self.engine_errors += 1
            if not self._warned:
                self._warned = True
                log.warning(
                    "llm-eou: engine at %s failed (%s); deciding on silence until it answers",
                    self.eou.base_url,
                    exc,
                )
            score = Score(None, error=str(exc))
        else:
            self.last_cached_tokens = res.cached_tokens
            score = Score(res.probability, parts={"p_llm": res.probability})
        score.compute_ms = (time.perf_counter() - t0) * 1000
        score.fixed_ms = FIXED_COST_MS
        self._cache = (key, score)
        return score

    def prewarm(self, history: list[dict[str, str]]) -> None:
        """The agent's message is known: put the coming turn's prompt (the
        conversation so far, no caller words yet) in the engine's prefix
        cache, in the background, so the first ask of the turn computes only
        the caller's words. Never raises; does nothing outside an event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self.eou.prewarm(context=list(history)))
        self._prewarms.add(task)
        task.add_done_callback(self._prewarms.discard)


@register
class LLMEouDetector(EndOfTurnDetector):
    """End of turn from a language model's P(end token), gated by VAD silence.

    Evidence: the latest transcript of the caller's turn, the agent's last
    message and the VAD. The engine is asked **once per pause** — on the first
    silent frame after the VAD's stop — and again only if the words change
    before the pause is decided. ``p >= threshold``: the turn ends at
    ``min_wait_ms`` of silence; otherwise at ``max_wait_ms``; no words yet:
    ``max_wait_ms``; the engine failed (refused, past ``timeout_ms``,
    nonsense): the **fallback** ends the turn at ``fallback_ms`` of silence,
    the reason says ``fallback: <why>``, :attr:`fallbacks` counts it and one
    WARNING is logged. All waiting is the endpointing's.

    Example::

        det = create_detector("llm-eou:base_url=http://127.0.0.1:8080/v1", clock)
        det.set_agent_text("What is your card number?")
        await det.on_transcript(transcript_frame)
        out = await det.on_audio(frame, vad_step)   # [TurnEndFrame(...)] at a pause
    """

    name = "llm-eou"
    Params = LLMEouParams
    params: LLMEouParams

    @classmethod
    def text_scorer(cls, params: DetectorParams | None = None) -> _TextScorer:
        p = params if isinstance(params, LLMEouParams) else LLMEouParams()
        return _TextScorer(_make_scorer(p), p.threshold)

    def __init__(
        self,
        clock: Clock,
        params: DetectorParams | None = None,
        spec: str = "",
        scorer: LLMEndOfTurn | None = None,
    ) -> None:
        self._eou = scorer
        super().__init__(clock, params, spec)

    def make_scorer(self) -> LLMEouScorer:
        return LLMEouScorer(self._eou if self._eou is not None else _make_scorer(self.params))

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        prm = self.params
        return WaitPolicy(
            threshold=prm.threshold,
            min_wait_ms=prm.min_wait_ms,
            max_wait_ms=max(prm.max_wait_ms, prm.fallback_ms),
            digit_run_ms=DIGIT_RUN_MS,
            digit_run_floor_ms=DIGIT_RUN_FLOOR_MS,
            open_frame_ms=OPEN_FRAME_MS,
            announce_floor_ms=ANNOUNCE_FLOOR_MS,
            no_evidence_ms=prm.max_wait_ms,
            fallback_ms=prm.fallback_ms,
        )

    @property
    def requests(self) -> int:
        return self.scorer.requests

    @property
    def engine_errors(self) -> int:
        return self.scorer.engine_errors

    @property
    def last_cached_tokens(self) -> int | None:
        return self.scorer.last_cached_tokens
