"""A dry run of the audit (`wap audit`): write the file to a throw-away branch, audit it, delete the branch.

Nothing is published and no alert is sent: a producer checks a file before dropping it for real. The
branch is named `dryrun-...` (not `wap-...`), so the real pipeline's clean-up of a file's attempts and
`wap branches` never confuse the two.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass

from .audits import AuditSuites
from .errors import BadInputError
from .models import AuditReport, IngestOutcome, SourceObject
from .naming import format_for_key, table_for_key
from .pipeline import PipelineConfig, Ports, _discard_quietly, _write_and_measure, audit_measured
from .stopwatch import Stopwatch

DRY_RUN_PREFIX = "dryrun"


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


def dry_run_branch_for(table_name: str, namespace: str) -> str:
    return f"{DRY_RUN_PREFIX}-{namespace}-{table_name}-{secrets.token_hex(4)}"


def audit_without_publishing(
    source: SourceObject, *, ports: Ports, suites: AuditSuites, config: PipelineConfig, table: str | None = None,
) -> DryRun:
    """Run the table's suite on the file's rows as the pipeline would; main never changes."""
    from .naming import table_ref_from

    try:
        target = (table_ref_from(table, default_namespace=config.default_namespace, source="--table") if table
                  else table_for_key(source.key, default_namespace=config.default_namespace, bucket=source.bucket))
        fmt = format_for_key(source.key, bucket=source.bucket)
        current = ports.objects.head(source.bucket, source.key)
    except BadInputError as exc:
        return DryRun(source, DryRunStatus.INVALID, table, message=str(exc))
    source = current
    suite = suites.suite_for(target)
    main_hash = ports.catalog.ensure_namespace(config.main_branch, target.namespace)
    branch = ports.catalog.create_branch(dry_run_branch_for(target.name, target.namespace), main_hash)
    try:
        written = _write_and_measure(source, target, fmt, branch, suite.plan(), ports, Stopwatch(),
                                     allow_new_columns=suite.allow_new_columns)
        if isinstance(written, IngestOutcome):  # invalid input; the branch is already gone
            return DryRun(source, DryRunStatus.INVALID, target.qualified, report=written.report,
                          message=written.message)
        appended, measured = written
        report = audit_measured(suite, target, measured, ports.catalog, config.main_branch)
    finally:
        note = _discard_quietly(ports.catalog, branch.name)
    status = DryRunStatus.PASSED if report.passed else DryRunStatus.FAILED
    verdict = ("the file would be published" + (" (with warnings)" if report.warnings else "")
               if report.passed else "the file would be rejected")
    return DryRun(source, status, target.qualified, appended.rows, report,
                  f"dry run: {verdict}; nothing was published{note}")
