"""The recording format ``turnkit.recording/v1``: models, loader, checks.

A recorded call is a folder with ``call.json`` (this module's
:class:`Manifest`), ``caller.wav`` and optionally ``agent.wav``; see
RECORDING_FORMAT.md. :func:`load_recording` turns a folder into a checked
:class:`Recording` or raises :class:`RecordingError` whose message is one line
naming the file and the field at fault.

Nothing doubtful is taken silently: JSON that Python would read but that
is not plain data (NaN/Infinity, duplicate keys, numbers past what a float
holds, 5,000-digit integers, nesting past :data:`MAX_DEPTH`, lone surrogates)
is an error; times are strict finite numbers (``true`` or ``"1.2"`` is not a
time); an event without a ``type`` or with a near miss of a known one
(``caller_trun``) is an error; what is suspicious but usable (an unknown
event type, a stereo file, no caller turn, float audio past full scale, an
agent track of another length) is a one-line entry in
:attr:`Recording.warnings`.

Example::

    rec = load_recording(Path("recordings/booking-0007"))
    for turn in rec.caller_turns:
        print(turn.start, turn.end, turn.holds_or_gaps())
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import soundfile as sf
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnkit.audio.wav import (
    SUPPORTED_RATES,
    AudioError,
    AudioStats,
    check_not_truncated,
    iter_wav_frames,
    read_wav,
    resampled_length,
    scan_wav,
)

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
    "ToolCallEvent",
    "find_recordings",
    "load_recording",
    "path_problem",
]

log = logging.getLogger(__name__)

FORMAT = "turnkit.recording/v1"
MANIFEST = "call.json"
# Labels are measured on a sample grid and rounded; allow that much slack
# against the audio's duration.
TIME_SLACK_S = 0.02
# How far outside its caller turn a word's times may lie and still be read
# as the turn's (at its edge): word times and turn edges from two tools
# (a recogniser, a diarizer) disagree by a word's length or so. Further
# out, the word belongs to no turn: an error.
WORD_REACH_S = 0.3
# Deepest JSON nesting a manifest may have (a real one is 4 deep).
MAX_DEPTH = 64
# Longest integer literal read (a time or an index needs a few digits).
MAX_INT_DIGITS = 30
# call.json larger than this is refused before it is read.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024


class RecordingError(ValueError):
    """A call that cannot be replayed. The message is one line: file, field, why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


# A time: a JSON number (``true`` and ``"1.2"`` are refused), finite.
Seconds = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class _Span(_Model):
    start: Seconds = Field(ge=0)
    end: Seconds = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> _Span:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class WordTiming(_Span):
    """One word of a caller turn and when it was spoken (seconds on the
    call's timeline): what a replay's oracle transcript emits word by word."""

    text: str


class Hold(_Span):
    """A labelled pause between two speech spans of a caller turn: its kind
    (``mid-sentence``, ``between-sentences``, ``comma``) is what replay
    reports false cutoffs per."""

    kind: Literal["mid-sentence", "between-sentences", "comma"]


class CallerTurn(_Span):
    """The caller holding the floor from ``start`` to ``end``: the speech
    spans (the gaps between them are holds), the text, optional word
    timings and hold labels. The reference a detector's end-of-turn
    decision is scored against: a decision before ``end`` is a cutoff."""

    type: Literal["caller_turn"]
    text: str = ""
    spans: list[tuple[Seconds, Seconds]] | None = None
    words: list[WordTiming] | None = None
    holds: list[Hold] | None = None

    @model_validator(mode="after")
    def _spans_inside(self) -> CallerTurn:
        for i, w in enumerate(self.words or []):
            # A word that reaches past the turn's edge is read as ending
            # with it (word times and turn edges often come from different
            # tools: a recogniser's words, a diarizer's turns); one further
            # than WORD_REACH_S outside belongs to no turn.
            if w.end < self.start - WORD_REACH_S or w.start > self.end + WORD_REACH_S:
                raise ValueError(
                    f"words[{i}] [{w.start}, {w.end}] is outside the turn "
                    f"[{self.start}, {self.end}]"
                )
        for i, h in enumerate(self.holds or []):
            if h.start < self.start - TIME_SLACK_S or h.end > self.end + TIME_SLACK_S:
                raise ValueError(
                    f"holds[{i}] [{h.start}, {h.end}] is outside the turn "
                    f"[{self.start}, {self.end}]"
                )
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
    """When the agent spoke in the original call and what it said; the
    replayed reply to the caller turn before it plays until its ``end``."""

    type: Literal["agent_turn"]
    text: str = ""


class Backchannel(_Span):
    """Caller speech while the agent talks that is not a bid for the floor
    ("uh-huh"): an agent that stops for it is a false barge-in."""

    type: Literal["backchannel"]
    text: str = ""


class Echo(_Span):
    """A stretch of the caller channel that is the agent's own audio coming
    back: an agent that stops for it is a false barge-in."""

    type: Literal["echo"]


class Noise(_Span):
    """A non-speech sound on the caller channel (``label``: cough, door,
    ...): an agent that stops for it is a false barge-in."""

    type: Literal["noise"]
    label: str = ""


class ToolCallEvent(_Model):
    """A tool the original agent called while answering caller turn ``turn``
    (0-based index of the caller turns): ``start`` is when the call began,
    ``duration_s`` how long the backend took. Optional in v1; the replay's
    simulated engine asks for it while answering that turn, and the tool
    runs through the real :class:`~turnkit.drafting.tools.ToolGate`."""

    type: Literal["tool_call"]
    turn: int = Field(strict=True, ge=0)
    start: Seconds = Field(ge=0)
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    arguments: dict[str, Any] = {}
    effect: Literal["read", "write"]
    duration_s: Seconds = Field(ge=0)
    confirm: bool = False
    result: str | None = None

    @model_validator(mode="after")
    def _confirm_is_for_writes(self) -> ToolCallEvent:
        if self.confirm and self.effect != "write":
            raise ValueError("confirm: only a write waits for the caller's yes")
        return self

    @property
    def end(self) -> float:
        return self.start + self.duration_s


Event = Annotated[
    CallerTurn | AgentTurn | Backchannel | Echo | Noise | ToolCallEvent,
    Field(discriminator="type"),
]
KNOWN_EVENTS = {"caller_turn", "agent_turn", "backchannel", "echo", "noise", "tool_call"}
# Documented in the format but not scored by replay: ignored without a word.
IGNORED_EVENTS: set[str] = set()


class AudioPaths(_Model):
    """The call's WAV files, relative to its folder: the caller channel and,
    where present, the agent's (the echo filter's reference)."""

    caller: str = "caller.wav"
    agent: str | None = None


class Manifest(_Model):
    """A recording's ``call.json`` (``turnkit.recording/v1``): its id, audio
    files, tags (subsets such as natural, stress, telephone) and labelled
    events, validated; event types a newer writer added are dropped."""

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

    def __init__(
        self,
        folder: Path,
        manifest: Manifest,
        duration: float,
        *,
        warnings: list[str] | None = None,
        caller_frames: int | None = None,
        caller_rate: int | None = None,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.duration = duration
        self.caller_path = folder / manifest.audio.caller
        self.agent_path = folder / manifest.audio.agent if manifest.audio.agent else None
        # One line each, naming the file and the field: suspicious but usable.
        self.warnings: list[str] = list(warnings or [])
        self._caller_frames = caller_frames
        self._caller_rate = caller_rate
        self._audio: dict[int, np.ndarray] = {}
        # What the replays of this call derive from its audio alike, per
        # key (several detectors replay one loaded call).
        self.derived: dict[tuple[Any, ...], Any] = {}

    @property
    def caller_rate(self) -> int | None:
        """caller.wav's own sample rate (8000 for a telephone recording)."""
        return self._caller_rate

    @property
    def line_rate(self) -> int | None:
        """The caller's line rate where it is narrower than the 16 kHz the
        models run at (a telephone recording), else None: what a host that
        receives the line resampled passes as its ``line_rate``."""
        rate = self._caller_rate
        return rate if rate is not None and rate < 16000 else None

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

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

    @property
    def tool_calls(self) -> list[ToolCallEvent]:
        """The optional ``tool_call`` events, in start order."""
        return self._of(ToolCallEvent)

    def caller_audio(self, sample_rate: int = 16000) -> np.ndarray:
        """The caller audio, mono float32; read once per rate (several
        detectors replay the same call)."""
        cached = self._audio.get(sample_rate)
        if cached is None:
            stats = AudioStats(self.caller_path)
            cached = self._audio[sample_rate] = read_wav(self.caller_path, sample_rate, stats)
            for w in stats.warnings:
                self.warn(f"{w} (audio.caller)")
        return cached

    def caller_samples(self, sample_rate: int = 16000) -> int:
        """Length of the caller audio at ``sample_rate``, from the header."""
        if self._caller_frames is None or self._caller_rate is None:
            return len(self.caller_audio(sample_rate))
        return resampled_length(self._caller_frames, self._caller_rate, sample_rate)

    def caller_frames(
        self, sample_rate: int, frame_samples: int
    ) -> Iterator[tuple[int, np.ndarray]]:
        """The caller audio as ``(start_sample, frame)``, read a block at a
        time (memory flat with the call's length); the same frames as
        ``iter_frames(caller_audio(sample_rate), frame_samples)``, and
        :attr:`caller_samples` samples in all. Raises
        :class:`~turnkit.audio.wav.AudioError` at the first bad block."""
        stats = AudioStats(self.caller_path)
        yield from iter_wav_frames(self.caller_path, sample_rate, frame_samples, stats)
        for w in stats.warnings:
            self.warn(f"{w} (audio.caller)")


def _resolved(p: Path) -> Path:
    """``p`` resolved; where it cannot be (a NUL, a symlink loop), absolute
    as given, so that loading it reports the problem."""
    try:
        return p.resolve()
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.abspath(str(p))) if "\0" not in str(p) else p


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):
        return False


def path_problem(p: Path) -> str | None:
    """Why ``p`` names nothing usable, in words (a NUL character, a symlink
    loop, a dangling link, nothing there), or None when it exists."""
    text = str(p)
    if "\0" in text:
        return f"{text!r}: the path contains a NUL character"
    try:
        p.stat()
        return None
    except OSError as exc:
        if exc.errno == 40:
            return f"{p}: symlink loop"
        if os.path.islink(p):
            return f"{p}: dangling symlink (-> {os.readlink(p)})"
        return f"{p}: {exc.strerror or 'cannot be read'}"
    except ValueError as exc:
        return f"{text!r}: unusable path ({exc})"


def find_recordings(paths: list[Path], warnings: list[str] | None = None) -> list[Path]:
    """Call folders under ``paths``: a folder with call.json, a call.json
    itself, or any folder searched recursively. Sorted, without repeats.

    The recursive search does not follow symlinked folders (a link loop or a
    link to ``/`` must not run away); each one it passes is named in
    ``warnings`` (name it on the command line to include it), as is a folder
    it cannot read. A path that holds no call (missing, a symlink loop, a NUL
    in its name) is kept, so that loading it reports the problem."""
    found: dict[Path, None] = {}
    notes = warnings if warnings is not None else []
    for p in paths:
        if _is_file(p) and p.name == MANIFEST:
            found[_resolved(p.parent)] = None
        elif _is_file(p / MANIFEST):
            found[_resolved(p)] = None
        elif "\0" not in str(p) and os.path.isdir(p):
            inside = _search(p, notes)
            if inside:
                for folder in inside:
                    found[_resolved(folder)] = None
            else:
                found[_resolved(p)] = None
        else:
            # Named but holds no call (or does not exist): kept, so that
            # loading it reports the problem instead of skipping it silently.
            found[_resolved(p)] = None
    return list(found)


def _search(root: Path, notes: list[str]) -> list[Path]:
    out: list[Path] = []

    def onerror(exc: OSError) -> None:
        notes.append(f"{exc.filename}: cannot search this folder ({exc.strerror})")

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
        here = Path(dirpath)
        if MANIFEST in filenames and _is_file(here / MANIFEST):
            out.append(here)
        for d in sorted(dirnames):
            link = here / d
            if link.is_symlink():
                try:
                    target = os.readlink(link)
                except OSError:
                    target = "?"
                what = "call folder" if _is_file(link / MANIFEST) else "folder"
                notes.append(
                    f"{link}: symlinked {what} (-> {target}) not searched; "
                    "name it on the command line to include it"
                )
    return sorted(out)


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
    got = err.get("input")
    if isinstance(got, bool | str | int | float) and err["type"] not in ("value_error", "missing"):
        msg += f" (got {got!r:.40})"
    return f"{_field_path(tuple(err['loc']), data, event_index)}: {msg}"


class _Reject(ValueError):
    """A JSON construct a manifest may not use; the message says which."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Reject(f"duplicate key {k!r} in one JSON object (which one counts is undefined)")
        out[k] = v
    return out


def _parse_constant(name: str) -> float:
    raise _Reject(f"{name} is not a JSON number")


def _parse_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise _Reject(f"number {text[:40]!r} is too large for a float")
    return v


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Reject(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _check_tree(data: Any) -> None:
    """Depth and strings of parsed JSON, without recursion: nesting past
    :data:`MAX_DEPTH` and lone surrogates (valid JSON escapes, not text;
    nothing downstream can write them) are refused with their place."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            short = where if len(where) <= 60 else where[:60] + "…"
            raise _Reject(f"{short}: nested more than {MAX_DEPTH} deep")
        if isinstance(node, str):
            if any("\ud800" <= ch <= "\udfff" for ch in node):
                bad = next(ch for ch in node if "\ud800" <= ch <= "\udfff")
                raise _Reject(
                    f"{where or '(root)'}: lone surrogate U+{ord(bad):04X} (not valid Unicode text)"
                )
        elif isinstance(node, dict):
            for k, v in node.items():
                if any("\ud800" <= ch <= "\udfff" for ch in k):
                    raise _Reject(f"{where or '(root)'}: a key holds a lone surrogate")
                stack.append((v, f"{where}.{k}" if where else k, depth + 1))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                stack.append((v, f"{where}[{i}]", depth + 1))


def read_manifest_json(mpath: Path) -> Any:
    """``call.json`` parsed strictly (see the module doc); raises
    :class:`RecordingError` naming the file and, where it can, the field."""
    try:
        size = mpath.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise RecordingError(
                f"{mpath}: {size} bytes, larger than a manifest can be "
                f"({MAX_MANIFEST_BYTES // (1024 * 1024)} MB)"
            )
        raw = mpath.read_bytes()
    except OSError as exc:
        raise RecordingError(f"{mpath}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordingError(f"{mpath}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise RecordingError(
            f"{mpath}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except _Reject as exc:
        raise RecordingError(f"{mpath}: {exc}") from None
    except RecursionError:
        raise RecordingError(f"{mpath}: JSON nested too deeply (at most {MAX_DEPTH})") from None
    except ValueError as exc:  # e.g. int conversion limits
        raise RecordingError(f"{mpath}: unreadable JSON ({str(exc).splitlines()[0]})") from None
    try:
        _check_tree(data)
    except _Reject as exc:
        raise RecordingError(f"{mpath}: {exc}") from None
    return data


def _audio_path(folder: Path, rel: str, field: str) -> Path:
    where = f"{folder / MANIFEST}: {field}"
    if "\0" in rel:
        raise RecordingError(f"{where}: path {rel!r} contains a NUL character")
    try:
        path = (folder / rel).resolve()
        inside = path.is_relative_to(folder.resolve())
    except RuntimeError:
        raise RecordingError(f"{where}: {rel!r} is a symlink loop") from None
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{where}: path {rel!r} unusable ({exc})") from None
    if not inside:
        raise RecordingError(f"{where}: path {rel!r} escapes the call folder")
    try:
        if not path.is_file():
            raise RecordingError(f"{where}: file {rel!r} not found")
    except OSError as exc:
        if exc.errno == 40:
            raise RecordingError(f"{where}: {rel!r} is a symlink loop") from None
        raise RecordingError(f"{where}: {rel!r}: {exc.strerror or exc}") from None
    return path


def _audio_info(folder: Path, rel: str, field: str) -> Any:
    path = _audio_path(folder, rel, field)
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
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read ({exc.strerror or exc}) ({field})") from None
    return info


def _audio_duration(folder: Path, rel: str, field: str) -> float:
    info = _audio_info(folder, rel, field)
    return info.frames / info.samplerate


def _check_event_types(mpath: Path, raw_events: Any, warnings: list[str]) -> None:
    """Missing, non-text or near-miss ``type``: an error (the event would be
    dropped, and with it a turn); an unknown type: a warning (newer writers
    may add types; v1 readers go on without them)."""
    if not isinstance(raw_events, list):
        return
    unknown: dict[str, list[int]] = {}
    for i, e in enumerate(raw_events):
        if not isinstance(e, dict):
            continue  # the model names it
        if "type" not in e:
            raise RecordingError(
                f"{mpath}: events[{i}].type: missing (one of {', '.join(sorted(KNOWN_EVENTS))})"
            )
        t = e["type"]
        if not isinstance(t, str):
            raise RecordingError(f"{mpath}: events[{i}].type: {t!r} is not a string")
        if t in KNOWN_EVENTS or t in IGNORED_EVENTS:
            continue
        near = difflib.get_close_matches(t.strip().lower(), sorted(KNOWN_EVENTS), n=1, cutoff=0.75)
        if near:
            raise RecordingError(
                f"{mpath}: events[{i}].type: unknown event type {t!r} (did you mean {near[0]!r}?)"
            )
        unknown.setdefault(t, []).append(i)
    for t, idx in unknown.items():
        shown = ", ".join(f"events[{i}]" for i in idx[:3]) + (" …" if len(idx) > 3 else "")
        warnings.append(
            f"{mpath}: {shown}.type: unknown event type {t!r} ignored ({len(idx)} event(s))"
        )


def load_recording(folder: Path, check_audio: bool = False) -> Recording:
    """Load and check one call folder. ``check_audio`` also decodes the
    audio fully, a block at a time (catches truncated files and samples that
    are not audio; ``validate`` uses it).

    Raises :class:`RecordingError` (one line) for anything wrong, including
    unreadable files and unusable paths; never another exception for bad
    input."""
    try:
        return _load(folder, check_audio)
    except RecordingError:
        raise
    except RecursionError:
        raise RecordingError(f"{folder / MANIFEST}: nested too deeply") from None
    except RuntimeError as exc:  # pathlib's symlink loop
        raise RecordingError(f"{folder}: {_one_line(exc)}") from None
    except (OSError, ValueError) as exc:
        raise RecordingError(
            f"{folder}: cannot load ({type(exc).__name__}: {_one_line(exc)})"
        ) from None


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _load(folder: Path, check_audio: bool) -> Recording:
    if "\0" in str(folder):
        raise RecordingError(f"{str(folder)!r}: the path contains a NUL character")
    mpath = folder / MANIFEST
    problem = path_problem(folder)
    if problem is not None:
        if problem.endswith("No such file or directory"):
            problem = f"{folder}: no such file or folder"
        raise RecordingError(problem)
    if not _is_file(mpath):
        raise RecordingError(f"{mpath}: missing (no call.json in {folder})")
    data = read_manifest_json(mpath)
    if not isinstance(data, dict):
        raise RecordingError(f"{mpath}: (root): expected a JSON object")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise RecordingError(f"{mpath}: format: unknown format {fmt!r} (expected {FORMAT!r})")
    warnings: list[str] = []
    raw_events = data.get("events")
    _check_event_types(mpath, raw_events, warnings)
    # Error messages name an event by its index in the file as written,
    # which differs from manifest.events when unknown types were dropped.
    raw_index = [
        i
        for i, e in enumerate(raw_events if isinstance(raw_events, list) else [])
        if not isinstance(e, dict) or e.get("type") in KNOWN_EVENTS
    ]
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise RecordingError(f"{mpath}: {_first_error(exc, data, raw_index)}") from None

    info = _audio_info(folder, manifest.audio.caller, "audio.caller")
    duration = info.frames / info.samplerate
    if info.channels > 1:
        warnings.append(
            f"{folder / manifest.audio.caller}: {info.channels} channels, using the first "
            "(audio.caller)"
        )
    if manifest.audio.agent:
        agent = _audio_info(folder, manifest.audio.agent, "audio.agent")
        if agent.channels > 1:
            warnings.append(
                f"{folder / manifest.audio.agent}: {agent.channels} channels, using the first "
                "(audio.agent)"
            )
        agent_s = agent.frames / agent.samplerate
        if abs(agent_s - duration) > 0.01:
            warnings.append(
                f"{folder / manifest.audio.agent}: {agent_s:.3f} s long, the caller audio is "
                f"{duration:.3f} s: {'padded with silence' if agent_s < duration else 'cut'} "
                "to match (audio.agent)"
            )
    index_of = {id(e): raw_index[k] for k, e in enumerate(manifest.events)}

    def where(e: Any) -> str:
        return f"{mpath}: events[{index_of[id(e)]}]"

    for e in manifest.events:
        if isinstance(e, ToolCallEvent):
            continue  # a backend call may outlast the recorded audio
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
    if not turns:
        warnings.append(f"{mpath}: events: no caller_turn: nothing to score in this call")
    for t in turns:
        past = [
            max(t.start - w.start, w.end - t.end)
            for w in t.words or []
            if w.start < t.start - TIME_SLACK_S or w.end > t.end + TIME_SLACK_S
        ]
        if past:
            warnings.append(
                f"{where(t)}.words: {len(past)} word(s) reach past the turn [{t.start}, "
                f"{t.end}] (by up to {max(past):.3f} s): read as inside it"
            )
    for e in manifest.events:
        if isinstance(e, ToolCallEvent) and e.turn >= len(turns):
            raise RecordingError(
                f"{where(e)}.turn: {e.turn} but the call has {len(turns)} caller turn(s)"
            )
        if isinstance(e, ToolCallEvent) and e.start > duration + TIME_SLACK_S:
            raise RecordingError(
                f"{where(e)}.start: {e.start} is past the end of {manifest.audio.caller} "
                f"({duration:.3f} s)"
            )
    rec = Recording(
        folder,
        manifest,
        duration,
        warnings=warnings,
        caller_frames=info.frames,
        caller_rate=info.samplerate,
    )
    if check_audio:
        try:
            for w in scan_wav(rec.caller_path).warnings:
                rec.warn(f"{w} (audio.caller)")
            if rec.agent_path is not None:
                for w in scan_wav(rec.agent_path).warnings:
                    rec.warn(f"{w} (audio.agent)")
        except AudioError as exc:
            field = "audio.caller"
            if rec.agent_path is not None and str(exc).startswith(str(rec.agent_path)):
                field = "audio.agent"
            raise RecordingError(f"{exc} ({field})") from None
    return rec
