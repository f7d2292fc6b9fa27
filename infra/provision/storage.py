"""The source and lake buckets: versioning, public access blocked, SSE-S3 default encryption, TLS only;
and the source bucket's ObjectCreated notification to the ingest queue."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from infra.provision import documents
from infra.provision.context import Client, Context, Outcome, ProvisionError
from wap_ingest.adapters.aws.lake_lifecycle import apply_lake_lifecycle, current_rules, drift

PUBLIC_ACCESS_BLOCK = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}
SSE_S3 = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]}
_MISSING = ("NoSuchBucket", "404", "NotFound")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def bucket_exists(s3: Client, bucket: str) -> bool:
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        if _code(exc) in _MISSING:
            return False
        if _code(exc) in ("403", "AccessDenied"):
            raise ProvisionError(f"s3://{bucket} exists but belongs to another account: choose another name.") from exc
        raise
    return True


def _get_or(call: Any, missing: str, default: Any, **kwargs: Any) -> Any:
    try:
        return call(**kwargs)
    except ClientError as exc:
        if _code(exc) == missing:
            return default
        raise


def _bucket_policy(ctx: Context, bucket: str) -> dict[str, Any]:
    values = ctx.template_values() | {"BucketArn": ctx.account.bucket_arn(bucket)}
    policy: dict[str, Any] = documents.load_rendered("iam/bucket-policy.json", values)
    return policy


def bucket_drift(ctx: Context, bucket: str) -> list[str]:
    """Which of the bucket's settings differ from the wanted ones."""
    s3 = ctx.clients("s3")
    changes = []
    if s3.get_bucket_versioning(Bucket=bucket).get("Status") != "Enabled":
        changes.append("versioning")
    pab = _get_or(s3.get_public_access_block, "NoSuchPublicAccessBlockConfiguration", {}, Bucket=bucket)
    if pab.get("PublicAccessBlockConfiguration") != PUBLIC_ACCESS_BLOCK:
        changes.append("public access block")
    sse = _get_or(s3.get_bucket_encryption, "ServerSideEncryptionConfigurationNotFoundError", {}, Bucket=bucket)
    rules = sse.get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
    algorithms = [r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules]
    if algorithms != ["AES256"]:
        changes.append("default encryption")
    policy = _get_or(s3.get_bucket_policy, "NoSuchBucketPolicy", {}, Bucket=bucket).get("Policy")
    if policy is None or documents.policy_json(json.loads(policy)) != documents.policy_json(
        _bucket_policy(ctx, bucket)
    ):
        changes.append("TLS-only policy")
    return changes


def _apply_settings(ctx: Context, bucket: str) -> None:
    s3 = ctx.clients("s3")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=PUBLIC_ACCESS_BLOCK)
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=SSE_S3)
    s3.put_bucket_policy(Bucket=bucket, Policy=documents.policy_json(_bucket_policy(ctx, bucket)))


def _create_bucket(ctx: Context, bucket: str) -> None:
    s3 = ctx.clients("s3")
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if ctx.account.region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": ctx.account.region}
    s3.create_bucket(**kwargs)
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "wap:prefix", "Value": ctx.names.prefix}]})
    _apply_settings(ctx, bucket)


def ensure_bucket(ctx: Context, bucket: str) -> Outcome:
    kind = "s3 bucket"
    if not bucket_exists(ctx.clients("s3"), bucket):
        return ctx.pending(lambda: _create_bucket(ctx, bucket), kind, bucket, "versioned, private, SSE-S3, TLS only")
    return ctx.converge(bucket_drift(ctx, bucket), lambda: _apply_settings(ctx, bucket), kind, bucket)


def ensure_source_bucket(ctx: Context) -> Outcome:
    return ensure_bucket(ctx, ctx.names.source_bucket)


def ensure_lake_bucket(ctx: Context) -> Outcome:
    return ensure_bucket(ctx, ctx.names.lake_bucket)


def ensure_lake_lifecycle(ctx: Context) -> Outcome:
    """wap_ingest.adapters.aws.lake_lifecycle's rules on the lake bucket (staging copies, request answers, reports)."""
    s3, bucket = ctx.clients("s3"), ctx.names.lake_bucket
    kind, name = "s3 lifecycle", f"{bucket} (wap-staging/, wap-requests/, wap-reports/)"
    if not bucket_exists(s3, bucket):
        return ctx.pending(lambda: apply_lake_lifecycle(s3, bucket), kind, name)
    return ctx.converge(drift(current_rules(s3, bucket)), lambda: apply_lake_lifecycle(s3, bucket), kind, name)


def bucket_is_empty(s3: Client, bucket: str) -> bool:
    """True when no object version and no delete marker is left (a versioned bucket's delete needs that)."""
    page = s3.list_object_versions(Bucket=bucket, MaxKeys=1)
    return not page.get("Versions") and not page.get("DeleteMarkers")


def _empty_bucket(s3: Client, bucket: str) -> None:
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        doomed = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for item in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if doomed:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})


def remove_bucket(ctx: Context, bucket: str) -> Outcome:
    s3 = ctx.clients("s3")
    exists = bucket_exists(s3, bucket)
    empty = not exists or bucket_is_empty(s3, bucket)

    def delete() -> None:
        if not empty:
            s3.delete_bucket_policy(Bucket=bucket)  # going anyway; it must not stand in the way of emptying
            _empty_bucket(s3, bucket)
        s3.delete_bucket(Bucket=bucket)

    return ctx.removal(exists, delete, "s3 bucket", bucket, "" if empty else "with every object version (--force)")


def remove_source_bucket(ctx: Context) -> Outcome:
    return remove_bucket(ctx, ctx.names.source_bucket)


def remove_lake_bucket(ctx: Context) -> Outcome:
    return remove_bucket(ctx, ctx.names.lake_bucket)


def non_empty_buckets(ctx: Context) -> list[str]:
    """Buckets that hold data: `delete` refuses to touch anything while one exists, unless --force."""
    s3 = ctx.clients("s3")
    buckets = (ctx.names.lake_bucket, ctx.names.source_bucket)
    return [b for b in buckets if bucket_exists(s3, b) and not bucket_is_empty(s3, b)]


_CONFIG_KINDS = ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations",
                 "EventBridgeConfiguration")


def _notification_id(ctx: Context) -> str:
    return f"{ctx.names.prefix}-ingest"


def _wanted_queue_config(ctx: Context) -> dict[str, Any]:
    settings = documents.load("ingest-queue.yml")
    return {
        "Id": _notification_id(ctx),
        "QueueArn": ctx.account.queue_arn(ctx.names.queue),
        "Events": sorted(settings["notification_events"]),
    }


def _current_notification(ctx: Context) -> dict[str, Any]:
    current = ctx.clients("s3").get_bucket_notification_configuration(Bucket=ctx.names.source_bucket)
    return {key: current[key] for key in _CONFIG_KINDS if key in current}


def _ours(config: dict[str, Any], notification_id: str) -> dict[str, Any] | None:
    for queue in config.get("QueueConfigurations", []):
        if queue.get("Id") == notification_id:
            return {"Id": queue["Id"], "QueueArn": queue.get("QueueArn"), "Events": sorted(queue.get("Events", []))}
    return None


def _with_ours(config: dict[str, Any], ours: dict[str, Any] | None, notification_id: str) -> dict[str, Any]:
    """The bucket's notification configuration with ours replaced (or removed); others kept as they are."""
    queues = [q for q in config.get("QueueConfigurations", []) if q.get("Id") != notification_id]
    result = {key: value for key, value in config.items() if key != "QueueConfigurations"}
    if ours is not None:
        queues.append(ours)
    if queues:
        result["QueueConfigurations"] = queues
    return result


def _put_notification(ctx: Context, config: dict[str, Any]) -> None:
    ctx.clients("s3").put_bucket_notification_configuration(
        Bucket=ctx.names.source_bucket, NotificationConfiguration=config
    )


def ensure_notification(ctx: Context) -> Outcome:
    kind, name = "s3 notification", f"s3://{ctx.names.source_bucket} -> sqs {ctx.names.queue}"
    wanted = _wanted_queue_config(ctx)
    events = ", ".join(wanted["Events"])
    if not bucket_exists(ctx.clients("s3"), ctx.names.source_bucket):
        if not ctx.dry_run:
            raise ProvisionError(f"s3://{ctx.names.source_bucket} does not exist: the bucket step must run first.")
        return ctx.report(Outcome.WOULD_CREATE, kind, name, events)
    current = _current_notification(ctx)
    ours = _ours(current, wanted["Id"])
    updated = _with_ours(current, wanted, wanted["Id"])
    if ours is None:
        return ctx.pending(lambda: _put_notification(ctx, updated), kind, name, events)
    changes = [] if ours == wanted else ["queue or events"]
    return ctx.converge(changes, lambda: _put_notification(ctx, updated), kind, name)


def remove_notification(ctx: Context) -> Outcome:
    kind, name = "s3 notification", f"s3://{ctx.names.source_bucket} -> sqs {ctx.names.queue}"
    if not bucket_exists(ctx.clients("s3"), ctx.names.source_bucket):
        return ctx.removal(False, lambda: None, kind, name)
    current = _current_notification(ctx)
    exists = _ours(current, _notification_id(ctx)) is not None
    remaining = _with_ours(current, None, _notification_id(ctx))
    return ctx.removal(exists, lambda: _put_notification(ctx, remaining), kind, name)
