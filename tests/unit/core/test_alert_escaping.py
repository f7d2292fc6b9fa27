"""Every value in an alert is escaped for Slack mrkdwn: `&`, `<`, `>` as entities, backticks as a look-alike."""

from __future__ import annotations

import re
from typing import Any

import pytest

from wap_ingest.adapters.slack.client import LogNotifier, blocks_for
from wap_ingest.core.alerts import (
    GRAVE_STAND_IN,
    Alert,
    alert_for_failure,
    alert_for_outcome,
    alert_for_prune,
    alert_for_unreadable_event,
    mrkdwn_escape,
    plain_text,
)
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, IngestOutcome, OutcomeStatus, SourceObject

KEYS = ("in/a`b.csv", "in/<!channel>.csv", "in/x&y<z>.csv")
LOUD = "<!channel> <!here> <@U123ABC> <https://evil.example|click me> `code` ```block``` & &amp;"
BRANCH = "wap-orders-0123456789abcdef-a1b2c3d4"
RAW_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")


def texts(alert: Alert) -> list[str]:
    """The fallback text and every mrkdwn or plain_text string of the blocks."""
    found = [alert.text]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks_for(alert))
    return found


def assert_inert(alert: Alert) -> None:
    for text in texts(alert):
        assert "<" not in text and ">" not in text, text  # no link, mention or command can start
        assert not RAW_ENTITY.search(text), text  # every & starts an entity
        assert "<!channel>" not in text and "<!here>" not in text


def report(key_text: str) -> AuditReport:
    samples = ({"email": LOUD, "note`col": "a`b", "x<y": "1 & 2"}, {"id": "<@U999>"})
    return AuditReport("wap.orders", 3, (
        CheckResult("custom_sql", f"target<{key_text}>", CheckStatus.FAILED, "3 rows > 0", "<= 0 `rows`",
                    samples=samples),
        CheckResult("not_null", "id", CheckStatus.WARNED, "1 null", "0 nulls", severity="warn"),
    ))


@pytest.mark.parametrize("key", KEYS)
def test_rejected_alert_escapes_key_values_and_samples(key: str) -> None:
    outcome = IngestOutcome(SourceObject("bucket&<b>", key), OutcomeStatus.REJECTED, table="wap.orders",
                            branch=BRANCH, rows=3, report=report(key))
    alert = alert_for_outcome(outcome, correlation_id="<!here>")
    assert alert is not None
    assert_inert(alert)
    assert "`" not in dict(alert.fields)["Object"]
    readable = plain_text(alert.text)
    assert f"s3://bucket&<b>/{key.replace('`', GRAVE_STAND_IN)}" in readable  # the value survives, readably
    assert "email=<!channel> <!here>" in readable and f"note{GRAVE_STAND_IN}col=a{GRAVE_STAND_IN}b" in readable
    assert "&lt;@U999&gt;" in alert.text and "measured 3 rows &gt; 0, expected &lt;= 0" in alert.text


def test_field_and_detail_code_spans_cannot_be_closed_by_a_value() -> None:
    outcome = IngestOutcome(SourceObject("b", "in/a`b.csv"), OutcomeStatus.REJECTED, table="wap.orders",
                            branch=BRANCH, rows=3, report=report("a`b"))
    alert = alert_for_outcome(outcome)
    assert alert is not None
    blocks = blocks_for(alert)
    for field in blocks[2]["fields"]:
        assert field["text"].count("`") == 2  # the adapter's own span, and only it
    details = blocks[3]["text"]["text"]
    assert details.startswith("```") and details.endswith("```") and details.count("`") == 6
    commands = blocks[4]["text"]["text"]
    assert commands.count("```") == 2 * len(alert.commands)  # each command in its own block
    assert "&lt;why it is fine&gt;" in commands and "`orders@" + BRANCH + "`" in commands  # the SQL's own quoting


def test_the_alerts_own_code_span_still_works() -> None:
    outcome = IngestOutcome(SourceObject("b", "in/<!channel>.csv"), OutcomeStatus.PUBLISHED, table="wap.orders",
                            rows=3, report=report("x"))
    alert = alert_for_outcome(outcome)
    assert alert is not None
    assert "severity `warn` failed" in alert.summary
    assert_inert(alert)


@pytest.mark.parametrize("key", KEYS)
def test_invalid_and_failure_alerts_escape_the_error_message(key: str) -> None:
    invalid = IngestOutcome(SourceObject("b", key), OutcomeStatus.INVALID, table="x&y",
                            message=f"column `a` of {key} is not <int>: {LOUD}")
    alert = alert_for_outcome(invalid)
    assert alert is not None
    assert_inert(alert)
    assert "`" not in alert.details[0] and "`" not in alert.title
    failure = alert_for_failure(SourceObject("b", key), f"boom <!channel> in {key}", attempt=2, final=True,
                                correlation_id="c`1")
    assert_inert(failure)
    assert "&lt;!channel&gt;" in failure.details[0]
    unreadable = alert_for_unreadable_event("<@U1>", LOUD, final=False)
    assert_inert(unreadable)


def test_prune_alert_escapes_branches_tables_reason_and_actor() -> None:
    alert = alert_for_prune([("wap-x", "wap.<!channel>"), ("wap-y", "a`b&c")], reason="older than <30d> `ok`",
                            actor="<@U42>")
    assert_inert(alert)
    assert all("`" not in value for _, value in alert.fields)


def test_escape_rules_and_the_log_line(caplog: pytest.LogCaptureFixture) -> None:
    assert mrkdwn_escape("a&b<c>`d`") == f"a&amp;b&lt;c&gt;{GRAVE_STAND_IN}d{GRAVE_STAND_IN}"
    assert mrkdwn_escape("&lt;") == "&amp;lt;"  # an entity in a value stays literal text
    assert plain_text(mrkdwn_escape("&lt; <x> & y")) == "&lt; <x> & y"
    alert = alert_for_failure(SourceObject("b", "in/x&y<z>.csv"), "boom", attempt=1, final=False)
    assert LogNotifier().notify(alert) is True
    assert "s3://b/in/x&y<z>.csv" in caplog.text  # the log is not Slack: it reads the plain value
