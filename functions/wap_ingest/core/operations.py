"""The function's operational events and the operators' prune, as use cases with their ports: what is alerted when
the dead-letter queue's alarm changes, when a large file's EMR run ended and cannot run again, when branches are
pruned, and when the EMR job finds another audits file than the function's. The entry points only read the event or
the arguments and print or return what these say."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .alerts import alert_for_prune
from .dead_letters import QueueAlarm, alert_for_alarm
from .job_failures import JobRunsExhaustedError, alert_for_exhausted, alert_for_suite_mismatch, suite_mismatch_message
from .ports import LargeFileJobs, Notifier
from .review import Pruned

log = logging.getLogger(__name__)

ENDED_BADLY = ("FAILED", "CANCELLED")  # the states of a run that is resubmitted (or, past its attempts, alerted)


def tell_alarm(alarm: QueueAlarm, notifier: Notifier) -> None:
    """The dead-letter queue's alarm fired or cleared: said in Slack, with what to do (nothing for no data)."""
    log.warning("alarm %s: %s", alarm.name, alarm.state, extra={"alarm": alarm.name, "state": alarm.state,
                                                                "queue": alarm.queue})
    alert = alert_for_alarm(alarm)
    if alert is not None:
        notifier.notify(alert)


@dataclass(frozen=True)
class JobEnded:
    """What became of a large file's EMR run that ended: resubmitted as `resubmitted`, or not (None), and why not."""

    job_run: str
    state: str
    resubmitted: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        answer = {"job_run": self.job_run, "state": self.state, "resubmitted": self.resubmitted}
        return answer if self.error is None else answer | {"error": self.error}


def job_run_ended(application_id: str, job_run_id: str, state: str, *, jobs: LargeFileJobs | None,
                  notifier: Notifier) -> JobEnded:
    """A large file's EMR run ended: a failed or cancelled one is resubmitted now, with its alert (the adapter's), or,
    when it was its last allowed run, alerted as final (it waits for an operator: the fix is in the alert). Any other
    error raises: the event is retried, and the schedule's sweep finds the run if every retry fails."""
    log.info("job run %s ended: %s", job_run_id, state, extra={"job_run_id": job_run_id, "state": state})
    if jobs is None or state not in ENDED_BADLY:
        return JobEnded(job_run_id, state)
    try:
        again = jobs.run_ended(application_id, job_run_id)
    except JobRunsExhaustedError as exc:
        log.error("job run %s not resubmitted: its attempts are used up", job_run_id,
                  extra={"job_run_id": job_run_id, "error": str(exc)})
        notifier.notify(alert_for_exhausted(job_run_id, str(exc)))
        return JobEnded(job_run_id, state, error=str(exc))
    return JobEnded(job_run_id, state, again.job_run_id if again else None)


def prune_and_tell(prune: Callable[[], Pruned], *, dry_run: bool, reason: str, actor: str,
                   notifier: Notifier) -> Pruned:
    """`wap prune`: the branches discarded (`prune`: core.review.prune_branches with its ports), then one summary
    alert of what was discarded (none for a dry run, nor when nothing was)."""
    pruned = prune()
    if pruned.discarded and not dry_run:
        notifier.notify(alert_for_prune([(b.name, b.table.qualified) for b in pruned.discarded], reason=reason,
                                        actor=actor, skipped=len(pruned.skipped)))
    return pruned


def refusal_for(expected: str | None, found: str, *, what: str, job_run_id: str, audits_file: str, again: str,
                notifier: Notifier) -> str | None:
    """Why the EMR job must not run (its audits file, digest `found`, is not the function's, `expected`), alerted;
    None when it is the same. The refusal stands without its alert: the run's record and FAILED state tell it too."""
    if found == expected:
        return None
    expected = expected or "(none: the request carries no --audits-digest; it was sent by an older function)"
    facts = {"what": what, "job_run_id": job_run_id, "expected": expected, "found": found,
             "audits_file": audits_file, "again": again}
    message = suite_mismatch_message(**facts)
    log.error("%s", message)
    try:
        notifier.notify(alert_for_suite_mismatch(**facts))
    except Exception:
        log.exception("the alert about the audits file could not be sent")
    return message
