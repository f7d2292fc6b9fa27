"""The function's small handlers, one per request that is not a file to ingest (adapters/inbound.py reads them):
the dead-letter queue's alarm, a large file's EMR run that ended, the maintenance schedule, and an operator's publish
request (an SQS message among the files: answered by its record handler, see lambda_objects.py)."""

from __future__ import annotations

from typing import Any

from wap_ingest.adapters.inbound import Alarms, JobStateChange
from wap_ingest.bootstrap import Service
from wap_ingest.core.dead_letters import alert_for_alarm
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.job_failures import alert_for_exhausted
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.lambda_observability import logger


class MaintenanceFailedError(WapError):
    """The schedule maintained every table, and some failed; Lambda should retry the event."""


def on_alarms(svc: Service, request: Alarms) -> dict[str, Any]:
    """The dead-letter queue's alarm fired or cleared: say so in Slack, with what to do."""
    for alarm in request.alarms:
        logger.warning("alarm", extra={"alarm": alarm.name, "state": alarm.state, "queue": alarm.queue})
        alert = alert_for_alarm(alarm)
        if alert is not None:
            svc.notifier.notify(alert)
    return {"alarms": [a.name for a in request.alarms]}


def on_job_state(svc: Service, change: JobStateChange) -> dict[str, Any]:
    """A large file's EMR run ended: a failed one is resubmitted now, with its alert (the adapter's), or, past the
    allowed attempts, alerted as final (it waits for an operator: the fix is in the alert)."""
    run_id, state = change.job_run_id, change.state
    logger.info("job run ended", extra={"job_run_id": run_id, "state": state})
    if svc.large_files is None or state not in ("FAILED", "CANCELLED"):
        return {"job_run": run_id, "state": state, "resubmitted": None}
    try:
        again = svc.large_files.jobs.run_ended(change.application_id, run_id)
    except InfrastructureError as exc:
        logger.error("job run could not be resubmitted", extra={"job_run_id": run_id, "error": str(exc)})
        svc.notifier.notify(alert_for_exhausted(run_id, str(exc)))
        return {"job_run": run_id, "state": state, "resubmitted": None, "error": str(exc)}
    return {"job_run": run_id, "state": state, "resubmitted": again.job_run_id if again else None}


def on_schedule(svc: Service) -> dict[str, Any]:
    """The schedule: every table on main (each logged and counted by Service.maintain); a table that failed fails
    the invocation, after the others ran."""
    results = svc.maintain(None)
    failed = [str(r) for r in results if isinstance(r, Exception)]
    if failed:
        raise MaintenanceFailedError(f"maintenance failed for {len(failed)} of {len(results)} tables: "
                                     f"{'; '.join(failed)}")
    return {"maintained": [r.to_dict() for r in results if not isinstance(r, Exception)]}


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
