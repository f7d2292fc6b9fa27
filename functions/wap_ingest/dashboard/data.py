"""What the quality dashboard shows, gathered without a JVM and without Streamlit (tested on its own).

Per table: the rows on `main` over time (the snapshots in main's history, from Iceberg metadata), the latest
loads with their audit results (publications on `main` and recorded discards, from Nessie and the decision
log, plus the files waiting on open branches), and the open branches with their failed checks and the null
counts per column on each branch's new rows next to `main`'s. The checks of an open branch are the table's
audit suite evaluated on the branch's manifest metadata (record and null counts of the files its append
added): the same measurements the pipeline takes, read from metadata instead of a Spark scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from wap_ingest.adapters.catalog import IcebergRestReader
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core import lineage
from wap_ingest.core.alerts import branch_commands
from wap_ingest.core.audits import AuditContext, AuditSuites, audit
from wap_ingest.core.durations import format_age
from wap_ingest.core.history import history_context
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import AuditReport, TableRef
from wap_ingest.core.ports import AuditResults, CatalogBranches, DecisionLog
from wap_ingest.core.review import HistoryEntry, OpenBranch, history_for, open_branches, source_uri
from wap_ingest.dashboard.metrics import MetricSeries, metric_history

LATEST_LOADS = 15


@dataclass(frozen=True)
class Sources:
    """The dashboard's ports, wired once per process."""

    catalog: CatalogBranches
    reader: IcebergRestReader
    decisions: DecisionLog
    suites: AuditSuites
    namespace: str
    main: str = "main"
    results: AuditResults | None = None  # the audit results tables (the metrics' history)


def sources_for(settings: Settings) -> Sources:
    from wap_ingest.bootstrap import Service

    svc = Service(settings)  # the dashboard's process: its adapters, each built once
    return Sources(svc.catalog, svc.reader, svc.decisions, svc.suites, settings.namespace, settings.main_branch,
                   svc.audit_results)


@dataclass(frozen=True)
class ColumnNulls:
    column: str
    branch_nulls: int  # in the branch's new rows
    main_nulls: int | None  # in the whole table on main (None: the table is not on main yet)


@dataclass(frozen=True)
class BranchView:
    name: str
    table: str
    age: str
    source: str | None
    rows_added: int
    report: AuditReport
    nulls: tuple[ColumnNulls, ...]
    commands: tuple[tuple[str, str], ...]

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(f"{c.check}({c.target}): {c.measured}, expected {c.expected}" for c in self.report.failures)


@dataclass(frozen=True)
class Load:
    """One row of "latest loads": a file's fate, newest first."""

    at: datetime
    outcome: str  # "published", "published after review", "rejected (branch open)", "discarded"
    source: str | None
    rows: int | None
    audit: str
    branch: str | None
    by: str | None
    reason: str | None


@dataclass(frozen=True)
class TableView:
    table: str
    rows_on_main: int | None
    main_rows: int | None  # rows summed from main's data files (the null counts' denominator)
    rows_over_time: tuple[tuple[datetime, int], ...]
    loads: tuple[Load, ...]
    branches: tuple[BranchView, ...]
    metrics: tuple[MetricSeries, ...] = ()  # dashboard.metrics


def table_list(sources: Sources) -> list[tuple[TableRef, int]]:
    """Every table on `main` in the namespace, and any table only open branches hold, with its open-branch count."""
    branches = open_branches(sources.catalog, now=datetime.now(UTC), default_namespace=sources.namespace)
    counts: dict[TableRef, int] = dict.fromkeys(sources.reader.tables(sources.namespace, sources.main), 0)
    for branch in branches:
        counts[branch.table] = counts.get(branch.table, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0].qualified))


def _load_for(entry: HistoryEntry) -> Load:
    if entry.action == "discarded":
        return Load(entry.at, "discarded", entry.source, None, "failed (not published)", entry.branch, entry.actor,
                    entry.reason)
    if entry.how == "reviewed":
        audited = "re-audit passed" if entry.reaudit == "passed" else "failed; published by override"
        return Load(entry.at, "published after review", entry.source, entry.rows, audited, entry.branch, entry.actor,
                    entry.reason)
    quarantined = entry.properties.get(lineage.QUARANTINED_ROWS)
    audit_text = f"passed; {quarantined} rows quarantined in {entry.properties.get(lineage.QUARANTINE_TABLE)}" \
        if quarantined else "passed"
    return Load(entry.at, "published", entry.source, entry.rows, audit_text, None, "wap", None)


def branch_view(sources: Sources, branch: OpenBranch, main_nulls: dict[str, int] | None, now: datetime,
                context: AuditContext | None = None) -> BranchView:
    table = branch.table
    changes = sources.reader.branch_changes(table, branch.name)
    measured = Measurements(row_count=changes.rows_added, null_counts=changes.null_counts,
                            columns=tuple(changes.null_counts))
    report = audit(sources.suites.suite_for(table), table, measured, context)
    nulls = tuple(ColumnNulls(column, count, None if main_nulls is None else main_nulls.get(column, 0))
                  for column, count in changes.null_counts.items())
    age = branch.age(now)
    return BranchView(branch.name, table.qualified, "?" if age is None else format_age(age),
                      source_uri(changes.summary), changes.rows_added, report, nulls,
                      branch_commands(branch.name, table.qualified))


def table_view(sources: Sources, table: TableRef, *, now: datetime | None = None) -> TableView:
    now = now or datetime.now(UTC)
    main = sources.reader.null_counts(table, sources.main)
    main_rows, main_nulls = (None, None) if main is None else main
    history = sources.reader.row_history(table, sources.main)
    points = tuple((datetime.fromtimestamp(ms / 1000, UTC), rows) for ms, rows in history)
    opened = list(reversed(open_branches(sources.catalog, now=now, default_namespace=sources.namespace,
                                         table=table)))  # newest first
    suite = sources.suites.suite_for(table)
    context = history_context(suite, table, sources.catalog, sources.main, sources.results) if opened else None
    branches = tuple(branch_view(sources, b, main_nulls, now, context) for b in opened)
    loads = [_load_for(e) for e in history_for(sources.catalog, sources.decisions, table, main=sources.main,
                                               limit=LATEST_LOADS)]
    for view, branch in zip(branches, opened, strict=True):
        audit_text = "failed: " + "; ".join(view.failed) if view.failed else "passes now (publish it)"
        loads.append(Load(branch.head_time or now, "rejected (branch open)", view.source, view.rows_added,
                          audit_text, view.name, None, None))
    loads.sort(key=lambda load: load.at, reverse=True)
    rows_on_main = points[-1][1] if points else main_rows
    metrics = () if sources.results is None else metric_history(sources.results, suite, table, sources.main,
                                                                [b.name for b in opened])
    return TableView(table.qualified, rows_on_main, main_rows, points, tuple(loads[:LATEST_LOADS]), branches,
                     metrics)
