"""What an alert says, decided in the core; how it is delivered (Slack blocks, a log line) is the
notifier adapter's job. Alerts never contain secrets: only object URIs, table and branch names, counts.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .models import IngestOutcome, OutcomeStatus, SourceObject

MAX_FAILED_CHECKS = 10
MAX_LISTED_BRANCHES = 20


class AlertKind(enum.StrEnum):
    REJECTED = "rejected"  # the audit failed: a data problem, the branch is open
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


def alert_for_outcome(outcome: IngestOutcome, correlation_id: str | None = None) -> Alert | None:
    """The alert an outcome deserves, or None (a clean publish is not news)."""
    if outcome.status is OutcomeStatus.REJECTED and outcome.report is not None and outcome.branch:
        table = outcome.table or "?"
        failures = outcome.report.failures
        details = tuple(
            f"FAILED {c.check}({c.target}): measured {c.measured}, expected {c.expected}"
            for c in failures[:MAX_FAILED_CHECKS]
        )
        if len(failures) > MAX_FAILED_CHECKS:
            details += (f"... and {len(failures) - MAX_FAILED_CHECKS} more failed checks",)
        return Alert(
            kind=AlertKind.REJECTED,
            title=f":warning: WAP audit failed for {table}",
            summary=f"{outcome.rows} new rows were NOT published; main is unchanged. The rows wait on the branch.",
            fields=(("Table", table), ("Object", outcome.source.uri), ("Branch", outcome.branch),
                    ("Rows", str(outcome.rows)), ("Failed checks", str(len(failures))), *_correlation(correlation_id)),
            details=details,
            commands=branch_commands(outcome.branch, table),
        )
    if outcome.status is OutcomeStatus.INVALID:
        return Alert(
            kind=AlertKind.INVALID,
            title=f":no_entry: WAP could not ingest {outcome.source.uri}",
            summary="The file cannot be ingested as it is; nothing was written to the lake.",
            fields=(("Table", outcome.table or "(none: the key did not name one)"), ("Object", outcome.source.uri),
                    *_correlation(correlation_id)),
            details=(outcome.message,),
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
