"""The Lambda entry point: `wap_ingest.entrypoints.lambda_handler.handler`.

Thin: read the event (S3, SQS-wrapped S3, or EventBridge), run the pipeline per object through the
process-wide Service (one SparkSession and one set of clients per container, reused by warm
invocations), and return a per-object summary. Each object has its own fate:
- SQS: all messages are read first; objects above WAP_LARGE_FILE_BYTES are submitted to EMR Serverless, the
  small ones of one table run as one batch (core.batch: one write, one merge; each file keeps its outcome).
  An object whose run hit an infrastructure error, or was not started because the invocation's remaining
  time fell below WAP_TIME_RESERVE_SECONDS, fails its message, reported in `batchItemFailures` so only that
  message is redelivered (and dead-lettered after maxReceiveCount); rejected and invalid files are outcomes
  (alerted), so their messages are consumed.
- direct S3 / EventBridge: every object is processed, then the invocation raises if any failed, so
  Lambda's retry applies.
Each object gets a correlation id (the SQS message id, or the request id, and the key) on every log line
about it and in its alert; one EMF metrics document per invocation counts the outcomes (adapters/metrics.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from wap_ingest.adapters.events import (
    EventKind,
    UnreadableEventError,
    event_kind,
    objects_from_eventbridge,
    objects_from_s3_event,
    objects_from_sqs_body,
    unique_objects,
)
from wap_ingest.adapters.metrics import OutcomeMetrics
from wap_ingest.bootstrap import Service, service
from wap_ingest.core.alerts import alert_for_unreadable_event
from wap_ingest.core.batch import Result
from wap_ingest.core.errors import OutOfTimeError, WapError
from wap_ingest.core.ingest import Delivery
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "wap-ingest"))
metrics = OutcomeMetrics()


class InvocationFailedError(WapError):
    """Some objects of a direct invocation failed; Lambda should retry the event."""


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The core logs with the standard library; give its loggers the same JSON format and keys.
    copy_config_to_registered_loggers(source_logger=logger, include={"wap_ingest"})
    try:
        return _handle(event, context)
    finally:
        metrics.flush()  # once per invocation, also when it raises


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    svc = service()
    kind = event_kind(event)
    logger.info("invocation", extra={"event_kind": kind.value})
    if kind is EventKind.SQS:
        return _handle_sqs(event, context, svc)
    sources = objects_from_s3_event(event) if kind is EventKind.S3 else objects_from_eventbridge(event)
    request_id = getattr(context, "aws_request_id", None) or uuid.uuid4().hex
    summaries, failures = _ingest_all(svc, unique_objects(sources), Delivery(), request_id)
    if failures:
        raise InvocationFailedError(f"{len(failures)} of {len(summaries)} objects failed: {'; '.join(failures)}")
    return {"objects": summaries}


def _handle_sqs(event: dict[str, Any], context: Any, svc: Service) -> dict[str, Any]:
    """Read every message first, then run its objects: large ones go to EMR, the small ones of one table run as
    one batch (core.batch). A message fails (and is redelivered) if any of its objects failed or was not started
    for lack of time; its other objects are done and are found as duplicates on the retry."""
    failed: dict[str, str] = {}  # message id -> why
    items: list[tuple[SourceObject, Delivery, str]] = []
    summaries: list[dict[str, Any]] = []
    out_of_time = _deadline(context, svc.settings.time_reserve_seconds)
    for record in (SQSRecord(r) for r in event["Records"]):
        delivery = Delivery(int(record.attributes.approximate_receive_count or 1), svc.settings.max_receives)
        try:
            sources = unique_objects(objects_from_sqs_body(record.body))
        except UnreadableEventError as exc:
            logger.error("unreadable message", extra={"error": str(exc), "message_id": record.message_id})
            if delivery.alert_worthy:
                svc.notifier.notify(alert_for_unreadable_event(record.message_id, str(exc), final=delivery.final))
            failed[record.message_id] = str(exc)
            continue
        for source in sources:
            routed = replace(delivery, correlation_id=correlation_id_for(record.message_id, source))
            if svc.routes_to_emr(source):
                summary, error = _submit(svc, source, routed)
                summaries.append(summary)
                if error:
                    failed[record.message_id] = error
            else:
                items.append((source, routed, record.message_id))
    if svc.batch_writer is not None and items:
        logger.info("batch", extra={"objects": len(items), "correlation_ids": [d.correlation_id for _, d, _ in items]})
        results: list[Result] = list(svc.ingest_batch([(s, d) for s, d, _ in items], out_of_time=out_of_time))
    else:
        results = [_ingest_one(svc, source, delivery, out_of_time) for source, delivery, _ in items]
    for (source, delivery, message_id), result in zip(items, results, strict=True):
        summary, error = _settle(source, delivery, result)
        summaries.append(summary)
        if error:
            failed.setdefault(message_id, error)
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed], "objects": summaries}


def _deadline(context: Any, reserve_seconds: float) -> Callable[[], bool]:
    """True once the invocation has less time left than a file needs (never without a Lambda context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return lambda: False
    return lambda: bool(remaining() < reserve_seconds * 1000)


def _ingest_one(svc: Service, source: SourceObject, delivery: Delivery, out_of_time: Callable[[], bool]) -> Result:
    if out_of_time():
        return OutOfTimeError(f"{source.uri}: not started, the invocation is nearly out of time; back to the queue.")
    logger.append_keys(object_key=source.key, bucket=source.bucket, correlation_id=delivery.correlation_id)
    try:
        return svc.ingest(source, delivery=delivery)
    except WapError as exc:
        return exc
    finally:
        logger.remove_keys(["object_key", "bucket", "correlation_id"])


def _submit(svc: Service, source: SourceObject, delivery: Delivery) -> tuple[dict[str, Any], str | None]:
    try:
        result: Result = svc.submit_large(source, delivery=delivery)
    except WapError as exc:
        result = exc
    return _settle(source, delivery, result)


def _settle(source: SourceObject, delivery: Delivery, result: Result) -> tuple[dict[str, Any], str | None]:
    """Log and count one object's result; the error that fails its message, if any."""
    logger.append_keys(object_key=source.key, bucket=source.bucket, correlation_id=delivery.correlation_id)
    try:
        if isinstance(result, OutOfTimeError):
            logger.warning("deferred: not started for lack of time", extra={"error": str(result)})
            return {"object": source.uri, "status": "deferred", "message": str(result),
                    "correlation_id": delivery.correlation_id}, str(result)
        error = None
        if isinstance(result, WapError):
            logger.error("ingestion failed", extra={"error": str(result)})
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


def _ingest_all(
    svc: Service, sources: list[SourceObject], delivery: Delivery, origin: str
) -> tuple[list[dict[str, Any]], list[str]]:
    summaries: list[dict[str, Any]] = []
    failures: list[str] = []
    for source in sources:
        correlation_id = correlation_id_for(origin, source)
        logger.append_keys(object_key=source.key, bucket=source.bucket, correlation_id=correlation_id)
        try:
            outcome = svc.ingest(source, delivery=replace(delivery, correlation_id=correlation_id))
        except WapError as exc:
            logger.exception("ingestion failed", extra={"error": str(exc)})
            outcome = IngestOutcome(source=source, status=OutcomeStatus.FAILED, message=str(exc))
            failures.append(f"{source.uri}: {exc}")
        logger.info("outcome", extra={"status": outcome.status.value, "table": outcome.table,
                                      "branch": outcome.branch, "rows": outcome.rows})
        metrics.record(outcome)
        summaries.append(_summary(outcome) | {"correlation_id": correlation_id})
    logger.remove_keys(["object_key", "bucket", "correlation_id"])
    return summaries, failures


def _summary(outcome: IngestOutcome) -> dict[str, Any]:
    summary = outcome.to_dict()
    report = summary.pop("report", None)
    if isinstance(report, dict):
        summary["failed_checks"] = [c for c in report["checks"] if c["status"] == "failed"]
    return summary
