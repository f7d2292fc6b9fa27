"""setup_aws.py creates the dead-letter queue's CloudWatch alarm, notifying the topic the function is subscribed to
(serverless.yml), on moto over HTTP; a second run changes nothing; delete removes it."""

from __future__ import annotations

import pytest

from tests.integration.setup_aws_harness import client, names_for, run

pytestmark = pytest.mark.stack


def test_setup_aws_creates_the_alarm_on_the_dead_letter_queue_and_its_topic(moto_url: str) -> None:
    names = names_for("alarm")
    created = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert created.code == 0, created.out
    [alarm] = client(moto_url, "cloudwatch").describe_alarms(AlarmNames=[names.dead_letter_alarm])["MetricAlarms"]
    topic = f"arn:aws:sns:us-east-1:123456789012:{names.alarm_topic}"
    assert alarm["Namespace"] == "AWS/SQS" and alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": names.dead_letter_queue}]
    assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic] and alarm["Threshold"] == 1.0
    topics = [t["TopicArn"] for t in client(moto_url, "sns").list_topics()["Topics"]]
    assert topic in topics
    again = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"unchanged     cloudwatch alarm {names.dead_letter_alarm}" in again.out, again.out
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie", "--force").code == 0
    assert client(moto_url, "cloudwatch").describe_alarms(AlarmNames=[names.dead_letter_alarm])["MetricAlarms"] == []
