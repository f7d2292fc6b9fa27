"""What every WAP run shares (the one-table groups of groups.py and the multi-table loads of loads.py): its ports,
its settings, the result of a file, and the back-off between attempts from `main`."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from wap_ingest.core.audit_results import results_table, rows_for
from wap_ingest.core.audits import AuditSuite, AuditSuites
from wap_ingest.core.errors import BranchExistsError, BranchNotFoundError, MergeConflictError, StaleHashError, WapError
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import AuditReport, IngestOutcome, SourceObject, TableRef
from wap_ingest.core.outcomes import unexpected
from wap_ingest.core.ports import (
    AuditResults,
    CatalogBranches,
    ObjectStore,
    ReportStore,
    TableMaintainer,
    TableWriter,
    WriteSpec,
)
from wap_ingest.core.routing import Router

log = logging.getLogger(__name__)

__all__ = ["RETRY_FROM_MAIN", "PipelineConfig", "Ports", "Result", "bound_snapshots", "retry_delay", "router_for",
           "spec_for", "unexpected"]

Result = IngestOutcome | WapError  # a file's outcome, or the error that fails it (to be retried or deferred)
RETRY_FROM_MAIN = (MergeConflictError, BranchExistsError, BranchNotFoundError, StaleHashError)


@dataclass(frozen=True)
class Ports:
    catalog: CatalogBranches
    writer: TableWriter
    objects: ObjectStore
    reports: ReportStore | None = None  # where rejected runs' reports go (for `wap show`); None: not kept
    maintainer: TableMaintainer | None = None  # keeps tables' metadata bounded after appends (None: never trimmed)
    results: AuditResults | None = None  # every audited load's measurements, kept in the lake (None: not kept)


@dataclass(frozen=True)
class PipelineConfig:
    default_namespace: str
    main_branch: str = "main"
    source_buckets: frozenset[str] = frozenset()  # the buckets that may be read (empty: any but the refused)
    refused_buckets: frozenset[str] = frozenset()  # never read (the lake bucket: the tables' own files)
    # Enough for a writer that keeps losing races to several concurrent writers of the same table (each round one
    # wins); when exhausted the error is returned and the message is retried, never lost.
    merge_attempts: int = 20
    backoff_seconds: float = 0.2
    backoff_cap_seconds: float = 8.0
    staging_budget_bytes: int | None = None  # a group processes at most this much at once (None: no limit)
    max_inflation: float | None = None  # a file inflating more than this many times is a bomb (None: no limit)
    free_bytes: Callable[[], int] | None = field(default=None, compare=False)  # free space where files are staged
    abandoned_after_seconds: float = 960.0  # a batch branch older than this belongs to a run that died
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.time, compare=False)


def router_for(ports: Ports, suites: AuditSuites, config: PipelineConfig,
               large_file_bytes: int | None = None) -> Router:
    """Routing's one place (core/routing.py) with this run's rules; `large_file_bytes`: the large-file threshold
    (None: every object runs here, as in a dry run or the EMR job)."""
    return Router(ports.objects, suites, config.default_namespace, config.source_buckets, config.refused_buckets,
                  config.max_inflation, large_file_bytes)


def retry_delay(attempt: int, config: PipelineConfig) -> float:
    """Capped exponential back-off with jitter, so concurrent writers of one table spread out."""
    ceiling = float(min(config.backoff_cap_seconds, config.backoff_seconds * 2 ** (attempt - 1)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def spec_for(suite: AuditSuite, table: TableRef, branch: str, *, alone: bool,
             out_of_time: Callable[[], bool] | None = None) -> WriteSpec:
    """How a table's files are written on a branch, as its suite says (a quarantine applies to a file alone), and
    the invocation's deadline the engine watches while it stages and writes them."""
    return WriteSpec(table, branch, suite.plan(), suite.allow_new_columns, suite.format_options, suite.layout,
                     suite.quarantine_plan(table) if alone else None, out_of_time, suite.write)


def bound_snapshots(ports: Ports, suite: AuditSuite, table: TableRef, branch: str, snapshots: int) -> None:
    """After an append: a table whose current metadata lists more than twice `keep_snapshots` keeps only that many
    (metadata only; the maintainer's work), so the metadata every commit rewrites stays bounded."""
    keep = suite.maintenance.keep_snapshots
    if ports.maintainer is not None and keep and snapshots > 2 * keep:
        dropped = ports.maintainer.trim_snapshots(table, branch, keep)
        log.info("%s on %s: %d old snapshot(s) dropped from the current metadata (kept %d)", table, branch, dropped,
                 keep)


def record_results(ports: Ports, config: PipelineConfig, table: TableRef, branch: str,
                   audited: Sequence[tuple[SourceObject, AuditReport, Measurements]]) -> None:
    """The one place a run keeps its audited loads' measurements: their rows (core.audit_results) appended to the
    table's results table on the run's branch, in one commit, before the transaction records the ledger and merges
    (or keeps) the branch: so the rows go wherever the load goes."""
    if ports.results is None or not audited:
        return
    at = datetime.fromtimestamp(config.clock(), UTC)
    ports.results.record(branch, table, [row for source, report, measured in audited
                                         for row in rows_for(table, source, report, measured, branch, at)])


def results_tables(ports: Ports, tables: Sequence[TableRef]) -> list[TableRef]:
    """The results tables a run of `tables` may write (none when results are not kept)."""
    return [] if ports.results is None else [results_table(t) for t in tables]
