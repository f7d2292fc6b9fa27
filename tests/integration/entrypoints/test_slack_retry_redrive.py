"""The other actions an alert offers, through the real stack: "Re-audit and publish" on a branch that still fails
(the function re-audits it with Spark), an INVALID file's Retry (once the file was fixed), and the dead-letter alarm's
Show and Redrive. Clicked in the stack's Slack channel (the sink posts them to the
interactivity endpoint as Slack does); the function does the work and answers in the channel."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from tests.conftest import Lake, parquet_bytes
from tests.slack_channel import ALICE, Channel, edited, reaudit_form_open
from tests.waiting import wait_for
from wap_ingest.core.dead_letters import QueueAlarm, alert_for_alarm
from wap_ingest.core.models import OutcomeStatus, TableRef
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]


@pytest.fixture
def channel(local_stack: StackState) -> Channel:
    return Channel.of(local_stack)


def test_a_reaudit_that_still_fails_publishes_nothing_and_keeps_the_buttons(lake: Lake, channel: Channel,
                                                                          table_name: str) -> None:
    branch = reaudit_form_open(lake, channel, table_name)
    assert channel.submit(ALICE, "the suite was fixed (it was not)")["status"] == 200
    message = wait_for(lambda: edited(channel, branch), "the alert updated")
    assert ":x: Re-audit asked by <@U0ALICE01> still fails: not_null(my_col_1) 2 nulls, expected 0 nulls." \
        in message["text"]
    assert [b for b in message["blocks"] if b.get("type") == "actions"]  # still open: its buttons stay
    assert branch in lake.wap_branches() and lake.service.history(TableRef("wap", table_name)) == []


def test_retry_ingests_the_fixed_file(lake: Lake, channel: Channel, table_name: str) -> None:
    key = f"{table_name}/export.parquet"
    outcome = lake.service.ingest(lake.put(key, b"PAR1 this is not a parquet file PAR1"))  # alerted by the test's own
    assert outcome.status is OutcomeStatus.INVALID and outcome.table == f"wap.{table_name}"  # service, to the sink
    alert = wait_for(lambda: channel.message_about(f"s3://inbox/{key}"), "the INVALID file's alert")
    assert [e["action_id"] for b in alert["blocks"] if b["type"] == "actions" for e in b["elements"]] == ["wap.retry"]
    lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=parquet_bytes(6))  # fixed (no event: inbox)
    assert channel.click(ALICE, str(alert["ts"]), "wap.retry")["status"] == 200
    message = wait_for(lambda: edited(channel, f"s3://inbox/{key}"), "the alert updated")
    assert f"Retried by <@U0ALICE01>: published 6 rows into wap.{table_name}." in message["text"]
    assert lake.count(f"wap.{table_name}") == 6


def test_the_dead_letter_alarm_shows_and_redrives(lake: Lake, channel: Channel, local_stack: StackState,
                                                  table_name: str) -> None:
    key = f"{table_name}/late.parquet"
    lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=parquet_bytes(4))
    sqs: Any = boto3.session.Session().client("sqs", endpoint_url=lake.env["AWS_ENDPOINT_URL"],
                                              region_name="us-east-1")
    notification = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": lake.inbox_bucket}, "object": {"key": key, "size": 1}}}]}
    sqs.send_message(QueueUrl=local_stack.dead_letter_url, MessageBody=json.dumps(notification))  # dead-lettered
    alarm = QueueAlarm(f"dlq-{table_name}", "ALARM", "1 message", "wap-events-dlq", "2026-11-25T00:00:00Z")
    alert = alert_for_alarm(alarm)
    assert alert is not None and lake.service.notifier.notify(alert)
    posted = wait_for(lambda: channel.message_about(f"dlq-{table_name}"), "the alarm's alert")
    ts = str(posted["ts"])

    assert channel.click(ALICE, ts, "wap.show_dead_letters")["status"] == 200
    shown = wait_for(lambda: [e for e in channel.ephemerals(ALICE) if f"inbox/{key}" in e], "the list, to alice")
    print(shown[-1])
    assert "message(s) in wap-events-dlq" in shown[-1]
    time.sleep(6)  # the listing hid them for a few seconds
    assert channel.click(ALICE, ts, "wap.redrive")["status"] == 200  # the page asks to confirm first
    message = wait_for(lambda: edited(channel, f"dlq-{table_name}"), "the alarm's alert updated")
    assert "Redriven by <@U0ALICE01>:" in message["text"] and "sent back to the ingest queue" in message["text"]
    assert not [b for b in message["blocks"] if b.get("type") == "actions"]
    wait_for(lambda: table_rows(lake, f"wap.{table_name}") == 4, "the redriven file on main")


def table_rows(lake: Lake, table: str) -> int | None:
    try:
        return lake.count(table)
    except Exception:  # not on main yet
        return None
