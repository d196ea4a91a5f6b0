"""Voice activity: Silero VAD (ONNX) and the hysteresis that turns its
per-frame probabilities into speech start/stop edges.

:class:`SileroVAD` runs the vendored Silero v6 model (MIT) with onnxruntime,
512 samples (32 ms) at a time at 16 kHz, carrying the LSTM state and the
64-sample context between calls exactly as the reference wrapper does. By
default it loads ``silero_vad_16k.onnx``: the same graph with its run-time
branches (sample rate, batch and state shapes) resolved for the one shape
turnkit feeds (``scripts/silero_16k.py``): the same kernels on the same
data, bit-identical probabilities, ~20 % less time per frame.

:class:`VADAnalyzer` decides *is the caller speaking now* from those
probabilities: speech starts after ``start_ms`` of frames at or above
``threshold``, and stops after ``stop_ms`` of frames below ``neg_threshold``
(Silero's own hysteresis, ``threshold - 0.15``). Edge times are the onset of
the first speech frame and the end of the last one, not the moment the VAD
became sure, so downstream silence timers count real silence.

Example::

    vad = VADAnalyzer(SileroVAD())
    for start, chunk in iter_frames(audio, vad.frame_samples):
        state = vad.analyze(chunk, at=start / 16000)
        if state.started: ...
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnxruntime as ort

__all__ = [
    "SILERO_16K_MODEL_PATH",
    "SILERO_MODEL_PATH",
    "SileroVAD",
    "VADAnalyzer",
    "VADParams",
    "VADStep",
]

SILERO_MODEL_PATH = Path(str(resources.files("turnkit.models").joinpath("silero_vad.onnx")))
# The same model without run-time branches, for 16 kHz, batch 1 (the only
# shape SileroVAD feeds): what SileroVAD loads by default.
SILERO_16K_MODEL_PATH = Path(str(resources.files("turnkit.models").joinpath("silero_vad_16k.onnx")))


def _session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    # One call is tiny; threads only add hand-off cost, and replay already
    # runs one process per core.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


class SileroVAD:
    """Speech probability per 32 ms frame of 16 kHz audio (stateful)."""

    sample_rate = 16000
    frame_samples = 512
    context_samples = 64

    _shared_sessions: ClassVar[dict[Path, ort.InferenceSession]] = {}

    def __init__(self, model_path: Path = SILERO_16K_MODEL_PATH) -> None:
        # The session is stateless (state is passed in), so one per process
        # serves every call.
        session = self._shared_sessions.get(model_path)
        if session is None:
            session = self._shared_sessions[model_path] = _session(model_path)
        self._session = session
        self._sr = np.array(self.sample_rate, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._input = np.zeros((1, self.context_samples + self.frame_samples), dtype=np.float32)

    def __call__(self, frame: np.ndarray) -> float:
        if frame.shape[-1] != self.frame_samples:
            raise ValueError(f"SileroVAD takes {self.frame_samples} samples, got {frame.shape[-1]}")
        x = self._input
        x[0, self.context_samples :] = frame
        out, self._state = self._session.run(
            None, {"input": x, "state": self._state, "sr": self._sr}
        )
        # Next call's context is the tail of this frame.
        x[0, : self.context_samples] = frame[-self.context_samples :]
        return float(out[0, 0])


@dataclass(frozen=True, slots=True)
class VADParams:
    threshold: float = 0.5
    neg_threshold: float | None = None  # default threshold - 0.15, as Silero
    start_ms: float = 64.0
    stop_ms: float = 96.0

    @property
    def neg(self) -> float:
        return (
            self.neg_threshold
            if self.neg_threshold is not None
            else max(0.01, self.threshold - 0.15)
        )


@dataclass(slots=True)
class VADStep:
    """The VAD's verdict for one frame."""

    prob: float
    speaking: bool
    started: bool = False  # an edge confirmed at this frame
    stopped: bool = False
    speech_start: float = 0.0  # onset of the current/last speech stretch
    speech_end: float = 0.0  # end of the last speech frame seen


class VADAnalyzer:
    """Hysteresis over Silero probabilities: speaking / not speaking, edges."""

    def __init__(self, model: SileroVAD | None = None, params: VADParams | None = None) -> None:
        self.model = model if model is not None else SileroVAD()
        self.params = params or VADParams()
        self.frame_samples = self.model.frame_samples
        self.frame_s = self.model.frame_samples / self.model.sample_rate
        self.reset()

    def reset(self) -> None:
        self.model.reset()
        self.speaking = False
        self._run_start: float | None = None  # first frame of a candidate onset
        self._run_frames = 0
        self._quiet_frames = 0
        self.speech_start = 0.0
        self.speech_end = 0.0

    def analyze(self, frame: np.ndarray, at: float) -> VADStep:
        return self.step(self.model(frame), at)

    def step(self, prob: float, at: float) -> VADStep:
        """Advance by one frame starting at ``at`` with probability ``prob``."""
        p = self.params
        end = at + self.frame_s
        started = stopped = False
        if not self.speaking:
            if prob >= p.threshold:
                if self._run_start is None:
                    self._run_start = at
                    self._run_frames = 0
                self._run_frames += 1
                if self._run_frames * self.frame_s * 1000 >= p.start_ms - 1e-6:
                    # A blip shorter than start_ms is not speech: it must not
                    # restart silence timers, so speech_end moves only here.
                    self.speaking = True
                    started = True
                    self.speech_end = end
                    self.speech_start = self._run_start
                    self._quiet_frames = 0
            else:
                self._run_start = None
                self._run_frames = 0
        elif prob >= p.neg:
            self._quiet_frames = 0
            if prob >= p.threshold:
                self.speech_end = end
        else:
            self._quiet_frames += 1
            if self._quiet_frames * self.frame_s * 1000 >= p.stop_ms - 1e-6:
                self.speaking = False
                stopped = True
                self._run_start = None
                self._run_frames = 0
        return VADStep(
            prob=prob,
            speaking=self.speaking,
            started=started,
            stopped=stopped,
            speech_start=self.speech_start,
            speech_end=self.speech_end,
        )
