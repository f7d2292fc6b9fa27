"""The Lambda entry point: `wap_ingest.entrypoints.lambda_handler.handler`.

Thin: read the event (SQS-wrapped S3 or EventBridge notifications, a direct S3 event, or an EventBridge event)
into items, hand them all to the process-wide Service (one engine and one set of clients per container, reused
by warm invocations), which routes each object once (refuse, the function, or EMR Serverless) and runs the one
pipeline, then settle every object the same way:
- an outcome (published, duplicate, rejected, invalid, submitted) consumes its message;
- an error (an infrastructure failure, or deferred: not started for lack of time or disk) fails it: for SQS the
  message is listed in `batchItemFailures` so only it is redelivered (and dead-lettered after maxReceiveCount);
  a direct invocation raises once every object was handled, so Lambda's retry applies.
Each object gets a correlation id (the SQS message id, or the request id, and the key) on every log line about
it and in its alert; one EMF metrics document per invocation counts the outcomes (adapters/metrics.py).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from wap_ingest.adapters.events import (
    EventKind,
    UnreadableEventError,
    alarms_from_sns,
    event_kind,
    job_run_from,
    objects_from_eventbridge,
    objects_from_s3_event,
    objects_from_sqs_body,
    unique_objects,
)
from wap_ingest.adapters.metrics import OutcomeMetrics
from wap_ingest.bootstrap import Service, service
from wap_ingest.core.alerts import alert_for_unreadable_event
from wap_ingest.core.dead_letters import alert_for_alarm
from wap_ingest.core.errors import BadInputError, DeferredError, InfrastructureError, WapError
from wap_ingest.core.ingest import Delivery, Item, retry_delay_seconds
from wap_ingest.core.job_failures import alert_for_exhausted
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject
from wap_ingest.core.pipeline import Result
from wap_ingest.core.publish_requests import PublishRequest

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "wap-ingest"))
metrics = OutcomeMetrics()


class InvocationFailedError(WapError):
    """Some objects of a direct invocation failed; Lambda should retry the event."""


@dataclass(frozen=True)
class _Message:
    """An SQS message as the event source handed it over: what the retry back-off needs."""

    message_id: str
    queue_arn: str
    receipt_handle: str
    receive_count: int


@dataclass(frozen=True)
class _Received:
    item: Item
    message_id: str | None  # the SQS message that carried it (None: a direct invocation)


class _Correlation(logging.Filter):
    """Puts the correlation id of the object a line is about (its `object_key`) on the line: the core logs
    about many objects in one call, and knows keys, not deliveries."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, "object_key", None)
        if isinstance(key, str) and key in self.ids and not getattr(record, "correlation_id", None):
            record.correlation_id = self.ids[key]
        return True


_CORRELATION = _Correlation()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The core logs with the standard library; give its loggers the same JSON format and keys.
    copy_config_to_registered_loggers(source_logger=logger, include={"wap_ingest"})
    if _CORRELATION not in logger.registered_handler.filters:
        logger.registered_handler.addFilter(_CORRELATION)
    try:
        return _handle(event, context)
    finally:
        metrics.flush()  # once per invocation, also when it raises


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    svc = service()
    kind = event_kind(event)
    logger.info("invocation", extra={"event_kind": kind.value})
    if kind is EventKind.ALARM:
        alarms = alarms_from_sns(event)
        for alarm in alarms:
            alert = alert_for_alarm(alarm)
            logger.warning("alarm", extra={"alarm": alarm.name, "state": alarm.state, "queue": alarm.queue})
            if alert is not None:
                svc.notifier.notify(alert)
        return {"alarms": [a.name for a in alarms]}
    if kind is EventKind.JOB_STATE:
        return _job_ended(svc, event)
    if kind is EventKind.MAINTAIN:
        return _maintain(svc)
    failed: dict[str, str] = {}  # message id -> why (SQS)
    messages: dict[str, _Message] = {}
    asked: list[tuple[PublishRequest, str]] = []  # operators' publish requests on the queue, with their message
    if kind is EventKind.SQS:
        received = _from_sqs(event, svc, failed, messages, asked)
    else:
        origin = getattr(context, "aws_request_id", None) or uuid.uuid4().hex
        sources = objects_from_s3_event(event) if kind is EventKind.S3 else objects_from_eventbridge(event)
        received = [_Received(Item(s, Delivery(correlation_id=correlation_id_for(origin, s))), None)
                    for s in unique_objects(sources)]
    _CORRELATION.ids = {r.item.source.key: r.item.delivery.correlation_id or "" for r in received}
    results = svc.ingest_all([r.item for r in received], out_of_time=_deadline(context, svc.settings))
    summaries, errors = [], []
    for got, result in zip(received, results, strict=True):
        summary, error = _settle(got.item, result)
        summaries.append(summary)
        if error is not None:
            errors.append(error)
            if got.message_id is not None:
                failed.setdefault(got.message_id, error)
    answers = _answer(svc, asked, failed)
    if kind is EventKind.SQS:
        _back_off(svc, [messages[m] for m in failed if m in messages])
        if answers:
            return {"batchItemFailures": [{"itemIdentifier": m} for m in failed], "objects": summaries,
                    "requests": answers}
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failed], "objects": summaries}
    if errors:
        raise InvocationFailedError(f"{len(errors)} of {len(summaries)} objects failed: {'; '.join(errors)}")
    return {"objects": summaries}


def _maintain(svc: Service) -> dict[str, Any]:
    """The schedule: every table on main (each logged and counted by Service.maintain); a table that failed fails
    the invocation, after the others ran."""
    results = svc.maintain(None)
    failed = [str(r) for r in results if isinstance(r, Exception)]
    if failed:
        raise InvocationFailedError(f"maintenance failed for {len(failed)} of {len(results)} tables: "
                                    f"{'; '.join(failed)}")
    return {"maintained": [r.to_dict() for r in results if not isinstance(r, Exception)]}


def _job_ended(svc: Service, event: dict[str, Any]) -> dict[str, Any]:
    """A large file's EMR run ended: a failed one is resubmitted now, with its alert (the adapter's), or, past the
    allowed attempts, alerted as final (it waits for an operator: the fix is in the alert)."""
    application_id, run_id, state = job_run_from(event)
    logger.info("job run ended", extra={"job_run_id": run_id, "state": state})
    if svc.large_files is None or state not in ("FAILED", "CANCELLED"):
        return {"job_run": run_id, "state": state, "resubmitted": None}
    try:
        again = svc.large_files.jobs.run_ended(application_id, run_id)
    except InfrastructureError as exc:
        logger.error("job run could not be resubmitted", extra={"job_run_id": run_id, "error": str(exc)})
        svc.notifier.notify(alert_for_exhausted(run_id, str(exc)))
        return {"job_run": run_id, "state": state, "resubmitted": None, "error": str(exc)}
    return {"job_run": run_id, "state": state, "resubmitted": again.job_run_id if again else None}


def _from_sqs(event: dict[str, Any], svc: Service, failed: dict[str, str], messages: dict[str, _Message],
              asked: list[tuple[PublishRequest, str]]) -> list[_Received]:
    """Every message's objects (and publish requests); an unreadable message is alerted and failed on its own."""
    received = []
    for record in (SQSRecord(r) for r in event["Records"]):
        delivery = Delivery(int(record.attributes.approximate_receive_count or 1), svc.settings.max_receives)
        messages[record.message_id] = _Message(record.message_id, record.event_source_arn, record.receipt_handle,
                                               delivery.attempt or 1)
        try:
            request = PublishRequest.from_body(record.body)
            if request is not None:
                asked.append((request, record.message_id))
                continue
            sources = unique_objects(objects_from_sqs_body(record.body))
        except (UnreadableEventError, BadInputError) as exc:
            logger.error("unreadable message", extra={"error": str(exc), "message_id": record.message_id})
            if delivery.alert_worthy:
                svc.notifier.notify(alert_for_unreadable_event(record.message_id, str(exc), final=delivery.final))
            failed[record.message_id] = str(exc)
            continue
        received += [_Received(Item(s, Delivery(delivery.attempt, delivery.max_attempts,
                                                correlation_id_for(record.message_id, s))), record.message_id)
                     for s in sources]
    return received


def _answer(svc: Service, asked: list[tuple[PublishRequest, str]], failed: dict[str, str]) -> list[dict[str, Any]]:
    """Serve each publish request; one that failed on infrastructure fails its message (retried like a file)."""
    answers = []
    for request, message_id in asked:
        logger.append_keys(request_id=request.request_id, branch=request.branch, correlation_id=message_id)
        try:
            answer = svc.answer(request)
        except Exception as exc:
            logger.error("publish request failed", extra={"error": str(exc), "error_type": type(exc).__name__})
            failed.setdefault(message_id, str(exc))
            continue
        finally:
            logger.remove_keys(["request_id", "branch", "correlation_id"])
        logger.info("publish request answered", extra={"action": answer.get("action"), "actor": answer.get("actor"),
                                                       "request_id": request.request_id, "branch": request.branch})
        answers.append({k: answer.get(k) for k in ("request_id", "branch", "action", "actor", "merged_hash")})
    return answers


def _back_off(svc: Service, failed: list[_Message]) -> None:
    """Each failed or deferred message comes back after a capped exponential back-off from its receive count, not
    after the queue's whole visibility timeout (the event source mapping leaves that alone)."""
    if svc.retries is None:
        return
    for message in failed:
        delay = retry_delay_seconds(message.receive_count, svc.settings.retry_base_seconds,
                                    svc.settings.retry_max_seconds)
        if svc.retries.back_off(message.queue_arn, message.receipt_handle, delay):
            logger.info("retry delayed", extra={"message_id": message.message_id, "seconds": delay,
                                                "receive_count": message.receive_count})


def _deadline(context: Any, settings: Any) -> Callable[[], bool]:
    """True once the invocation has less time left than a file needs (never without a Lambda context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return lambda: False
    reserve_ms = float(settings.time_reserve_seconds) * 1000
    return lambda: bool(remaining() < reserve_ms)


def _settle(item: Item, result: Result) -> tuple[dict[str, Any], str | None]:
    """Log and count one object's result; the error that fails its message, if any."""
    source, delivery = item.source, item.delivery
    logger.append_keys(object_key=source.key, bucket=source.bucket, correlation_id=delivery.correlation_id)
    try:
        if isinstance(result, DeferredError):
            logger.warning("deferred: not started in this invocation", extra={"error": str(result)})
            return {"object": source.uri, "status": "deferred", "message": str(result),
                    "correlation_id": delivery.correlation_id}, str(result)
        error = None
        if isinstance(result, WapError):
            logger.error("ingestion failed", extra={"error": str(result), "error_type": type(result).__name__})
            error = f"{source.uri}: {result}"
            result = IngestOutcome(source=source, status=OutcomeStatus.FAILED, message=str(result))
        logger.info("outcome", extra={"status": result.status.value, "table": result.table,
                                      "branch": result.branch, "rows": result.rows})
        metrics.record(result)
        return _summary(result) | {"correlation_id": delivery.correlation_id}, error
    finally:
        logger.remove_keys(["object_key", "bucket", "correlation_id"])


def correlation_id_for(origin: str, source: SourceObject) -> str:
    """Stable across redeliveries of one SQS message: its retries share the id."""
    return f"{origin}:{source.key}"


def _summary(outcome: IngestOutcome) -> dict[str, Any]:
    summary = outcome.to_dict()
    report = summary.pop("report", None)
    if isinstance(report, dict):
        summary["failed_checks"] = [c for c in report["checks"] if c["status"] == "failed"]
    return summary
