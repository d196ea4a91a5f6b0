"""The recording format ``turnkit.recording/v1``: models, loader, checks.

A recorded call is a folder with ``call.json`` (this module's
:class:`Manifest`), ``caller.wav`` and optionally ``agent.wav``; see
RECORDING_FORMAT.md. :func:`load_recording` turns a folder into a checked
:class:`Recording` or raises :class:`RecordingError` whose message is one line
naming the file and the field at fault.

Example::

    rec = load_recording(Path("recordings/booking-0007"))
    for turn in rec.caller_turns:
        print(turn.start, turn.end, turn.holds_or_gaps())
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import soundfile as sf
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnkit.audio.wav import SUPPORTED_RATES, AudioError, check_not_truncated, read_wav

__all__ = [
    "FORMAT",
    "AgentTurn",
    "Backchannel",
    "CallerTurn",
    "Echo",
    "Hold",
    "Manifest",
    "Noise",
    "Recording",
    "RecordingError",
    "find_recordings",
    "load_recording",
]

log = logging.getLogger(__name__)

FORMAT = "turnkit.recording/v1"
MANIFEST = "call.json"
# Labels are measured on a sample grid and rounded; allow that much slack
# against the audio's duration.
TIME_SLACK_S = 0.02


class RecordingError(ValueError):
    """A call that cannot be replayed. The message is one line: file, field, why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class _Span(_Model):
    start: float = Field(ge=0)
    end: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> _Span:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class WordTiming(_Span):
    text: str


class Hold(_Span):
    kind: Literal["mid-sentence", "between-sentences", "comma"]


class CallerTurn(_Span):
    type: Literal["caller_turn"]
    text: str = ""
    spans: list[tuple[float, float]] | None = None
    words: list[WordTiming] | None = None
    holds: list[Hold] | None = None

    @model_validator(mode="after")
    def _spans_inside(self) -> CallerTurn:
        prev_end = None
        for i, (s, e) in enumerate(self.spans or []):
            if e < s:
                raise ValueError(f"spans[{i}] ends before it starts")
            if s < self.start - 1e-6 or e > self.end + 1e-6:
                raise ValueError(
                    f"spans[{i}] [{s}, {e}] is outside the turn [{self.start}, {self.end}]"
                )
            if prev_end is not None and s < prev_end - 1e-6:
                raise ValueError(f"spans[{i}] overlaps the span before it")
            prev_end = e
        return self

    def speech_spans(self) -> list[tuple[float, float]]:
        return list(self.spans) if self.spans else [(self.start, self.end)]

    def gaps(self) -> list[tuple[float, float, str]]:
        """The holds of the turn as ``(start, end, kind)``: the labelled
        ones where given, else the gaps between spans, kind "unlabelled"."""
        if self.holds:
            return [(h.start, h.end, h.kind) for h in self.holds]
        spans = self.speech_spans()
        return [(a[1], b[0], "unlabelled") for a, b in itertools.pairwise(spans)]


class AgentTurn(_Span):
    type: Literal["agent_turn"]
    text: str = ""


class Backchannel(_Span):
    type: Literal["backchannel"]
    text: str = ""


class Echo(_Span):
    type: Literal["echo"]


class Noise(_Span):
    type: Literal["noise"]
    label: str = ""


Event = Annotated[CallerTurn | AgentTurn | Backchannel | Echo | Noise, Field(discriminator="type")]
KNOWN_EVENTS = {"caller_turn", "agent_turn", "backchannel", "echo", "noise"}


class AudioPaths(_Model):
    caller: str = "caller.wav"
    agent: str | None = None


class Manifest(_Model):
    format: str
    id: str = Field(min_length=1)
    language: str = "en"
    audio: AudioPaths = AudioPaths()
    source: str | None = None
    tags: list[str] = []
    events: list[Event] = []

    @model_validator(mode="before")
    @classmethod
    def _drop_unknown_events(cls, data: Any) -> Any:
        # Newer writers may add event types; v1 readers keep going without them.
        if isinstance(data, dict) and isinstance(data.get("events"), list):
            events = data["events"]
            known = [e for e in events if not isinstance(e, dict) or e.get("type") in KNOWN_EVENTS]
            if len(known) != len(events):
                data = {**data, "events": known, "unknown_events": len(events) - len(known)}
        return data


class Recording:
    """A loaded, checked call: manifest plus where its audio lives."""

    def __init__(self, folder: Path, manifest: Manifest, duration: float) -> None:
        self.folder = folder
        self.manifest = manifest
        self.duration = duration
        self.caller_path = folder / manifest.audio.caller
        self.agent_path = folder / manifest.audio.agent if manifest.audio.agent else None
        self._audio: dict[int, np.ndarray] = {}

    @property
    def id(self) -> str:
        return self.manifest.id

    def _of(self, kind: type) -> list[Any]:
        return sorted(
            (e for e in self.manifest.events if isinstance(e, kind)), key=lambda e: e.start
        )

    @property
    def caller_turns(self) -> list[CallerTurn]:
        return self._of(CallerTurn)

    @property
    def agent_turns(self) -> list[AgentTurn]:
        return self._of(AgentTurn)

    @property
    def backchannels(self) -> list[Backchannel]:
        return self._of(Backchannel)

    @property
    def echoes(self) -> list[Echo]:
        return self._of(Echo)

    @property
    def noises(self) -> list[Noise]:
        return self._of(Noise)

    def caller_audio(self, sample_rate: int = 16000) -> np.ndarray:
        """The caller audio, mono float32; read once per rate (several
        detectors replay the same call)."""
        cached = self._audio.get(sample_rate)
        if cached is None:
            cached = self._audio[sample_rate] = read_wav(self.caller_path, sample_rate)
        return cached


def find_recordings(paths: list[Path]) -> list[Path]:
    """Call folders under ``paths``: a folder with call.json, a call.json
    itself, or any folder searched recursively. Sorted, without repeats."""
    found: dict[Path, None] = {}
    for p in paths:
        if p.is_file() and p.name == MANIFEST:
            found[p.parent.resolve()] = None
        elif (p / MANIFEST).is_file():
            found[p.resolve()] = None
        elif p.is_dir() and any(p.rglob(MANIFEST)):
            for m in sorted(p.rglob(MANIFEST)):
                found[m.parent.resolve()] = None
        else:
            # Named but holds no call (or does not exist): kept, so that
            # loading it reports the problem instead of skipping it silently.
            found[p.resolve()] = None
    return list(found)


def _field_path(loc: tuple[Any, ...], data: Any, event_index: list[int]) -> str:
    """A pydantic error location as the user wrote it: ``events[3].end``.

    Pydantic counts events after unknown types were dropped and puts the
    discriminator tag ("caller_turn") in the path; both are undone here."""
    out = ""
    node = data
    for k, part in enumerate(loc):
        if isinstance(part, int):
            if k == 1 and loc[0] == "events" and part < len(event_index):
                part = event_index[part]
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
        else:
            if isinstance(node, dict) and node.get("type") == part and part not in node:
                continue
            out += ("." if out else "") + str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out or "(root)"


def _first_error(exc: ValidationError, data: Any, event_index: list[int]) -> str:
    err = exc.errors()[0]
    msg = err["msg"].removeprefix("Value error, ")
    return f"{_field_path(tuple(err['loc']), data, event_index)}: {msg}"


def _audio_duration(folder: Path, rel: str, field: str) -> float:
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise RecordingError(f"{folder / MANIFEST}: {field}: path {rel!r} escapes the call folder")
    if not path.is_file():
        raise RecordingError(f"{folder / MANIFEST}: {field}: file {rel!r} not found")
    try:
        info = sf.info(str(path))
    except Exception:
        # read_wav gives the precise one-line reason.
        try:
            read_wav(path)
        except AudioError as exc:
            raise RecordingError(f"{exc} ({field})") from None
        raise RecordingError(f"{path}: not a readable WAV file ({field})") from None
    if info.format not in ("WAV", "WAVEX"):
        raise RecordingError(f"{path}: not a WAV file (format {info.format}) ({field})")
    if info.samplerate not in SUPPORTED_RATES:
        rates = ", ".join(str(r) for r in SUPPORTED_RATES)
        raise RecordingError(
            f"{path}: unsupported sample rate {info.samplerate} Hz (supported: {rates}) ({field})"
        )
    if info.frames == 0:
        raise RecordingError(f"{path}: no audio samples ({field})")
    try:
        check_not_truncated(path)
    except AudioError as exc:
        raise RecordingError(f"{exc} ({field})") from None
    return info.frames / info.samplerate


def load_recording(folder: Path, check_audio: bool = False) -> Recording:
    """Load and check one call folder. ``check_audio`` also decodes the
    audio fully (catches truncated files; ``validate`` uses it)."""
    mpath = folder / MANIFEST
    if not folder.exists():
        raise RecordingError(f"{folder}: no such file or folder")
    if not mpath.is_file():
        raise RecordingError(f"{mpath}: missing (no call.json in {folder})")
    try:
        data = json.loads(mpath.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise RecordingError(f"{mpath}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RecordingError(
            f"{mpath}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise RecordingError(f"{mpath}: (root): expected a JSON object")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise RecordingError(f"{mpath}: format: unknown format {fmt!r} (expected {FORMAT!r})")
    # Error messages name an event by its index in the file as written,
    # which differs from manifest.events when unknown types were dropped.
    raw_events = data.get("events")
    raw_index = [
        i
        for i, e in enumerate(raw_events if isinstance(raw_events, list) else [])
        if not isinstance(e, dict) or e.get("type") in KNOWN_EVENTS
    ]
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise RecordingError(f"{mpath}: {_first_error(exc, data, raw_index)}") from None

    duration = _audio_duration(folder, manifest.audio.caller, "audio.caller")
    if manifest.audio.agent:
        _audio_duration(folder, manifest.audio.agent, "audio.agent")
    index_of = {id(e): raw_index[k] for k, e in enumerate(manifest.events)}

    def where(e: Any) -> str:
        return f"{mpath}: events[{index_of[id(e)]}]"

    for e in manifest.events:
        if e.end > duration + TIME_SLACK_S:
            raise RecordingError(
                f"{where(e)}.end: {e.end} is past the end of {manifest.audio.caller} ({duration:.3f} s)"
            )
    turns = sorted((e for e in manifest.events if isinstance(e, CallerTurn)), key=lambda e: e.start)
    for a, b in itertools.pairwise(turns):
        if b.start < a.end - 1e-6:
            raise RecordingError(
                f"{where(b)}.start: caller turn at {b.start} overlaps the caller turn "
                f"[{a.start}, {a.end}] (events[{index_of[id(a)]}])"
            )
    rec = Recording(folder, manifest, duration)
    if check_audio:
        try:
            rec.caller_audio()
            if rec.agent_path is not None:
                read_wav(rec.agent_path)
        except AudioError as exc:
            raise RecordingError(str(exc)) from None
    return rec
