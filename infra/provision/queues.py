"""The ingest queue (S3 ObjectCreated events for the Lambda function) and its dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from infra.provision import documents
from infra.provision.context import Client, Context, Outcome

_KIND = "sqs queue"
_MISSING = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


def queue_url(sqs: Client, name: str) -> str | None:
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _MISSING:
            return None
        raise


def queue_settings() -> dict[str, Any]:
    settings: dict[str, Any] = documents.load("ingest-queue.yml")
    return settings


def dead_letter_attributes() -> dict[str, str]:
    return {key: str(value) for key, value in queue_settings()["dead_letter_queue"].items()}


def ingest_attributes(ctx: Context) -> dict[str, str]:
    settings = queue_settings()
    redrive = {
        "deadLetterTargetArn": ctx.account.queue_arn(ctx.names.dead_letter_queue),
        "maxReceiveCount": int(settings["max_receive_count"]),
    }
    policy = documents.load_rendered("iam/ingest-queue-policy.json", ctx.template_values())
    return {key: str(value) for key, value in settings["queue"].items()} | {
        "RedrivePolicy": json.dumps(redrive, sort_keys=True),
        "Policy": documents.policy_json(policy),
    }


def _normalised(name: str, value: str) -> Any:
    """JSON attributes compare as documents (AWS reorders keys and may type numbers as strings)."""
    if name in ("RedrivePolicy", "Policy"):
        document = json.loads(value)
        if name == "RedrivePolicy":
            document["maxReceiveCount"] = int(document["maxReceiveCount"])
        return json.dumps(document, sort_keys=True)
    return value


def _drift(sqs: Client, url: str, wanted: dict[str, str]) -> list[str]:
    current = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]).get("Attributes", {})
    return [
        name
        for name, value in wanted.items()
        if name not in current or _normalised(name, current[name]) != _normalised(name, value)
    ]


def _ensure(ctx: Context, name: str, wanted: dict[str, str]) -> Outcome:
    sqs = ctx.clients("sqs")
    url = queue_url(sqs, name)
    tags = {"wap:prefix": ctx.names.prefix}
    if url is None:
        return ctx.pending(lambda: sqs.create_queue(QueueName=name, Attributes=wanted, tags=tags), _KIND, name)
    return ctx.converge(
        _drift(sqs, url, wanted), lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes=wanted), _KIND, name
    )


def ensure_dead_letter_queue(ctx: Context) -> Outcome:
    return _ensure(ctx, ctx.names.dead_letter_queue, dead_letter_attributes())


def ensure_ingest_queue(ctx: Context) -> Outcome:
    return _ensure(ctx, ctx.names.queue, ingest_attributes(ctx))


def _remove(ctx: Context, name: str) -> Outcome:
    sqs = ctx.clients("sqs")
    url = queue_url(sqs, name)
    return ctx.removal(url is not None, lambda: sqs.delete_queue(QueueUrl=url), _KIND, name)


def remove_ingest_queue(ctx: Context) -> Outcome:
    return _remove(ctx, ctx.names.queue)


def remove_dead_letter_queue(ctx: Context) -> Outcome:
    return _remove(ctx, ctx.names.dead_letter_queue)
