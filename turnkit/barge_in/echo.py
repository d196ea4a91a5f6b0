"""Echo filter: is the caller's microphone hearing the caller, or only the
agent's own voice coming back?

:class:`EchoFilter` decides, for each caller frame, how much of it is the
agent's echo, from the audio the agent played (the *reference*: ``agent.wav``
in replay, the output stream live):

1. **Delay search** — generalised cross-correlation (PHAT-weighted, speech
   band) between the last 0.5 s of microphone and reference audio over
   delays of 0 to ``max_delay_ms``. A peak that stands well out of the
   correlation (peak / standard deviation) is an echo path; the median of
   the last accepted peaks is the delay. Without a locked delay there is no
   evidence of echo, unless the reference is loud right now, in which case
   the reference's power over *all* candidate delays is taken as possible
   echo (conservative while the path is being found), capped by what the
   microphone proves (echo is never louder than the microphone: over half a
   second, the microphone's energy per band against the reference's at the
   candidate delay where it is least bounds the echo path's gain; a headset
   caller's silent microphone under a loud agent gives a low bound, so
   their first words over the agent are heard) — until ``no_path_after``
   searches over loud reference in a row found none: then there is no echo
   path (a headset) and the caller passes untouched.
2. **Echo power** — the reference's power spectrum at that delay, smeared by
   the room's decay (``tail_ms``) and scaled per frequency band by the echo
   path's gain, which tracks the lower envelope of mic/reference power on
   frames where the reference is loud (echo-only frames give the lowest
   ratios; caller speech only raises them), times an ``overestimate`` margin.
3. **Residual** — what the microphone holds beyond that echo and the noise
   floor. Caller speech over the agent (double talk) leaves a large residual
   in the bands it occupies; echo alone leaves little. The frame's audio is
   rewritten with the echo bands suppressed (a residual echo suppressor), so
   the VAD and end-of-turn models downstream hear the caller, not the agent.

:class:`EchoTranscriptCheck` is the second line of evidence: a transcript
whose words are a run of the agent's own recent words is its echo. With no
reference (no ``agent.wav``) it is the only one.

Example::

    echo = EchoFilter()
    echo.set_reference(agent_audio)            # replay: the whole agent track
    step = echo.process(frame_audio, at=t)      # live: push_reference() as it plays
    vad.analyze(step.audio, t)                  # echo bands suppressed
"""

from __future__ import annotations

import itertools
import logging
import re
from collections import deque
from dataclasses import dataclass

import numpy as np

from turnkit.audio.wav import resample

__all__ = [
    "EchoFilter",
    "EchoParams",
    "EchoStep",
    "EchoTranscriptCheck",
    "ReferenceBuffer",
    "align_reference",
]

log = logging.getLogger(__name__)


def align_reference(
    ref: np.ndarray, ref_rate: int, n_samples: int, rate: int = 16000, name: str = "agent.wav"
) -> np.ndarray:
    """The reference on the microphone's timeline: resampled to ``rate`` and
    padded or cut to ``n_samples``, with a warning when it had to change
    (another rate or another length than the caller audio)."""
    out = resample(ref, ref_rate, rate) if ref_rate != rate else ref.astype(np.float32)
    if len(out) != n_samples:
        # A few samples of rounding are normal after resampling; more is a
        # recording whose tracks were not cut together.
        if abs(len(out) - n_samples) > rate // 100:
            log.warning(
                "%s: %.3f s long, the caller audio is %.3f s: %s to match",
                name,
                len(out) / rate,
                n_samples / rate,
                "padded with silence" if len(out) < n_samples else "cut",
            )
        out = np.pad(out, (0, max(0, n_samples - len(out))))[:n_samples]
    return np.ascontiguousarray(out, dtype=np.float32)


class ReferenceBuffer:
    """What the loudspeaker played, by absolute sample index (sample 0 is
    the microphone's first sample). Holds the last ``keep_s`` seconds live,
    or a whole track in replay; unknown samples read as silence.

    Writes go into a preallocated array (amortised O(1) per sample): a live
    agent or a replay's feeder pushes a frame at a time."""

    def __init__(self, rate: int = 16000, keep_s: float = 4.0) -> None:
        self.rate = rate
        self._keep = int(keep_s * rate)
        self._arr = np.zeros(0, dtype=np.float32)
        self._off = 0  # _arr[_off : _off + _len] is the buffer
        self._len = 0
        self._start = 0  # absolute index of the buffer's first sample

    @property
    def _buf(self) -> np.ndarray:
        return self._arr[self._off : self._off + self._len]

    @property
    def end(self) -> int:
        """Absolute index one past the last sample written."""
        return self._start + self._len

    def set_track(self, audio: np.ndarray) -> None:
        self._arr = np.ascontiguousarray(audio, dtype=np.float32)
        self._off, self._len = 0, len(self._arr)
        self._start = 0
        self._keep = max(self._keep, len(audio))

    def write(self, audio: np.ndarray, start: int) -> None:
        """Add played samples starting at absolute index ``start`` (what was
        written at or after ``start`` before is replaced)."""
        if start < self._start:  # before what is kept: long gone
            audio, start = audio[self._start - start :], self._start
        if len(audio) > self._keep:
            cut = len(audio) - self._keep
            audio, start = audio[cut:], start + cut
        pos = max(0, start - self._start)  # where audio goes, relative to the buffer
        gap = max(0, pos - self._len)
        new_len = pos + len(audio)
        if self._off + new_len > len(self._arr):
            # Compact (dropping what is past keep) and grow if needed.
            drop = max(0, new_len - self._keep)
            kept = self._arr[self._off + drop : self._off + min(self._len, pos)]
            cap = max(len(self._arr), 2 * self._keep, 2 * (new_len - drop))
            arr = np.zeros(cap, dtype=np.float32)
            arr[: len(kept)] = kept
            self._arr, self._off, self._start = arr, 0, self._start + drop
            pos -= drop
            new_len -= drop
        elif gap:
            self._arr[self._off + self._len : self._off + pos] = 0.0
        self._arr[self._off + pos : self._off + pos + len(audio)] = audio
        self._len = new_len
        if self._len > self._keep:
            drop = self._len - self._keep
            self._off += drop
            self._len -= drop
            self._start += drop

    def view(self, start: int, n: int) -> np.ndarray:
        """Samples ``start .. start + n`` as :meth:`read` gives them, without
        a copy when they are all held (read-only use: the next write may
        change them)."""
        lo = start - self._start
        if lo >= 0 and lo + n <= self._len:
            return self._arr[self._off + lo : self._off + lo + n]
        return self.read(start, n)

    def read(self, start: int, n: int) -> np.ndarray:
        out = np.zeros(n, dtype=np.float32)
        lo = max(start, self._start)
        hi = min(start + n, self._start + self._len)
        if hi > lo:
            o = self._off - self._start
            out[lo - start : hi - start] = self._arr[lo + o : hi + o]
        return out


@dataclass(frozen=True, slots=True)
class EchoParams:
    max_delay_ms: float = 300.0
    search_window_s: float = 0.5  # audio compared per delay search
    search_every: int = 4  # frames between delay searches while the agent plays
    peak_sharpness: float = 6.5  # correlation peak / std for an echo path
    tail_ms: float = 60.0  # room decay smearing the echo after the reference
    overestimate_db: float = 6.0  # margin over the tracked echo path gain
    ref_floor_db: float = -55.0  # reference quieter than this plays nothing
    caller_ratio: float = 1.0  # residual / (echo + noise) above this: the caller
    gain_floor_db: float = -30.0  # most an echo band is suppressed
    band_hz: tuple[float, float] = (150.0, 4000.0)
    # Frames with nothing played within max_delay_ms and no echo tail left
    # skip the spectral work; the noise floor and the search window catch up
    # in one batch when the agent plays again (same verdicts, see process).
    idle_skip: bool = True
    idle_batch: int = 256  # idle frames held before a catch-up batch
    # Delay searches over loud reference that found no echo path, in a row,
    # after which there is none (a headset, a muted speaker): the
    # conservative "any delay" echo estimate stops, so double talk passes.
    no_path_after: int = 24  # ~3 s of agent audio at search_every=4
    # Until then the "any delay" estimate is capped by what the microphone
    # proves: echo is never louder than the microphone, so over a window of
    # ``bound_window`` frames the microphone's energy per band divided by
    # the reference's, at the candidate delay where it is least, bounds the
    # echo path's gain in that band (caller speech and noise only loosen
    # it). The bound is kept as a minimum that relaxes by ``bound_relax``
    # per frame (~1.3 dB/s: a path that grows, a phone put on speaker, is
    # let back in) and used with ``bound_margin_db`` (the candidate delays
    # are a frame grid).
    bound_window: int = 16  # ~0.5 s at 512 samples
    bound_relax: float = 1.01
    bound_margin_db: float = 3.0


@dataclass(slots=True)
class EchoStep:
    """The echo filter's verdict on one microphone frame."""

    audio: np.ndarray  # the frame with echo bands suppressed
    reference_active: bool  # the agent's audio could be in this frame
    echo_power: float  # estimated echo power in the speech band
    residual_power: float  # microphone power beyond echo and noise (nan: idle frame, not measured)
    caller_present: bool  # residual clearly above the echo: someone else speaks
    delay_ms: float | None  # locked echo path delay, if found

    @property
    def echo_only(self) -> bool:
        return self.reference_active and not self.caller_present


class EchoFilter:
    """Decides how much of each microphone frame is the agent's own echo.

    Framework-free and stateful per call; see the module docstring for the
    evidence. ``process`` takes frames in order (any fixed size, 512 at
    16 kHz in turnkit's pipeline).
    """

    def __init__(
        self, params: EchoParams | None = None, rate: int = 16000, frame_samples: int = 512
    ) -> None:
        self.params = params or EchoParams()
        self.rate = rate
        self.n = frame_samples
        self.reference = ReferenceBuffer(rate)
        self.has_reference = False
        p = self.params
        self._maxd = int(p.max_delay_ms * rate / 1000)
        self._delay_frames = -(-self._maxd // frame_samples)
        self._search_len = int(p.search_window_s * rate)
        k = frame_samples // 2 + 1
        freqs = np.fft.rfftfreq(frame_samples, 1 / rate)
        self._band = (freqs >= p.band_hz[0]) & (freqs <= p.band_hz[1])
        self._win = np.hanning(frame_samples).astype(np.float32)
        self._win_power = float(np.sum(self._win**2))
        self._decay = float(np.exp(-frame_samples / rate / (p.tail_ms / 1000)))
        self._over = 10 ** (p.overestimate_db / 10)
        self._ref_floor = 10 ** (p.ref_floor_db / 10)
        self._gain_floor = 10 ** (p.gain_floor_db / 20)
        self._bound_margin = 10 ** (p.bound_margin_db / 10)
        nfft = 1 << int(np.ceil(np.log2(self._search_len + self._maxd)))
        self._nfft = nfft
        sf = np.fft.rfftfreq(nfft, 1 / rate)
        self._search_band = (sf > p.band_hz[0]) & (sf < min(p.band_hz[1], 3500.0))
        self._search_bins = np.flatnonzero(self._search_band)
        # mic[t] matches ref[maxd + t - d]: delay d sits at lag -(maxd - d).
        self._lags = (np.arange(self._maxd + 1) - self._maxd) % nfft
        self._k = k
        # Powers are compared in ~250 Hz bands: a single FFT bin of one frame
        # is far too noisy to tell echo from speech.
        edges = np.arange(p.band_hz[0], p.band_hz[1] + 1, 250.0)
        self._bands = np.stack(
            [(freqs >= lo) & (freqs < hi) for lo, hi in itertools.pairwise(edges)]
        ).astype(np.float64)
        self._bin_band = np.argmax(np.vstack([self._bands, 1e-9 * np.ones(k)]), axis=0)
        self._gbuf = np.ones(len(self._bands) + 1)  # per-band gains, then 1 (no band)
        self._zeros_k = np.zeros(k)
        self.reset()

    # -- reference -----------------------------------------------------------
    def set_reference(self, audio: np.ndarray) -> None:
        """The whole played track, on the microphone's timeline (replay)."""
        self.reference.set_track(audio)
        self.has_reference = True

    def push_reference(self, audio: np.ndarray, at: float) -> None:
        """Audio the loudspeaker played starting at clock time ``at`` (live)."""
        self.reference.write(audio, round(at * self.rate))
        self.has_reference = True

    def reset(self) -> None:
        self._mic = np.zeros(self._search_len, dtype=np.float32)
        self._delays: deque[int] = deque(maxlen=5)
        self._frames = 0
        self._pr = np.zeros(self._k)
        nb = len(self._bands)
        # Echo path power gain per band, a least-squares fit of mic power on
        # reference power over echo-only frames (forgetting ~2 s); it starts
        # at 0 dB (all reference-band sound is echo) until it has evidence.
        self._xy = np.zeros(nb)
        self._yy = np.zeros(nb)
        self._gain = np.ones(nb)
        # Upper bound on the echo path gain per band while no delay is
        # locked (inf: no evidence yet), from windows of consecutive frames'
        # microphone and (delay-0) reference band powers.
        self._bound = np.full(nb, np.inf)
        self._ref_now: np.ndarray | None = None  # delay-0 reference frame power
        w = self.params.bound_window
        self._hist_mic: deque[np.ndarray] = deque(maxlen=w)
        self._hist_ref: deque[np.ndarray] = deque(maxlen=w + self._delay_frames)
        self._noise: np.ndarray | None = None
        self.delay_samples: int | None = None
        self._misses = 0  # delay searches in a row that found no echo path
        self._idle: list[np.ndarray] = []  # idle frames not yet in _mic / _noise
        self.idle_frames = 0  # frames that skipped the spectral work

    @property
    def delay_ms(self) -> float | None:
        return None if self.delay_samples is None else self.delay_samples * 1000 / self.rate

    # -- decision --------------------------------------------------------------
    def process(self, frame: np.ndarray, at: float) -> EchoStep:
        n = len(frame)
        idx = round(at * self.rate)
        # Is anything playing that could reach this frame (any delay)?
        playing = self.has_reference and self._playing(idx, n)
        if (
            not playing
            and self.params.idle_skip
            and n == self.n
            and not self._pr.any()
            and (
                self.delay_samples is None
                or not self.reference.view(idx - self.delay_samples, n).any()
            )
        ):
            # Idle: no echo can be in this frame and the verdict is "not
            # active" whatever the spectrum; only the noise floor and the
            # search window need the frame, and they get it in a batch.
            self._frames += 1
            self.idle_frames += 1
            self._forget_bound_window()
            self._idle.append(np.array(frame, dtype=np.float32))
            if len(self._idle) >= self.params.idle_batch:
                self._catch_up()
            return EchoStep(frame, False, 0.0, float("nan"), False, self.delay_ms)
        self._catch_up()
        self._mic = np.concatenate([self._mic[n:], frame.astype(np.float32)])
        self._frames += 1
        spec = np.fft.rfft(frame * self._win[:n] if n == self.n else frame)
        px = (np.abs(spec) ** 2) / self._win_power
        self._track_noise(px)
        if playing and self._frames % self.params.search_every == 0:
            self._search_delay(idx + n)
        pr = self._reference_power(idx, n, playing)
        active = bool(np.any(pr[self._band] > 0))
        if not active or self._ref_now is None:
            self._forget_bound_window()
        if not active:
            return EchoStep(frame, False, 0.0, float(px[self._band].sum()), False, self.delay_ms)
        bx = self._bands @ px
        br = self._bands @ pr
        noise = self._noise if self._noise is not None else np.zeros_like(px)
        bn = self._bands @ noise
        gain = self._over * self._gain
        if self._ref_now is not None:
            # No delay locked, the agent playing: cap the "any delay"
            # estimate by the gain the microphone allows (see EchoParams;
            # a bound, so its own margin, not the tracked gain's).
            gain = np.minimum(gain, self._update_bound(bx) * self._bound_margin)
        elif self.delay_samples is None:
            # The agent has stopped and its tail is still taken as possible
            # echo: the same path, so the same bound. Without it, a caller
            # who answers within ~0.5 s of the agent's last word (most do)
            # has their first syllables suppressed as "echo" on a line with
            # none, and the quieter the caller the more of them.
            gain = np.minimum(gain, self._bound * self._bound_margin)
        echo_b = gain * br
        residual = np.maximum(bx - echo_b - bn, 0.0)
        e_band = float(echo_b.sum())
        r_band = float(residual.sum())
        caller = r_band > self.params.caller_ratio * (e_band + float(bn.sum()))
        if self.delay_samples is not None and playing and not caller:
            self._learn_gain(bx, br)
        # Residual echo suppression: each band keeps what exceeds its echo;
        # echo alone: nothing in this frame is the caller's (gain floor).
        # gbuf's last slot (bins outside the bands) stays 1.
        gbuf = self._gbuf
        if caller:
            g = np.minimum(np.maximum(1.0 - echo_b / np.maximum(bx, 1e-20), 0.0), 1.0)
            gbuf[:-1] = np.maximum(np.sqrt(g), self._gain_floor)
        else:
            gbuf[:-1] = self._gain_floor
        gains = gbuf[self._bin_band]
        raw = np.fft.rfft(frame)
        cleaned = np.fft.irfft(raw * gains, n).astype(np.float32)
        return EchoStep(cleaned, True, e_band, r_band, bool(caller), self.delay_ms)

    def _playing(self, idx: int, n: int) -> bool:
        """Is the reference's mean power over every delay that could reach
        this frame above ``ref_floor``? The verdict is the float32
        ``mean(span**2)``'s; a dot product (no temporaries) settles it
        unless it lies within 1 % of the floor, where the exact mean is
        taken (a float32 sum of 5,312 squares is off by far less)."""
        span = self.reference.view(idx - self._maxd, self._maxd + n)
        e = float(np.dot(span, span)) / len(span)
        if e > self._ref_floor * 1.01:
            return True
        if e < self._ref_floor * 0.99:
            return False
        return float(np.mean(span**2)) > self._ref_floor

    def _catch_up(self) -> None:
        """Idle frames into the search window and the noise floor, as if
        each had been processed in turn (one batched FFT)."""
        if not self._idle:
            return
        frames = np.stack(self._idle)
        self._idle = []
        flat = frames.ravel()
        if len(flat) >= self._search_len:
            self._mic = flat[-self._search_len :].copy()
        else:
            self._mic = np.concatenate([self._mic[len(flat) :], flat])
        spec = np.fft.rfft(frames * self._win[None, :], axis=1)
        pxs = (np.abs(spec) ** 2) / self._win_power
        for px in pxs:
            self._track_noise(px)

    def _track_noise(self, px: np.ndarray) -> None:
        # Minimum-statistics style floor: falls at once, rises slowly.
        if self._noise is None:
            self._noise = px.copy()
            return
        self._noise = np.where(px < self._noise, px, self._noise * 1.01)

    def _update_bound(self, bx: np.ndarray) -> np.ndarray:
        """The echo path gain bound per band, with this frame's microphone
        band powers ``bx`` (see EchoParams)."""
        assert self._ref_now is not None
        self._hist_mic.append(bx)
        self._hist_ref.append(self._bands @ self._ref_now)
        self._bound *= self.params.bound_relax
        w = self.params.bound_window
        if len(self._hist_ref) == self._hist_ref.maxlen:  # (and _hist_mic holds w)
            ref = np.cumsum(np.vstack([np.zeros((1, len(bx))), *self._hist_ref]), axis=0)
            # Window energy of the reference at each delay d (frames): the
            # w frames ending d frames before this one.
            ends = len(self._hist_ref) - np.arange(self._delay_frames + 1)
            least = (ref[ends] - ref[ends - w]).min(axis=0)
            mic = np.sum(self._hist_mic, axis=0)
            ratio = np.divide(mic, least, out=np.full_like(mic, np.inf), where=least > 1e-12)
            self._bound = np.minimum(self._bound, ratio)
        return self._bound

    def _forget_bound_window(self) -> None:
        """The bound's windows need consecutive "any delay" frames: start
        them again after a frame that was not one."""
        if self._hist_ref:
            self._hist_mic.clear()
            self._hist_ref.clear()

    def _reference_power(self, idx: int, n: int, playing: bool) -> np.ndarray:
        self._ref_now = None
        if self.delay_samples is not None:
            ref = self.reference.view(idx - self.delay_samples, n)
            if ref.any():
                spec = np.fft.rfft(ref * self._win[:n] if n == self.n else ref)
                now = (np.abs(spec) ** 2) / self._win_power
            else:  # silence at the delay: its spectrum is zero
                now = self._zeros_k
        elif playing and not self.no_echo_path:
            # Path not found yet: any delay is possible, so the loudest
            # reference frame in the window stands for the echo.
            span = self.reference.view(idx - self._maxd, self._maxd + n)
            frames = span[len(span) % n :].reshape(-1, n)
            spec = np.fft.rfft(frames * self._win[None, :n], axis=1)
            powers = (np.abs(spec) ** 2) / self._win_power
            now = powers.max(axis=0)
            self._ref_now = powers[-1]  # the frame at delay 0
        else:
            now = np.zeros(self._k)
        self._pr = np.maximum(now, self._decay * self._pr)
        self._pr[self._pr < self._ref_floor * 1e-3] = 0.0
        return self._pr

    def _learn_gain(self, bx: np.ndarray, br: np.ndarray) -> None:
        loud = br > self._ref_floor
        if not np.any(loud):
            return
        f = 0.985  # ~2 s memory at 32 ms frames
        self._xy = np.where(loud, f * self._xy + bx * br, self._xy)
        self._yy = np.where(loud, f * self._yy + br * br, self._yy)
        seen = self._yy > 0
        self._gain = np.where(seen, self._xy / np.maximum(self._yy, 1e-30), self._gain)

    def _search_delay(self, end: int) -> None:
        mic = self._mic
        if float(np.mean(mic**2)) <= 0.0:
            return
        ref = self.reference.view(
            end - self._search_len - self._maxd, self._search_len + self._maxd
        )
        if float(np.mean(ref[-self._search_len :] ** 2)) < self._ref_floor:
            return
        m = np.fft.rfft(mic, self._nfft)
        r = np.fft.rfft(ref, self._nfft)
        # PHAT weighting in the search band; the other bins are zero (only
        # the band's bins are computed: the same values elementwise).
        b = self._search_bins
        cross_b = m[b] * np.conj(r[b])
        cross = np.zeros(len(m), dtype=cross_b.dtype)
        cross[b] = cross_b / (np.abs(cross_b) + 1e-12)
        cc = np.fft.irfft(cross, self._nfft)
        vals = cc[self._lags]
        best = int(np.argmax(vals))
        sharp = float(vals[best] / (np.std(vals) + 1e-12))
        if sharp >= self.params.peak_sharpness:
            self._misses = 0
            self._delays.append(best)
            if len(self._delays) >= 2:
                self.delay_samples = int(np.median(self._delays))
        else:
            self._misses += 1

    @property
    def no_echo_path(self) -> bool:
        """No echo path found over ``no_path_after`` searches of loud
        reference in a row, and none locked before: the microphone does not
        hear the agent (a headset)."""
        return self.delay_samples is None and self._misses >= self.params.no_path_after


_WORD = re.compile(r"[a-z0-9']+")


def _said(at: float, text: str, playing_since: float | None, played_chars: int | None) -> str:
    """What the agent has said of ``text``, begun playing at ``at``: a
    reply that began at ``playing_since`` or later only its first
    ``played_chars`` characters; anything else whole."""
    if playing_since is None or played_chars is None or at < playing_since - 1e-9:
        return text
    return text[: max(0, played_chars)]


class EchoTranscriptCheck:
    """Is a caller transcript the agent's own words coming back?

    Evidence: the agent's text of the last ``window_s`` seconds, as far as
    it has played: the reply playing now only up to ``played_chars`` (the
    host's playback marks, or time at a nominal rate). A transcript of at
    least ``min_words`` words that appears as a contiguous run of those
    words is echo (a recogniser hearing the loudspeaker); one or two words
    ("friday", "yes") are too common to tell, so they pass. Words the agent
    has not said yet cannot come back: a caller reading out "zero one three
    two" while the agent's reply, 0.2 s in, was to read the same number
    back was taken for its echo and talked over for the whole reply.
    """

    def __init__(self, min_words: int = 2, window_s: float = 20.0) -> None:
        self.min_words = min_words
        self.window_s = window_s
        self._texts: deque[tuple[float, str]] = deque()

    def agent_said(self, text: str, at: float) -> None:
        """The agent's text ``text`` began playing at ``at``."""
        self._texts.append((at, text.lower()))

    def agent_stopped(self, playing_since: float, played_chars: int) -> None:
        """The reply that began playing at ``playing_since`` stopped after
        ``played_chars`` characters (cut off): its unsaid rest is no echo."""
        self._texts = deque(
            (at, _said(at, text, playing_since, played_chars)) for at, text in self._texts
        )

    def is_echo(
        self,
        transcript: str,
        now: float,
        playing_since: float | None = None,
        played_chars: int | None = None,
    ) -> bool:
        """``playing_since``/``played_chars``: the reply playing now began
        at that time and has played that many characters of its text
        (``agent_said`` texts from then on are cut there)."""
        while self._texts and self._texts[0][0] < now - self.window_s:
            self._texts.popleft()
        words = _WORD.findall(transcript.lower())
        if len(words) < self.min_words:
            return False
        k = len(words)
        for at, text in self._texts:
            agent = _WORD.findall(_said(at, text, playing_since, played_chars))
            for i in range(len(agent) - k + 1):
                if agent[i : i + k] == words:
                    return True
        return False
