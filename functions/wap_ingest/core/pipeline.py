"""The WAP pipeline for one source object: route, branch, write, audit, then publish or reject.

The pipeline receives its ports; it never builds clients. Expected failures are outcomes:
- the audit failed        -> REJECTED (branch kept with the rows, report returned)
- the input is unusable   -> INVALID  (nothing reaches main; any branch made is deleted or named)
Unexpected failures (Nessie, S3 or Spark down) raise an InfrastructureError and leave `main` untouched.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from .audits import AuditContext, AuditSuite, AuditSuites, audit
from .errors import (
    BadInputError,
    BranchExistsError,
    BranchNotFoundError,
    EmptySourceError,
    MergeConflictError,
    SchemaDriftError,
    StaleHashError,
    WapError,
)
from .models import (
    AppendResult,
    AuditReport,
    Branch,
    CheckResult,
    CheckStatus,
    FileFormat,
    IngestOutcome,
    MeasurementPlan,
    Measurements,
    OutcomeStatus,
    SourceObject,
    TableRef,
)
from .naming import branch_name_for, branch_prefix_for, format_for_key, table_for_key
from .ports import CatalogBranches, ObjectStore, ReportStore, TableWriter
from .stopwatch import Stopwatch

log = logging.getLogger(__name__)

SOURCE_PROPERTY_PREFIX = "wap.source."


@dataclass(frozen=True)
class Ports:
    catalog: CatalogBranches
    writer: TableWriter
    objects: ObjectStore
    reports: ReportStore | None = None  # where rejected runs' reports go (for `wap show`); None: not kept


@dataclass(frozen=True)
class PipelineConfig:
    default_namespace: str
    main_branch: str = "main"
    # Enough for a writer that keeps losing races to several concurrent writers of the same table (each
    # round one wins); when exhausted the error is raised and the event is retried by SQS, never lost.
    merge_attempts: int = 20
    backoff_seconds: float = 0.2
    backoff_cap_seconds: float = 8.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)


def _context(source: SourceObject, table: TableRef | None = None, branch: str | None = None) -> dict[str, object]:
    """Fields structured loggers (Powertools' JSON formatter) put on the line: object, table, branch."""
    return {"object_key": source.key, "bucket": source.bucket, "table": table.qualified if table else None,
            "branch": branch}


def source_properties(source: SourceObject) -> dict[str, str]:
    """The source identity stamped on the Iceberg snapshot and the Nessie merge commit."""
    props = {
        f"{SOURCE_PROPERTY_PREFIX}bucket": source.bucket,
        f"{SOURCE_PROPERTY_PREFIX}key": source.key,
        f"{SOURCE_PROPERTY_PREFIX}identity": source.identity,
    }
    if source.etag:
        props[f"{SOURCE_PROPERTY_PREFIX}etag"] = source.etag.strip('"')
    if source.version_id:
        props[f"{SOURCE_PROPERTY_PREFIX}version-id"] = source.version_id
    if source.size is not None:
        props[f"{SOURCE_PROPERTY_PREFIX}size"] = str(source.size)
    return props


def run_wap(
    source: SourceObject,
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    table: TableRef | None = None,
) -> IngestOutcome:
    """Ingest one object version. See the module docstring for the outcomes."""
    watch = Stopwatch()  # the outcome's `timings`: seconds per stage, summed over retries
    try:
        with watch.stage("route"):
            target = table or table_for_key(
                source.key, default_namespace=config.default_namespace, bucket=source.bucket
            )
            fmt = format_for_key(source.key, bucket=source.bucket)
            current = ports.objects.head(source.bucket, source.key)
        if current.size == 0:
            raise EmptySourceError(
                f"{source.uri}: the object is empty (0 bytes). Fix: upload the complete file again."
            )
    except BadInputError as exc:
        log.warning("invalid input: %s", exc, extra=_context(source, table))
        return IngestOutcome(
            source=source, status=OutcomeStatus.INVALID, table=table.qualified if table else None,
            message=str(exc), timings=watch.laps(),
        )
    source = _with_version(source, current)

    for attempt in range(1, config.merge_attempts + 1):
        try:
            outcome = _attempt(source, target, fmt, ports=ports, suites=suites, config=config, watch=watch)
            return replace(outcome, attempts=attempt, timings=watch.laps())
        except (MergeConflictError, BranchExistsError, BranchNotFoundError, StaleHashError) as exc:
            # Another writer changed the table on main, or is working on this same object right now
            # (a duplicate delivery): start again from main, which says whether it was published meanwhile.
            if attempt == config.merge_attempts:
                raise
            ceiling = min(config.backoff_cap_seconds, config.backoff_seconds * 2 ** (attempt - 1))
            delay = ceiling / 2 + random.uniform(0, ceiling / 2)  # jitter: concurrent writers spread out
            log.info("conflict on %s (attempt %d), retrying from main in %.2fs: %s", target, attempt, delay, exc,
                     extra=_context(source, target))
            config.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _with_version(requested: SourceObject, current: SourceObject) -> SourceObject:
    """Fill the version markers the event did not carry from the object's current head."""
    return SourceObject(
        bucket=requested.bucket,
        key=requested.key,
        size=requested.size if requested.size is not None else current.size,
        etag=requested.etag or current.etag,
        version_id=requested.version_id or current.version_id,
    )


def _discard_attempts(
    catalog: CatalogBranches, target: TableRef, source: SourceObject, keep: str | None = None
) -> str:
    """Delete the other attempts at this object version (found by their deterministic prefix): the
    branches of interrupted runs, and of concurrent duplicate deliveries that lost the race."""
    branches = catalog.list_branches(f"{branch_prefix_for(target, source)}-")
    return "".join(_discard_quietly(catalog, b.name) for b in branches if b.name != keep)


def _attempt(
    source: SourceObject,
    target: TableRef,
    fmt: FileFormat,
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    watch: Stopwatch,
) -> IngestOutcome:
    with watch.stage("branch"):
        main_hash = ports.catalog.ensure_namespace(config.main_branch, target.namespace)
        published = ports.writer.find_append(target, config.main_branch, source.identity)
        if published is not None:
            return _duplicate(source, target, published, ports)
        # Each attempt writes to a branch of its own: a concurrent duplicate delivery never shares it, and
        # Nessie refuses the second of two merges that both changed the table, so rows land at most once.
        branch = ports.catalog.create_branch(branch_name_for(target, source), main_hash)
    suite = suites.suite_for(target)
    written = _write_and_measure(source, target, fmt, branch, suite.plan(), ports, watch,
                                 allow_new_columns=suite.allow_new_columns)
    if isinstance(written, IngestOutcome):
        return written
    appended, measured = written
    with watch.stage("audit"):
        report = audit_measured(suite, target, measured, ports.catalog, config.main_branch)
    if not report.passed:
        return _reject(source, target, branch, appended, report, ports)
    with watch.stage("merge"):
        return _publish(source, target, branch, appended, report, main_hash, ports, config)


def _duplicate(source: SourceObject, target: TableRef, published: AppendResult, ports: Ports) -> IngestOutcome:
    # At most once: this version is on main. A run that merged and died before deleting its branch left
    # that branch behind; it is removed here (so are attempts a concurrent duplicate delivery abandoned).
    note = _discard_attempts(ports.catalog, target, source)
    log.info("already published: %s in %s", source.uri, target, extra=_context(source, target))
    return IngestOutcome(
        source=source, status=OutcomeStatus.DUPLICATE, table=target.qualified, rows=published.rows,
        message=f"{source.uri} is already published in {target} (snapshot {published.snapshot_id}); "
        f"nothing to do{note}",
    )


def audit_measured(
    suite: AuditSuite, target: TableRef, measured: Measurements, catalog: CatalogBranches, main: str
) -> AuditReport:
    """Evaluate the suite; the row counts of earlier published loads are read only if a check needs them."""
    return audit(suite, target, measured, history_context(suite, target, catalog, main))


def history_context(suite: AuditSuite, target: TableRef, catalog: CatalogBranches, main: str) -> AuditContext:
    """The row counts of the last published loads (one per file: a batch merge lists its files' counts)."""
    if not suite.history_loads:
        return AuditContext()
    counts: list[int] = []
    for publication in catalog.publications(target, on=main, limit=suite.history_loads):
        counts.extend(load_rows(publication.properties))
    return AuditContext(history=tuple(counts[: suite.history_loads]))


def load_rows(properties: Mapping[str, str]) -> list[int]:
    """The rows of each file a merge published: `wap.rows`, or each entry of a batch merge's `wap.sources`."""
    if "wap.sources" in properties:
        try:
            files = json.loads(properties["wap.sources"])
        except ValueError:
            return []
        return [int(f["rows"]) for f in files if isinstance(f, dict) and str(f.get("rows", "")).isdigit()]
    rows = properties.get("wap.rows", "")
    return [int(rows)] if rows.isdigit() else []


def _write_and_measure(
    source: SourceObject, target: TableRef, fmt: FileFormat, branch: Branch, plan: MeasurementPlan, ports: Ports,
    watch: Stopwatch, *, allow_new_columns: bool = False,
) -> tuple[AppendResult, Measurements] | IngestOutcome:
    """Append on the branch and measure the new rows; bad input is an INVALID outcome (branch deleted).

    A schema that does not fit the table is INVALID too, not REJECTED: such rows cannot be put on a branch
    without changing the table in a way the suite forbids, so there is nothing to review or publish; the
    outcome's report shows the difference, column by column."""
    ctx = _context(source, target, branch.name)
    try:
        log.info("writing %s into %s on branch %s", source.uri, target, branch.name, extra=ctx)
        with watch.stage("append"):
            if allow_new_columns:
                appended = ports.writer.append(source, fmt, target, branch.name, source_properties(source),
                                               allow_new_columns=True)
            else:
                appended = ports.writer.append(source, fmt, target, branch.name, source_properties(source))
        with watch.stage("audit"):  # measuring the new rows is the audit's cost
            measured = ports.writer.measure_appended(target, branch.name, appended, plan)
            return appended, replace(measured, added_columns=appended.added_columns)
    except BadInputError as exc:
        note = _discard_quietly(ports.catalog, branch.name)
        log.warning("invalid input: %s%s", exc, note, extra=ctx)
        report = None
        if isinstance(exc, SchemaDriftError):
            report = AuditReport(target.qualified, 0, (CheckResult(
                "schema", "columns", CheckStatus.FAILED, "; ".join(exc.difference) or str(exc),
                "the table's columns and types" + ("" if allow_new_columns else "; new columns: reject")),))
        return IngestOutcome(source=source, status=OutcomeStatus.INVALID, table=target.qualified,
                             message=f"{exc}{note}", report=report)
    except WapError as exc:
        if _vanished(ports.catalog, branch.name):  # a concurrent duplicate published and cleaned up
            raise BranchNotFoundError(f"branch {branch.name!r} was deleted during the run: {exc}") from exc
        note = _discard_quietly(ports.catalog, branch.name)
        raise type(exc)(f"{exc}{note}") from exc


def _reject(
    source: SourceObject, target: TableRef, branch: Branch, appended: AppendResult, report: AuditReport, ports: Ports
) -> IngestOutcome:
    _discard_attempts(ports.catalog, target, source, keep=branch.name)  # one open branch per object
    failed = "; ".join(f"{c.check}({c.target}): {c.measured}, expected {c.expected}" for c in report.failures)
    log.warning("audit failed for %s on branch %s: %s", target, branch.name, failed,
                extra=_context(source, target, branch.name))
    outcome = IngestOutcome(
        source=source, status=OutcomeStatus.REJECTED, table=target.qualified, branch=branch.name,
        rows=appended.rows, report=report,
        message=f"audit failed: {failed}. The rows stay on branch {branch.name!r}; main is unchanged.",
    )
    return replace(outcome, message=outcome.message + _keep_report(ports.reports, outcome))


def _keep_report(reports: ReportStore | None, outcome: IngestOutcome) -> str:
    """Persist a rejected run's report for `wap show`; a storage failure is noted, not raised (the branch
    and the alert still carry the facts)."""
    if reports is None or outcome.branch is None:
        return ""
    try:
        return f" Report: {reports.save(outcome.branch, outcome.to_dict())}."
    except WapError as exc:
        log.warning("could not keep the audit report of %s: %s", outcome.branch, exc)
        return f" (the audit report could not be stored: {exc})"


def _publish(
    source: SourceObject,
    target: TableRef,
    branch: Branch,
    appended: AppendResult,
    report: AuditReport,
    main_hash: str,
    ports: Ports,
    config: PipelineConfig,
) -> IngestOutcome:
    head = Branch(branch.name, ports.catalog.reference_hash(branch.name))
    try:
        merged = ports.catalog.merge(
            head, config.main_branch, main_hash,
            message=f"wap: publish {source.uri} into {target} ({appended.rows} rows)",
            properties=source_properties(source) | {"wap.table": target.qualified, "wap.rows": str(appended.rows)},
        )
    except MergeConflictError:
        # Another file for this table was published first: redo the work on a fresh branch.
        _discard_quietly(ports.catalog, head.name)
        raise
    note = _discard_attempts(ports.catalog, target, source)
    log.info("published %s into %s (%d rows)", source.uri, target, appended.rows,
             extra=_context(source, target, branch.name))
    return IngestOutcome(
        source=source, status=OutcomeStatus.PUBLISHED, table=target.qualified, branch=branch.name,
        rows=appended.rows, report=report, merged_hash=merged,
        message=f"published {appended.rows} rows into {target}{note}",
    )


def _vanished(catalog: CatalogBranches, name: str) -> bool:
    """True if the branch is gone; False if it exists or the catalog cannot say (keep the original error)."""
    try:
        return catalog.find_branch(name) is None
    except WapError:
        return False


def _discard_quietly(catalog: CatalogBranches, name: str) -> str:
    """Delete a branch whose attempt failed; say so in the message if that is impossible."""
    try:
        found = catalog.find_branch(name)
        if found is not None:
            catalog.delete_branch(found)
        return ""
    except WapError as exc:
        return f" (branch {name!r} could not be deleted and is left open: {exc})"


# The steps core.batch shares with the one-file path.
with_version = _with_version
discard_quietly = _discard_quietly
duplicate_outcome = _duplicate
