"""Anomaly checks' arithmetic (issue 36, item 2), pure: which metric of a load a check watches, and whether its
value lies inside the band its table's published history gives.

    anomaly: {metric: null_share(email), last: 30, min_loads: 5, method: mad, threshold: 4}

`mad`: the band is the median of the last loads' values plus or minus `threshold` times their median absolute
deviation, scaled by 1.4826 so that it estimates the standard deviation of normally distributed values (robust: one
earlier outlier moves neither the centre nor the spread much); when over half the loads equal the median (counts
that repeat), the MAD is 0 and the mean absolute deviation from the median, scaled by 1.2533, stands in. `zscore`:
the mean plus or minus `threshold` standard deviations. A history whose values are all equal has no spread: the band
is that value, widened by `FLOOR` of its magnitude (and never narrower than `FLOOR`) so that rounding noise does not
fail a load. A failing verdict draws the last loads and this one as a sparkline (eight block heights), and the band
is shown within the metric's domain (a share between 0 and 1, a count not below 0).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

METHODS = ("mad", "zscore")
COLUMN_METRICS = ("null_share", "mean", "distinct", "min", "max")
TABLE_METRICS = ("row_count",)
MAD_SCALE = 1.4826  # MAD x this estimates sigma for normal data
MEAN_AD_SCALE = 1.2533  # the mean absolute deviation x this estimates sigma for normal data
FLOOR = 1e-9
_METRIC = re.compile(r"^\s*(?:(?P<table>row_count)|(?P<kind>[a-z_]+)\(\s*(?P<column>[A-Za-z_][A-Za-z0-9_]*)\s*\))\s*$")


@dataclass(frozen=True)
class Metric:
    """One figure of a load: `row_count`, or a column's `null_share`, `mean`, `distinct`, `min` or `max`."""

    kind: str
    column: str | None = None

    @property
    def name(self) -> str:
        return self.kind if self.column is None else f"{self.kind}({self.column})"


def parse_metric(text: object) -> Metric | str:
    """The metric `text` names, or why it names none (a sentence for the audits file's error)."""
    found = _METRIC.match(text) if isinstance(text, str) else None
    if found is None:
        return (f"metric must be row_count or one of {', '.join(f'{m}(column)' for m in COLUMN_METRICS)}, "
                f"got {text!r}")
    if found["table"]:
        return Metric("row_count")
    if found["kind"] not in COLUMN_METRICS:
        return f"metric {found['kind']!r} is not one of {', '.join(COLUMN_METRICS)} (or row_count)"
    return Metric(found["kind"], found["column"])


@dataclass(frozen=True)
class Band:
    """What the history says a value should be: its centre, its spread and the bounds `threshold` spreads away."""

    method: str
    centre: float
    spread: float
    threshold: float
    loads: int

    @property
    def low(self) -> float:
        return self.centre - self.threshold * self.spread

    @property
    def high(self) -> float:
        return self.centre + self.threshold * self.spread

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def deviations(self, value: float) -> float:
        """How many spreads `value` lies from the centre (signed)."""
        return (value - self.centre) / self.spread


def band(history: Sequence[float], method: str, threshold: float) -> Band:
    """The band of `history` (at least one value, all finite) by `method` (METHODS)."""
    if not history:
        raise ValueError("a band needs at least one earlier value")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    values = [float(v) for v in history]
    if method == "mad":
        centre = statistics.median(values)
        deviations = [abs(v - centre) for v in values]
        spread = MAD_SCALE * statistics.median(deviations)
        if spread == 0:  # over half the loads sit on the median: their mean deviation says how far the rest stray
            spread = MEAN_AD_SCALE * statistics.fmean(deviations)
    else:
        centre = statistics.fmean(values)
        spread = statistics.pstdev(values, centre) if len(values) > 1 else 0.0
    return Band(method, centre, max(spread, FLOOR * abs(centre), FLOOR), threshold, len(values))


@dataclass(frozen=True)
class Verdict:
    ok: bool
    measured: str  # the value, and how far from the centre
    expected: str  # the band, how it was made and from how many loads


def judge(metric: Metric, value: float | None, history: Sequence[float], *, method: str, threshold: float,
          min_loads: int) -> Verdict:
    """Whether `value` (None: the load gives no such figure, e.g. the mean of a column with no values) is normal for
    a table whose last published loads gave `history` (newest first, non-finite values left out)."""
    kept = [float(v) for v in history if v is not None and math.isfinite(v)]
    if value is None or not math.isfinite(value):
        return Verdict(True, f"{metric.name}: no value in this load", "a value to compare (none: not judged)")
    if len(kept) < min_loads:
        return Verdict(True, f"{metric.name} = {_number(value)}; {len(kept)} earlier loads, too few to judge",
                       f"at least {min_loads} earlier loads")
    found = band(kept, method, threshold)
    centre = "median" if method == "mad" else "mean"
    spread = "MAD x 1.4826" if method == "mad" else "standard deviation"
    ok = found.holds(value)
    low, high = _within_domain(metric, found.low, found.high)
    trend = "" if ok else (f"; the last {len(kept)} loads, oldest first, then this one: "
                           f"{sparkline([*reversed(kept), value])}")
    return Verdict(
        ok,
        f"{metric.name} = {_number(value)}, {found.deviations(value):+.1f} spreads from the {centre} "
        f"{_number(found.centre)}{trend}",
        f"between {_number(low)} and {_number(high)} ({centre} {_number(found.centre)} +/- "
        f"{_number(threshold)} x {spread} {_number(found.spread)}, last {found.loads} loads)")


BARS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"  # eight block heights, lowest first


def sparkline(values: Sequence[float]) -> str:
    """The values as a line of block characters, the lowest value the lowest block (all equal: the middle one)."""
    low, high = min(values), max(values)
    if high - low <= FLOOR * max(abs(low), abs(high), 1.0):
        return BARS[3] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int((v - low) / (high - low) * len(BARS)))] for v in values)


def _within_domain(metric: Metric, low: float, high: float) -> tuple[float, float]:
    """The band as the metric's values can be: a share between 0 and 1, a count or distinct estimate not below 0."""
    if metric.kind == "null_share":
        return max(low, 0.0), min(high, 1.0)
    if metric.kind in ("row_count", "distinct"):
        return max(low, 0.0), high
    return low, high


def _number(value: float) -> str:
    return f"{value:.6g}"
