"""Acting on an alert where it arrives: who may act, and what each action answers.

A person clicks one of an alert's actions (core.alerts `Action`) in Slack; the interactivity endpoint has verified the
request (adapters/slack/incoming.py) and the function runs the action with the very use cases the `wap` commands run
(`Service.publish`, `Service.discard`, `wap ingest`, `wap dlq`), with the person as the decision's actor. The answer is
data: the line the alert's message shows from then on (`line`, Slack mrkdwn), whether the alert's choices are settled
(its buttons go), and a reply only the person who asked sees (`private`).

- discard: the branch deleted, the decision recorded; "Discarded by @name: reason" (settled);
- publish after review, re-audit and publish: merged into main (re-audited first for the second); "Published by @name
  after review: reason" (settled). A re-audit that still fails, or a conflict: the failure, the buttons kept;
- show rows: nothing done; the stored report's failing checks and sample rows, privately;
- retry: the object's current version ingested again (its own alert follows); "Retried by @name: <outcome>";
- show / redrive the dead letters: the list, privately / the messages sent back to the ingest queue.

What people see is never internal text: a refusal of the decision (the branch is gone or not open for review, a
re-audit that fails, a conflict) is said as it is; any other failure (a setting, a component) is a short line with a
reference (`Asked.ref`, the delivery's correlation id), and the error itself is in `Answer.logged`, for the log only.
Someone not on the allow list is told only that they may not act.

Nothing is done twice: a branch already decided (by someone else a moment before, or with `wap` in a terminal) is
answered with who decided it, privately ("Nothing done: ..."), and the message says what is true now. A branch deleted
with no decision (a newer attempt at the same file replaced it, or it was removed by hand) is answered so ("No longer
open"; settled: nothing is left to decide). An infrastructure failure raises (the request is retried, as any message
of the queue).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .alerts import ActionKind, mrkdwn_escape, report_lines
from .errors import BadInputError, BranchNotFoundError, CatalogError, ConfigError, InfrastructureError, WapError
from .models import AuditReport, IngestOutcome, OutcomeStatus, SourceObject
from .ports import CatalogBranches, DecisionLog
from .review import DECISION_PREFIX, Decision, ReauditFailedError, published_on_main, wap_table

USER_ID = re.compile(r"[UW][A-Z0-9]{6,20}")
GROUP_ID = re.compile(r"S[A-Z0-9]{6,20}")
MAX_SAMPLES = 5
OPERATORS_VARIABLE = "WAP_SLACK_OPERATORS"


@dataclass(frozen=True)
class Person:
    """A Slack user, as a verified request names them."""

    user_id: str
    name: str

    @property
    def actor(self) -> str:
        """Who the decision log, the merge commit and `wap history` record."""
        return f"{self.name} (Slack {self.user_id})"

    @property
    def mention(self) -> str:
        """Slack shows `<@U123>` as @name; an id that is not one is shown as text."""
        return f"<@{self.user_id}>" if USER_ID.fullmatch(self.user_id) else mrkdwn_escape(self.actor)


@dataclass(frozen=True)
class Asked:
    """One action asked for: what, on what (a branch, an s3:// URI, a queue name), by whom, and why."""

    action: ActionKind
    target: str
    person: Person
    reason: str | None = None
    ref: str = ""  # the correlation id a failure is shown with (and logged under)


@dataclass(frozen=True)
class Answer:
    line: str  # Slack mrkdwn: what happened, shown on the alert's message
    settled: bool  # the alert's choices are done: its buttons go
    private: str | None = None  # Slack mrkdwn, for the person who asked only
    update: bool = True  # False: the message stays as it is (a private reply only)
    logged: str | None = None  # the internal error behind a failed answer: for the log, never shown


def reference() -> str:
    """A new correlation id for a failure: shown to the person, logged with the error."""
    return uuid.uuid4().hex[:12]


def not_done(ref: str) -> str:
    """What a person is told when the service failed them (no internal text)."""
    return f"Nothing done: something failed on our side. Try again in a moment (reference {ref})."


def operators_from(text: str) -> frozenset[str]:
    """WAP_SLACK_OPERATORS: comma- or space-separated Slack user ids (U..., W...) and user-group ids (S...)."""
    ids = frozenset(part for part in re.split(r"[\s,]+", text.strip()) if part)
    bad = sorted(i for i in ids if not (USER_ID.fullmatch(i) or GROUP_ID.fullmatch(i)))
    if bad:
        raise ConfigError(f"{OPERATORS_VARIABLE}: {', '.join(map(repr, bad))} is not a Slack user id (U.../W...) or "
                          f"user-group id (S...). Fix: list the ids (profile > Copy member ID; a group's id is in its "
                          f"URL), e.g. {OPERATORS_VARIABLE}=U012AB3CD,S0614TZR7")
    return ids


class Operators:
    """Who may act on alerts: the allow list's users, and the members of its user groups (`members_of` asks Slack)."""

    def __init__(self, ids: frozenset[str], members_of: Callable[[str], frozenset[str]]) -> None:
        self.ids, self._members_of = ids, members_of

    def allows(self, user_id: str) -> bool:
        if user_id in self.ids:
            return True
        return any(user_id in self._members_of(group) for group in sorted(self.ids) if GROUP_ID.fullmatch(group))

    def refusal(self, person: Person) -> str:
        """What a person not on the list is told: only that they may not act (nothing was done). Why, and the fix,
        are for the log (`refused_because`)."""
        return f"Nothing done: {person.mention} may not act on WAP alerts."

    def refused_because(self) -> str:
        """Why someone was refused, and the fix: for the log, never shown to them."""
        if not self.ids:
            return (f"no one may act on WAP alerts from Slack here ({OPERATORS_VARIABLE} is empty): docs/deploy.md, "
                    f"\"Who may act from Slack\"")
        return f"not in {OPERATORS_VARIABLE} (users and user groups); docs/deploy.md, \"Who may act from Slack\""


@dataclass(frozen=True)
class UseCases:
    """The use cases an action runs (the Service's, as the `wap` commands run them)."""

    publish: Callable[[str, str | None, str, bool], Decision]  # (branch, reason, actor, reaudit)
    discard: Callable[[str, str, str], Decision]  # (branch, reason, actor)
    report: Callable[[str], Mapping[str, object] | None]  # a branch's stored report (the rejected outcome)
    retry: Callable[[SourceObject], IngestOutcome]  # the object's current version ingested
    dead_letters: Callable[[str], Sequence[str]]  # a dead-letter queue's name: a line per message
    redrive: Callable[[str], int]  # a dead-letter queue's name: messages sent back
    decided: Callable[[str], Decision | None] = lambda _branch: None  # who settled a branch that is gone, if known


def decided_by(catalog: CatalogBranches, decisions: DecisionLog, branch: str, *, default_namespace: str,
               main: str = "main") -> Decision | None:
    """Who settled a branch that is gone: the merge that published its rows, or the recorded discard; None if
    neither is found."""
    table = wap_table(branch, default_namespace)
    publication = published_on_main(catalog, table, branch, main)
    if publication is not None:
        props = publication.properties
        return Decision(branch, table, "published", props.get(f"{DECISION_PREFIX}reason", "its audit passed"),
                        props.get(f"{DECISION_PREFIX}actor", "wap (automatic publish)"), publication.hash, True)
    for record in decisions.decisions(table, limit=1000):
        if record.branch == branch:
            return Decision(branch, table, record.action, record.reason, record.actor, already=True)
    return None


def object_at(uri: str) -> SourceObject:
    """The object an alert's Retry names (`s3://bucket/key`, the key as it is: no URL decoding)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not uri.startswith("s3://") or not bucket or not key:
        raise BadInputError(f"{uri!r} is not an object's s3://bucket/key; nothing to retry.")
    return SourceObject(bucket, key)


def answer(asked: Asked, cases: UseCases) -> Answer:
    """Run what was asked; the answer. Refusals and failures of the decision are answers; an infrastructure failure
    raises."""
    e, who = mrkdwn_escape, asked.person.mention
    try:
        return _run(asked, cases)
    except InfrastructureError:
        raise
    except BranchNotFoundError as exc:
        if not asked.action.asks_reason:
            return Answer(f"No longer open (asked by {who}): {e(exc)}", settled=True,
                          private=f"Nothing done: {e(exc)}")
        decided = cases.decided(asked.target)
        if decided is not None:
            return _already(decided, decided.action)
        return _gone(asked.target, who)
    except ReauditFailedError as exc:
        failed = "; ".join(f"{c.check}({c.target}) {c.measured}, expected {c.expected}" for c in exc.report.failures)
        return Answer(f":x: Re-audit asked by {who} still fails: {e(failed)}. Nothing was published; the branch stays "
                      f"open.", settled=False, private=e(exc))
    except (CatalogError, BadInputError) as exc:  # the decision refused (a conflict, a branch not open for review)
        verb = _VERBS[asked.action]
        return Answer(f":x: {verb} asked by {who} failed: {e(exc)}", settled=False, private=e(exc))
    except WapError as exc:  # a setting or anything else on the service's side: no internal text is shown
        verb, ref = _VERBS[asked.action], asked.ref or reference()
        return Answer(f":x: {verb} asked by {who} failed on our side; nothing was done (reference `{e(ref)}`).",
                      settled=False, private=e(not_done(ref)), logged=f"{type(exc).__name__}: {exc}")


_VERBS = {ActionKind.SHOW_ROWS: "Showing the rows", ActionKind.REAUDIT_PUBLISH: "Re-audit and publish",
          ActionKind.PUBLISH_REVIEWED: "Publishing", ActionKind.DISCARD: "Discarding", ActionKind.RETRY: "Retrying",
          ActionKind.SHOW_DEAD_LETTERS: "Listing the dead letters", ActionKind.REDRIVE: "Redriving"}


def _run(asked: Asked, cases: UseCases) -> Answer:
    e, who, target, actor = mrkdwn_escape, asked.person.mention, asked.target, asked.person.actor
    reason = (asked.reason or "").strip()
    if asked.action.asks_reason and not reason:
        return Answer("", settled=False, private="Nothing done: say why (the reason is recorded).", update=False)
    if asked.action is ActionKind.DISCARD:
        decision = cases.discard(target, reason, actor)
        if decision.already:
            return _already(decision, "discarded")
        return Answer(f":wastebasket: Discarded by {who}: {e(reason)}", settled=True)
    if asked.action in (ActionKind.PUBLISH_REVIEWED, ActionKind.REAUDIT_PUBLISH):
        reaudit = asked.action is ActionKind.REAUDIT_PUBLISH
        decision = cases.publish(target, reason, actor, reaudit)
        if decision.already:
            return _already(decision, "published")
        how = "re-audited it (passed) and published it" if reaudit else "published it after review"
        merged = f" (merge `{e(decision.merged_hash[:12])}`)" if decision.merged_hash else ""
        return Answer(f":white_check_mark: {who} {how}: {e(reason)}{merged}", settled=True)
    if asked.action is ActionKind.SHOW_ROWS:
        return Answer("", settled=False, private=_rows(target, cases.report(target)), update=False)
    if asked.action is ActionKind.RETRY:
        return _retried(who, cases.retry(object_at(target)))
    if asked.action is ActionKind.SHOW_DEAD_LETTERS:
        lines = list(cases.dead_letters(target))
        shown = "\n".join(e(line) for line in lines[:20]) + (f"\n... and {len(lines) - 20} more" if len(lines) > 20
                                                              else "")
        text = (f"{len(lines)} message(s) in {e(target)}:\n```{shown}```\nRedrive sends them back to the ingest queue "
                f"once the cause is fixed." if lines else f"{e(target)} is empty.")
        return Answer("", settled=False, private=text, update=False)
    moved = cases.redrive(target)
    return Answer(f":arrows_counterclockwise: Redriven by {who}: {moved} message(s) sent back to the ingest queue.",
                  settled=True)


def _already(decision: Decision, action: str) -> Answer:
    """Someone decided first: nothing was done; the message says what is true now."""
    e = mrkdwn_escape
    line = f"{action.capitalize()} by {e(decision.actor)}: {e(decision.reason)}"
    return Answer(line, settled=True, private=f"Nothing done: it was already {action} by {e(decision.actor)} "
                                              f"({e(decision.reason)}).")


def _gone(branch: str, who: str) -> Answer:
    """The branch was deleted and no one decided it (neither published nor a recorded discard): a newer attempt at
    the same file replaced it (its run's clean-up), or it was removed by hand. Nothing is left to decide here."""
    gone = f"{mrkdwn_escape(branch)} was deleted without a recorded decision; its rows are not on main"
    return Answer(f"No longer open (asked by {who}): {gone}.", settled=True,
                  private=f"Nothing done: {gone} (a newer attempt at the same file replaces it, or it was removed by "
                          f"hand). If the file was ingested again, its newer alert has the buttons; open branches: "
                          f"`wap branches`.")


def _rows(branch: str, document: Mapping[str, object] | None) -> str:
    e = mrkdwn_escape
    report = document.get("report") if document is not None else None
    if not isinstance(report, Mapping):
        return f"No stored report for {e(branch)} (expired, or not kept). See it with: wap show {e(branch)}"
    parsed = AuditReport.from_dict(report)
    lines = list(report_lines(parsed))
    for check in parsed.failures:
        for sample in check.samples[:MAX_SAMPLES]:
            lines.append(e(f"{check.check}({check.target}): " + ", ".join(f"{k}={v}" for k, v in sample.items())))
    return f"{parsed.rows} new rows on {e(branch)}:\n```" + "\n".join(lines) + "```"


def _retried(who: str, outcome: IngestOutcome) -> Answer:
    e = mrkdwn_escape
    status = outcome.status
    where = f" into {e(outcome.table)}" if outcome.table else ""
    if status in (OutcomeStatus.PUBLISHED, OutcomeStatus.DUPLICATE, OutcomeStatus.SUBMITTED, OutcomeStatus.WAITING):
        done = {OutcomeStatus.PUBLISHED: f"published {outcome.rows} rows{where}",
                OutcomeStatus.DUPLICATE: "already on main (nothing done)",
                OutcomeStatus.SUBMITTED: "submitted as a large-file job",
                OutcomeStatus.WAITING: "waiting for its load's manifest"}[status]
        return Answer(f":repeat: Retried by {who}: {done}.", settled=True)
    return Answer(f":repeat: Retried by {who}: {status.value} again ({e(outcome.message)}); see its new alert.",
                  settled=status is OutcomeStatus.REJECTED)
