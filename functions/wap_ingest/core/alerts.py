"""What an alert says, decided in the core; how it is delivered (Slack blocks, a log line) is the
notifier adapter's job. Alerts never contain secrets: only object URIs, table and branch names, counts.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .models import AuditReport, CheckResult, IngestOutcome, OutcomeStatus, SourceObject

MAX_FAILED_CHECKS = 10
MAX_LISTED_BRANCHES = 20
MAX_SAMPLES_SHOWN = 2  # sample rows per check in the alert (the stored report keeps up to 5)
MAX_SAMPLE_CHARS = 160


class AlertKind(enum.StrEnum):
    REJECTED = "rejected"  # the audit failed: a data problem, the branch is open
    WARNED = "warned"  # published, but checks of severity `warn` failed: worth a look
    INVALID = "invalid"  # the file cannot be ingested as it is: a data problem, nothing was written
    INFRASTRUCTURE = "infrastructure"  # a component failed: not a data problem
    MAINTENANCE = "maintenance"  # an operator's bulk action (pruning old branches)


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    title: str
    summary: str
    fields: tuple[tuple[str, str], ...]
    details: tuple[str, ...] = ()
    commands: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        """The plain-text form: Slack's fallback, and the log line when no Slack is configured."""
        lines = [self.title, self.summary]
        lines += [f"{name}: {value}" for name, value in self.fields]
        lines += list(self.details)
        lines += [f"{label}: {command}" for label, command in self.commands]
        return "\n".join(lines)


def branch_commands(branch: str, table: str) -> tuple[tuple[str, str], ...]:
    quoted = shlex.quote(branch)
    namespace, name = table.split(".", 1)
    return (
        ("Inspect", f"wap show {quoted}   # or SQL: SELECT * FROM nessie.{namespace}.`{name}@{branch}`"),
        ("Publish after review", f"wap publish {quoted} --no-reaudit --reason '<why it is fine>'"),
        ("Re-audit and publish (after fixing the audit suite)", f"wap publish {quoted} --reason '<what was fixed>'"),
        ("Discard", f"wap discard {quoted} --reason '<why>'"),
    )


def _correlation(correlation_id: str | None) -> tuple[tuple[str, str], ...]:
    """The field that finds the object's log lines (CloudWatch Logs Insights: filter correlation_id = ...)."""
    return (("Correlation id", correlation_id),) if correlation_id else ()


def _compact(check: CheckResult) -> str:
    """One line per check: status, check(target), measured vs expected, and a sample or two."""
    line = (f"{check.status.value.upper()} {check.check}({check.target}): measured {check.measured}, "
            f"expected {check.expected}")
    if check.samples:
        shown = "; ".join(
            ", ".join(f"{k}={v}" for k, v in sample.items())[:MAX_SAMPLE_CHARS]
            for sample in check.samples[:MAX_SAMPLES_SHOWN]
        )
        more = len(check.samples) - MAX_SAMPLES_SHOWN
        line += f"\n    e.g. {shown}" + (f" (+{more} more in the report)" if more > 0 else "")
    return line


def report_lines(report: AuditReport) -> tuple[str, ...]:
    """The compact form of a report: failed checks first, then warnings, at most MAX_FAILED_CHECKS lines."""
    flagged = report.failures + report.warnings
    lines = tuple(_compact(c) for c in flagged[:MAX_FAILED_CHECKS])
    if len(flagged) > MAX_FAILED_CHECKS:
        lines += (f"... and {len(flagged) - MAX_FAILED_CHECKS} more failed or warned checks (wap show has all)",)
    passed = len(report.checks) - len(flagged)
    if passed:
        lines += (f"{passed} other check(s) passed",)
    return lines


def alert_for_outcome(outcome: IngestOutcome, correlation_id: str | None = None) -> Alert | None:
    """The alert an outcome deserves, or None (a clean publish is not news)."""
    if outcome.status is OutcomeStatus.REJECTED and outcome.report is not None and outcome.branch:
        table = outcome.table or "?"
        failures = outcome.report.failures
        return Alert(
            kind=AlertKind.REJECTED,
            title=f":warning: WAP audit failed for {table}",
            summary=f"{outcome.rows} new rows were NOT published; main is unchanged. The rows wait on the branch.",
            fields=(("Table", table), ("Object", outcome.source.uri), ("Branch", outcome.branch),
                    ("Rows", str(outcome.rows)), ("Failed checks", str(len(failures))), *_correlation(correlation_id)),
            details=report_lines(outcome.report),
            commands=branch_commands(outcome.branch, table),
        )
    if outcome.status is OutcomeStatus.PUBLISHED and outcome.report is not None and outcome.report.warnings:
        table = outcome.table or "?"
        return Alert(
            kind=AlertKind.WARNED,
            title=f":large_yellow_circle: WAP published {table} with warnings",
            summary=f"{outcome.rows} new rows were published to main; checks of severity `warn` failed. "
            "Look at the source if this is not expected.",
            fields=(("Table", table), ("Object", outcome.source.uri), ("Rows", str(outcome.rows)),
                    ("Warnings", str(len(outcome.report.warnings))), *_correlation(correlation_id)),
            details=report_lines(outcome.report),
        )
    if outcome.status is OutcomeStatus.INVALID:
        details: tuple[str, ...] = (outcome.message,)
        if outcome.report is not None:
            details += report_lines(outcome.report)
        return Alert(
            kind=AlertKind.INVALID,
            title=f":no_entry: WAP could not ingest {outcome.source.uri}",
            summary="The file cannot be ingested as it is; nothing was written to the lake.",
            fields=(("Table", outcome.table or "(none: the key did not name one)"), ("Object", outcome.source.uri),
                    *_correlation(correlation_id)),
            details=details,
        )
    return None


def alert_for_failure(
    source: SourceObject, error: str, *, attempt: int | None, final: bool, correlation_id: str | None = None
) -> Alert:
    """An infrastructure failure: say plainly that it is not a data problem."""
    if final:
        fate = "Retries are exhausted: the event is in the dead-letter queue. Redrive it once the cause is fixed."
    else:
        fate = "The event will be retried automatically."
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=f":rotating_light: WAP infrastructure failure on {source.uri}",
        summary=f"This is not a data problem: a component of the service failed. main is untouched. {fate}",
        fields=(("Object", source.uri), ("Attempt", str(attempt) if attempt else "-"), *_correlation(correlation_id)),
        details=(error,),
    )


def alert_for_unreadable_event(message_id: str, error: str, *, final: bool) -> Alert:
    fate = "It is in the dead-letter queue." if final else "It will be retried."
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=":rotating_light: WAP received an event it cannot read",
        summary=f"Message {message_id} is not an S3 notification this service understands. {fate}",
        fields=(("Message", message_id),),
        details=(error,),
    )


def alert_for_prune(
    discarded: Sequence[tuple[str, str]], *, reason: str, actor: str, skipped: int = 0
) -> Alert:
    """One summary of a prune: the (branch, table) pairs discarded, and why."""
    tables = sorted({table for _, table in discarded})
    details = tuple(f"{branch} ({table})" for branch, table in discarded[:MAX_LISTED_BRANCHES])
    if len(discarded) > MAX_LISTED_BRANCHES:
        details += (f"... and {len(discarded) - MAX_LISTED_BRANCHES} more",)
    if skipped:
        details += (f"{skipped} branch(es) changed or vanished while pruning and were left alone.",)
    return Alert(
        kind=AlertKind.MAINTENANCE,
        title=f":broom: WAP pruned {len(discarded)} open branch(es)",
        summary=f"{reason}. Their rows were never published; main is unchanged.",
        fields=(("Branches", str(len(discarded))), ("Tables", ", ".join(tables) or "-"), ("By", actor),
                ("Reason", reason)),
        details=details,
    )
