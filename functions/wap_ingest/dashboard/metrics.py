"""Each audited metric of a table over its loads (issue 36, item 4), from its audit results tables: the published
loads' values on `main` (a load published after review whose audit failed is marked so), the loads waiting on open
branches, and the band the table's anomaly check judges the next load against (core.anomaly, from the same
published history the pipeline reads)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from wap_ingest.core.anomaly import band
from wap_ingest.core.audit_results import METRIC_CHECK
from wap_ingest.core.audits import Anomaly, AuditSuite
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import AuditResults

PUBLISHED = "published"
PUBLISHED_FAILED = "published after review, its audit failed"
REJECTED = "rejected (branch open)"
MAX_POINTS = 200  # the newest loads drawn per metric


@dataclass(frozen=True)
class MetricPoint:
    at: datetime
    value: float
    load: str  # the source object's URI
    state: str  # PUBLISHED, PUBLISHED_FAILED or REJECTED


@dataclass(frozen=True)
class MetricSeries:
    metric: str
    points: tuple[MetricPoint, ...]  # oldest first
    band: tuple[float, float] | None = None  # where the table's anomaly check expects the next load's value
    rule: str | None = None  # that check, in words

    @property
    def failed(self) -> int:
        return sum(1 for p in self.points if p.state != PUBLISHED)


def metric_history(results: AuditResults, suite: AuditSuite, table: TableRef, main: str,
                   open_branches: Sequence[str]) -> tuple[MetricSeries, ...]:
    """Every metric the results hold, those an anomaly check watches first, each with its points and band."""
    published = results.rows(table, main)
    on_main = {r.load for r in published}
    waiting = [r for name in open_branches for r in results.rows(table, name)
               if r.load not in on_main and r.branch == name]
    failed = {r.load for r in published if r.check != METRIC_CHECK and r.verdict == "failed"}
    points: dict[str, list[MetricPoint]] = {}
    for row, state in [*((r, PUBLISHED_FAILED if r.load in failed else PUBLISHED) for r in published),
                       *((r, REJECTED) for r in waiting)]:
        if row.check == METRIC_CHECK and row.metric and row.value is not None:
            points.setdefault(row.metric, []).append(MetricPoint(row.recorded_at, row.value, row.source, state))
    checks = {c.metric.name: c for c in suite.checks if isinstance(c, Anomaly)}
    series = []
    for metric in sorted(points, key=lambda m: (m not in checks, m != "row_count", m)):
        ordered = sorted(points[metric], key=lambda p: p.at)
        series.append(_with_band(metric, ordered, checks.get(metric)))
    return tuple(series)


def _with_band(metric: str, ordered: list[MetricPoint], check: Anomaly | None) -> MetricSeries:
    drawn = tuple(ordered[-MAX_POINTS:])
    if check is None:
        return MetricSeries(metric, drawn)
    rule = f"anomaly: {check.method}, threshold {check.threshold:g}, last {check.last}, min_loads {check.min_loads}"
    history = [p.value for p in reversed(ordered) if p.state != REJECTED][: check.last]  # as the pipeline reads it
    if len(history) < check.min_loads:
        return MetricSeries(metric, drawn, None, f"{rule} (too few loads for a band yet)")
    found = band(history, check.method, check.threshold)
    return MetricSeries(metric, drawn, (found.low, found.high), rule)
