"""`wap maintain`: a table's upkeep (core.maintenance) through the same transaction as ingestion (transaction.py).

A WAP branch from main, the work on the branch (compaction, manifest rewrite, metadata-only snapshot trim), a check
that the rows did not change, then a merge into main expecting the hash the branch started from. An ingestion that
published to the table meanwhile makes that merge conflict: the maintenance branch is dropped and the maintenance
starts again from the new main (with back-off), so the ingestion's data is never touched, never overwritten, and no
merge is ever forced. A table larger than its `emr_above_mb` is sent to the EMR Serverless job instead.
The invocation's time left is the transaction's guard, as for files and loads: checked before each attempt and again
before the maintenance work itself; out of time, the table is not started (or its branch is deleted before any work
on it) and an OutOfTimeError (a DeferredError) says so: the next run maintains it.
Then, given a `Sweep`, the table's location is swept of the files no reference of the catalog uses (sweep.py), time
permitting (else the sweep is reported deferred); the EMR job, which maintains one large table, sweeps nothing: the
schedule that sent it sweeps every table itself (a sweep reads metadata only, whatever the table's size).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from wap_ingest.core import lineage
from wap_ingest.core.audits import AuditSuite
from wap_ingest.core.branches import RunKind
from wap_ingest.core.errors import CatalogError, EngineError
from wap_ingest.core.lake_files import FilesSwept
from wap_ingest.core.maintenance import MAINTENANCE, MB, MaintenanceReport, work_for
from wap_ingest.core.models import Branch, TableRef
from wap_ingest.core.ports import CatalogBranches, MaintenanceJobs, TableMaintainer
from wap_ingest.core.stopwatch import Stopwatch

from .base import PipelineConfig
from .sweep import Sweep, sweep_table
from .transaction import Discard, Guards, Merge, Publish, Transactions, Verdict, Work


@dataclass(frozen=True)
class MaintenancePorts:
    catalog: CatalogBranches
    maintainer: TableMaintainer
    jobs: MaintenanceJobs | None = None  # EMR Serverless for large tables (None: every table here)


def maintain_table(table: TableRef, *, ports: MaintenancePorts, suite: AuditSuite, config: PipelineConfig,
                   dry_run: bool = False, here: bool = False,
                   out_of_time: Callable[[], bool] = lambda: False, sweep: Sweep | None = None) -> MaintenanceReport:
    """Maintain one table, then sweep it (`sweep`; None: not swept); `here`: never send it to EMR (the EMR job
    itself); `out_of_time`: the invocation's deadline (the transaction's guard). Raises a WapError when the
    maintenance fails, an OutOfTimeError when there is no time to start it (the branch of the attempt is deleted:
    nothing of it stays); a sweep that cannot be done is a report (`swept.status` "aborted" or "deferred")."""
    transactions = Transactions(ports.catalog, config, Guards(out_of_time))
    work = _Maintenance(table, ports, suite, transactions.guards, dry_run=dry_run, here=here)
    watch = Stopwatch()
    ended = transactions.run(work, watch)
    if work.report is None:  # pragma: no cover (a transaction without versions always runs its work)
        raise EngineError(f"maintaining {table}: the run ended before measuring the table")
    report = replace(work.report, attempts=ended.attempts, timings=watch.laps())
    if ended.status == "published":
        report = replace(report, merged_hash=ended.merged_hash, message=f"{report.message}{ended.note}")
    if sweep is None:
        return report
    if out_of_time():
        return replace(report, swept=FilesSwept(table.qualified, "deferred", grace_seconds=sweep.policy.grace_seconds,
                                                message=f"{table}: no time left in this invocation to sweep its "
                                                f"files; the next run sweeps them"))
    return replace(report, swept=sweep_table(table, sweep, dry_run=dry_run))


class _Maintenance(Work):
    """A table's upkeep as the transaction's work: measured on the branch, done there, checked, then merged."""

    kind = RunKind.MAINTAIN

    def __init__(self, table: TableRef, ports: MaintenancePorts, suite: AuditSuite, guards: Guards, *,
                 dry_run: bool, here: bool) -> None:
        self.table, self.ports, self.suite, self.dry_run, self.here = table, ports, suite, dry_run, here
        self.guards = guards
        self.report: MaintenanceReport | None = None

    def tables(self) -> Sequence[TableRef]:
        return [self.table]

    def about(self) -> str:
        return f"maintain {self.table.qualified}"

    def run(self, branch: Branch, attempt: int) -> Verdict:
        table, settings, name = self.table, self.suite.maintenance, branch.name
        before = self.ports.maintainer.health(table, name, settings.small_file_mb * MB)
        if before is None:
            raise CatalogError(f"maintaining {table}: there is no such table on main. Fix: check the name "
                               f"(wap maintain --all maintains every table).")
        work = work_for(before, settings)
        self.report = MaintenanceReport(table.qualified, "dry run" if self.dry_run else "nothing to do", work, before,
                                        message=f"{table}: {'would ' if self.dry_run else ''}{work.describe()}")
        if self.dry_run or not work:
            return Discard()
        if not self.here and self.ports.jobs is not None and before.data_bytes > settings.emr_above_mb * MB:
            run = self.ports.jobs.submit_maintenance(table)
            self.report = replace(self.report, status="sent to EMR", job_run=run,
                                  message=f"{table}: {before.data_bytes} bytes, above emr_above_mb "
                                  f"({settings.emr_above_mb}): EMR Serverless job run {run}")
            return Discard()
        self.guards.check_time(f"maintenance of {table} ({work.describe()})")  # measuring took some of it
        self.ports.maintainer.maintain(table, name, work, settings, self.suite.layout)
        after = self.ports.maintainer.health(table, name, settings.small_file_mb * MB)
        if after is None or after.rows != before.rows:
            raise EngineError(f"maintaining {table} on {name!r}: the table held {before.rows} rows before and "
                              f"{after.rows if after else 'none'} after; nothing was merged.")
        self.report = replace(self.report, status="maintained", after=after,
                              message=f"{table}: {work.describe()}: {before.data_files} -> {after.data_files} data "
                              f"files, {before.data_bytes} -> {after.data_bytes} bytes")
        return Publish(Merge((), f"wap: maintain {table} ({work.describe()})",
                             {lineage.TABLE: table.qualified, MAINTENANCE: self.report.commit_summary()}))
