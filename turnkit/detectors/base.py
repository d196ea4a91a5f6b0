"""What every end-of-turn detector is: a framework-free policy object.

A detector hears the caller side of a call — each audio frame with the VAD's
verdict, and transcripts as they arrive — and decides when the caller's turn
is over. It emits :class:`~turnkit.frames.TurnEndFrame` (commit: reply now),
optionally :class:`~turnkit.frames.TurnEagerFrame` (probably done: a draft
may start), and :class:`~turnkit.frames.TurnResumedFrame` when the caller
speaks again after either. Time comes only from the injected clock.

Hosts (the replay harness, the Pipecat and LiveKit plugins) call the same
async methods; none of them knows which detector it runs. They are async so
that a detector may wait on an engine (``llm-eou``); a model that runs
locally reports its wall-clock cost in ``compute_ms``, which the replay adds
to the decision time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from turnkit.audio.vad import VADStep
from turnkit.clock import Clock
from turnkit.detectors.endpointing import ComputeMode, Endpointing, Scorer, WaitPolicy
from turnkit.frames import (
    AudioInFrame,
    SystemFrame,
    TranscriptFrame,
    TurnEagerFrame,
    TurnEndFrame,
    TurnResumedFrame,
)
from turnkit.net import TargetRefused, check_target
from turnkit.text.recogniser import RecogniserKind

if TYPE_CHECKING:
    from turnkit.drafting.drafter import EagerDrafter

__all__ = ["DetectorParams", "EndOfTurnDetector", "TurnSignal", "check_spec_target"]

TurnSignal = TurnEndFrame | TurnEagerFrame | TurnResumedFrame


class DetectorParams(BaseModel):
    """Base for a detector's parameters (parsed from its spec string)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_spec_target(base_url: str, allow_remote: bool) -> None:
    """Where a detector connects follows the same policy as every command
    (:func:`turnkit.net.check_target`); refused, it is a spec error that
    names the spec's own option."""
    try:
        check_target(base_url, allow_remote, what="base_url")
    except TargetRefused as exc:
        raise PydanticCustomError(
            "target", str(exc).replace("pass --allow-remote", "set allow_remote=true")
        ) from None


class EndOfTurnDetector:
    """Base class: a :class:`~turnkit.detectors.endpointing.Scorer` (what the
    detector judges) run by one :class:`~turnkit.detectors.endpointing.Endpointing`
    (when a pause ends the turn). Subclasses set ``name`` and ``Params`` and
    override :meth:`make_scorer` and :meth:`wait_policy`; hosts call
    :meth:`on_audio` / :meth:`on_transcript` and never know which detector
    they run.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[DetectorParams]] = DetectorParams

    def __init__(self, clock: Clock, params: DetectorParams | None = None, spec: str = "") -> None:
        self.clock = clock
        self.params = params if params is not None else self.Params()
        self.spec = spec or self.name
        self.scorer = self.make_scorer()
        self.endpointing = Endpointing(clock, self.scorer, self.wait_policy, spec=self.spec)

    # -- what a detector is ----------------------------------------------------
    def make_scorer(self) -> Scorer | None:
        """The evidence this detector judges (None: silence alone)."""
        return None

    def wait_policy(self, agent_text: str, text: str = "") -> WaitPolicy:
        """How long a pause must last, given the agent's last message and the
        turn's words so far."""
        raise NotImplementedError

    # -- state -------------------------------------------------------------------
    def reset(self) -> None:
        self.endpointing.reset()

    def set_agent_text(self, text: str) -> None:
        """The agent's last message: context for text-based detectors."""
        self.endpointing.set_agent_text(text)

    def agent_started(self) -> None:
        """The agent began a reply (its text, :meth:`set_agent_text`, may come
        once it has played)."""
        self.endpointing.agent_started()

    def set_recogniser(self, kind: RecogniserKind, final_p99_ms: float | None = None) -> None:
        """The host's recogniser, where it knows, and how late its words may
        come (see :meth:`~turnkit.detectors.endpointing.Endpointing.set_recogniser`)."""
        self.endpointing.set_recogniser(kind, final_p99_ms)

    def attach_drafter(self, drafter: EagerDrafter | None) -> None:
        """The host's drafter (None: it drafts nothing): with its
        ``first_token_ms`` set, a pause with a draft out commits no sooner
        than the draft's first token, and a commit due within that time
        sends an eager signal first (see :mod:`turnkit.drafting.drafter`)."""
        self.endpointing.drafts = drafter

    def set_compute(self, mode: ComputeMode) -> None:
        """How model cost delays a decision: measured, fixed (the recorded
        benchmark figure: reproducible) or none."""
        self.endpointing.compute = mode  # scorers read it as Evidence.timed

    def set_source_rate(self, sample_rate: int) -> None:
        """The caller audio's rate before it was resampled to 16 kHz: 8 kHz
        is a telephone line, whose narrow band some evidence reads worse."""
        hook = getattr(self.scorer, "set_source_rate", None)
        if hook is not None:
            hook(sample_rate)

    @property
    def agent_text(self) -> str:
        return self.endpointing.agent_text

    @property
    def text(self) -> str:
        """The current turn's words (none once the turn has ended)."""
        return self.endpointing.turn_text()

    @property
    def turn_open(self) -> bool:
        return self.endpointing.turn_open

    @property
    def signalled(self) -> bool:
        return self.endpointing.signalled

    @property
    def fallbacks(self) -> int:
        """Commits decided by the fallback wait because the scorer failed."""
        return self.endpointing.fallbacks

    # -- evidence ----------------------------------------------------------------
    async def on_audio(self, frame: AudioInFrame, vad: VADStep) -> list[SystemFrame]:
        """One caller audio frame with the VAD's verdict; ``clock.now()`` is
        the end of the frame."""
        return await self.endpointing.on_audio(frame, vad)

    async def on_transcript(self, frame: TranscriptFrame) -> list[SystemFrame]:
        return await self.endpointing.on_transcript(frame)
