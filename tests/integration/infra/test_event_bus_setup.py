"""setup_aws.py creates the downstream event bus (WAP_EVENT_BUS in serverless.yml), on moto over HTTP; a second run
changes nothing; delete removes it with the rules consumers added on it."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.integration.setup_aws_harness import client, names_for, run

pytestmark = pytest.mark.stack


def test_setup_aws_creates_and_removes_the_downstream_bus(moto_url: str) -> None:
    names = names_for("bus")
    created = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert created.code == 0, created.out
    events = client(moto_url, "events")
    assert events.describe_event_bus(Name=names.event_bus)["Name"] == names.event_bus == "bus-events"
    again = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"unchanged     eventbridge bus {names.event_bus}" in again.out, again.out
    events.put_rule(Name="a-consumer", EventBusName=names.event_bus, EventPattern=json.dumps({"source": ["wap-lake"]}))
    events.put_targets(Rule="a-consumer", EventBusName=names.event_bus,
                       Targets=[{"Id": "q", "Arn": "arn:aws:sqs:us-east-1:123456789012:consumer"}])
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie", "--force").code == 0
    with pytest.raises(ClientError, match="ResourceNotFound"):
        events.describe_event_bus(Name=names.event_bus)
