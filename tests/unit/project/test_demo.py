"""`make demo` prints the latest alert as a person reads it (scripts/demo.py `printout_for`): Slack's escapes, links and
mentions written out, each value exactly as it is, even one that looks like Slack markup."""

from __future__ import annotations

from typing import NoReturn

from scripts.demo import printout_for

from wap_ingest.adapters.slack.blocks import answered_text
from wap_ingest.core.alerts import ActionKind, alert_for_outcome
from wap_ingest.core.interactions import Asked, Person, UseCases, answer
from wap_ingest.core.models import (
    AuditReport,
    CheckResult,
    CheckStatus,
    IngestOutcome,
    OutcomeStatus,
    SourceObject,
    TableRef,
)
from wap_ingest.core.review import Decision

BRANCH = "wap-orders-0123456789abcdef-f1795725343916426x7db3a6e9"
KEY = "orders/q&a <draft>.parquet"


def acted_on_alert() -> str:
    """A rejected file's alert (a key and a sample with `&`, `<`, `>`, one value shaped like a Slack link), as the
    sink holds it once alice discarded it from Slack (the answer's line names her: a mention)."""
    report = AuditReport("wap.orders", 20, (CheckResult(
        "not_null", "note", CheckStatus.FAILED, "3 nulls", "0 nulls",
        samples=({"note": "a<b & c>d", "id": "<https://evil.example|click>"},)),))
    alert = alert_for_outcome(IngestOutcome(SourceObject("inbox", KEY), OutcomeStatus.REJECTED, table="wap.orders",
                                            branch=BRANCH, rows=20, report=report))
    assert alert is not None

    def discard(branch: str, reason: str, actor: str) -> Decision:
        return Decision(branch, TableRef("wap", "orders"), "discarded", reason, actor)

    def unused(*_: object) -> NoReturn:
        raise AssertionError("only the discard runs")

    done = answer(Asked(ActionKind.DISCARD, BRANCH, Person("U0ALICE01", "alice"), "resent as <fixed> & checked"),
                  UseCases(unused, discard, unused, unused, unused, unused))
    return answered_text(alert.text, done)


def test_the_demo_prints_an_alert_as_plain_text() -> None:
    text = acted_on_alert() + "\nThe channel: <http://127.0.0.1:19122/?user=U0ALICE01&amp;x=1|the local channel>"
    assert "&lt;" in text and "&amp;" in text and "<@U0ALICE01>" in text  # what Slack gets
    printed = printout_for(text)
    lines = printed.splitlines()
    assert all(line.startswith("  ") for line in lines)  # indented under the demo's heading
    assert f"  Object: s3://inbox/{KEY}" in lines
    assert "      e.g. note=a<b & c>d, id=<https://evil.example|click>" in lines  # a value as it is, not a link
    assert f"  Discard: wap discard {BRANCH} --reason '<why>'" in lines
    assert "  >>> :wastebasket: Discarded by @U0ALICE01: resent as <fixed> & checked" in lines
    assert "  The channel: the local channel (http://127.0.0.1:19122/?user=U0ALICE01&x=1)" in lines
    for escape in ("&lt;", "&gt;", "&amp;", "<@", "|the local channel>"):
        assert escape not in printed, escape
