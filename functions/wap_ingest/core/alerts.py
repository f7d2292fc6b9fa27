"""What an alert says, decided in the core; how it is delivered (Slack blocks, a log line) is the
notifier adapter's job. Alerts never contain secrets: only object URIs, table and branch names, counts.

Every alert is Slack mrkdwn (the Slack text, its blocks and their fallback): each value that comes from outside the
alert's own wording (an object key or bucket, a table, a branch, an error message, a check's name, target, measured and
expected values, a sample's columns and values, an alarm's reason, an actor) goes through `mrkdwn_escape`: `&`, `<`
and `>` become `&amp;`, `&lt;`, `&gt;` (Slack's rule: https://api.slack.com/reference/surfaces/formatting#escaping),
so `<!channel>`, `<@U123>` or `<https://x|click>` in a key arrive as inert text, and a backtick becomes U+02CB MODIFIER
LETTER GRAVE ACCENT, which looks alike but cannot open or close a code span or block. The alert's own structure
(its code spans, `:emoji:`) is left as it is. `plain_text` undoes the entities for a log line (not the backticks);
`readable` is the text for people outside Slack (a terminal, the demo): links and mentions written out, the entities
and the backtick look-alike undone.

An alert may offer actions (`Action`: plain data, no SDK): a rejected file's branch can be shown, re-audited and
published, published after review or discarded; an INVALID file retried; the dead-letter queue shown or redriven. The
Slack adapter renders them as buttons (each decision opening a form that asks for the reason); every other reader
gets the same choices as the commands in the alert's text.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .models import AuditReport, CheckResult, IngestOutcome, OutcomeStatus, SourceObject

MAX_FAILED_CHECKS = 10
MAX_LISTED_BRANCHES = 20
MAX_SAMPLES_SHOWN = 2  # sample rows per check in the alert (the stored report keeps up to 5)
MAX_SAMPLE_CHARS = 160
GRAVE_STAND_IN = "\u02cb"  # MODIFIER LETTER GRAVE ACCENT: a backtick look-alike that Slack does not parse

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _escape_entities(text: str) -> str:
    """Slack's control characters only: for the alert's own text that holds values (commands with placeholders)."""
    return "".join(_ENTITIES.get(char, char) for char in text)


def quoted(text: str) -> str:
    """A value inside a SQL string literal in a command: `'` doubled; no backtick (the command is a code block)."""
    return text.replace("'", "''").replace("`", "")


def mrkdwn_escape(value: object) -> str:
    """A value, safe anywhere in Slack mrkdwn: entities for `&`, `<`, `>`; a look-alike for the backtick."""
    return _escape_entities(str(value)).replace("`", GRAVE_STAND_IN)


def plain_text(text: str) -> str:
    """An alert's text for a log line: Slack's entities back to `&`, `<`, `>` (the backtick stand-in stays)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


_CONTROL = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")  # Slack's <target> and <target|label>: a link, a mention


def _shown(control: re.Match[str]) -> str:
    """One of Slack's control sequences as a person reads it: `<@U123>` @U123, `<!here>` @here, `<#C123|alerts>`
    #alerts, `<https://x|the page>` "the page (https://x)", `<https://x>` https://x."""
    target, label = control.group(1), control.group(2)
    if target[:1] in ("@", "#"):
        return target[0] + (label or target[1:]).lstrip(target[0])
    if target[:1] == "!":  # <!channel>, <!here>, <!subteam^S123|@team>, <!date^...|fallback>
        return label or "@" + target[1:].split("^")[0]
    return f"{label} ({target})" if label and label != target else target


def readable(text: str) -> str:
    """An alert's text for a person outside Slack: Slack's links and mentions written out (an acted-on alert names
    the person, `<@U123>`), then `plain_text`, and the backtick look-alike back to a backtick. A value's `<` and `>`
    are entities in the alert (mrkdwn_escape), so they are never taken for a link."""
    return plain_text(_CONTROL.sub(_shown, text)).replace(GRAVE_STAND_IN, "`")


class AlertKind(enum.StrEnum):
    REJECTED = "rejected"  # the audit failed: a data problem, the branch is open
    WARNED = "warned"  # published, but checks of severity `warn` failed: worth a look
    QUARANTINED = "quarantined"  # published, with the rows that failed row checks set aside in <table>_quarantine
    INVALID = "invalid"  # the file cannot be ingested as it is: a data problem, nothing was written
    INFRASTRUCTURE = "infrastructure"  # a component failed: not a data problem
    MAINTENANCE = "maintenance"  # an operator's bulk action (pruning old branches)


class ActionKind(enum.StrEnum):
    """What a person can do from an alert. The values are stable: they travel in Slack's buttons."""

    SHOW_ROWS = "show_rows"  # the stored report's failing checks and sample rows, to the person who asked
    REAUDIT_PUBLISH = "reaudit_publish"  # re-audit the branch's new rows with the current suite; merge if they pass
    PUBLISH_REVIEWED = "publish_reviewed"  # merge the branch as it is (the override is recorded)
    DISCARD = "discard"  # delete the branch (the decision is recorded)
    RETRY = "retry"  # ingest the object's current version again
    SHOW_DEAD_LETTERS = "show_dead_letters"  # list the dead-letter queue's messages
    REDRIVE = "redrive"  # send them back to the ingest queue

    @property
    def asks_reason(self) -> bool:
        """A decision on a branch: the person says why, and it is recorded with their name."""
        return self in REASON_FORMS

    @property
    def form(self) -> ReasonForm:
        """The form this decision opens (KeyError for an action that asks no reason)."""
        return REASON_FORMS[self]


@dataclass(frozen=True)
class ReasonForm:
    """What a decision's form says: its title, its submit button, and the question (`{target}`: the branch)."""

    title: str
    submit: str
    text: str


# A new button that asks a reason adds its form here, beside its kind: no adapter changes.
REASON_FORMS: dict[ActionKind, ReasonForm] = {
    ActionKind.DISCARD: ReasonForm("Discard", "Discard", "Discard branch `{target}`? Its rows are never published; "
                                   "the decision is recorded with your name and reason (`wap history`)."),
    ActionKind.PUBLISH_REVIEWED: ReasonForm("Publish after review", "Publish", "Publish branch `{target}` as it is? "
                                            "Its rows failed the audit: your name and reason are recorded on the "
                                            "merge."),
    ActionKind.REAUDIT_PUBLISH: ReasonForm("Re-audit and publish", "Re-audit", "Re-audit branch `{target}` with the "
                                           "current audit suite, and publish it if it passes now? Your name and "
                                           "reason are recorded."),
}


@dataclass(frozen=True)
class Action:
    """One choice an alert offers. `target`: the branch, the object's s3:// URI or the dead-letter queue's name (a
    raw value: the adapter escapes or encodes it). `style`: "primary", "danger" or None. `confirm`: a question to
    answer before it runs (for an action that asks no reason)."""

    kind: ActionKind
    label: str
    target: str
    style: str | None = None
    confirm: str | None = None


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    title: str
    summary: str
    fields: tuple[tuple[str, str], ...]
    details: tuple[str, ...] = ()
    commands: tuple[tuple[str, str], ...] = ()
    actions: tuple[Action, ...] = ()

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


def branch_actions(branch: str, *, report: bool = True) -> tuple[Action, ...]:
    """A kept branch's choices: see its rows (when a report was stored), the two ways to publish it, discard it."""
    shown = (Action(ActionKind.SHOW_ROWS, "Show rows", branch),) if report else ()
    return (
        *shown,
        Action(ActionKind.REAUDIT_PUBLISH, "Re-audit and publish", branch),
        Action(ActionKind.PUBLISH_REVIEWED, "Publish after review", branch, style="primary"),
        Action(ActionKind.DISCARD, "Discard", branch, style="danger"),
    )


def _slack_commands(branch: str, table: str) -> tuple[tuple[str, str], ...]:
    """`branch_commands` for Slack: the names lose any backtick (Nessie's names have none), the placeholders'
    `<` `>` become entities; the SQL's own backticks stay (the Slack adapter shows each command in a code block)."""
    safe_branch, safe_table = (name.replace("`", GRAVE_STAND_IN) for name in (branch, table))
    return tuple((label, _escape_entities(command)) for label, command in branch_commands(safe_branch, safe_table))


def _correlation(correlation_id: str | None) -> tuple[tuple[str, str], ...]:
    """The field that finds the object's log lines (CloudWatch Logs Insights: filter correlation_id = ...)."""
    return (("Correlation id", mrkdwn_escape(correlation_id)),) if correlation_id else ()


def _compact(check: CheckResult) -> str:
    """One line per check: status, check(target), measured vs expected, and a sample or two."""
    e = mrkdwn_escape
    line = (f"{check.status.value.upper()} {e(check.check)}({e(check.target)}): measured {e(check.measured)}, "
            f"expected {e(check.expected)}")
    if check.samples:
        shown = "; ".join(  # cut the raw text, then escape: a cut never splits an entity
            e(", ".join(f"{k}={v}" for k, v in sample.items())[:MAX_SAMPLE_CHARS])
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
    if outcome.status is OutcomeStatus.REJECTED and outcome.parts and outcome.branch:
        return _load_rejected(outcome, correlation_id)
    if outcome.status is OutcomeStatus.REJECTED and outcome.report is not None and outcome.branch:
        table = mrkdwn_escape(outcome.table or "?")
        failures = outcome.report.failures
        return Alert(
            kind=AlertKind.REJECTED,
            title=f":warning: WAP audit failed for {table}",
            summary=f"{outcome.rows} new rows were NOT published; main is unchanged. The rows wait on the branch.",
            fields=(("Table", table), ("Object", mrkdwn_escape(outcome.source.uri)),
                    ("Branch", mrkdwn_escape(outcome.branch)), ("Rows", str(outcome.rows)),
                    ("Failed checks", str(len(failures))), *_correlation(correlation_id)),
            details=report_lines(outcome.report),
            commands=_slack_commands(outcome.branch, outcome.table or "?"),
            actions=branch_actions(outcome.branch),
        )
    if outcome.status is OutcomeStatus.PUBLISHED and outcome.quarantined is not None:
        moved, table = outcome.quarantined, mrkdwn_escape(outcome.table or "?")
        return Alert(
            kind=AlertKind.QUARANTINED,
            title=f":large_yellow_circle: WAP published {table}; {moved.rows} rows quarantined",
            summary=f"{outcome.rows} of {moved.total_rows} new rows were published to main; {moved.rows} failed row "
            f"checks and were published to {mrkdwn_escape(moved.table)} instead.",
            fields=(("Table", table), ("Object", mrkdwn_escape(outcome.source.uri)), ("Rows", str(outcome.rows)),
                    ("Quarantined", str(moved.rows)), *_correlation(correlation_id)),
            details=tuple(f"{mrkdwn_escape(check)}: {n} rows" for check, n in sorted(moved.by_check.items())),
            commands=(("See them", _escape_entities(
                f"SELECT * FROM nessie.{moved.table} WHERE _wap_source = '{quoted(outcome.source.uri)}'")),),
        )
    if outcome.status is OutcomeStatus.PUBLISHED and outcome.report is not None and outcome.report.warnings:
        table = mrkdwn_escape(outcome.table or "?")
        return Alert(
            kind=AlertKind.WARNED,
            title=f":large_yellow_circle: WAP published {table} with warnings",
            summary=f"{outcome.rows} new rows were published to main; checks of severity `warn` failed. "
            "Look at the source if this is not expected.",
            fields=(("Table", table), ("Object", mrkdwn_escape(outcome.source.uri)), ("Rows", str(outcome.rows)),
                    ("Warnings", str(len(outcome.report.warnings))), *_correlation(correlation_id)),
            details=report_lines(outcome.report),
        )
    if outcome.status is OutcomeStatus.INVALID:
        return _invalid(outcome, correlation_id)
    return None


def _invalid(outcome: IngestOutcome, correlation_id: str | None) -> Alert:
    """The error and its fix (the message names both). A retry can help only a file routed to a table: once the file
    is uploaded again (to a bucket that is not notified) or the table or its suite changed; a key that names no table
    fails again as it is."""
    details: tuple[str, ...] = (mrkdwn_escape(outcome.message),)
    if outcome.report is not None:
        details += report_lines(outcome.report)
    retry = outcome.table is not None and bool(outcome.source.key)
    uri = outcome.source.uri
    return Alert(
        kind=AlertKind.INVALID,
        title=f":no_entry: WAP could not ingest {mrkdwn_escape(uri)}",
        summary="The file cannot be ingested as it is; nothing was written to the lake."
        + (" Once it is fixed (uploaded again, or its table changed), retry it." if retry else ""),
        fields=(("Table", mrkdwn_escape(outcome.table or "(none: the key did not name one)")),
                ("Object", mrkdwn_escape(uri)),
                *_correlation(correlation_id)),
        details=details,
        commands=(("Retry", _escape_entities(f"wap ingest {shlex.quote(uri.replace('`', GRAVE_STAND_IN))}")),)
        if retry else (),
        actions=(Action(ActionKind.RETRY, "Retry", uri),) if retry else (),
    )


def _load_rejected(outcome: IngestOutcome, correlation_id: str | None) -> Alert:
    """A multi-table load whose audit failed for some file: nothing was published; each file's result."""
    lines = []
    for part in outcome.parts:
        verdict = "passed" if part.report is None or part.report.passed else "FAILED: " + "; ".join(
            f"{c.check}({c.target}) {c.measured}, expected {c.expected}" for c in part.report.failures)
        lines.append(mrkdwn_escape(f"{part.table}: {part.source.uri} ({part.rows} rows) {verdict}"))
    return Alert(
        kind=AlertKind.REJECTED,
        title=f":warning: WAP load {mrkdwn_escape(outcome.source.uri)} not published",
        summary="One merge for every table, or none: a file failed its audit, so no table changed. Every file waits "
                "on the branch.",
        fields=(("Tables", mrkdwn_escape(outcome.table or "?")), ("Manifest", mrkdwn_escape(outcome.source.uri)),
                ("Branch", mrkdwn_escape(outcome.branch or "?")), ("Rows", str(outcome.rows)),
                *_correlation(correlation_id)),
        details=tuple(lines),
        actions=branch_actions(outcome.branch, report=False) if outcome.branch else (),
    )


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
        title=f":rotating_light: WAP infrastructure failure on {mrkdwn_escape(source.uri)}",
        summary=f"This is not a data problem: a component of the service failed. main is untouched. {fate}",
        fields=(("Object", mrkdwn_escape(source.uri)), ("Attempt", str(attempt) if attempt else "-"),
                *_correlation(correlation_id)),
        details=(mrkdwn_escape(error),),
    )


def alert_for_unreadable_event(message_id: str, error: str, *, final: bool) -> Alert:
    fate = "It is in the dead-letter queue." if final else "It will be retried."
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=":rotating_light: WAP received an event it cannot read",
        summary=f"Message {mrkdwn_escape(message_id)} is not an S3 notification this service understands. {fate}",
        fields=(("Message", mrkdwn_escape(message_id)),),
        details=(mrkdwn_escape(error),),
    )


def alert_for_prune(
    discarded: Sequence[tuple[str, str]], *, reason: str, actor: str, skipped: int = 0
) -> Alert:
    """One summary of a prune: the (branch, table) pairs discarded, and why."""
    e = mrkdwn_escape
    tables = sorted({e(table) for _, table in discarded})
    details = tuple(f"{e(branch)} ({e(table)})" for branch, table in discarded[:MAX_LISTED_BRANCHES])
    if len(discarded) > MAX_LISTED_BRANCHES:
        details += (f"... and {len(discarded) - MAX_LISTED_BRANCHES} more",)
    if skipped:
        details += (f"{skipped} branch(es) changed or vanished while pruning and were left alone.",)
    return Alert(
        kind=AlertKind.MAINTENANCE,
        title=f":broom: WAP pruned {len(discarded)} open branch(es)",
        summary=f"{e(reason)}. Their rows were never published; main is unchanged.",
        fields=(("Branches", str(len(discarded))), ("Tables", ", ".join(tables) or "-"), ("By", e(actor)),
                ("Reason", e(reason))),
        details=details,
    )
