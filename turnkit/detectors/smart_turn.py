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
from typing import ClassVar

import numpy as np
import onnxruntime as ort
from pydantic import Field, model_validator

from turnkit.audio.mel import SAMPLE_RATE, WINDOW_S, smart_turn_features
from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.registry import DetectorSpecError, register
from turnkit.frames import AudioInFrame, SystemFrame, TurnEagerFrame

__all__ = [
    "MODEL_DIR",
    "SmartTurnDetector",
    "SmartTurnModel",
    "SmartTurnParams",
    "SmartTurnUnavailable",
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


class SmartTurnModel:
    """Probability that a turn is complete, from its last (up to) 8 s of audio.

    One onnxruntime session per model file per process, on one intra-op
    thread: a call costs tens of milliseconds on one core, and replay already
    runs one process per core.

    Example::

        model = SmartTurnModel()
        p = model.predict(audio_16k)      # float in [0, 1]
    """

    _sessions: ClassVar[dict[Path, ort.InferenceSession]] = {}

    def __init__(self, model_path: Path | None = None, package: str = "pipecat") -> None:
        self.path = Path(model_path) if model_path is not None else find_smart_turn_model(package)
        session = self._sessions.get(self.path)
        if session is None:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            session = ort.InferenceSession(
                str(self.path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            self._sessions[self.path] = session
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
        1500.0, ge=0, le=60_000, description="silence before ending when the model says incomplete"
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


class _Ring:
    """The last ``size`` samples of a stream, in a fixed buffer."""

    def __init__(self, size: int) -> None:
        self.buf = np.zeros(size, dtype=np.float32)
        self.pos = 0  # next write index
        self.filled = 0

    def clear(self) -> None:
        self.pos = 0
        self.filled = 0

    def push(self, x: np.ndarray) -> None:
        n = self.buf.size
        if x.size >= n:
            self.buf[:] = x[-n:]
            self.pos, self.filled = 0, n
            return
        end = self.pos + x.size
        if end <= n:
            self.buf[self.pos : end] = x
        else:
            k = n - self.pos
            self.buf[self.pos :] = x[:k]
            self.buf[: x.size - k] = x[k:]
        self.pos = end % n
        self.filled = min(n, self.filled + x.size)

    def last(self, count: int) -> np.ndarray:
        """A copy of the newest ``count`` samples (fewer if not yet heard)."""
        count = max(0, min(count, self.filled))
        start = self.pos - count
        if start >= 0:
            return self.buf[start : self.pos].copy()
        return np.concatenate((self.buf[start:], self.buf[: self.pos]))


class TurnAudio:
    """The caller audio of the current turn, for audio models: the last
    ``window_s`` of the stream, cut to start ``pre_speech_ms`` before the
    turn's first speech (older audio is the agent's echo or the previous
    turn, which drags the model's judgement)."""

    def __init__(self, window_s: float = WINDOW_S, pre_speech_ms: float = 500.0) -> None:
        self.ring = _Ring(round(window_s * SAMPLE_RATE))
        self.pre_speech_ms = pre_speech_ms
        self.turn_start: float | None = None

    def clear(self) -> None:
        self.ring.clear()
        self.turn_start = None

    def push(self, frame: AudioInFrame, vad: VADStep, opening: bool) -> None:
        if frame.sample_rate != SAMPLE_RATE:
            raise ValueError(f"audio models take {SAMPLE_RATE} Hz audio, got {frame.sample_rate}")
        self.ring.push(np.asarray(frame.audio, dtype=np.float32).reshape(-1))
        if opening:
            self.turn_start = vad.speech_start

    def turn_audio(self, now: float) -> np.ndarray:
        start = self.turn_start if self.turn_start is not None else 0.0
        seconds = now - start + self.pre_speech_ms / 1000
        return self.ring.last(round(seconds * SAMPLE_RATE))


@register
class SmartTurnDetector(EndOfTurnDetector):
    """End of turn from Smart Turn v3's reading of the caller's voice, gated
    by VAD silence.

    Evidence: the caller's audio and the VAD. The model runs **once per
    pause**, when the VAD reports the end of a speech stretch (its 96 ms stop
    window), on the audio of the current turn — from ``pre_speech_ms`` before
    the turn's first speech (at most the last ``window_s``) up to now:

    * ``p >= threshold`` — the caller sounds done: the turn ends once the
      silence since the last speech reaches ``min_wait_ms`` (at once, by
      default: the VAD's stop window has already passed);
    * otherwise the caller sounds mid-thought: the turn ends only if the
      silence reaches ``max_wait_ms`` (a fallback for a model that misses an
      end, not a decision of the model).

    Speech before the decision cancels the pause; the next pause is judged
    afresh. When ``p >= eager_threshold`` but the turn does not end at once,
    a :class:`~turnkit.frames.TurnEagerFrame` goes out right after inference
    (one per pause) so a draft reply can start. The inference's wall-clock
    cost is measured; the part of it that delays a decision (all of it when
    the turn ends right after inference, none when a timer fires long after)
    is the ``compute_ms`` of the :class:`~turnkit.frames.TurnEndFrame`.

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
        super().__init__(clock, params, spec)
        self.model = model if model is not None else SmartTurnModel()
        self._audio = TurnAudio(self.params.window_s, self.params.pre_speech_ms)
        self._pause_reset()

    def reset(self) -> None:
        super().reset()
        if hasattr(self, "_audio"):
            self._audio.clear()
        self._pause_reset()

    def _pause_reset(self) -> None:
        self._p: float | None = None  # the model's verdict on the current pause
        self._infer_at = 0.0  # clock time the inference started
        self._infer_ms = 0.0  # its wall-clock cost

    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        opening = vad.speaking and not self.turn_open
        out = await super().on_audio(frame, vad)
        self._audio.push(frame, vad, opening)
        if vad.speaking:
            self._pause_reset()  # speech again: any pending pause is void
            return out
        if not self.turn_open:
            return out
        now = self.clock.now()
        if self._p is None:
            # First silent frame of a pause: the VAD just confirmed the stop.
            self._infer_at = now
            t0 = time.perf_counter()
            self._p = self.model.predict(self._audio.turn_audio(now))
            self._infer_ms = (time.perf_counter() - t0) * 1000
            committed = self._decide(now, vad, out)
            if not committed and self._p >= self.params.eager:
                out.append(
                    TurnEagerFrame(
                        at=now, detector=self.spec, probability=self._p, compute_ms=self._infer_ms
                    )
                )
                self.signalled = True  # speech after this yields TurnResumedFrame
            return out
        self._decide(now, vad, out)
        return out

    def _decide(self, now: float, vad: VADStep, out: list[SystemFrame]) -> bool:
        assert self._p is not None
        p = self._p
        complete = p >= self.params.threshold
        wait_ms = self.params.min_wait_ms if complete else self.params.max_wait_ms
        silent_ms = (now - vad.speech_end) * 1000
        if silent_ms < wait_ms - 1e-6:
            return False
        # Only the part of the model's cost still running at this moment
        # delays the decision (none when a timer fires long after inference).
        pending_ms = self._still_running_ms(self._infer_ms, self._infer_at)
        verdict = "complete" if complete else "incomplete"
        out.append(
            self._end(
                probability=p,
                compute_ms=pending_ms,
                reason=(
                    f"p={p:.2f} {verdict} after {silent_ms:.0f} ms silence "
                    f"(model {self._infer_ms:.0f} ms)"
                ),
            )
        )
        self._audio.turn_start = None
        self._pause_reset()
        return True
