"""The audit without the publish, on the one pipeline: `wap audit` (a dry run of a file) and the re-audit of a
branch before `wap publish`.

A dry run writes the file to a throw-away branch of its own kind (`wap-[<ns>.]<table>-<digest>-d<start>x<token>`,
core.branches; the catalog's rules let the roles that may run it create and write exactly those), audits it,
deletes the branch, and sends no alert.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .audits import AuditSuites, audit
from .errors import CatalogError, WapError
from .models import AuditReport, OutcomeStatus, SourceObject, TableRef
from .naming import table_ref_from
from .pipeline import PipelineConfig, Ports, run_wap
from .ports import TableWriter

__all__ = ["DryRun", "DryRunStatus", "audit_branch", "audit_without_publishing"]


class DryRunStatus(enum.StrEnum):
    PASSED = "passed"  # every check of severity error passed (warnings may remain)
    FAILED = "failed"  # a check of severity error failed: the real ingestion would reject the file
    INVALID = "invalid"  # the file cannot be ingested at all (unreadable, empty, schema drift...)


@dataclass(frozen=True)
class DryRun:
    source: SourceObject
    status: DryRunStatus
    table: str | None
    rows: int = 0
    report: AuditReport | None = None
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"object": self.source.uri, "status": self.status.value, "table": self.table, "rows": self.rows,
                "message": self.message, "report": self.report.to_dict() if self.report else None}


_STATUS = {OutcomeStatus.AUDITED: DryRunStatus.PASSED, OutcomeStatus.REJECTED: DryRunStatus.FAILED,
           OutcomeStatus.INVALID: DryRunStatus.INVALID}


def audit_without_publishing(
    source: SourceObject, *, ports: Ports, suites: AuditSuites, config: PipelineConfig, table: str | None = None,
) -> DryRun:
    """Run the table's suite on the file's rows as the pipeline would; main never changes. Raises the WapError of
    an infrastructure failure."""
    try:
        target = table_ref_from(table, default_namespace=config.default_namespace, source="--table") if table else None
    except WapError as exc:
        return DryRun(source, DryRunStatus.INVALID, table, message=str(exc))
    (result,) = run_wap([source], ports=ports, suites=suites, config=config, table=target, dry_run=True)
    if isinstance(result, WapError):
        raise result
    return DryRun(result.source, _STATUS[result.status], result.table, result.rows, result.report, result.message)


def audit_branch(table: TableRef, branch: str, identity: str, *, writer: TableWriter, suites: AuditSuites
                 ) -> AuditReport:
    """The table's suite, as the audits file says now, on the rows the branch's WAP append added (found by the
    file's identity): the re-audit before a reviewed publish."""
    suite = suites.suite_for(table)
    appended = writer.find_append(table, branch, identity)
    if appended is None:
        raise CatalogError(
            f"no snapshot of {table} on {branch!r} carries the source identity {identity!r}, so its new rows "
            f"cannot be re-audited. Fix: inspect it (wap show {branch}); publish with --no-reaudit --reason "
            f"'...' or discard it."
        )
    return audit(suite, table, writer.measure_appended(table, branch, appended, suite.plan()))
