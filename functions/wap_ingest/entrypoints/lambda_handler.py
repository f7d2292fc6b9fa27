"""The Lambda entry point: `wap_ingest.entrypoints.lambda_handler.handler`.

Thin: read the event (S3, SQS-wrapped S3, or EventBridge), run the pipeline per object through the
process-wide Service (one SparkSession and one set of clients per container, reused by warm
invocations), and return a per-object summary. Each object has its own fate:
- SQS: an object whose run hit an infrastructure error fails its message, reported in
  `batchItemFailures` so only that message is redelivered (and dead-lettered after maxReceiveCount);
  rejected and invalid files are outcomes (alerted), so their messages are consumed.
- direct S3 / EventBridge: every object is processed, then the invocation raises if any failed, so
  Lambda's retry applies.
Each object gets a correlation id (the SQS message id, or the request id, and the key) on every log line
about it and in its alert; one EMF metrics document per invocation counts the outcomes (adapters/metrics.py).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
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
from wap_ingest.core.errors import WapError
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
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    summaries: list[dict[str, Any]] = []

    def record_handler(record: SQSRecord) -> None:
        delivery = Delivery(int(record.attributes.approximate_receive_count or 1), svc.settings.max_receives)
        logger.append_keys(message_id=record.message_id, attempt=delivery.attempt)
        try:
            sources = unique_objects(objects_from_sqs_body(record.body))
        except UnreadableEventError as exc:
            logger.error("unreadable message", extra={"error": str(exc)})
            if delivery.alert_worthy:
                svc.notifier.notify(alert_for_unreadable_event(record.message_id, str(exc), final=delivery.final))
            raise
        done, failures = _ingest_all(svc, sources, delivery, record.message_id)
        summaries.extend(done)
        if failures:
            raise InvocationFailedError("; ".join(failures))

    with processor(records=event["Records"], handler=record_handler, lambda_context=context):
        processor.process()
    response: dict[str, Any] = dict(processor.response())
    response["objects"] = summaries
    logger.remove_keys(["message_id", "attempt"])
    return response


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
