"""LatencyModel: fixed values and log-normals fitted through percentiles."""

from __future__ import annotations

import math
import random

import pytest

from turnkit.replay.latency import LatencyModel, LatencySpecError


def empirical(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


@pytest.mark.parametrize("spec", ["350", 350, 350.0, " 350 "])
def test_plain_number_is_a_fixed_latency(spec):
    m = LatencyModel.parse(spec)
    assert m.value == 350.0
    rng = random.Random(1)
    assert {m.sample(rng) for _ in range(100)} == {350.0}
    assert m.percentile(0.05) == m.percentile(0.99) == 350.0


def test_zero_is_a_valid_fixed_latency():
    m = LatencyModel.parse("0")
    assert m.sample(random.Random(0)) == 0.0


def test_two_percentiles_give_a_lognormal_through_them():
    m = LatencyModel.parse("p50=300,p95=900")
    assert m.value is None
    assert m.sigma > 0
    assert m.percentile(0.5) == pytest.approx(300, rel=0.01)
    assert m.percentile(0.95) == pytest.approx(900, rel=0.01)
    assert m.mu == pytest.approx(math.log(300), rel=1e-6)


def test_percentile_spec_is_case_and_space_tolerant():
    m = LatencyModel.parse(" P50 = 300 , p95=900 ")
    assert m.percentile(0.5) == pytest.approx(300, rel=0.01)
    assert m.percentile(0.95) == pytest.approx(900, rel=0.01)


def test_percentile_order_in_the_spec_does_not_matter():
    a = LatencyModel.parse("p95=900,p50=300")
    b = LatencyModel.parse("p50=300,p95=900")
    assert (a.mu, a.sigma) == pytest.approx((b.mu, b.sigma))


def test_three_percentiles_on_one_lognormal_are_fitted_exactly():
    truth = LatencyModel.parse("p50=200,p90=700")
    spec = ",".join(f"p{q}={truth.percentile(q / 100):.6f}" for q in (10, 50, 99))
    m = LatencyModel.parse(spec)
    assert m.mu == pytest.approx(truth.mu, rel=1e-6)
    assert m.sigma == pytest.approx(truth.sigma, rel=1e-6)


def test_samples_with_a_seeded_rng_are_repeatable():
    m = LatencyModel.parse("p50=300,p95=900")

    def draw(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [m.sample(rng) for _ in range(100)]

    first = draw(42)
    assert draw(42) == first
    assert draw(43) != first
    assert len(set(first)) == 100  # a distribution, not a constant
    assert all(x > 0 for x in first)


def test_empirical_percentiles_of_samples_match_the_spec():
    m = LatencyModel.parse("p50=300,p95=900")
    rng = random.Random(2024)
    xs = [m.sample(rng) for _ in range(20_000)]
    assert empirical(xs, 0.50) == pytest.approx(300, rel=0.05)
    assert empirical(xs, 0.95) == pytest.approx(900, rel=0.05)


def test_equal_percentiles_give_a_constant_latency():
    m = LatencyModel.parse("p50=300,p95=300")
    assert m.sigma == 0
    rng = random.Random(0)
    assert all(x == pytest.approx(300) for x in (m.sample(rng) for _ in range(50)))


@pytest.mark.parametrize(
    "spec",
    [
        "abc",
        "",
        "p50=300",  # one percentile cannot fix a spread
        "p50=900,p95=300",  # decreasing
        "-5",
        "nan",
        "inf",
        "p0=1,p50=2",  # p0 is -infinity on the normal scale
        "p100=5,p50=3",
        "p50=0,p95=900",
        "p50=-3,p95=900",
        "p50=300,,p95=900",
        "p50=abc,p95=900",
        "pxx=3,p50=2",
        "50=300,95=900",
    ],
)
def test_bad_specs_raise_latency_spec_error(spec):
    with pytest.raises(LatencySpecError) as exc:
        LatencyModel.parse(spec)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("spec", ["p50=300,p50=400", "p50=300,p50=300"])
def test_repeated_percentile_is_a_spec_error(spec):
    # Two points at the same quantile leave the spread undetermined.
    with pytest.raises(LatencySpecError):
        LatencyModel.parse(spec)


@pytest.mark.parametrize("spec", ["p50=nan,p95=900", "p50=300,p95=inf"])
def test_non_finite_percentile_values_are_spec_errors(spec):
    with pytest.raises(LatencySpecError):
        LatencyModel.parse(spec)


def test_latency_spec_error_is_a_value_error():
    assert issubclass(LatencySpecError, ValueError)
