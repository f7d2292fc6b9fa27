"""Checks judged against the table's own published history (issue 36): `anomaly`, a metric of the new rows against
the band its last published loads give (core.anomaly)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wap_ingest.core.anomaly import METHODS, Metric, judge, parse_metric
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import CheckResult

from .base import AuditContext, Check, _present

ANOMALY_KEYS = {"metric", "last", "min_loads", "method", "threshold"}


@dataclass(frozen=True)
class Anomaly(Check):
    metric: Metric
    last: int = 30
    min_loads: int = 5
    method: str = "mad"
    threshold: float = 4.0
    severity: str = "error"
    kind = "anomaly"

    def plan(self) -> MeasurementPlan:
        column = self.metric.column
        if column is None:
            return MeasurementPlan()
        if self.metric.kind == "null_share":  # the files' metrics answer it: no row read
            return MeasurementPlan(null_count_columns=(column,))
        return MeasurementPlan(profile_columns=(column,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        target = self.metric.name
        if self.metric.column is None:
            value: float | None = float(measured.row_count)
        else:
            name = _present(measured, self.metric.column)
            if name is None:
                return [self._missing(target, f"{target} within its history's band")]
            value = metric_value(self.metric, name, measured)
        history = context.metrics.get(target, ())[: self.last]
        verdict = judge(self.metric, value, history, method=self.method, threshold=self.threshold,
                        min_loads=self.min_loads)
        return [self._result(target, verdict.ok, verdict.measured, verdict.expected)]


def metric_value(metric: Metric, column: str, measured: Measurements) -> float | None:
    """The load's value of a column metric (None: these rows give none)."""
    if metric.kind == "null_share":
        nulls = measured.null_counts.get(column)
        return None if nulls is None or measured.row_count == 0 else nulls / measured.row_count
    profile = measured.profile.get(column)
    return None if profile is None else getattr(profile, metric.kind)


def anomaly_from(spec: Mapping[str, Any], where: str, severity: str) -> Anomaly:
    metric = parse_metric(spec.get("metric"))
    if isinstance(metric, str):
        raise AuditSuiteError(f"{where}: key 'metric': {metric}.")
    last, min_loads = _whole(spec, "last", 30, where), _whole(spec, "min_loads", 5, where)
    if min_loads > last:
        raise AuditSuiteError(f"{where}: 'min_loads' ({min_loads}) is greater than 'last' ({last}).")
    method = spec.get("method", "mad")
    if method not in METHODS:
        raise AuditSuiteError(f"{where}: key 'method' must be mad (median and median absolute deviation) or zscore "
                              f"(mean and standard deviation), got {method!r}.")
    threshold = spec.get("threshold", 4)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 100:
        raise AuditSuiteError(f"{where}: key 'threshold' must be a number of spreads above 0 (e.g. 4), got "
                              f"{threshold!r}.")
    return Anomaly(metric, last, min_loads, str(method), float(threshold), severity)


def _whole(spec: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value: object = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise AuditSuiteError(f"{where}: key {key!r} must be a whole number of loads from 1 to 1000, got {value!r}.")
    return value
