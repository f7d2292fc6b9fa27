"""The function's small handlers, one per request that is not a file to ingest (entrypoints/inbound.py reads them):
the dead-letter queue's alarm, a large file's EMR run that ended, the schedule (the sweep of the EMR runs, then
maintenance), and an operator's publish request (an SQS message among the files: answered by its record handler, see
lambda_objects.py). Each is handed its use cases (bootstrap/use_cases.py: `OperationUseCases`, and the publish
request's answer); what is alerted, resubmitted or deferred is the core's (core/operations.py, core/deliveries.py).
`remaining_of` reads the invocation's clock, which the use cases keep their deadline by."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wap_ingest.bootstrap import OperationUseCases
from wap_ingest.core.deliveries import RemainingMillis
from wap_ingest.core.errors import DeferredError, WapError
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.inbound import Alarms, JobStateChange
from wap_ingest.entrypoints.lambda_observability import logger

Answer = Callable[[PublishRequest, str, str | None], dict[str, Any]]


class MaintenanceFailedError(WapError):
    """The schedule swept the EMR runs and maintained every table, and some of it failed; Lambda retries the event
    (both are idempotent)."""


def remaining_of(context: Any) -> RemainingMillis | None:
    """The invocation's time left (Lambda's context), None without one: the use cases' deadline
    (WAP_TIME_RESERVE_SECONDS before it, core.deliveries.deadline_for) is then never reached."""
    remaining: RemainingMillis | None = getattr(context, "get_remaining_time_in_millis", None)
    return remaining


def on_alarms(uses: OperationUseCases, request: Alarms) -> dict[str, Any]:
    """The dead-letter queue's alarm fired or cleared: said in Slack, with what to do."""
    for alarm in request.alarms:
        uses.alarm(alarm)
    return {"alarms": [a.name for a in request.alarms]}


def on_job_state(uses: OperationUseCases, change: JobStateChange) -> dict[str, Any]:
    """A large file's EMR run ended: resubmitted, or alerted as final (core.operations.job_run_ended). Any other error
    fails the invocation: Lambda retries the event, and the schedule's sweep finds the run if every retry fails."""
    return uses.job_ended(change.application_id, change.job_run_id, change.state).to_dict()


def on_schedule(uses: OperationUseCases, context: Any) -> dict[str, Any]:
    """The schedule: first the sweep of the large files' EMR runs (a failed, cancelled or overdue run is resubmitted
    or, past its attempts, alerted, whether or not its state-change event came: adapters/aws/emr.py), then every table
    on main (each logged and counted by Service.maintain) while the invocation has time left: a table not started for
    want of time is listed as deferred (the next schedule maintains it), not failed, and leaves no branch. What failed
    fails the invocation, after the rest ran."""
    failures: list[str] = []
    try:
        swept = uses.sweep_job_runs()
    except Exception as exc:  # the listing itself failed: maintenance still runs, and the invocation fails
        logger.exception("the EMR sweep failed", extra={"error": str(exc)})
        swept, failures = None, [f"the EMR sweep: {exc}"]
    if swept is not None:
        logger.info("EMR runs swept", extra={"emr_sweep": swept.to_dict()})
        failures += [f"the EMR sweep: {error}" for error in swept.errors]
    results = uses.maintain_all(remaining_of(context))
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


def on_publish_request(answer_request: Answer, request: PublishRequest, message_id: str,
                       queue_arn: str | None = None) -> dict[str, Any]:
    """Serve an operator's publish request (`answer_request` claims it for this message, checks its signature and
    age, and writes the answer once where `wap publish` waits). A refusal is an answer (a replay's is logged, not
    written); an infrastructure failure raises, so its message is retried like a file's."""
    logger.append_keys(request_id=request.request_id, branch=request.branch, correlation_id=message_id)
    try:
        answer = answer_request(request, message_id, queue_arn)
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
