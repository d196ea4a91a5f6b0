"""Smart Turn v3: the caller's *voice* says whether the turn is over.

:class:`SmartTurnDetector` (``smart-turn``) decides at each pause in the
caller's speech whether the caller is done, on the evidence of the audio of
the turn so far — the melody, rhythm and final-syllable lengthening of the
last words — as judged by Pipecat's Smart Turn v3.x model (a Whisper-tiny
encoder classifier, BSD-2, about 8.7 MB of ONNX), plus the VAD's silence
timing. It does not read transcripts.

The model file ships inside the ``pipecat-ai`` wheel
(``pipecat/audio/turn/smart_turn/data/``). :class:`SmartTurnModel` finds it
from the installed package's location without importing pipecat (importing
it would pull in the whole framework), and runs it with onnxruntime on one
CPU thread; the features are computed by :mod:`turnkit.audio.mel`.

Example::

    det = create_detector("smart-turn:threshold=0.5,max_wait_ms=2000", clock)
    # fed by a TurnDetectorProcessor behind the VAD; or directly:
    signals = await det.on_audio(frame, vad_step)
"""

from __future__ import annotations

import importlib.util
import logging
import re
import time
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import onnxruntime as ort
from pydantic import Field, model_validator

from turnkit.audio.mel import WINDOW_S, smart_turn_features
from turnkit.audio.turn_audio import TurnAudio, _Ring  # noqa: F401 - re-exported
from turnkit.clock import Clock
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.endpointing import CEILING_MS, Evidence, Score, WaitPolicy
from turnkit.detectors.registry import DetectorSpecError, register

__all__ = [
    "MODEL_DIR",
    "SmartTurnDetector",
    "SmartTurnModel",
    "SmartTurnParams",
    "SmartTurnScorer",
    "SmartTurnUnavailable",
    "TurnAudio",
    "find_smart_turn_model",
]

log = logging.getLogger(__name__)

# Inside the pipecat-ai wheel.
MODEL_DIR = ("audio", "turn", "smart_turn", "data")
PREFERRED_MODEL = "smart-turn-v3.2-cpu.onnx"
INSTALL_HINT = (
    "smart-turn needs the Smart Turn model from the pipecat-ai wheel: "
    "pip install 'turnkit[smart-turn]'"
)
# How the model's activations are computed. "int8": as the file ships (and
# as Pipecat runs it): every activation, the input features included, is
# rounded to an 8-bit grid with fixed scales. Measured (2026-12-02), that
# rounding makes the output jump with inaudible input changes: the same
# turn end at 0.99 / 0.9 / 0.5 x its level reads P 0.88 / 0.50 / 0.74
# (the features differ by < 1e-5), and on the demo corpus a -0.2 dB change
# moves the logit by more than 0.5 at 17 % of turn ends. "float": the
# activation rounding removed (quantize/dequantize pairs taken out at load;
# the int8 weights kept, dequantized): p90 of that logit change 0.04, ROC
# AUC of turn ends vs holds on the natural calls 0.83 -> 0.91 (0.15/0.25 s
# into the pause; 0.675 -> 0.719 at the endpointing's first look), ~1.3x
# the cost (FIXED_COST_FLOAT_MS). Needs the onnx package (the smart-turn extra).
Activations = Literal["int8", "float"]
_MODEL_NAME = re.compile(r"^smart-turn-v3(?:\.(\d+))?(?:-(\w+))?\.onnx$")


class SmartTurnUnavailable(DetectorSpecError):
    """The Smart Turn model cannot be found (pipecat-ai is not installed, or
    its wheel has no v3.x model). The message names the extra to install."""


def find_smart_turn_model(package: str = "pipecat") -> Path:
    """Path of the Smart Turn v3.x ONNX inside the installed ``package``.

    Prefers ``smart-turn-v3.2-cpu.onnx``; otherwise the newest ``v3.x`` file
    there (a ``-cpu`` build before others of the same version). Only the
    package's location is looked up (``importlib.util.find_spec`` on a
    top-level name runs none of its code), so pipecat is never imported.
    Raises :class:`SmartTurnUnavailable` when there is none.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    if not roots:
        raise SmartTurnUnavailable(INSTALL_HINT)
    for root in roots:
        folder = Path(root).joinpath(*MODEL_DIR)
        if (folder / PREFERRED_MODEL).is_file():
            return folder / PREFERRED_MODEL
        found: list[tuple[int, int, str, Path]] = []
        for p in folder.glob("smart-turn-v3*.onnx") if folder.is_dir() else []:
            m = _MODEL_NAME.match(p.name)
            if m is not None and p.is_file():
                minor = int(m.group(1) or 0)
                found.append((minor, int(m.group(2) == "cpu"), p.name, p))
        if found:
            return max(found)[3]
    raise SmartTurnUnavailable(f"{INSTALL_HINT} (no smart-turn-v3*.onnx under {package})")


def float_activations(path: Path) -> bytes:
    """The ONNX graph at ``path`` with every activation quantize/dequantize
    pair removed (weights stay as stored, dequantized), serialised: the same
    network computing its activations in float32 (see ``Activations``)."""
    try:
        import onnx
    except ImportError:
        raise SmartTurnUnavailable(
            "smart-turn activations=float needs the onnx package: pip install 'turnkit[smart-turn]'"
        ) from None
    m = onnx.load(str(path))
    g = m.graph
    weights = {i.name for i in g.initializer}
    quantized = {
        n.output[0]: n.input[0]
        for n in g.node
        if n.op_type == "QuantizeLinear" and n.input[0] not in weights
    }
    rename: dict[str, str] = {}
    keep = []
    for n in g.node:
        if n.op_type == "QuantizeLinear" and n.input[0] not in weights:
            continue
        if n.op_type == "DequantizeLinear" and n.input[0] in quantized:
            rename[n.output[0]] = quantized[n.input[0]]
            continue
        keep.append(n)
    if any(o.name in rename for o in g.output):
        raise SmartTurnUnavailable(f"{path}: a graph output is a dequantized activation")
    for n in keep:
        for i, name in enumerate(n.input):
            if name in rename:
                n.input[i] = rename[name]
    del g.node[:]
    g.node.extend(keep)
    return m.SerializeToString()


class SmartTurnModel:
    """Probability that a turn is complete, from its last (up to) 8 s of audio.

    One onnxruntime session per model file (and ``activations``) per
    process, on one intra-op thread: a call costs tens of milliseconds on
    one core, and replay already runs one process per core.

    Example::

        model = SmartTurnModel()
        p = model.predict(audio_16k)      # float in [0, 1]
        steady = SmartTurnModel(activations="float")
    """

    _sessions: ClassVar[dict[tuple[Path, str], ort.InferenceSession]] = {}

    def __init__(
        self,
        model_path: Path | None = None,
        package: str = "pipecat",
        activations: Activations = "int8",
    ) -> None:
        self.path = Path(model_path) if model_path is not None else find_smart_turn_model(package)
        if activations not in ("int8", "float"):
            raise ValueError(f"activations: 'int8' or 'float', not {activations!r}")
        self.activations = activations
        key = (self.path, activations)
        session = self._sessions.get(key)
        if session is None:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            graph = str(self.path) if activations == "int8" else float_activations(self.path)
            session = ort.InferenceSession(
                graph, sess_options=opts, providers=["CPUExecutionProvider"]
            )
            self._sessions[key] = session
            log.debug("loaded Smart Turn model %s", self.path)
        self._session = session
        self._input = session.get_inputs()[0].name

    def predict(self, audio_16k: np.ndarray) -> float:
        """P(turn complete) for mono float32 16 kHz audio ending now. Only the
        last 8 s count; shorter audio is zero-padded at the start."""
        feats = smart_turn_features(audio_16k)[np.newaxis]
        out = self._session.run(None, {self._input: feats})[0]
        # The exported graph ends in a sigmoid already.
        return float(np.clip(np.asarray(out).reshape(-1)[0], 0.0, 1.0))


class SmartTurnParams(DetectorParams):
    """Options of ``smart-turn``: the P(complete) from the last ``window_s``
    of caller audio at or above which the model's "done" is taken, the eager
    signal's P, and the waits for a complete (``min_wait_ms``) or incomplete
    (``max_wait_ms``) verdict."""

    threshold: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="P(complete) at or above which the model's 'done' is taken",
        json_schema_extra={"sweep": [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]},
    )
    eager_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="P(complete) for an eager signal (a draft may start); default threshold - 0.2",
    )
    min_wait_ms: float = Field(
        200.0, ge=0, le=60_000, description="silence before ending when the model says complete"
    )
    max_wait_ms: float = Field(
        CEILING_MS,
        ge=0,
        le=60_000,
        description="silence before ending when the model says incomplete: the ceiling",
    )
    window_s: float = Field(
        float(WINDOW_S), gt=0, le=WINDOW_S, description="seconds of audio the model hears (<= 8)"
    )
    pre_speech_ms: float = Field(
        500.0,
        ge=0,
        le=60_000,
        description="audio kept before the turn's first speech (the rest of the window is zeros)",
    )
    activations: Activations = Field(
        "int8",
        description="int8: the model as shipped (and as Pipecat runs it); float: activation "
        "rounding removed, a steadier P at ~1.3x the cost (see SmartTurnModel)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SmartTurnParams:
        if self.min_wait_ms > self.max_wait_ms:
            raise ValueError("min_wait_ms must not exceed max_wait_ms")
        if self.eager_threshold is not None and self.eager_threshold > self.threshold:
            raise ValueError("eager_threshold must not exceed threshold")
        return self

    @property
    def eager(self) -> float:
        if self.eager_threshold is not None:
            return self.eager_threshold
        return max(0.0, self.threshold - 0.2)


# Smart Turn v3.2's cost per inference on one core, p50 over 8 s windows of
# the corpus (benchmarks/bench_smart_turn.py, 2026-12-01, idle machine: 53.5 ms
# wall, 55.2 ms CPU time). What `--compute fixed` charges per inference.
FIXED_COST_MS = 55.0
# The same with activations="float": bench_smart_turn.py --activations float
# and int8 in one session (2026-12-02) took 38.2 and 29.5 ms CPU time p50
# (1.3x; that machine ran faster than the one int8's 55 ms was recorded on),
# so 1.3 x 55 ms.
FIXED_COST_FLOAT_MS = 71.0
FIXED_COST: dict[str, float] = {"int8": FIXED_COST_MS, "float": FIXED_COST_FLOAT_MS}


def fixed_cost_ms(model: object) -> float:
    """What ``--compute fixed`` charges for one inference by ``model``: its
    activations' recorded cost (int8's for a model that does not say)."""
    return FIXED_COST[getattr(model, "activations", "int8")]


class SmartTurnScorer:
    """P(complete) from Smart Turn v3 on the turn's audio: the melody,
    rhythm and final lengthening of the last words. Hears audio only."""

    hears_audio = True
    reads_text = False
    no_evidence = "no audio"

    def __init__(
        self, model: SmartTurnModel, window_s: float = WINDOW_S, pre_speech_ms: float = 500.0
    ) -> None:
        self.model = model
        self.window_s = window_s
        self.pre_speech_ms = pre_speech_ms
        self._cache: tuple[int, Score] | None = None  # (pause, score)

    async def score(self, ev: Evidence) -> Score:
        if ev.audio is None:
            return Score(None)
        if self._cache is not None and self._cache[0] == ev.pause:
            p = self._cache[1].p
            return Score(p, parts={"p_audio": p} if p is not None else {})
        t0 = time.perf_counter()
        p = self.model.predict(ev.audio())
        ms = (time.perf_counter() - t0) * 1000
        score = Score(p, compute_ms=ms, fixed_ms=fixed_cost_ms(self.model), parts={"p_audio": p})
        self._cache = (ev.pause, score)
        return score


@register
class SmartTurnDetector(EndOfTurnDetector):
    """End of turn from Smart Turn v3's reading of the caller's voice, gated
    by VAD silence.

    Evidence: the caller's audio and the VAD. The model runs **once per
    pause**, on the first frame after the VAD's stop window, on the audio of
    the current turn — from ``pre_speech_ms`` before the turn's first speech
    (at most the last ``window_s``) up to now. ``p >= threshold``: the turn
    ends once the silence reaches ``min_wait_ms``; otherwise at
    ``max_wait_ms`` (the ceiling). An eager signal goes out right after
    inference when ``p >= eager_threshold`` and the turn did not end at once.
    All waiting is :class:`~turnkit.detectors.endpointing.Endpointing`'s.

    Audio must be 16 kHz mono (the rate of the VAD and of the model).

    Example::

        det = create_detector("smart-turn:threshold=0.5,max_wait_ms=2000", clock)
        out = await det.on_audio(frame, vad_step)   # [TurnEndFrame(...)] at a pause
    """

    name = "smart-turn"
    Params = SmartTurnParams
    params: SmartTurnParams

    def __init__(
        self,
        clock: Clock,
        params: DetectorParams | None = None,
        spec: str = "",
        model: SmartTurnModel | None = None,
    ) -> None:
        self._given_model = model
        super().__init__(clock, params, spec)

    def make_scorer(self) -> SmartTurnScorer:
        given = self._given_model
        self.model = given if given is not None else SmartTurnModel(activations=self.params.activations)
        return SmartTurnScorer(self.model, self.params.window_s, self.params.pre_speech_ms)

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        prm = self.params
        return WaitPolicy(
            threshold=prm.threshold,
            eager=prm.eager,
            min_wait_ms=prm.min_wait_ms,
            max_wait_ms=prm.max_wait_ms,
        )
