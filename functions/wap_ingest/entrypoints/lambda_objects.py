"""Files to ingest: an SQS batch on Powertools' batch utilities, and a direct S3 or EventBridge invocation.

The handler maps the event to requests and the results to `batchItemFailures`; what is alerted, on which attempt,
and when a failed message comes back is the core's (core/deliveries.py, `Deliveries`, handed by the composition
root with the other use cases of the function: bootstrap/use_cases.py).

An SQS batch, in four steps:
1. entrypoints/inbound.py has read every message once: its object versions, a publish request, or `Unreadable`.
2. The object versions of every readable message go through one `Deliveries.ingest` call, so the files of one
   table from the whole batch are staged, audited and merged together (one read, one snapshot, one merge: what
   makes a burst cheap). It returns one result per object (an outcome, or the error that fails it), and alerts by
   the core's policy. Should the call itself raise, every object it was given gets that error (and its alert).
3. `process_partial_response(event=..., record_handler=..., processor=BatchProcessor(EventType.SQS), context=...)`
   then calls the record handler once per message, in order, and the handler settles that message alone:
   - objects: each one's outcome is logged with its correlation id and counted in the invocation's EMF document;
     if any of them failed or was deferred, it raises `MessageFailedError` (a message is consumed only when all
     its objects are: its published ones are duplicates when it comes back);
   - a publish request: answered (`FunctionUseCases.answer`); an infrastructure failure raises;
   - an action asked from an alert in Slack: verified again and run (`lambda_slack.on_slack_action`);
   - unreadable: alerted on its first and last attempt (`Deliveries.unreadable`), and raises.
   The processor turns each raise, expected or not, into that message's `batchItemFailures` entry, and nothing
   else's. It is built with `raise_on_entire_batch_failure=False`: when every message failed, the event source
   mapping gets the same list rather than an error, and the response keeps the objects' summaries.
4. Each failed message comes back after a capped exponential back-off from its receive count
   (`Deliveries.returned`, through the Retries port), not after the queue's whole visibility timeout.

A direct S3 or EventBridge invocation runs its objects the same way (one `Deliveries.ingest`), settles each, and
raises `InvocationFailedError` once every object was handled if any failed, so Lambda's own retry applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from wap_ingest.adapters.slack import SignedRequest
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.deliveries import Deliveries, Item, Result, Returned
from wap_ingest.core.errors import DeferredError, WapError
from wap_ingest.core.models import IngestOutcome, OutcomeStatus
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.events import UnreadableEventError
from wap_ingest.entrypoints.inbound import ObjectVersions, SqsBatch, SqsMessage, Unreadable
from wap_ingest.entrypoints.lambda_observability import correlation, logger, metrics
from wap_ingest.entrypoints.lambda_operations import on_publish_request, remaining_of
from wap_ingest.entrypoints.lambda_slack import on_slack_action


class MessageFailedError(WapError):
    """Some objects of an SQS message failed or were deferred: the message goes back to the queue."""


class InvocationFailedError(WapError):
    """Some objects of a direct invocation failed; Lambda should retry the event."""


def on_messages(uses: FunctionUseCases, event: dict[str, Any], batch: SqsBatch, context: Any) -> dict[str, Any]:
    """An SQS batch: the four steps of the module docstring."""
    objects = {m.message_id: m.request.items for m in batch.messages if isinstance(m.request, ObjectVersions)}
    deliveries = uses.deliveries
    messages = _Messages(uses, {m.message_id: m for m in batch.messages},
                         _ingest_together(deliveries, objects, context))
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=messages.record_handler, processor=processor,
                                        context=context)
    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    deliveries.returned([Returned(m.message_id, m.queue_arn, m.receipt_handle, m.receive_count)
                         for m in batch.messages if m.message_id in failed])
    requests = {"requests": messages.answers} if messages.answers else {}
    return {"batchItemFailures": response["batchItemFailures"], "objects": messages.summaries, **requests}


def on_objects(deliveries: Deliveries, request: ObjectVersions, context: Any) -> dict[str, Any]:
    """A direct S3 or EventBridge invocation: every object handled, then a raise if any failed."""
    settled = [settle(item, result)
               for item, result in zip(request.items, _ingest(deliveries, request.items, context), strict=True)]
    errors = [error for _, error in settled if error is not None]
    if errors:
        raise InvocationFailedError(f"{len(errors)} of {len(settled)} objects failed: {'; '.join(errors)}")
    return {"objects": [summary for summary, _ in settled]}


class _Messages:
    """An SQS batch after its one ingest: the record handler settles each message's share."""

    def __init__(self, uses: FunctionUseCases, messages: Mapping[str, SqsMessage],
                 ingested: Mapping[str, list[tuple[Item, Result]]]) -> None:
        self.uses, self.messages, self.ingested = uses, messages, ingested
        self.summaries: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []

    def record_handler(self, record: SQSRecord) -> None:
        """Settle one message; raise if it is to come back (the processor lists it in `batchItemFailures`)."""
        try:
            message = self.messages[record.message_id]
            request = message.request
            if isinstance(request, Unreadable):
                _refuse(self.uses.deliveries, message, request.reason)
            elif isinstance(request, PublishRequest):
                self.answers.append(on_publish_request(self.uses.answer, request, message.message_id,
                                                       message.queue_arn))
            elif isinstance(request, SignedRequest):
                self.answers.append(on_slack_action(self.uses.slack, request, message.message_id))
            else:
                self._settle(message)
        except WapError:
            raise  # logged where it was decided
        except Exception:  # a bug: this message fails, with its traceback in the log
            logger.exception("handling the message raised", extra={"message_id": record.message_id})
            raise

    def _settle(self, message: SqsMessage) -> None:
        ingested = self.ingested[message.message_id]
        errors = []
        for item, result in ingested:
            summary, error = settle(item, result)
            self.summaries.append(summary)
            if error is not None:
                errors.append(error)
        if errors:
            raise MessageFailedError(f"message {message.message_id}: {len(errors)} of its {len(ingested)} objects "
                                     f"did not finish: {'; '.join(errors)}")


def _refuse(deliveries: Deliveries, message: SqsMessage, reason: str) -> NoReturn:
    """An unreadable message: logged and alerted by the core's policy, then failed."""
    deliveries.unreadable(message.message_id, reason, message.delivery)
    raise UnreadableEventError(reason)


def _ingest_together(deliveries: Deliveries, groups: Mapping[str, Sequence[Item]], context: Any
                     ) -> dict[str, list[tuple[Item, Result]]]:
    """One ingest for the items of every group (message); each group's items paired with their results."""
    results = iter(_ingest(deliveries, [item for group in groups.values() for item in group], context))
    return {key: [(item, next(results)) for item in group] for key, group in groups.items()}


def _ingest(deliveries: Deliveries, items: Sequence[Item], context: Any) -> list[Result]:
    """One result per item, in order (the core alerts and never raises)."""
    correlation.follow(items)
    return deliveries.ingest(items, remaining_of(context))


def settle(item: Item, result: Result) -> tuple[dict[str, Any], str | None]:
    """Log and count one object's result; the error that fails its message (or invocation), if any."""
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


def _summary(outcome: IngestOutcome) -> dict[str, Any]:
    summary = outcome.to_dict()
    report = summary.pop("report", None)
    if isinstance(report, dict):
        summary["failed_checks"] = [c for c in report["checks"] if c["status"] == "failed"]
    return summary
