"""Per-turn stage metrics from a running Pipecat pipeline.

:class:`TurnMetricsObserver` watches the frames a pipeline pushes and, for
each caller turn, measures turnkit's stages on the pipeline clock:

* ``eot_delay_ms`` — end of the caller's speech to the turn end
  (``UserStoppedSpeakingFrame``): with ``engine``, the turnkit VAD's last
  speech end on the engine's audio clock (exact at frame resolution);
  else Pipecat's VAD stop minus its ``stop_secs``;
* ``llm_ttft_ms`` — the LLM's time to its first token for the reply: the
  LLM service's TTFB metric (with ``PipelineParams(enable_metrics=True)``),
  of the last completion that reported one before the reply's first text
  — a kept speculation's included, whose request ran before the turn
  ended; without metrics, the response start to its first text as the
  pipeline sees them, except where both came in the same instant: a kept
  speculation's frames are held by Pipecat's speculation gate and released
  together, so that reading would be ~0, not the engine's time; those
  turns read None (and a warning says to enable metrics, once);
* ``tts_ttfb_ms`` — the first text sent to TTS to its first audio;
* ``response_ms`` — end of speech to ``BotStartedSpeakingFrame``.

Example::

    metrics = TurnMetricsObserver(on_turn=lambda m: print(m), engine=engine)
    task = PipelineTask(pipeline, observers=[metrics])
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed

from turnkit_pipecat.engine import TurnkitTurnEngine
from turnkit_pipecat.first_token import llm_first_tokens_ms

__all__ = ["TurnMetrics", "TurnMetricsObserver"]

log = logging.getLogger(__name__)

# No engine answers within a millisecond: a first text that close to its
# response start was held and released with it, not generated then.
RELEASED_TOGETHER_S = 0.001


@dataclass(slots=True)
class TurnMetrics:
    turn: int
    eot_delay_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    response_ms: float | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


class TurnMetricsObserver(BaseObserver):
    """Measures each turn's stages (see the module docstring); a turn's
    record is complete when the bot starts speaking for it."""

    def __init__(
        self,
        on_turn: Callable[[TurnMetrics], None] | None = None,
        *,
        engine: TurnkitTurnEngine | None = None,
    ) -> None:
        super().__init__()
        self.on_turn = on_turn
        self.engine = engine
        self._decisions = 0
        self.eot_delays_ms: list[float] = []  # every turn end's, answered or not
        self.turns: list[TurnMetrics] = []
        self._seen: deque[int] = deque(maxlen=512)
        self._seen_set: set[int] = set()
        self._speech_end: float | None = None
        self._stopped: float | None = None
        self._llm_start: float | None = None
        self._llm_ttfb_ms: float | None = None  # the LLM service's last TTFB metric
        self._tts_text: float | None = None
        self._current: TurnMetrics | None = None
        self._warned = False  # the missing-metrics warning, once

    def _first(self, frame: object) -> bool:
        # Observers see every hop of a frame, and a broadcast frame comes as
        # two siblings (one each way): measure the first push of the first.
        ids = [getattr(frame, "id", 0), getattr(frame, "broadcast_sibling_id", None)]
        if any(i in self._seen_set for i in ids if i is not None):
            return False
        if len(self._seen) == self._seen.maxlen:
            self._seen_set.discard(self._seen[0])
        self._seen.append(ids[0])
        self._seen_set.add(ids[0])
        return True

    async def on_push_frame(self, data: FramePushed) -> None:
        frame = data.frame
        if not self._first(frame):
            return
        t = data.timestamp / 1e9
        if isinstance(frame, MetricsFrame):
            for ms in llm_first_tokens_ms(data):
                self._llm_ttfb_ms = ms
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._speech_end = self._stopped = None
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._speech_end = t - frame.stop_secs
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._stopped = t
            end = self._speech_end if self._speech_end is not None else t
            eng = self.engine
            k = self._decisions
            if eng is not None and len(eng.decisions) > k:
                # The audio clock knows how long after the caller's speech
                # end the detector decided (independent of queueing delays);
                # Pipecat's turn ends follow the engine's decisions in order.
                self._decisions = k + 1
                end = t - max(0.0, eng.decisions[k].at - eng.speech_ends[k])
            self._current = TurnMetrics(turn=len(self.turns), eot_delay_ms=(t - end) * 1000)
            self.eot_delays_ms.append((t - end) * 1000)
            self._speech_end = end
            self._llm_start = self._tts_text = None
        elif self._current is None:
            return
        elif isinstance(frame, LLMFullResponseStartFrame):
            self._llm_start = t
        elif isinstance(frame, LLMTextFrame) and self._current.llm_ttft_ms is None:
            if self._llm_ttfb_ms is not None:
                # The completion answering the turn reported its TTFB before
                # its first text (a speculation's before the turn ended).
                self._current.llm_ttft_ms = self._llm_ttfb_ms
            elif self._llm_start is not None:
                if t - self._llm_start > RELEASED_TOGETHER_S:
                    self._current.llm_ttft_ms = (t - self._llm_start) * 1000
                elif not self._warned:
                    self._warned = True
                    log.warning(
                        "turnkit turn metrics: an LLM response's first text came with its "
                        "start (a kept speculation, released by the speculation gate): its "
                        "TTFT is unknown without PipelineParams(enable_metrics=True)"
                    )
        elif isinstance(frame, TTSTextFrame) and self._tts_text is None:
            self._tts_text = t
        elif isinstance(frame, TTSAudioRawFrame) and self._current.tts_ttfb_ms is None:
            if self._tts_text is not None:
                self._current.tts_ttfb_ms = (t - self._tts_text) * 1000
        elif isinstance(frame, BotStartedSpeakingFrame):
            m, self._current = self._current, None
            if self._speech_end is not None:
                m.response_ms = (t - self._speech_end) * 1000
            self.turns.append(m)
            log.info("turnkit turn metrics: %s", m.as_dict())
            if self.on_turn is not None:
                self.on_turn(m)
