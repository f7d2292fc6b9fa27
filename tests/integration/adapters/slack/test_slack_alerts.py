"""Alerts through the real slack-sdk WebClient to the local Slack-compatible sink over HTTP."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from wap_ingest.adapters.aws.secrets import secret_from_parameter
from wap_ingest.adapters.slack.client import LogNotifier, SlackNotifier, slack_client_for
from wap_ingest.core.alerts import alert_for_failure, alert_for_outcome
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.models import (
    AuditReport,
    CheckResult,
    CheckStatus,
    IngestOutcome,
    OutcomeStatus,
    SourceObject,
)
from wap_stack.processes import free_port
from wap_stack.slack_sink import read_messages

TOKEN = "test-token-do-not-log"



def rejected() -> IngestOutcome:
    report = AuditReport("wap.orders", 42, (
        CheckResult("not_null", "customer_id", CheckStatus.FAILED, "7 nulls", "0 nulls"),
        CheckResult("row_count", "rows", CheckStatus.PASSED, "42 rows", ">= 1"),
    ))
    return IngestOutcome(SourceObject("source", "orders/2026/a b.parquet"), OutcomeStatus.REJECTED, table="wap.orders",
                         branch="wap-orders-0123456789abcdef-a1b2c3d4", rows=42, report=report)


def test_rejection_alert_reaches_slack_with_blocks_and_fallback(sink: tuple[str, Path],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    url, record = sink
    caplog.set_level(logging.DEBUG)
    alert = alert_for_outcome(rejected())
    assert alert is not None
    assert SlackNotifier(slack_client_for(TOKEN, url, 5), "#data-alerts").notify(alert) is True
    [message] = read_messages(record)
    assert message["channel"] == "#data-alerts"
    text = message["text"]
    for expected in ("wap.orders", "s3://source/orders/2026/a b.parquet", "wap-orders-0123456789abcdef-a1b2c3d4",
                     "not_null(customer_id): measured 7 nulls", "Rows: 42",
                     "wap show wap-orders-0123456789abcdef-a1b2c3d4", "wap publish", "wap discard"):
        assert expected in text
    assert message["blocks"][0]["type"] == "header"
    assert TOKEN not in record.read_text() and TOKEN not in caplog.text


def test_slack_outage_is_logged_and_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    notifier = SlackNotifier(slack_client_for(TOKEN, f"http://127.0.0.1:{free_port()}/api/", 2), "#x")
    alert = alert_for_failure(SourceObject("b", "k"), "boom", attempt=1, final=False)
    assert notifier.notify(alert) is False
    assert "alert not delivered" in caplog.text and TOKEN not in caplog.text


def test_slack_api_error_is_logged(sink: tuple[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    url, _ = sink
    alert = alert_for_failure(SourceObject("b", "k"), "boom", attempt=None, final=True)
    assert SlackNotifier(slack_client_for(TOKEN, url, 5), "").notify(alert) is False
    assert "channel_not_found" in caplog.text


def test_without_slack_the_alert_goes_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    alert = alert_for_outcome(rejected())
    assert alert is not None
    assert LogNotifier().notify(alert) is True
    assert "wap-orders-0123456789abcdef-a1b2c3d4" in caplog.text


@pytest.mark.stack
def test_token_from_ssm_secure_string(stack_env: dict[str, str]) -> None:
    import boto3

    ssm = boto3.session.Session().client("ssm", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    ssm.put_parameter(Name="/wap/slack-token", Value=TOKEN, Type="SecureString", Overwrite=True)
    def token(name: str) -> str:  # as bootstrap.builders.slack_token_from reads it
        return secret_from_parameter(name, variable="WAP_SLACK_TOKEN_PARAMETER", what="the Slack token", ssm=ssm)

    assert token("/wap/slack-token") == TOKEN
    with pytest.raises(ConfigError, match="WAP_SLACK_TOKEN_PARAMETER='/wap/missing'") as info:
        token("/wap/missing")
    assert TOKEN not in str(info.value)


def test_escaped_text_reaches_slack(sink: tuple[str, Path]) -> None:
    """Through the real WebClient: keys and values with mrkdwn control characters arrive as inert text."""
    url, record = sink
    report = AuditReport("wap.orders", 2, (
        CheckResult("not_null", "id`x", CheckStatus.FAILED, "1 null", "0 nulls",
                    samples=({"email": "<!channel> & <@U123>", "note": "a`b"},)),
    ))
    outcome = IngestOutcome(SourceObject("source", "in/x&y<z>`<!here>.csv"), OutcomeStatus.REJECTED,
                            table="wap.orders", branch="wap-orders-0123456789abcdef-a1b2c3d4", rows=2,
                            report=report)
    alert = alert_for_outcome(outcome)
    assert alert is not None
    assert SlackNotifier(slack_client_for(TOKEN, url, 5), "#data-alerts").notify(alert) is True
    [message] = read_messages(record)
    received = [message["text"], *(json.dumps(block) for block in message["blocks"])]
    for text in received:
        assert "<!channel>" not in text and "<!here>" not in text and "<@U123>" not in text
        assert "x&y" not in text and "<z>" not in text and "a`b" not in text and "id`x" not in text
    assert "s3://source/in/x&amp;y&lt;z&gt;\u02cb&lt;!here&gt;.csv" in message["text"]
    assert "email=&lt;!channel&gt; &amp; &lt;@U123&gt;" in message["text"]
