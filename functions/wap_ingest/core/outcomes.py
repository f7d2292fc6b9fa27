"""The outcomes the pipeline settles a file with, and how each is logged and worded."""

from __future__ import annotations

import logging
from dataclasses import replace

from .errors import BadInputError, SchemaDriftError, UnexpectedError, WapError
from .ledger import LedgerEntry
from .models import (
    SOURCE_COLUMN,
    AuditReport,
    CheckResult,
    CheckStatus,
    IngestOutcome,
    OutcomeStatus,
    Quarantined,
    SourceObject,
    TableRef,
)
from .ports import ReportStore

log = logging.getLogger(__name__)


def about(source: SourceObject, table: TableRef | None = None, branch: str | None = None) -> dict[str, object]:
    """The fields a structured log line about one object carries (the entry point adds its correlation id)."""
    return {"object_key": source.key, "bucket": source.bucket, "table": table.qualified if table else None,
            "branch": branch}


def unexpected(doing: str, exc: BaseException) -> UnexpectedError:
    """A bug while `doing` something to a file: its error (retried, then dead-lettered), the traceback logged."""
    log.exception("unexpected error %s", doing)
    return UnexpectedError(f"{doing}: unexpected {type(exc).__name__}: {exc}. The file will be retried; if it "
                           f"keeps failing, it reaches the dead-letter queue (see the logs for the traceback).")


def invalid(source: SourceObject, exc: BadInputError, table: TableRef | None = None, note: str = "") -> IngestOutcome:
    """The file (or its key) is the problem: consumed, alerted once, never retried. A schema that does not fit the
    table is INVALID too (such rows cannot go on a branch without changing the table in a way the suite forbids);
    its report shows the difference column by column."""
    log.warning("invalid input: %s%s", exc, note, extra=about(source, table))
    report = None
    if isinstance(exc, SchemaDriftError) and table is not None:
        report = AuditReport(table.qualified, 0, (CheckResult(
            "schema", "columns", CheckStatus.FAILED, "; ".join(exc.difference) or str(exc),
            "the table's columns and types"),))
    return IngestOutcome(source=source, status=OutcomeStatus.INVALID, table=table.qualified if table else None,
                         message=f"{exc}{note}", report=report)


def duplicate(source: SourceObject, target: TableRef, published: LedgerEntry, note: str = "") -> IngestOutcome:
    """At most once: this version is on main already (its left-over attempts were cleaned up)."""
    log.info("already published: %s in %s", source.uri, target, extra=about(source, target))
    return IngestOutcome(
        source=source, status=OutcomeStatus.DUPLICATE, table=target.qualified, rows=published.rows,
        message=f"{source.uri} is already published in {target} (at {published.recorded_at}, by branch "
        f"{published.branch}); nothing to do{note}",
    )


def quarantine_note(quarantined: Quarantined | None, source: SourceObject) -> str:
    """What the outcome and the alert say of a quarantine: how many rows, by which checks, and the query."""
    if quarantined is None:
        return ""
    checks = ", ".join(f"{check}: {n}" for check, n in sorted(quarantined.by_check.items()))
    return (f"; {quarantined.rows} of {quarantined.total_rows} rows failed row checks ({checks}) and are in "
            f"{quarantined.table}: SELECT * FROM nessie.{quarantined.table} WHERE {SOURCE_COLUMN} = "
            f"'{source.uri.replace(chr(39), chr(39) * 2)}'")


def rejected(
    source: SourceObject, target: TableRef, branch: str, rows: int, report: AuditReport, reports: ReportStore | None,
    quarantined: Quarantined | None = None,
) -> IngestOutcome:
    """The audit failed: the branch stays open with the rows; the report is kept for `wap show`."""
    failed = "; ".join(f"{c.check}({c.target}): {c.measured}, expected {c.expected}" for c in report.failures)
    log.warning("audit failed for %s on branch %s: %s", target, branch, failed, extra=about(source, target, branch))
    outcome = IngestOutcome(
        source=source, status=OutcomeStatus.REJECTED, table=target.qualified, branch=branch, rows=rows, report=report,
        message=f"audit failed: {failed}. The rows stay on branch {branch!r}; main is unchanged"
        f"{quarantine_note(quarantined, source)}.", quarantined=quarantined,
    )
    if reports is None:
        return outcome
    try:
        kept = f" Report: {reports.save(branch, outcome.to_dict())}."
    except WapError as exc:  # the branch and the alert still carry the facts
        log.warning("could not keep the audit report of %s: %s", branch, exc)
        kept = f" (the audit report could not be stored: {exc})"
    return replace(outcome, message=outcome.message + kept)
