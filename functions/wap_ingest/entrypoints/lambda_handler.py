"""The Lambda entry point: `wap_ingest.entrypoints.lambda_handler.handler`.

Thin: entrypoints/inbound.py turns the raw event into one typed request, and a small handler serves it with the use
cases the composition root hands it (`bootstrap.function()`: built once per container from one engine and one set of
clients, reused by warm invocations):

| request | handler, and what it is handed |
|---|---|
| an SQS batch (files, publish requests, Slack actions, unreadable messages) | `lambda_objects.on_messages`: all |
| a direct S3 or EventBridge event | `lambda_objects.on_objects`: `core.deliveries.Deliveries` |
| the dead-letter queue's alarm (SNS) | `lambda_operations.on_alarms`: `OperationUseCases` |
| a large file's EMR run that ended | `lambda_operations.on_job_state`: `OperationUseCases` |
| the maintenance schedule | `lambda_operations.on_schedule`: `OperationUseCases` |

A Slack action in a batch is served by `lambda_slack.on_slack_action`. Slack's requests themselves reach another
function, `slack_interactivity.handler` (an HTTP API route), which verifies them and hands their work to this one
through the ingest queue.
An SQS message's failure is its own `batchItemFailures` entry and nothing else's; a direct invocation raises once
every object was handled if any failed (lambda_objects.py says how).
Every object gets a correlation id (the SQS message id, or the request id, and the key) on every log line about it
and in its alert; one EMF metrics document per invocation counts the outcomes (lambda_observability.py).
"""

from __future__ import annotations

import uuid
from typing import Any, assert_never

from wap_ingest.bootstrap import function
from wap_ingest.entrypoints.inbound import Alarms, JobStateChange, ObjectVersions, Schedule, SqsBatch, request_from
from wap_ingest.entrypoints.lambda_objects import InvocationFailedError, MessageFailedError, on_messages, on_objects
from wap_ingest.entrypoints.lambda_observability import logger, metrics, observe
from wap_ingest.entrypoints.lambda_operations import MaintenanceFailedError, on_alarms, on_job_state, on_schedule

__all__ = ["InvocationFailedError", "MaintenanceFailedError", "MessageFailedError", "handler", "logger", "metrics"]


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    observe()
    try:
        return _handle(event, context)
    finally:
        metrics.flush()  # once per invocation, also when it raises


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    uses = function()
    origin = getattr(context, "aws_request_id", None) or uuid.uuid4().hex
    request = request_from(event, origin=origin, max_receives=uses.max_receives)
    logger.info("invocation", extra={"event_kind": request.kind.value})
    match request:
        case SqsBatch():
            return on_messages(uses, event, request, context)
        case ObjectVersions():
            return on_objects(uses.deliveries, request, context)
        case Alarms():
            return on_alarms(uses.operations, request)
        case JobStateChange():
            return on_job_state(uses.operations, request)
        case Schedule():
            return on_schedule(uses.operations, context)
        case _:
            assert_never(request)
