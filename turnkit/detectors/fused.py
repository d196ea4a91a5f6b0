"""The fused end-of-turn detector: how the words sound, whether they are
finished, and how long the silence has lasted — one probability, one wait.

Evidence, gathered once per pause (when the VAD says the caller stopped):

* ``p_audio`` — Smart Turn v3 on the current turn's audio (prosody; from
  500 ms before the turn's first speech, at most 8 s);
* ``p_text`` — the semantic-text model on the transcript so far, given the
  agent's last message (re-scored if a later transcript arrives during the
  pause, since recognisers lag the audio);
* optionally ``p_llm`` — an OpenAI-compatible engine's end-of-turn token
  probability (``llm=on``).

They are fused in logit space: a weighted mean of log-odds, so the fused
``p`` lies between the models' own, pulled toward the more confident one (a
confident "unfinished" from one is not drowned by a lukewarm "finished" from
another). Models that agree do not add up to more confidence than either
has: a sum of log-odds would, but both models answer the same question from
correlated cues (a sentence that is over sounds over too), and a sum counts
that evidence twice: at the first looks of the real-call variants'
pauses (``scripts/realcall_variants.py``, 133 turn ends, 116 holds) a sum
with the same weights ranks them no better (ROC AUC 0.849 either way) and
reads 17 % of the holds as p ≥ 0.95 (answered at the floor), the mean 11 %. The fused ``p`` sets a **continuous** wait, read
off the silence itself: if the caller is not done, the pause is a hold, and
holds have a length distribution (log-normal, median ``hold_ms``). After
``t`` ms of silence the chance the caller is done is

    P(done | t) = p / (p + (1 - p) * S(t)),   S(t) = P(hold lasts > t)

and the turn ends once that reaches ``confidence`` (clamped to
``[min_wait, max_wait]``). A clearly finished turn is answered after
``min_wait``; an unfinished one waits until such a long hold is unlikely;
everything between gets something between — rather than LiveKit's binary
choice of min or max.

Patience profiles set ``hold_ms``, ``confidence``, ``min_wait`` and ``max_wait``:
``default``; ``patient`` for callers reading numbers, spelling or giving an
address; ``snappy`` for yes/no confirmations. ``profile=auto`` (the default)
switches by context: the agent's last message asking for a number, a
spelling or an address selects ``patient``; a yes/no question selects
``snappy``.

An *eager* signal (``TurnEagerFrame``) goes out once per pause (again if the
recogniser writes the speech's last word after it) when ``p`` reaches
``eager`` (default 0.9) before the end is committed, so a draft reply can
start. A lower bar starts some drafts a few frames sooner (measured
2026-12-07, ``--compute fixed``, demo + real-call variants, 203 turns:
0.9 / 0.8 / 0.5 → p50 625 / 621 / 620 ms, mean 681 / 672 / 668 ms, 1.46
LLM requests per turn each, 7.4 / 7.4 / 7.9 % cut), and the stalled-words
end reads "surely finished" at the same level (it ends a turn whose words
stopped under other voices at ``endpointing.STALLED_SURE_MS``), so it stays.
With ``early_eager=on`` (the default) the text evidence may send it sooner:
on the first quiet frame after the caller's last word has been transcribed,
before the VAD's stop hysteresis (~100 ms) confirms the pause and before the
audio model has run. If speech comes back before the VAD confirms the pause,
a ``TurnResumedFrame`` voids that draft.

Example::

    det = create_detector("fused", clock)                 # auto profile
    det = create_detector("fused:profile=patient,audio=off", clock)
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from turnkit.detectors.base import DetectorParams, EndOfTurnDetector, check_spec_target
from turnkit.detectors.endpointing import (
    CEILING_MS,
    DIGIT_RUN_MS,
    OPEN_FRAME_MS,
    Evidence,
    Score,
    WaitPolicy,
    in_digit_run,
)
from turnkit.detectors.llm_eou import FIXED_COST_MS as LLM_COST_MS
from turnkit.detectors.registry import register
from turnkit.detectors.semantic_text import FIXED_COST_MS as TEXT_COST_MS
from turnkit.detectors.smart_turn import fixed_cost_ms as smart_turn_cost_ms
from turnkit.text.question import affirms, announces_more, read_agent

__all__ = [
    "CEILING_MS",
    "DIGIT_RUN_MS",
    "NARROWBAND_AUDIO_FACTOR",
    "PROFILES",
    "W_AUDIO",
    "FusedDetector",
    "FusedScorer",
    "Profile",
    "centred_llm",
    "choose_profile",
    "in_digit_run",
    "wait_ms",
]

log = logging.getLogger(__name__)

# Evidence weights in the logit mean are in proportion to how well each kind
# separates holds from turn ends at the moment the endpointing looks (the
# first quiet frame after the VAD's stop), on the natural calls of the
# development corpus (recordings/*natural*: 51 pauses; never the eval sets):
# d' = √2·Φ⁻¹(AUC), Smart Turn AUC 0.715 (d' 0.81) against semantic-text v1
# 0.858 (d' 1.51) → audio weighs 0.55 of text. (On the synthetic stress calls
# Smart Turn is at chance, AUC 0.50, as CORPUS_NOTES predicts for pasted
# pauses; they are not used for the weights.) On a telephone line (8 kHz,
# 300–3400 Hz, μ-law; benchmarks/bench_narrowband.py) Smart Turn's AUC over
# the corpus falls from 0.725 to 0.696 and it calls holds "complete" more
# often (median p at holds 0.08 → 0.24): its weight is scaled by d' 0.72/0.85.
# Re-measured 2026-12-02 with the default text model now v2: at those 51
# pauses Smart Turn AUC 0.675 (d' 0.64), semantic-text v2 0.947 (d' 2.29), a
# ratio of 0.28. Replayed with 0.28 (--compute fixed), the real-call variants
# went 746/1362 → 734/1554 ms p50/p95, interrupted 5.1 → 5.1 %, missed 2.2 →
# 2.9 %, the noisy ones 1072 → 1168 ms p50 (interrupted 3.3 → 0 %), the demo
# corpus 748/1337 → 746/1350 ms at 27.3 %: text alone leaves more pauses in
# the middle of the wait, and p95 nears its 1.6 s bound. 0.55 is kept; the
# weight is no longer the d' ratio.
W_AUDIO = 0.55
NARROWBAND_AUDIO_FACTOR = 0.85


# Patience profiles, calibrated to conversational timing rather than to any
# corpus (docs/endpointing.md says where each number comes from). Holds — the
# pauses inside a turn — are short: in two-party task-oriented phone calls
# their median is 0.20 s, p75 0.31 s, p90 0.45 s, and fewer than one in ten
# exceeds 0.5 s (Heldner & Edlund 2010 find the same shape: pauses inside a
# turn are shorter than gaps between turns); a log-normal with median 200 ms
# and sigma 0.65 fits those quantiles. The agent should answer as a person
# does: people reply a few hundred ms after a finished turn (human clerks in
# such calls: 0.78 s median end to reply, their own planning included).
PROFILES: dict[str, WaitPolicy] = {
    "default": WaitPolicy(
        mode="continuous",
        min_wait_ms=120,
        max_wait_ms=CEILING_MS,
        open_frame_ms=OPEN_FRAME_MS,
        hold_ms=200,
        hold_sigma=0.65,
        confidence=0.95,
        eager=0.9,
        early_eager=True,
    ),
    # Digits, spelling, addresses come in chunks with longer pauses between
    # (a caller reading a card number pauses between groups).
    "patient": WaitPolicy(
        mode="continuous",
        min_wait_ms=250,
        max_wait_ms=CEILING_MS,
        digit_run_ms=DIGIT_RUN_MS,
        open_frame_ms=OPEN_FRAME_MS,
        hold_ms=300,
        hold_sigma=0.65,
        confidence=0.95,
        eager=0.9,
        early_eager=True,
    ),
    # "yes" / "no" / "correct": answer as soon as it is said.
    "snappy": WaitPolicy(
        mode="continuous",
        min_wait_ms=100,
        max_wait_ms=700,
        open_frame_ms=OPEN_FRAME_MS,
        hold_ms=150,
        hold_sigma=0.6,
        confidence=0.9,
        eager=0.9,
        early_eager=True,
    ),
}
Profile = WaitPolicy  # a profile is a wait policy


def choose_profile(agent_text: str, text: str = "") -> str:
    """The patience profile the agent's last message calls for, given the
    caller's words so far (``text``).

    A yes/no question that names a field but does not ask for it ("Is the
    order under the email address ending in gmail dot com?", "Same address
    as before?") keeps ``patient`` — a "no" there is followed by the right
    data, in chunks — until the words are a bare affirmation ("yes",
    "that's right"): that is the whole answer, and ``snappy`` answers it.

    An offer of more ("Is there anything else I can help you with?",
    "Anything else?") is the other way round: a bare affirmation there is
    not the answer but its announcement, the request follows ("yes, | I
    also need a taxi"), after a hold, as after "yes" to a request in a
    yes/no form; ``patient`` (floor 250 ms) waits for it. "no", "no thanks"
    keep the question's profile. The text model reads "yes" there 0.96 and
    "no" 0.86, the reverse of what each means."""
    ask = read_agent(agent_text)
    if ask.kind == "none":
        return "default"
    if announces_more(agent_text, text):
        return "patient"
    if ask.chunked:
        if ask.kind == "yes-no" and not ask.request and affirms(text):
            return "snappy"
        return "patient"
    if ask.kind == "yes-no":
        return "snappy"
    return "default"


def wait_ms(p: float, profile: WaitPolicy) -> float:
    """Silence after which P(done | silence) reaches the profile's confidence."""
    return profile.wait_ms(Score(p))


def _logit(p: float) -> float:
    p = min(1 - 1e-4, max(1e-4, p))
    return math.log(p / (1 - p))


def centred_llm(raw: float, threshold: float) -> float:
    """An engine's P(end) on the fused scale: its own calibrated threshold
    (SmolLM2's is 0.03) reads 0.5, so it weighs as much as the text model's."""
    return 1.0 / (1.0 + math.exp(-(_logit(raw) - _logit(threshold))))


class FusedParams(DetectorParams):
    """Options of ``fused``: which evidence it fuses (Smart Turn audio, the
    semantic-text model, an LLM) and with what weights, the patience profile
    and ``scale`` that set its waits, and the P(end) at which it signals eager
    and commits (``confidence`` overrides the profile's)."""

    profile: Literal["auto", "default", "patient", "snappy"] = "auto"
    audio: Literal["auto", "on", "off"] = Field(
        "auto", description="Smart Turn: auto = use it when pipecat-ai is installed"
    )
    audio_activations: Literal["int8", "float"] = Field(
        "int8",
        description="Smart Turn's activations: int8 as shipped, float steadier (see SmartTurnModel)",
    )
    text: Literal["on", "off"] = "on"
    text_model: Literal["v1", "v2"] = Field("v2", description="semantic-text model version")
    llm: Literal["on", "off"] = "off"
    w_audio: float = Field(W_AUDIO, ge=0, description="weight of Smart Turn vs text (1.0)")
    w_text: float = Field(1.0, ge=0)
    w_llm: float = Field(1.0, ge=0)
    eager: float = Field(
        0.9, ge=0, le=1, description="p at which an eager signal (a draft) goes out"
    )
    early_eager: Literal["on", "off"] = Field(
        "on", description="eager on the text evidence at the first quiet frame"
    )
    scale: float = Field(
        1.0,
        gt=0,
        description="multiplies the waits and the expected hold length (the sweep knob)",
        json_schema_extra={"sweep": [0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0]},
    )
    confidence: float | None = Field(
        None, gt=0, lt=1, description="P(done | silence) to commit at; overrides the profile's"
    )
    min_wait_ms: float | None = Field(None, ge=0, description="overrides the profile's")
    max_wait_ms: float | None = Field(None, ge=0, description="overrides the profile's")
    base_url: str = "http://127.0.0.1:8080/v1"
    allow_remote: bool = Field(False, description="base_url may be outside private networks")
    llm_timeout_ms: float = Field(300, gt=0)

    @model_validator(mode="after")
    def _target(self) -> FusedParams:
        if self.llm == "on":
            check_spec_target(self.base_url, self.allow_remote)
        return self


class FusedScorer:
    """One P(done) from how the words sound (Smart Turn), whether they read as
    finished (semantic-text) and, optionally, an LLM's end token — fused in
    logit space: a weighted mean of log-odds, so the fused p lies between the
    models' own, nearer the more confident, and a confident "unfinished" is
    not drowned by a lukewarm "finished" (agreeing models do not add up).
    The audio model runs once per pause; the text models again when the
    words change. No evidence at all: None (the policy's prior decides)."""

    no_evidence = "no evidence"

    def __init__(
        self,
        audio: Any | None,
        text: Any | None,
        llm: Any | None,
        weights: tuple[float, float, float] = (1.0, 1.0, 1.0),
    ) -> None:
        self.audio, self.text, self.llm = audio, text, llm
        self.text_version = getattr(text, "version", "v1")
        self.w_audio, self.w_text, self.w_llm = weights
        self.hears_audio = audio is not None
        self.reads_text = text is not None or llm is not None
        self.audio_factor = 1.0  # NARROWBAND_AUDIO_FACTOR on a telephone line
        self.llm_threshold = 0.5  # the engine model's calibrated P(end) threshold
        self._audio_cache: tuple[int, float] | None = None  # (pause, p_audio)
        self._text_cache: tuple[str, str, float] | None = None
        self._llm_cache: tuple[int, str, str, float | None] | None = None

    def set_source_rate(self, sample_rate: int) -> None:
        """Narrowband (≤ 8 kHz) caller audio: the audio evidence counts for less."""
        self.audio_factor = NARROWBAND_AUDIO_FACTOR if sample_rate <= 8000 else 1.0

    async def score(self, ev: Evidence) -> Score:
        parts: dict[str, float] = {}
        measured = fixed = 0.0
        if self.audio is not None and ev.audio is not None and not ev.text_only:
            if self._audio_cache is not None and self._audio_cache[0] == ev.pause:
                parts["p_audio"] = self._audio_cache[1]
            else:
                t0 = time.perf_counter()
                p_audio = float(self.audio.predict(ev.audio()))
                measured += (time.perf_counter() - t0) * 1000
                fixed += smart_turn_cost_ms(self.audio)
                self._audio_cache = (ev.pause, p_audio)
                parts["p_audio"] = p_audio
        if self.text is not None and ev.text:
            c = self._text_cache
            if c is not None and c[0] == ev.text and c[1] == ev.agent_text:
                parts["p_text"] = c[2]
            else:
                t0 = time.perf_counter()
                p_text = float(self.text.predict(ev.text, ev.agent_text))
                measured += (time.perf_counter() - t0) * 1000
                fixed += TEXT_COST_MS[self.text_version]
                self._text_cache = (ev.text, ev.agent_text, p_text)
                parts["p_text"] = p_text
        if self.llm is not None and ev.text and not ev.text_only:
            c2 = self._llm_cache
            if c2 is not None and c2[:3] == (ev.pause, ev.text, ev.agent_text):
                p_llm = c2[3]
            else:
                t0 = time.perf_counter()
                try:
                    raw = float(
                        await self.llm.predict(
                            ev.text,
                            ev.agent_text,
                            ev.history or None,
                            deadline=ev.timed,
                        )
                    )
                    p_llm = centred_llm(raw, self.llm_threshold)
                except Exception as exc:  # the engine is optional evidence
                    log.debug("fused: llm evidence unavailable: %s", exc)
                    p_llm = None
                measured += (time.perf_counter() - t0) * 1000
                fixed += LLM_COST_MS
                self._llm_cache = (ev.pause, ev.text, ev.agent_text, p_llm)
            if p_llm is not None:
                parts["p_llm"] = p_llm
        return Score(self.fuse(parts), compute_ms=measured, fixed_ms=fixed, parts=parts)

    def fuse(self, parts: dict[str, float]) -> float | None:
        used = [
            (w, parts[k])
            for w, k in (
                (self.w_audio * self.audio_factor, "p_audio"),
                (self.w_text, "p_text"),
                (self.w_llm, "p_llm"),
            )
            if k in parts and w > 0
        ]
        if not used:
            return None
        z = sum(w * _logit(p) for w, p in used) / sum(w for w, _ in used)
        return 1.0 / (1.0 + math.exp(-z))


@register
class FusedDetector(EndOfTurnDetector):
    """Fused evidence (:class:`FusedScorer`) with a continuous wait read off
    the hold-length model and a patience profile chosen by what the agent
    asked (see the module doc); the ceiling :data:`CEILING_MS` holds unless
    the caller is in a digit or spelling run."""

    name = "fused"
    Params = FusedParams
    params: FusedParams

    # Loaded once per process: several detectors in one replay share them.
    _models: ClassVar[dict[str, Any]] = {}

    def make_scorer(self) -> FusedScorer:
        p = self.params
        audio = self._load_audio() if p.audio != "off" else None
        text = self._load(f"text-{p.text_model}") if p.text == "on" else None
        llm = self._load_llm() if p.llm == "on" else None
        scorer = FusedScorer(audio, text, llm, (p.w_audio, p.w_text, p.w_llm))
        if llm is not None:
            from turnkit.llm.eou import calibration_for

            cal = calibration_for(llm.model)
            scorer.llm_threshold = cal.threshold if cal is not None else 0.5
        return scorer

    # -- models ---------------------------------------------------------------
    def _load_audio(self) -> Any:
        try:
            return self._load(f"audio-{self.params.audio_activations}")
        except Exception as exc:
            if self.params.audio == "on":
                raise
            log.warning("fused: Smart Turn unavailable (%s); deciding on text and silence", exc)
            return None

    def _load(self, kind: str) -> Any:
        model = self._models.get(kind)
        if model is None:
            if kind.startswith("audio-"):
                from turnkit.detectors.smart_turn import SmartTurnModel

                model = SmartTurnModel(activations=kind.removeprefix("audio-"))
            else:
                from turnkit.text.semantic_model import SemanticTextModel

                model = SemanticTextModel.load(kind.removeprefix("text-"))
            self._models[kind] = model
        return model

    def _load_llm(self) -> Any:
        from turnkit.llm.eou import LLMEndOfTurn

        return LLMEndOfTurn(base_url=self.params.base_url, timeout_ms=self.params.llm_timeout_ms)

    # -- the wait ---------------------------------------------------------------
    def profile_name(self, agent_text: str | None = None, text: str = "") -> str:
        if self.params.profile != "auto":
            return self.params.profile
        return choose_profile(self.agent_text if agent_text is None else agent_text, text)

    def profile(self) -> WaitPolicy:
        return self.wait_policy(self.agent_text, self.text)

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        prm = self.params
        base = PROFILES[self.profile_name(agent_text, text)]
        lo = prm.min_wait_ms if prm.min_wait_ms is not None else base.min_wait_ms
        hi = prm.max_wait_ms if prm.max_wait_ms is not None else base.max_wait_ms
        s = prm.scale
        return base.model_copy(
            update={
                "min_wait_ms": lo * s,
                "max_wait_ms": max(lo, hi) * s,
                "digit_run_ms": None if base.digit_run_ms is None else base.digit_run_ms * s,
                "open_frame_ms": None if base.open_frame_ms is None else base.open_frame_ms * s,
                "hold_ms": base.hold_ms * s,
                "eager": prm.eager,
                "confidence": prm.confidence if prm.confidence is not None else base.confidence,
                "early_eager": prm.early_eager == "on",
            }
        )
