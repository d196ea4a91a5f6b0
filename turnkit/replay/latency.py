"""The replay's model of the LLM's first token and the TTS's first audio.

A value is either fixed (``"350"``) or a distribution given by percentiles
(``"p50=300,p95=900"``): a log-normal is fitted through them (least squares
on the normal quantiles of the log-values), since service latencies are
right-skewed and positive. Sampling uses the caller's RNG, so a replay with a
seed is repeatable.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["MAX_LATENCY_MS", "LatencyModel", "LatencySpecError"]

# Longest latency a spec may give or a fitted distribution may reach at its
# 99.9th percentile: ten minutes. Past that a spec is a typo, and its
# samples overflow floats (exp(1e3)) inside the replay.
MAX_LATENCY_MS = 600_000.0
# Smallest percentile value: a microsecond (1e-300 ms fits a sigma of
# hundreds, i.e. samples of 0 and inf).
MIN_LATENCY_MS = 1e-3


class LatencySpecError(ValueError):
    """A latency option that is neither a number of milliseconds (0 to the
    maximum) nor percentiles like ``p50=300,p95=900``: the CLI names the
    option, exit 2."""


@dataclass(frozen=True)
class LatencyModel:
    """Milliseconds: fixed ``value`` or log-normal (``mu``, ``sigma``)."""

    spec: str
    value: float | None = None
    mu: float = 0.0
    sigma: float = 0.0

    @classmethod
    def parse(cls, spec: str | float) -> LatencyModel:
        text = str(spec).strip()
        try:
            v = float(text)
        except ValueError:
            pass
        else:
            if v < 0 or not math.isfinite(v) or v > MAX_LATENCY_MS:
                raise LatencySpecError(
                    f"latency {text!r}: must be a number of ms from 0 to {MAX_LATENCY_MS:.0f}"
                )
            return cls(spec=text, value=v)
        points: list[tuple[float, float]] = []
        for item in text.split(","):
            key, eq, val = item.strip().partition("=")
            key = key.strip().lower()
            if not eq or not key.startswith("p"):
                raise LatencySpecError(
                    f"latency {text!r}: expected milliseconds or percentiles like 'p50=300,p95=900'"
                )
            try:
                q = float(key[1:]) / 100
                ms = float(val)
            except ValueError:
                raise LatencySpecError(f"latency {text!r}: cannot read {item.strip()!r}") from None
            if not 0 < q < 1 or not MIN_LATENCY_MS <= ms <= MAX_LATENCY_MS:
                raise LatencySpecError(
                    f"latency {text!r}: {item.strip()!r} out of range (percentile in (0, 100), "
                    f"ms from {MIN_LATENCY_MS:g} to {MAX_LATENCY_MS:.0f})"
                )
            points.append((q, ms))
        points.sort()
        if len({q for q, _ in points}) != len(points):
            raise LatencySpecError(f"latency {text!r}: a percentile is given twice")
        if len(points) < 2:
            raise LatencySpecError(f"latency {text!r}: give at least two percentiles")
        if any(b[1] < a[1] for a, b in itertools.pairwise(points)):
            raise LatencySpecError(f"latency {text!r}: percentiles must not decrease")
        z = [NormalDist().inv_cdf(q) for q, _ in points]
        y = [math.log(ms) for _, ms in points]
        zm, ym = sum(z) / len(z), sum(y) / len(y)
        szz = sum((a - zm) ** 2 for a in z)
        sigma = sum((a - zm) * (b - ym) for a, b in zip(z, y, strict=True)) / szz
        mu = ym - sigma * zm
        model = cls(spec=text, mu=mu, sigma=max(0.0, sigma))
        tail = model.percentile(0.999)
        if not tail <= MAX_LATENCY_MS:
            raise LatencySpecError(
                f"latency {text!r}: the fitted distribution's p99.9 is {tail:.3g} ms "
                f"(over {MAX_LATENCY_MS:.0f}): the percentiles are too far apart"
            )
        return model

    def sample(self, rng: random.Random) -> float:
        if self.value is not None:
            return self.value
        # A parsed model's p99.9 is bounded; the far tail is cut there at
        # 20x that bound so that no sample overflows (probability < 1e-12).
        return min(math.exp(min(rng.gauss(self.mu, self.sigma), 700.0)), 20 * MAX_LATENCY_MS)

    def percentile(self, q: float) -> float:
        if self.value is not None:
            return self.value
        return math.exp(min(self.mu + self.sigma * NormalDist().inv_cdf(q), 700.0))
