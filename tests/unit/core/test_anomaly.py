"""core.anomaly: the metric names, the band of a history by `mad` and `zscore`, and the verdict's words."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wap_ingest.core.anomaly import BARS, MAD_SCALE, Metric, band, judge, parse_metric, sparkline


@pytest.mark.parametrize(("text", "metric"), [("row_count", Metric("row_count")),
                                              ("null_share(email)", Metric("null_share", "email")),
                                              (" mean( amount ) ", Metric("mean", "amount")),
                                              ("distinct(c_1)", Metric("distinct", "c_1"))])
def test_metric_names(text: str, metric: Metric) -> None:
    assert parse_metric(text) == metric


@pytest.mark.parametrize("text", ["rows", "null_share", "median(a)", "mean(a.b)", "mean(a); DROP", 3, None])
def test_other_names_are_refused_with_the_list(text: object) -> None:
    refused = parse_metric(text)
    assert isinstance(refused, str) and ("row_count" in refused)


def test_mad_band_is_the_median_plus_minus_threshold_scaled_mads_and_ignores_one_outlier() -> None:
    found = band([1, 2, 3, 4, 100], "mad", 4)
    assert found.centre == 3 and found.spread == pytest.approx(MAD_SCALE)
    assert found.low == pytest.approx(3 - 4 * MAD_SCALE) and found.high == pytest.approx(3 + 4 * MAD_SCALE)
    assert not found.holds(100)  # the earlier outlier did not widen the band to admit its like


def test_zscore_band_is_the_mean_plus_minus_threshold_deviations() -> None:
    found = band([2, 4, 4, 4, 5, 5, 7, 9], "zscore", 2)
    assert (found.centre, found.spread) == (5, 2)
    assert found.holds(9) and not found.holds(9.01) and found.holds(1) and not found.holds(0.99)


def test_a_history_without_spread_admits_its_value_and_not_another() -> None:
    found = band([0.02] * 20, "mad", 4)
    assert found.holds(0.02) and not found.holds(0.021)
    assert band([0.0] * 5, "zscore", 3).holds(0.0) and not band([0.0] * 5, "zscore", 3).holds(0.001)


def test_the_issues_example_twenty_clean_loads_then_ten_times_the_null_share() -> None:
    rng = random.Random(36)
    history = [0.02 + rng.uniform(-0.003, 0.003) for _ in range(20)]
    metric = Metric("null_share", "email")
    usual = judge(metric, 0.021, history, method="mad", threshold=4, min_loads=5)
    shifted = judge(metric, 0.2, history, method="mad", threshold=4, min_loads=5)
    assert usual.ok and not shifted.ok
    assert shifted.measured.startswith("null_share(email) = 0.2, +") and "spreads from the median 0.02" in \
        shifted.measured
    assert "last 20 loads" in shifted.expected and "4 x MAD x 1.4826" in shifted.expected


def test_too_few_loads_pass_and_say_so() -> None:
    verdict = judge(Metric("row_count"), 10_000, [10, 11, 12], method="zscore", threshold=3, min_loads=5)
    assert verdict.ok and "3 earlier loads, too few to judge" in verdict.measured
    assert verdict.expected == "at least 5 earlier loads"


def test_a_load_without_the_figure_is_not_judged_and_says_so() -> None:
    verdict = judge(Metric("mean", "a"), None, [1.0] * 10, method="mad", threshold=4, min_loads=5)
    assert verdict.ok and "no value in this load" in verdict.measured


def test_non_finite_history_values_are_left_out() -> None:
    verdict = judge(Metric("mean", "a"), 5.0, [float("nan"), float("inf"), 5.0, 5.0, 5.0], method="mad",
                    threshold=4, min_loads=3)
    assert verdict.ok and "last 3 loads" in verdict.expected


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=40),
       st.sampled_from(["mad", "zscore"]), st.floats(min_value=0.5, max_value=10))
def test_the_centre_always_holds_and_the_band_is_symmetric(values: list[float], method: str,
                                                           threshold: float) -> None:
    found = band(values, method, threshold)
    assert found.holds(found.centre) and found.spread > 0
    assert found.high - found.centre == pytest.approx(found.centre - found.low)
    assert not found.holds(found.high + found.spread) and not found.holds(found.low - found.spread)


def test_a_sparkline_scales_the_values_to_eight_heights() -> None:
    assert sparkline([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]) == BARS
    assert sparkline([5.0, 5.0, 5.0]) == BARS[3] * 3  # no spread: a flat middle line
    assert sparkline([0.02, 0.03, 0.25]) == "\u2581\u2581\u2588"


def test_a_failing_verdict_shows_the_loads_as_a_sparkline_and_the_band_within_the_metrics_domain() -> None:
    history = (0.03, 0.02, 0.025, 0.02, 0.03, 0.025)  # newest first
    failed = judge(Metric("null_share", "email"), 0.25, history, method="mad", threshold=4, min_loads=5)
    assert not failed.ok
    assert failed.measured.endswith("the last 6 loads, oldest first, then this one: " + BARS[0] * 6 + BARS[-1])
    assert failed.expected.startswith("between 0 and ")  # a share is never below 0
    passed = judge(Metric("null_share", "email"), 0.025, history, method="mad", threshold=4, min_loads=5)
    assert passed.ok and "loads, oldest first" not in passed.measured
    wide = judge(Metric("mean", "amount"), 1.0, (1.0, 1.1, 0.9, 1.0, 1.05), method="zscore", threshold=100,
                 min_loads=5)
    assert wide.ok and wide.expected.startswith("between -")  # a mean may be negative


def test_when_most_loads_sit_on_the_median_the_mean_deviation_gives_the_spread() -> None:
    repeating = [0.02, 0.03, 0.02, 0.03, 0.02, 0.02, 0.03]  # MAD 0: four of seven equal the median
    found = band(repeating, "mad", 4)
    assert found.centre == 0.02 and found.spread == pytest.approx(1.2533 * 0.03 / 7)
    assert found.holds(0.03) and not found.holds(0.08)
    assert band([5.0, 5.0, 5.0], "mad", 4).spread == pytest.approx(5e-9)  # all equal: the floor
