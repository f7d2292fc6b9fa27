"""The function's small handlers, one per request that is not a file to ingest (entrypoints/inbound.py reads them):
the dead-letter queue's alarm, a large file's EMR run that ended, the schedule (the sweep of the EMR runs, then
maintenance), and an operator's publish request (an SQS message among the files: answered by its record handler, see
lambda_objects.py). `deadline_for` is the invocation's time guard, for files and for the schedule's maintenance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wap_ingest.bootstrap import Service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.dead_letters import alert_for_alarm
from wap_ingest.core.errors import DeferredError, WapError
from wap_ingest.core.job_failures import JobRunsExhaustedError, alert_for_exhausted
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.inbound import Alarms, JobStateChange
from wap_ingest.entrypoints.lambda_observability import logger


class MaintenanceFailedError(WapError):
    """The schedule swept the EMR runs and maintained every table, and some of it failed; Lambda retries the event
    (both are idempotent)."""


def deadline_for(context: Any, settings: Settings) -> Callable[[], bool]:
    """True once the invocation has less time left than WAP_TIME_RESERVE_SECONDS (never without a Lambda
    context): what is not started by then is deferred, never cut off mid-merge."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return lambda: False
    reserve_ms = float(settings.time_reserve_seconds) * 1000
    return lambda: bool(remaining() < reserve_ms)


def on_alarms(svc: Service, request: Alarms) -> dict[str, Any]:
    """The dead-letter queue's alarm fired or cleared: say so in Slack, with what to do."""
    for alarm in request.alarms:
        logger.warning("alarm", extra={"alarm": alarm.name, "state": alarm.state, "queue": alarm.queue})
        alert = alert_for_alarm(alarm)
        if alert is not None:
            svc.notifier.notify(alert)
    return {"alarms": [a.name for a in request.alarms]}


def on_job_state(svc: Service, change: JobStateChange) -> dict[str, Any]:
    """A large file's EMR run ended: a failed one is resubmitted now, with its alert (the adapter's), or, when this
    was its last allowed run, alerted as final (it waits for an operator: the fix is in the alert). Any other error
    fails the invocation: Lambda retries the event, and the schedule's sweep finds the run if every retry fails."""
    run_id, state = change.job_run_id, change.state
    logger.info("job run ended", extra={"job_run_id": run_id, "state": state})
    if svc.large_files is None or state not in ("FAILED", "CANCELLED"):
        return {"job_run": run_id, "state": state, "resubmitted": None}
    try:
        again = svc.large_files.jobs.run_ended(change.application_id, run_id)
    except JobRunsExhaustedError as exc:
        logger.error("job run not resubmitted: its attempts are used up", extra={"job_run_id": run_id,
                                                                                 "error": str(exc)})
        svc.notifier.notify(alert_for_exhausted(run_id, str(exc)))
        return {"job_run": run_id, "state": state, "resubmitted": None, "error": str(exc)}
    return {"job_run": run_id, "state": state, "resubmitted": again.job_run_id if again else None}


def on_schedule(svc: Service, context: Any) -> dict[str, Any]:
    """The schedule: first the sweep of the large files' EMR runs (a failed, cancelled or overdue run is resubmitted
    or, past its attempts, alerted, whether or not its state-change event came: adapters/aws/emr.py), then every table
    on main (each logged and counted by Service.maintain) while the invocation has time left (`deadline_for`): a table
    not started for want of time is listed as deferred (the next schedule maintains it), not failed, and leaves no
    branch. What failed fails the invocation, after the rest ran."""
    failures: list[str] = []
    try:
        swept = svc.sweep_job_runs()
    except Exception as exc:  # the listing itself failed: maintenance still runs, and the invocation fails
        logger.exception("the EMR sweep failed", extra={"error": str(exc)})
        swept, failures = None, [f"the EMR sweep: {exc}"]
    if swept is not None:
        logger.info("EMR runs swept", extra={"emr_sweep": swept.to_dict()})
        failures += [f"the EMR sweep: {error}" for error in swept.errors]
    results = svc.maintain(None, out_of_time=deadline_for(context, svc.settings))
    deferred = [str(r) for r in results if isinstance(r, DeferredError)]
    failed = [str(r) for r in results if isinstance(r, Exception) and not isinstance(r, DeferredError)]
    unswept = [r.swept.message for r in results  # a sweep that could not read or list what it needs
               if isinstance(r, MaintenanceReport) and r.swept is not None and r.swept.status == "aborted"]
    if failed:
        failures.append(f"maintenance failed for {len(failed)} of {len(results)} tables: {'; '.join(failed)}")
    if unswept:
        failures.append(f"the sweep of unreferenced files aborted for {len(unswept)} of {len(results)} tables: "
                        f"{'; '.join(unswept)}")
    if failures:
        raise MaintenanceFailedError("; ".join(failures))
    answer: dict[str, Any] = {"maintained": [r.to_dict() for r in results if not isinstance(r, Exception)]}
    if deferred:
        answer["deferred"] = deferred
    return answer if swept is None else {"emr_sweep": swept.to_dict(), **answer}


def on_publish_request(svc: Service, request: PublishRequest, message_id: str,
                       queue_arn: str | None = None) -> dict[str, Any]:
    """Serve an operator's publish request (Service.answer claims it for this message, checks its signature and
    age, and writes the answer once where `wap publish` waits). A refusal is an answer (a replay's is logged, not
    written); an infrastructure failure raises, so its message is retried like a file's."""
    logger.append_keys(request_id=request.request_id, branch=request.branch, correlation_id=message_id)
    try:
        answer = svc.answer(request, message_id, queue_arn)
    except Exception as exc:
        logger.error("publish request failed", extra={"error": str(exc), "error_type": type(exc).__name__})
        raise
    finally:
        logger.remove_keys(["request_id", "branch", "correlation_id"])
    logger.info("publish request answered", extra={
        "action": answer.get("action"), "actor": answer.get("actor"), "request_id": request.request_id,
        "branch": request.branch, "written": answer.get("written"),
        **({"error": answer["error"]} if answer.get("action") == "refused" else {})})
    return {k: answer.get(k) for k in ("request_id", "branch", "action", "actor", "merged_hash", "written")}
