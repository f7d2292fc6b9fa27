"""Every audited load's measurements kept as a table in the lake (issue 36, item 1), pure: which table holds a
table's results, the rows one load writes there, and the metric history the anomaly checks read back.

One results table per audited table, `wap_meta.<namespace>__<table>` (`results_table`): a run appends to its own
table's results only, so concurrent loads of different tables never change the same catalog key and their merges do
not conflict. A run writes its rows on its own branch, in the transaction that writes its data; its plan names the
results table (core.merge_plan), so the rows reach `main` with the load in the same merge, or stay on the branch
with a rejected load (and reach `main` with it if it is published after review). So `main`'s history and `main`'s
data never disagree, and the history the anomaly checks read from `main` is exactly the published loads'.

A load's rows (`rows_for`), all with the same load, object version, branch and time:
- one row per check result (`check` its kind, `target` what it checked, `measured` and `threshold` as the report
  says them, `verdict` passed | failed | warned, `severity`);
- one row per metric of the new rows (`check` = "metric", `verdict` = "measured", `metric` its name and `value` the
  figure): `row_count`; `null_share(c)` of every column whose nulls were counted; `distinct(c)`, `min(c)`,
  `max(c)`, `mean(c)` and `null_share(c)` of every profiled column (a figure the rows do not have is left out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from .measurements import Measurements
from .models import AuditReport, SourceObject, TableRef

RESULTS_NAMESPACE = "wap_meta"  # reserved: core.naming refuses it as a table's namespace
METRIC_CHECK = "metric"
MEASURED = "measured"
PROFILE_FIGURES = ("null_share", "distinct", "min", "max", "mean")
COLUMNS = ("table", "load", "source", "object_version", "branch", "check", "target", "column", "metric", "value",
           "measured", "threshold", "verdict", "severity", "recorded_at")


def results_table(table: TableRef) -> TableRef:
    """Where `table`'s audit results are kept: `wap_meta.<namespace>__<table>`."""
    return TableRef(RESULTS_NAMESPACE, f"{table.namespace}__{table.name}")


@dataclass(frozen=True)
class ResultRow:
    """One row of a results table (COLUMNS, in order)."""

    table: str
    load: str
    source: str
    object_version: str | None
    branch: str
    check: str
    target: str
    column: str | None
    metric: str | None
    value: float | None
    measured: str
    threshold: str
    verdict: str
    severity: str | None
    recorded_at: datetime


def rows_for(table: TableRef, source: SourceObject, report: AuditReport, measured: Measurements, branch: str,
             at: datetime) -> list[ResultRow]:
    """The rows one audited load writes into its table's results (see the module's note)."""
    def row(check: str, target: str, column: str | None, metric: str | None, value: float | None, shown: str,
            threshold: str, verdict: str, severity: str | None) -> ResultRow:
        return ResultRow(table.qualified, source.identity, source.uri, source.version_id, branch, check, target,
                         column, metric, value, shown, threshold, verdict, severity, at)

    found = [row(r.check, r.target, _column_of(r.target, measured), None, None, r.measured, r.expected,
                 r.status.value, r.severity) for r in report.checks]
    for name, column, value in metrics_of(measured):
        found.append(row(METRIC_CHECK, name, column, name, value, _shown(value), "", MEASURED, None))
    return found


def metrics_of(measured: Measurements) -> list[tuple[str, str | None, float]]:
    """Each metric the load's measurements give: (name, column or None, value), row_count first."""
    found: dict[str, tuple[str | None, float]] = {"row_count": (None, float(measured.row_count))}
    if measured.row_count:
        for column, nulls in measured.null_counts.items():
            found[f"null_share({column})"] = (column, nulls / measured.row_count)
    for column, profile in measured.profile.items():
        for figure in PROFILE_FIGURES:
            value = getattr(profile, figure)
            if value is not None and math.isfinite(value):
                found[f"{figure}({column})"] = (column, float(value))
    return [(name, column, value) for name, (column, value) in found.items()]


def history_of(rows: Iterable[tuple[str, str, float | None, datetime]], wanted: Mapping[str, int]
               ) -> dict[str, tuple[float, ...]]:
    """The metric history the anomaly checks judge against, from a results table's metric rows (load, metric, value,
    time): each wanted metric's values per load, newest first, at most its count (core.audits'
    AuditSuite.history_metrics). A load that measured a metric twice (it cannot, but a hand-written row could) counts
    once, with its latest value."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for load, metric, value, at in rows:
        if metric in wanted and value is not None and math.isfinite(value):
            known = latest.get((metric, load))
            if known is None or at >= known[0]:
                latest[(metric, load)] = (at, value)
    history: dict[str, tuple[float, ...]] = {}
    for metric, count in wanted.items():
        values = sorted(((at, value) for (m, _), (at, value) in latest.items() if m == metric),
                        key=lambda item: item[0], reverse=True)
        history[metric] = tuple(value for _, value in values[:count])
    return history


def _column_of(target: str, measured: Measurements) -> str | None:
    """The column a check's target names, when it names exactly one of the table's columns."""
    by_lower = {c.lower(): c for c in measured.columns}
    inner = target[target.index("(") + 1:-1] if target.endswith(")") and "(" in target else target
    return by_lower.get(inner.strip().lower())


def _shown(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else f"{value:.6g}"

