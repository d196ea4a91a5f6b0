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

import logging
import time

from pydantic import Field, model_validator

from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.registry import register
from turnkit.frames import AudioInFrame, SystemFrame, TranscriptFrame
from turnkit.llm.eou import DEFAULT_SYSTEM, LLMEndOfTurn
from turnkit.llm.logprobs import EngineError

__all__ = ["LLMEouDetector", "LLMEouParams"]

log = logging.getLogger(__name__)

# A transcript whose last word ended this long before the current turn's
# first speech belongs to an earlier turn.
_STALE_S = 0.05


class LLMEouParams(DetectorParams):
    base_url: str = Field("http://127.0.0.1:8080/v1", description="OpenAI-compatible API root")
    model: str = Field("", description="model name to send; empty: the engine's default")
    threshold: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="P(end token) at or above which the caller is done",
        json_schema_extra={"sweep": [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]},
    )
    timeout_ms: float = Field(300.0, gt=0, le=60_000, description="total deadline per request")
    min_wait_ms: float = Field(
        0.0, ge=0, le=60_000, description="silence before ending when the model says complete"
    )
    max_wait_ms: float = Field(
        1800.0, ge=0, le=60_000, description="silence before ending when the model says incomplete"
    )
    fallback_ms: float = Field(
        800.0, ge=0, le=60_000, description="silence that ends a turn when the engine fails"
    )
    top_k: int = Field(20, ge=1, le=100, description="logprobs requested (vLLM caps at 20)")
    punct: bool = Field(
        True, description="count sentence-final punctuation next as end (see turnkit.llm.eou)"
    )
    template: str = Field("chatml", description="chat template: built-in name or format string")
    eot_token: str = Field("", description="end-of-turn token text (needed for a custom template)")
    system: str = Field(DEFAULT_SYSTEM, description="system prompt (keep it fixed: prefix cache)")

    @model_validator(mode="after")
    def _consistent(self) -> LLMEouParams:
        if self.min_wait_ms > self.max_wait_ms:
            raise ValueError("min_wait_ms must not exceed max_wait_ms")
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
        timeout_ms=p.timeout_ms,
    )


class _TextScorer:
    """What ``eot-score`` / ``eot-eval`` use: blocking P(end) and the threshold."""

    def __init__(self, scorer: LLMEndOfTurn, threshold: float) -> None:
        self.scorer = scorer
        self.threshold = threshold

    def predict(self, text: str, agent_text: str = "") -> float:
        return self.scorer.predict_sync(text, agent_text)


@register
class LLMEouDetector(EndOfTurnDetector):
    """End of turn from a language model's P(end token), gated by VAD silence.

    Evidence: the latest transcript of the caller's turn
    (:meth:`on_transcript`), the agent's last message (:meth:`set_agent_text`)
    and the VAD. The engine is asked **once per pause** — on the first silent
    frame after the VAD's stop — and again only if the words change before
    the pause is decided (a recogniser's final arriving late; with no words
    yet, it is asked when they come):

    * ``p >= threshold`` — the words read as a finished message: the turn
      ends once the silence since the last speech reaches ``min_wait_ms``;
    * otherwise — unfinished: the turn ends only at ``max_wait_ms`` silence;
    * the engine failed (refused, timed out after ``timeout_ms``, answered
      nonsense) — the **fallback** decides: the turn ends at ``fallback_ms``
      silence, the :class:`~turnkit.frames.TurnEndFrame` says
      ``reason="fallback: <why>"`` and :attr:`fallbacks` counts it
      (:attr:`engine_errors` counts failed requests);
    * no words at all in the turn — the turn ends at ``max_wait_ms``.

    Speech before the decision voids the pause. The request is awaited; its
    wall-clock cost (``time.perf_counter``) is the decision's ``compute_ms``
    when the turn ends right after it (a host adds it to the decision time;
    the replay's virtual clock stands still while it is awaited), and the
    part still running when a later timer fires otherwise (none, by then).

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
        super().__init__(clock, params, spec)
        self.scorer = scorer if scorer is not None else _make_scorer(self.params)
        self.fallbacks = 0  # turn ends decided by the silence fallback
        self.engine_errors = 0  # requests that failed
        self.requests = 0
        self.last_cached_tokens: int | None = None

    def reset(self) -> None:
        super().reset()
        self.text = ""
        self._text_until = 0.0  # end of the last word in ``text``
        self._turn_start: float | None = None
        self._pause_reset()

    def _pause_reset(self) -> None:
        self._asked_text = ""  # the words the current verdict is about
        self._p: float | None = None  # the model's verdict on this pause
        self._error: str | None = None  # why the engine gave none
        self._infer_at = 0.0
        self._infer_ms = 0.0

    async def on_transcript(self, frame: TranscriptFrame) -> list[SystemFrame]:
        self.text = frame.text
        self._text_until = frame.spoken_until
        return []

    def _turn_text(self) -> str:
        if self._turn_start is not None and self._text_until < self._turn_start - _STALE_S:
            return ""  # words of an earlier turn; this one has none yet
        return self.text.strip()

    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        opening = vad.speaking and not self.turn_open
        out = await super().on_audio(frame, vad)
        if vad.speaking:
            if opening:
                self._turn_start = vad.speech_start
            self._pause_reset()  # speech again: any pending pause is void
            return out
        if not self.turn_open:
            return out
        now = self.clock.now()
        text = self._turn_text()
        if text and text != self._asked_text:
            # First silent frame with words, or words that arrived after the
            # pause was judged (a recogniser's late final): ask (again).
            await self._ask(now, text)
        self._decide(now, vad, out)
        return out

    @property
    def _asked(self) -> bool:
        return bool(self._asked_text)

    async def _ask(self, now: float, text: str) -> None:
        self._asked_text = text
        self._p, self._error = None, None
        self._infer_at = now
        self.requests += 1
        t0 = time.perf_counter()
        try:
            res = await self.scorer.score(text, self.agent_text)
        except EngineError as exc:
            self.engine_errors += 1
            self._error = str(exc)
            log.debug("llm-eou: engine failed: %s", exc)
        else:
            self._p = res.probability
            self.last_cached_tokens = res.cached_tokens
        self._infer_ms = (time.perf_counter() - t0) * 1000

    def _decide(self, now: float, vad: VADStep, out: list[SystemFrame]) -> None:
        silent_ms = (now - vad.speech_end) * 1000
        p = self._p
        if self._error is not None:
            wait_ms, verdict = self.params.fallback_ms, f"fallback: {self._error}"
        elif not self._asked:
            wait_ms, verdict = self.params.max_wait_ms, "no transcript"
        elif p is not None and p >= self.params.threshold:
            wait_ms, verdict = self.params.min_wait_ms, f"p={p:.2f} complete"
        else:
            wait_ms, verdict = self.params.max_wait_ms, f"p={p:.2f} incomplete"
        if silent_ms < wait_ms - 1e-6:
            return
        # Only the part of the request still running at this moment delays
        # the decision (none when a timer fires long after it).
        pending_ms = self._still_running_ms(self._infer_ms, self._infer_at) if self._asked else 0.0
        if self._error is not None:
            self.fallbacks += 1
            reason = f"{verdict} (after {silent_ms:.0f} ms silence)"
        else:
            reason = f"{verdict} after {silent_ms:.0f} ms silence"
            if self._asked:
                reason += f" (engine {self._infer_ms:.0f} ms)"
        out.append(self._end(probability=p, compute_ms=pending_ms, reason=reason))
        self._turn_start = None
        self._pause_reset()
