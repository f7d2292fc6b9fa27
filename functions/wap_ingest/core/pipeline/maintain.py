"""`wap maintain`: a table's upkeep (core.maintenance) through the same branch-and-merge discipline as ingestion.

A WAP branch from main, the work on the branch (compaction, manifest rewrite, metadata-only snapshot trim), a check
that the rows did not change, then a merge into main expecting the hash the branch started from. An ingestion that
published to the table meanwhile makes that merge conflict: the maintenance branch is dropped and the maintenance
starts again from the new main (with back-off), so the ingestion's data is never touched, never overwritten, and no
merge is ever forced. A table larger than its `emr_above_mb` is sent to the EMR Serverless job instead.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, replace

from wap_ingest.core import lineage
from wap_ingest.core.audits import AuditSuite
from wap_ingest.core.branches import RunBranches
from wap_ingest.core.errors import CatalogError, ConfigError, EngineError
from wap_ingest.core.maintenance import MAINTENANCE, MB, MaintenanceReport, work_for
from wap_ingest.core.models import Branch, TableRef
from wap_ingest.core.naming import BRANCH_PREFIX
from wap_ingest.core.ports import CatalogBranches, MaintenanceJobs, TableMaintainer
from wap_ingest.core.stopwatch import Stopwatch

from .base import RETRY_FROM_MAIN, PipelineConfig, retry_delay

log = logging.getLogger(__name__)
MAINTAIN_DIGEST = "maintain"  # a maintenance branch: wap-<namespace>-<table>-maintain-<token>


@dataclass(frozen=True)
class MaintenancePorts:
    catalog: CatalogBranches
    maintainer: TableMaintainer
    jobs: MaintenanceJobs | None = None  # EMR Serverless for large tables (None: every table here)


def maintain_table(table: TableRef, *, ports: MaintenancePorts, suite: AuditSuite, config: PipelineConfig,
                   dry_run: bool = False, here: bool = False) -> MaintenanceReport:
    """Maintain one table; `here`: never send it to EMR (the EMR job itself). Raises a WapError when it fails (the
    branch of the attempt is deleted: nothing of it stays)."""
    catalog, settings, main = ports.catalog, suite.maintenance, config.main_branch
    branches = RunBranches(catalog, clock=config.clock, abandoned_after=config.abandoned_after_seconds)
    watch = Stopwatch()
    for attempt in range(1, config.merge_attempts + 1):
        main_hash = catalog.reference_hash(main)
        name = f"{BRANCH_PREFIX}-{table.namespace}-{table.name}-{MAINTAIN_DIGEST}-{secrets.token_hex(4)}"
        catalog.create_branch(name, main_hash)
        try:
            with watch.stage("health"):
                before = ports.maintainer.health(table, name, settings.small_file_mb * MB)
            if before is None:
                raise CatalogError(f"maintaining {table}: there is no such table on {main!r}. Fix: check the name "
                                   f"(wap maintain --all maintains every table).")
            work = work_for(before, settings)
            report = MaintenanceReport(table.qualified, "dry run" if dry_run else "nothing to do", work, before,
                                       attempts=attempt)
            if dry_run or not work:
                branches.discard(name)
                return replace(report, message=f"{table}: {'would ' if dry_run else ''}{work.describe()}",
                               timings=watch.laps())
            if not here and ports.jobs is not None and before.data_bytes > settings.emr_above_mb * MB:
                branches.discard(name)
                run = ports.jobs.submit_maintenance(table)
                return replace(report, status="sent to EMR", job_run=run, timings=watch.laps(),
                               message=f"{table}: {before.data_bytes} bytes, above emr_above_mb "
                               f"({settings.emr_above_mb}): EMR Serverless job run {run}")
            with watch.stage("work"):
                ports.maintainer.maintain(table, name, work, settings, suite.layout)
            with watch.stage("health"):
                after = ports.maintainer.health(table, name, settings.small_file_mb * MB)
            if after is None or after.rows != before.rows:
                raise EngineError(f"maintaining {table} on {name!r}: the table held {before.rows} rows before and "
                                  f"{after.rows if after else 'none'} after; nothing was merged.")
            report = replace(report, status="maintained", after=after)
            with watch.stage("merge"):
                merged = catalog.merge(Branch(name, catalog.reference_hash(name)), main, main_hash,
                                       message=f"wap: maintain {table} ({work.describe()})",
                                       properties={lineage.TABLE: table.qualified,
                                                   MAINTENANCE: report.commit_summary()})
        except RETRY_FROM_MAIN as exc:
            branches.discard(name)
            if attempt == config.merge_attempts:
                raise
            delay = retry_delay(attempt, config)
            log.info("maintaining %s: main moved (attempt %d), again from main in %.2fs: %s", table, attempt, delay,
                     exc)
            config.sleep(delay)
            continue
        except Exception:
            branches.discard(name)
            raise
        branches.discard(name)
        return replace(report, merged_hash=merged, timings=watch.laps(),
                       message=f"{table}: {work.describe()}: {before.data_files} -> {after.data_files} data files, "
                       f"{before.data_bytes} -> {after.data_bytes} bytes")
    raise ConfigError("merge_attempts must be at least 1")  # pragma: no cover (the loop returns or raises)
