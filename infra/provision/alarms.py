"""The dead-letter queue's alarm: a CloudWatch alarm on its depth, notifying an SNS topic to which the function is
subscribed (serverless.yml), so the alarm reaches Slack like any other alert (`wap dlq list|redrive` in it)."""

from __future__ import annotations

from typing import Any

from infra.provision.context import Context, Outcome

_TOPIC, _ALARM = "sns topic", "cloudwatch alarm"


def topic_arn(ctx: Context) -> str:
    return ctx.account.arn("sns", ctx.names.alarm_topic)


def alarm_spec(ctx: Context) -> dict[str, Any]:
    """At least one message in the dead-letter queue for one minute: alarm (and OK again once it is empty)."""
    action = [topic_arn(ctx)]
    return {
        "AlarmName": ctx.names.dead_letter_alarm,
        "AlarmDescription": "Messages in the ingest dead-letter queue: their files are not ingested. wap dlq list; "
                            "after the fix: wap dlq redrive",
        "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": ctx.names.dead_letter_queue}],
        "Statistic": "Maximum", "Period": 60, "EvaluationPeriods": 1, "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
        "AlarmActions": action, "OKActions": action,
    }


def ensure_alarm_topic(ctx: Context) -> Outcome:
    sns = ctx.clients("sns")
    exists = any(t["TopicArn"] == topic_arn(ctx) for t in _topics(sns))
    if exists:
        return ctx.converge([], lambda: None, _TOPIC, ctx.names.alarm_topic)
    tags = [{"Key": "wap:prefix", "Value": ctx.names.prefix}]
    return ctx.pending(lambda: sns.create_topic(Name=ctx.names.alarm_topic, Tags=tags), _TOPIC, ctx.names.alarm_topic)


def ensure_dead_letter_alarm(ctx: Context) -> Outcome:
    cloudwatch = ctx.clients("cloudwatch")
    wanted = alarm_spec(ctx)
    found = cloudwatch.describe_alarms(AlarmNames=[wanted["AlarmName"]]).get("MetricAlarms", [])
    if not found:
        return ctx.pending(lambda: cloudwatch.put_metric_alarm(**wanted), _ALARM, wanted["AlarmName"])
    current = found[0]
    drift = [k for k, v in wanted.items() if k != "Dimensions" and current.get(k) != v]
    if current.get("Dimensions") != wanted["Dimensions"]:
        drift.append("Dimensions")
    return ctx.converge(drift, lambda: cloudwatch.put_metric_alarm(**wanted), _ALARM, wanted["AlarmName"])


def remove_dead_letter_alarm(ctx: Context) -> Outcome:
    cloudwatch = ctx.clients("cloudwatch")
    name = ctx.names.dead_letter_alarm
    exists = bool(cloudwatch.describe_alarms(AlarmNames=[name]).get("MetricAlarms"))
    return ctx.removal(exists, lambda: cloudwatch.delete_alarms(AlarmNames=[name]), _ALARM, name)


def remove_alarm_topic(ctx: Context) -> Outcome:
    sns = ctx.clients("sns")
    arn = topic_arn(ctx)
    exists = any(t["TopicArn"] == arn for t in _topics(sns))
    return ctx.removal(exists, lambda: sns.delete_topic(TopicArn=arn), _TOPIC, ctx.names.alarm_topic)


def _topics(sns: Any) -> list[dict[str, Any]]:
    return [t for page in sns.get_paginator("list_topics").paginate() for t in page.get("Topics", [])]
