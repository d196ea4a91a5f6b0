"""Recording live calls as ``turnkit.recording/v1``, framework-free.

A host (the Pipecat or LiveKit plugin, or your own loop) feeds a
:class:`CallRecorder` what it sees during a call — caller microphone chunks,
agent audio chunks as they play, VAD edges, transcripts, agent texts,
interruptions and its own turn decisions — and :meth:`CallRecorder.finish`
writes a call folder that ``turnkit replay`` loads: ``caller.wav`` and
``agent.wav`` (16 kHz mono PCM, one timeline starting at the first caller
sample) and ``call.json``.

What the labels are derived from (a live recorder cannot know the truth):

* **speech spans** — the caller speech stretches the host's VAD reported
  (onset to end of speech, not the confirmation times); if the host reported
  none, turnkit's Silero VAD is run over ``caller.wav`` at the end.
* **caller turns** — consecutive spans belong to one turn until the agent
  takes the floor: a span that starts after agent audio began (since the
  last span) opens a new turn. A span that starts while the agent is
  playing opens a new turn only if the agent was interrupted during it (a
  barge-in) or the host committed a caller turn after it, before the next
  span (a ``turn_event`` of kind ``user_turn_end``: the agent talked
  on, but the host answered it, as a caller's "Yes." to a question the agent
  was still finishing; talked-through spans just before it in the same
  reply join it); other speech the agent talked through is not a turn and is
  listed, unlabelled, under ``unlabelled_speech`` (it may be a backchannel,
  echo or noise: only a listener can tell, so no ``backchannel`` label is
  invented).
* **agent turns** — runs of agent audio on the timeline (gaps shorter than
  ``agent_merge_gap_s`` joined, unless an interruption stopped the agent in
  the gap or the host committed a caller turn in it: what follows is
  another reply), cut where an interruption stopped playback; their text is
  the agent text that was sent for them.
* **text/words** — final transcripts, attributed to the utterance they
  follow; word timings are kept when the recogniser gave them.

Hold kinds, backchannels, echo and noise are left out: they are what a human
(or a later labelling pass) adds. The host's own decisions are kept under
``live`` (ignored by replay) so a replay can be set beside what happened.

Example::

    rec = CallRecorder(Path("calls/0001"), clock=RealClock())
    rec.caller_audio(pcm_bytes, 16000)             # each mic chunk
    rec.agent_audio(tts_chunk, 24000)              # each chunk as it plays
    rec.transcript("book a table for two", final=True)
    rec.agent_text("Sure, for what time?")
    rec.finish()                                   # writes call.json + WAVs
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from turnkit.audio import SAMPLE_RATE
from turnkit.audio.wav import to_pcm16
from turnkit.clock import Clock
from turnkit.replay.live import COMMIT_KINDS
from turnkit.replay.recording import FORMAT

__all__ = ["CallRecorder", "RecorderError", "SpeechSpan"]

log = logging.getLogger(__name__)


class RecorderError(ValueError):
    """Bad input to the recorder; the message names the field."""


@dataclass(slots=True)
class SpeechSpan:
    """A stretch of speech the recorder's VAD heard (seconds on the call's
    timeline)."""

    start: float
    end: float


@dataclass(slots=True)
class _Transcript:
    at: float
    text: str
    words: list[tuple[str, float, float]]


@dataclass(slots=True)
class _AgentChunk:
    start: float  # clock time its first sample played
    audio: np.ndarray  # int16, 16 kHz


@dataclass(slots=True)
class _Stream:
    """Resampling state for one audio source (rates may change mid-call)."""

    rate: int = SAMPLE_RATE
    resampler: Any = None

    def to_16k(self, audio: np.ndarray, rate: int) -> np.ndarray:
        if rate == SAMPLE_RATE:
            return audio
        if rate != self.rate or self.resampler is None:
            self.rate = rate
            self.resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32")
        return self.resampler.resample_chunk(audio)

    def flush(self) -> np.ndarray:
        """The samples the resampler still holds back (its filter delay)."""
        if self.resampler is None:
            return np.zeros(0, dtype=np.float32)
        tail = self.resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self.resampler = None
        return tail


@dataclass(slots=True)
class _Utterance:
    start: float
    end: float
    spans: list[tuple[float, float]] = field(default_factory=list)
    turn: bool = True  # False: caller speech the agent talked through
    texts: list[str] = field(default_factory=list)
    words: list[tuple[str, float, float]] = field(default_factory=list)


def _as_float(audio: np.ndarray | bytes | bytearray | memoryview, what: str) -> np.ndarray:
    """Mono float32 in [-1, 1] from int16 PCM bytes or a numpy array (k /
    32768: :func:`~turnkit.audio.wav.to_pcm16` writes an int16 frame back
    bit for bit)."""
    if isinstance(audio, bytes | bytearray | memoryview):
        if len(audio) % 2:
            raise RecorderError(f"{what}: odd number of bytes for 16-bit PCM ({len(audio)})")
        return np.frombuffer(audio, dtype="<i2").astype(np.float32) / 32768.0
    arr = np.asarray(audio)
    if arr.ndim > 1:
        arr = arr.reshape(arr.shape[0], -1)[:, 0] if arr.shape[0] > arr.shape[-1] else arr[0]
    if arr.dtype == np.int16:
        return arr.astype(np.float32) / 32768.0
    if not np.issubdtype(arr.dtype, np.floating):
        raise RecorderError(f"{what}: unsupported sample type {arr.dtype} (int16 or float)")
    return np.clip(arr.astype(np.float32, copy=False), -1.0, 1.0)


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "call"


class CallRecorder:
    """Writes one live call as a ``turnkit.recording/v1`` folder.

    All times the host passes are on ``clock`` (``None`` means "now"); the
    recorder maps them onto the recording's timeline, whose zero is the
    first caller sample. Caller audio is streamed to ``caller.wav`` as it
    arrives; when the host's chunk times run ahead of the audio written by
    more than ``max_gap_s`` (a transport dropout, a muted input), silence is
    inserted so the audio stays aligned with the events.
    """

    def __init__(
        self,
        folder: Path | str,
        *,
        clock: Clock,
        call_id: str | None = None,
        language: str = "en",
        source: str = "live",
        tags: list[str] | None = None,
        max_gap_s: float = 0.2,
        agent_merge_gap_s: float = 0.5,
        barge_in_grace_s: float = 0.5,
    ) -> None:
        self.folder = Path(folder)
        self.clock = clock
        self.call_id = call_id or _safe_id(self.folder.name)
        self.language = language
        self.source = source
        self.tags = list(tags or [])
        self.max_gap_s = max_gap_s
        self.agent_merge_gap_s = agent_merge_gap_s
        self.barge_in_grace_s = barge_in_grace_s
        self.origin: float | None = None  # clock time of the first caller sample
        self._caller_samples = 0
        self._caller_file: sf.SoundFile | None = None
        self._caller_stream = _Stream()
        self._agent_stream = _Stream()
        self._agent: list[_AgentChunk] = []
        self._agent_cursor: float | None = None  # clock time the queued agent audio ends
        self._interruptions: list[float] = []
        self._speech: list[SpeechSpan] = []
        self._speech_open: float | None = None
        self._transcripts: list[_Transcript] = []
        self._agent_texts: list[tuple[float, str]] = []
        self._reply_texts: list[tuple[float, str]] = []  # handed to the detector
        self._turn_events: list[dict[str, Any]] = []
        self._notes: list[dict[str, Any]] = []
        self.finished = False

    # -- what the host feeds ---------------------------------------------------
    def _now(self, at: float | None) -> float:
        return self.clock.now() if at is None else float(at)

    def caller_audio(
        self,
        audio: np.ndarray | bytes | bytearray | memoryview,
        sample_rate: int,
        at: float | None = None,
    ) -> None:
        """A microphone chunk. ``at`` is the clock time of its first sample;
        ``None``: the chunk has just arrived (its last sample is now)."""
        self._check_open()
        if sample_rate <= 0:
            raise RecorderError(f"caller_audio.sample_rate: {sample_rate} is not a rate")
        samples = _as_float(audio, "caller_audio.audio")
        if len(samples) == 0:
            return
        if self._caller_stream.resampler is not None and sample_rate != self._caller_stream.rate:
            self._write_caller(self._caller_stream.flush())
        start = self._now(at) if at is not None else self.clock.now() - len(samples) / sample_rate
        if self.origin is None:
            self.origin = start
            self.folder.mkdir(parents=True, exist_ok=True)
            self._caller_file = sf.SoundFile(
                str(self.folder / "caller.wav"),
                mode="w",
                samplerate=SAMPLE_RATE,
                channels=1,
                subtype="PCM_16",
            )
        assert self._caller_file is not None
        written_until = self.origin + self._caller_samples / SAMPLE_RATE
        if start - written_until > self.max_gap_s:
            # The input stalled: keep the timeline, fill the hole with silence.
            self._write_caller(self._caller_stream.flush())
            written_until = self.origin + self._caller_samples / SAMPLE_RATE
            gap = round((start - written_until) * SAMPLE_RATE)
            self._write_caller(np.zeros(max(0, gap), dtype=np.float32))
        self._write_caller(self._caller_stream.to_16k(samples, sample_rate))

    def _write_caller(self, audio: np.ndarray) -> None:
        if len(audio) and self._caller_file is not None:
            self._caller_file.write(to_pcm16(audio))
            self._caller_samples += len(audio)

    def agent_audio(
        self,
        audio: np.ndarray | bytes | bytearray | memoryview,
        sample_rate: int,
        at: float | None = None,
    ) -> None:
        """An agent output chunk. ``at`` is when its first sample plays;
        ``None``: right after the agent audio already queued (or now, if
        none is), as a speaker plays chunks back to back."""
        self._check_open()
        if sample_rate <= 0:
            raise RecorderError(f"agent_audio.sample_rate: {sample_rate} is not a rate")
        samples = _as_float(audio, "agent_audio.audio")
        if len(samples) == 0:
            return
        now = self.clock.now()
        if at is None:
            start = now if self._agent_cursor is None else max(now, self._agent_cursor)
        else:
            start = float(at)
        if self._agent_cursor is None or abs(start - self._agent_cursor) > 1e-3:
            self._flush_agent()  # not back to back: the held-back tail ends the last run
        elif sample_rate != self._agent_stream.rate:
            self._flush_agent()
        out = to_pcm16(self._agent_stream.to_16k(samples, sample_rate))
        self._agent.append(_AgentChunk(start, out))
        end = start + len(out) / SAMPLE_RATE
        self._agent_cursor = end if self._agent_cursor is None else max(self._agent_cursor, end)

    def _flush_agent(self) -> None:
        tail = self._agent_stream.flush()
        if len(tail) and self._agent:
            last = self._agent[-1]
            last.audio = np.concatenate([last.audio, to_pcm16(tail)])
            if self._agent_cursor is not None:
                self._agent_cursor = max(
                    self._agent_cursor, last.start + len(last.audio) / SAMPLE_RATE
                )

    def agent_interrupted(self, at: float | None = None) -> None:
        """Playback stopped at ``at`` (the caller took the floor): agent
        audio queued to play after it never did, and is dropped."""
        self._check_open()
        t = self._now(at)
        self._flush_agent()
        self._interruptions.append(t)
        kept: list[_AgentChunk] = []
        for c in self._agent:
            if c.start >= t:
                continue
            n = len(c.audio)
            if c.start + n / SAMPLE_RATE > t:
                c = _AgentChunk(c.start, c.audio[: max(0, round((t - c.start) * SAMPLE_RATE))])
            kept.append(c)
        self._agent = kept
        if self._agent_cursor is not None and self._agent_cursor > t:
            self._agent_cursor = t

    def caller_speech_started(self, at: float | None = None) -> None:
        """The host's VAD: caller speech began at ``at`` (its onset)."""
        self._check_open()
        if self._speech_open is None:
            self._speech_open = self._now(at)

    def caller_speech_stopped(self, at: float | None = None) -> None:
        """The host's VAD: caller speech ended at ``at`` (the last speech,
        not when the VAD became sure)."""
        self._check_open()
        if self._speech_open is None:
            return
        end = self._now(at)
        self._speech.append(SpeechSpan(self._speech_open, max(end, self._speech_open)))
        self._speech_open = None

    def caller_speech(self, start: float, end: float) -> None:
        """A whole caller speech span at once (clock times)."""
        self._check_open()
        if end < start:
            raise RecorderError(f"caller_speech.end: {end} is before start {start}")
        self._speech.append(SpeechSpan(float(start), float(end)))

    def transcript(
        self,
        text: str,
        *,
        at: float | None = None,
        words: list[tuple[str, float, float]] | None = None,
        final: bool = True,
    ) -> None:
        """Recognised caller words. Only final transcripts become labels;
        ``words`` are ``(text, start, end)`` in clock time, when known."""
        self._check_open()
        if not final or not text.strip():
            return
        ws = [(str(w), float(s), float(e)) for w, s, e in (words or [])]
        for i, (_, s, e) in enumerate(ws):
            if e < s:
                raise RecorderError(f"transcript.words[{i}]: end {e} is before start {s}")
        self._transcripts.append(_Transcript(self._now(at), text.strip(), ws))

    def agent_text(self, text: str, at: float | None = None) -> None:
        """Text the agent sent to speech (joined per agent turn)."""
        self._check_open()
        if text.strip():
            self._agent_texts.append((self._now(at), text.strip()))

    def reply_text(self, text: str, at: float | None = None) -> None:
        """A reply's whole text as the host handed it to its detector when
        the reply started playing: the agent turn's text where no spoken
        text was recorded for it (:meth:`agent_text`), e.g. a reply cut
        before its first sentence's text came out of the TTS. Without it,
        the replay judged the caller's next words against no agent line
        where the live detector had the reply."""
        self._check_open()
        if text.strip():
            self._reply_texts.append((self._now(at), text.strip()))

    def turn_event(self, kind: str, at: float | None = None, **info: Any) -> None:
        """A decision the live host took ("user_turn_end", "eager", ...): kept
        under ``live.turn_events`` for comparison with a replay."""
        self._check_open()
        self._turn_events.append({"kind": kind, "at": self._now(at), **info})

    def note(self, kind: str, at: float | None = None, **info: Any) -> None:
        """Anything else worth keeping (per-turn metrics, ...): ``live.notes``."""
        self._check_open()
        self._notes.append({"kind": kind, "at": self._now(at), **info})

    # -- output ----------------------------------------------------------------
    @property
    def duration(self) -> float:
        return self._caller_samples / SAMPLE_RATE

    def _check_open(self) -> None:
        if self.finished:
            raise RecorderError(f"{self.folder}: recorder already finished")

    def finish(self, at: float | None = None) -> Path | None:
        """Close the audio and write ``call.json``. Returns the folder, or
        ``None`` when no caller audio ever arrived (nothing to replay)."""
        if self.finished:
            return self.folder if self.origin is not None else None
        if self._speech_open is not None:
            self.caller_speech_stopped(at)
        self.finished = True
        self._flush_agent()
        if self._caller_file is not None:
            self._write_caller(self._caller_stream.flush())
            self._caller_file.close()
        if self.origin is None:
            log.warning("%s: no caller audio was recorded; nothing written", self.folder)
            return None
        origin = self.origin
        duration = self.duration

        def tl(t: float) -> float:
            """Clock time -> recording timeline, clamped to the audio."""
            return round(min(max(t - origin, 0.0), duration), 3)

        agent_wav = self._write_agent(origin)
        interruptions = sorted(tl(t) for t in self._interruptions)
        commits = sorted(tl(e["at"]) for e in self._turn_events if e["kind"] in COMMIT_KINDS)
        agent_runs = self._agent_runs(origin, interruptions + commits)
        speech = (
            [(tl(s.start), tl(s.end)) for s in sorted(self._speech, key=lambda s: s.start)]
            if self._speech
            else self._vad_spans()
        )
        speech = [(s, e) for s, e in speech if e > s]
        utterances = self._utterances(speech, agent_runs, interruptions, commits)
        self._attach_transcripts(utterances, origin)

        events: list[dict[str, Any]] = []
        for u in utterances:
            if not u.turn:
                continue
            ev: dict[str, Any] = {
                "type": "caller_turn",
                "start": u.start,
                "end": u.end,
                "text": " ".join(u.texts),
                "spans": [[s, e] for s, e in u.spans],
            }
            if u.words:
                ev["words"] = [{"text": w, "start": s, "end": e} for w, s, e in u.words]
            events.append(ev)

        def per_run(texts: list[tuple[float, str]]) -> list[list[str]]:
            out: list[list[str]] = [[] for _ in agent_runs]
            for at, text in sorted(texts):
                # Text is sent before its audio plays (or as it starts): it
                # belongs to the first run still playing (or yet to play).
                k = next((k for k, (_, e) in enumerate(agent_runs) if tl(at) <= e + 1e-9), None)
                if k is not None:
                    out[k].append(text)
            return out

        said, handed = per_run(self._agent_texts), per_run(self._reply_texts)
        for (s, e), parts, whole in zip(agent_runs, said, handed, strict=True):
            text = " ".join(parts or whole)
            events.append({"type": "agent_turn", "start": s, "end": e, "text": text})
        events.sort(key=lambda ev: (ev["start"], ev["type"]))
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "id": self.call_id,
            "language": self.language,
            "audio": {"caller": "caller.wav", "agent": "agent.wav" if agent_wav else None},
            "source": self.source,
            "tags": self.tags,
            "events": events,
            "unlabelled_speech": [
                [u.start, u.end, " ".join(u.texts)] for u in utterances if not u.turn
            ],
            "live": {
                "recorder": "turnkit.replay.recorder",
                "speech_from": "host-vad" if self._speech else "turnkit-vad",
                "interruptions": interruptions,
                "turn_events": [{**e, "at": tl(e["at"])} for e in self._turn_events],
                "notes": [{**n, "at": tl(n["at"])} for n in self._notes],
            },
        }
        if not agent_wav:
            del manifest["audio"]["agent"]
        (self.folder / "call.json").write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
        return self.folder

    def _write_agent(self, origin: float) -> bool:
        if not self._agent:
            return False
        n = self._caller_samples
        buf = np.zeros(n, dtype=np.int16)
        for c in self._agent:
            i = round((c.start - origin) * SAMPLE_RATE)
            a = c.audio
            if i < 0:
                a, i = a[-i:], 0
            a = a[: max(0, n - i)]
            buf[i : i + len(a)] = a
        sf.write(str(self.folder / "agent.wav"), buf, SAMPLE_RATE, subtype="PCM_16")
        return True

    def _agent_runs(
        self, origin: float, breaks: list[float] | None = None
    ) -> list[tuple[float, float]]:
        """Stretches the agent played, on the timeline, gaps below the merge
        threshold joined unless the agent was stopped or the host committed
        a caller turn in the gap (``breaks``: the next audio is another
        reply, with its own text; a reply queued behind the one playing
        when the caller's "Yes." was committed started 0.1 s after it and
        was joined to it, so the replay read "Yes." against the later
        reply), clamped to the caller audio."""
        dur = self.duration
        runs: list[list[float]] = []
        for s, e in sorted(
            (c.start - origin, c.start - origin + len(c.audio) / SAMPLE_RATE)
            for c in self._agent
            if len(c.audio)
        ):
            s, e = max(s, 0.0), min(e, dur)
            if e <= s:
                continue
            stopped = runs and any(runs[-1][1] - 0.05 <= t <= s + 1e-9 for t in breaks or ())
            if runs and not stopped and s <= runs[-1][1] + self.agent_merge_gap_s:
                runs[-1][1] = max(runs[-1][1], e)
            else:
                runs.append([s, e])
        return [(round(s, 3), round(e, 3)) for s, e in runs]

    def _vad_spans(self) -> list[tuple[float, float]]:
        """Speech stretches from turnkit's Silero VAD over caller.wav (used
        when the host reported no VAD edges)."""
        from turnkit.audio.vad import VADAnalyzer, VADParams
        from turnkit.audio.wav import iter_frames, read_wav

        audio = read_wav(self.folder / "caller.wav", SAMPLE_RATE)
        vad = VADAnalyzer(params=VADParams(stop_ms=96.0))
        spans: list[tuple[float, float]] = []
        step = None
        for start, chunk in iter_frames(audio, vad.frame_samples):
            step = vad.analyze(chunk, start / SAMPLE_RATE)
            if step.stopped:
                spans.append((step.speech_start, step.speech_end))
        if step is not None and step.speaking:
            spans.append((step.speech_start, step.speech_end))
        return [(round(s, 3), round(min(e, self.duration), 3)) for s, e in spans]

    def _utterances(
        self,
        speech: list[tuple[float, float]],
        agent: list[tuple[float, float]],
        interruptions: list[float],
        commits: list[float] | None = None,
    ) -> list[_Utterance]:
        out: list[_Utterance] = []
        current: _Utterance | None = None
        grace = self.barge_in_grace_s
        for i, (s, e) in enumerate(speech):
            playing = next((a for a in agent if a[0] < s < a[1]), None)
            if playing is not None:
                upto = speech[i + 1][0] if i + 1 < len(speech) else math.inf
                if current is not None and current.turn and current.end >= playing[0]:
                    # The agent started over a caller who had not finished
                    # (a cutoff that got out): the caller's turn goes on.
                    current.spans.append((s, e))
                    current.end = e
                elif any(s - 0.05 <= t <= e + grace for t in interruptions):
                    # A barge-in: the agent was stopped while the caller spoke.
                    current = _Utterance(s, e, [(s, e)])
                    out.append(current)
                elif any(s - 0.05 <= t < upto for t in commits or ()):
                    # The agent talked on, but the host took the speech for a
                    # turn and answered it (the caller's "Yes." to a question
                    # the agent was still finishing). Talked-through speech
                    # just before it in the same reply is the same turn.
                    current = _Utterance(s, e, [(s, e)])
                    while out and not out[-1].turn and out[-1].start > playing[0]:
                        before = out.pop()
                        current.start = before.start
                        current.spans = before.spans + current.spans
                    out.append(current)
                else:
                    out.append(_Utterance(s, e, [(s, e)], turn=False))
                continue
            agent_between = current is not None and any(current.end <= a[0] < s for a in agent)
            if current is None or agent_between or not current.turn:
                current = _Utterance(s, e, [(s, e)])
                out.append(current)
            else:
                current.spans.append((s, e))
                current.end = e
        return out

    def _attach_transcripts(self, utterances: list[_Utterance], origin: float) -> None:
        """A final transcript belongs to the utterance its words overlap most
        (or, without words, the utterance it follows). Words are the
        recogniser's evidence of when the caller spoke; a host's VAD edges
        come when it is sure (LiveKit's ``user_state_changed`` 0.1 s after the
        onset or more), so the turn is widened to hold its words."""
        if not utterances:
            return
        starts = [u.start for u in utterances]
        dur = self.duration
        for tr in sorted(self._transcripts, key=lambda t: t.at):
            words = [
                (
                    w,
                    round(min(max(s - origin, 0.0), dur), 3),
                    round(min(max(e - origin, 0.0), dur), 3),
                )
                for w, s, e in tr.words
            ]
            if words:
                lo, hi = words[0][1], max(e for _, _, e in words)
                idx = max(
                    range(len(utterances)),
                    key=lambda i: (
                        min(hi, utterances[i].end) - max(lo, utterances[i].start),
                        -i,
                    ),
                )
            else:
                key = tr.at - origin
                idx = max((i for i, s in enumerate(starts) if s <= key + 0.05), default=0)
            u = utterances[idx]
            u.texts.append(tr.text)
            if not words:
                continue
            floor = utterances[idx - 1].end if idx > 0 else 0.0
            ceil = utterances[idx + 1].start if idx + 1 < len(utterances) else dur
            u.start = max(floor, min(u.start, lo))
            u.end = min(ceil, max(u.end, hi))
            for w, ws, we in words:
                ws = min(max(ws, u.start), u.end)
                u.words.append((w, ws, min(max(we, ws), u.end)))
