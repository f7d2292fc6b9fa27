"""The dead-letter queue's alarm, delivered by SNS to the function, becomes a Slack alert with what to do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.entrypoints.test_lambda_handler import World
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.alerts import AlertKind
from wap_ingest.entrypoints import lambda_handler


def sns_alarm(state: str, queue: str = "wap-ingest-dlq") -> dict[str, Any]:
    message = {"AlarmName": "wap-ingest-dead-letters", "NewStateValue": state,
               "StateChangeTime": "2026-11-22T12:00:00Z",
               "NewStateReason": "Threshold Crossed: 1 datapoint [3.0 (22/11/26 11:59:00)] was >= the threshold (1.0).",
               "Trigger": {"MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS",
                           "Dimensions": [{"name": "QueueName", "value": queue}]}}
    return {"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0", "Sns": {
        "Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:123456789012:wap-alarms",
        "Subject": f'{state}: "wap-ingest-dead-letters"', "Message": json.dumps(message)}}]}


def test_the_alarm_reaches_slack_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(world.service))
    assert world.invoke(sns_alarm("ALARM")) == {"alarms": ["wap-ingest-dead-letters"]}
    [alert] = world.notifier.alerts
    assert alert.kind is AlertKind.INFRASTRUCTURE and "wap-ingest-dlq" in alert.title
    assert ("See them", "wap dlq list") in alert.commands and ("Replay them (after the fix)", "wap dlq redrive") in \
        alert.commands
    assert "3.0" in alert.text
    world.invoke(sns_alarm("OK"))
    assert world.notifier.alerts[-1].kind is AlertKind.MAINTENANCE and "empty again" in world.notifier.alerts[-1].title
