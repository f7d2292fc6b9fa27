"""Acting on alerts, in the core and its Slack rendering, without a network: what each alert offers, who may act, what
each action answers (on the fake catalog, with the real review use cases), and the Block Kit the adapter makes."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.fakes import FakeCatalog, FakeDecisionLog
from tests.kept_branches import keep_for_review
from wap_ingest.adapters.slack.blocks import (
    ACTIONS_BLOCK,
    RESULT_BLOCK,
    Pending,
    answered,
    answered_text,
    blocks_for,
    kind_from,
    modal_for,
    reason_in,
)
from wap_ingest.core.alerts import ActionKind, alert_for_outcome, readable
from wap_ingest.core.branches import identity_digest
from wap_ingest.core.dead_letters import QueueAlarm, alert_for_alarm
from wap_ingest.core.errors import CatalogUnavailableError, ConfigError
from wap_ingest.core.interactions import (
    Answer,
    Asked,
    Operators,
    Person,
    UseCases,
    answer,
    decided_by,
    operators_from,
)
from wap_ingest.core.models import (
    AuditReport,
    CheckResult,
    CheckStatus,
    IngestOutcome,
    OutcomeStatus,
    SourceObject,
    TableRef,
)
from wap_ingest.core.pipeline import PipelineConfig, Transactions
from wap_ingest.core.review import discard_branch, publish_branch

TABLE = TableRef("wap", "orders")
IDENTITY = "inbox/orders/bad.parquet#etag1"
BRANCH = f"wap-wap-orders-{identity_digest(IDENTITY)}-0001"
ALICE, BOB = Person("U0ALICE01", "alice"), Person("U0BOB0001", "bob")
REPORT = AuditReport("wap.orders", 20, (
    CheckResult("not_null", "c", CheckStatus.FAILED, "3 nulls", "0 nulls", samples=({"c": "null", "id": "<b>"},)),))


def rejected(key: str = "orders/bad.parquet") -> IngestOutcome:
    return IngestOutcome(SourceObject("inbox", key), OutcomeStatus.REJECTED, table="wap.orders", branch=BRANCH,
                         rows=20, report=REPORT)


# --- what an alert offers ------------------------------------------------------------------------------------------

def test_a_rejected_file_offers_its_four_actions_on_its_branch() -> None:
    alert = alert_for_outcome(rejected())
    assert alert is not None
    assert [(a.kind, a.label, a.target) for a in alert.actions] == [
        (ActionKind.SHOW_ROWS, "Show rows", BRANCH), (ActionKind.REAUDIT_PUBLISH, "Re-audit and publish", BRANCH),
        (ActionKind.PUBLISH_REVIEWED, "Publish after review", BRANCH), (ActionKind.DISCARD, "Discard", BRANCH)]
    assert [a.kind.asks_reason for a in alert.actions] == [False, True, True, True]
    assert "wap discard" in alert.text  # the same choices for every plain-text reader


def test_an_invalid_file_offers_retry_only_when_it_was_routed_to_a_table() -> None:
    routed = alert_for_outcome(IngestOutcome(SourceObject("src", "orders/x y.csv"), OutcomeStatus.INVALID,
                                             table="wap.orders", message="a schema that does not fit. Fix: ..."))
    unrouted = alert_for_outcome(IngestOutcome(SourceObject("src", "loose.csv"), OutcomeStatus.INVALID,
                                               message="the key names no table. Fix: put it under <table>/"))
    assert routed is not None and unrouted is not None
    assert [(a.kind, a.target) for a in routed.actions] == [(ActionKind.RETRY, "s3://src/orders/x y.csv")]
    assert "wap ingest 's3://src/orders/x y.csv'" in routed.text and "Fix: ..." in routed.text
    assert unrouted.actions == () and "wap ingest" not in unrouted.text


def test_the_dead_letter_alarm_offers_show_and_a_confirmed_redrive() -> None:
    alert = alert_for_alarm(QueueAlarm("wap-dlq-depth", "ALARM", "1 message", "wap-ingest-dlq", "now"))
    assert alert is not None
    show, redrive = alert.actions
    assert (show.kind, redrive.kind, redrive.target) == (ActionKind.SHOW_DEAD_LETTERS, ActionKind.REDRIVE,
                                                         "wap-ingest-dlq")
    assert redrive.confirm and show.confirm is None


def test_readable_undoes_slacks_escaping_for_people() -> None:
    alert = alert_for_outcome(rejected("orders/a&b<c>`d.parquet"))
    assert alert is not None
    assert "&lt;why it is fine&gt;" in alert.text and "&amp;" in alert.text
    shown = readable(alert.text)
    assert "'<why it is fine>'" in shown and "s3://inbox/orders/a&b<c>`d.parquet" in shown
    assert "&lt;" not in shown and "&amp;" not in shown


# --- who may act -------------------------------------------------------------------------------------------------

def test_the_allow_list_takes_users_and_the_members_of_user_groups() -> None:
    asked: list[str] = []

    def members(group: str) -> frozenset[str]:
        asked.append(group)
        return frozenset({"U0BOB0001"}) if group == "S0ONCALL1" else frozenset()

    operators = Operators(operators_from("U0ALICE01, S0ONCALL1"), members)
    assert operators.allows("U0ALICE01") and asked == []  # a listed user: no group asked
    assert operators.allows("U0BOB0001") and asked == ["S0ONCALL1"]
    assert not operators.allows("U0MALLORY")
    assert "<@U0MALLORY> may not act" in operators.refusal(Person("U0MALLORY", "mallory"))
    # people off the list are told only that they may not act; why (and the fix) is for the log
    assert Operators(frozenset(), members).refusal(ALICE) == "Nothing done: <@U0ALICE01> may not act on WAP alerts."
    assert "WAP_SLACK_OPERATORS is empty" in Operators(frozenset(), members).refused_because()
    assert "WAP_SLACK_OPERATORS" in operators.refused_because()


@pytest.mark.parametrize("bad", ["alice", "U0A", "C0123456", "U0ALICE01;S1"])
def test_the_allow_list_refuses_what_is_not_a_slack_id(bad: str) -> None:
    with pytest.raises(ConfigError, match="WAP_SLACK_OPERATORS"):
        operators_from(bad)


# --- what each action answers --------------------------------------------------------------------------------------

class Lake:
    def __init__(self) -> None:
        self.catalog = FakeCatalog()  # a rejected file's branch, kept by the transaction with its run's plan
        keep_for_review(self.catalog, [(TABLE, SourceObject("inbox", "orders/bad.parquet", etag="etag1"), 20)],
                        name=BRANCH)
        self.decisions = FakeDecisionLog()
        self.retried: list[SourceObject] = []
        self.tx = Transactions(self.catalog, PipelineConfig(default_namespace="wap", sleep=lambda _s: None))

    def source_of(self, _table: TableRef, _branch: str) -> Mapping[str, str]:
        return {"wap.source.bucket": "inbox", "wap.source.key": "orders/bad.parquet", "wap.source.identity": IDENTITY}

    def cases(self, reaudit: AuditReport = REPORT) -> UseCases:
        def retry(source: SourceObject) -> IngestOutcome:
            self.retried.append(source)
            return IngestOutcome(source, OutcomeStatus.PUBLISHED, table="wap.orders", rows=7)

        return UseCases(
            publish=lambda b, r, a, re: publish_branch(self.tx, b, reason=r, actor=a, source_of=self.source_of,
                                                       reaudit=(lambda *_: reaudit) if re else None,
                                                       decisions=self.decisions),
            discard=lambda b, r, a: discard_branch(self.catalog, b, reason=r, actor=a, decisions=self.decisions,
                                                   default_namespace="wap"),
            report=lambda b: {"report": REPORT.to_dict()} if b == BRANCH else None, retry=retry,
            dead_letters=lambda q: ["m1  received 3x  s3://src/a.csv"], redrive=lambda q: 2,
            decided=lambda b: decided_by(self.catalog, self.decisions, b, default_namespace="wap"))


def test_discard_records_the_person_and_settles_the_alert() -> None:
    lake = Lake()
    got = answer(Asked(ActionKind.DISCARD, BRANCH, ALICE, "producer resends <!channel>"), lake.cases())
    assert got == Answer(":wastebasket: Discarded by <@U0ALICE01>: producer resends &lt;!channel&gt;", settled=True)
    [record] = lake.decisions.records
    assert (record.actor, record.reason, record.action) == ("alice (Slack U0ALICE01)", "producer resends <!channel>",
                                                            "discarded")
    assert lake.catalog.find_branch(BRANCH) is None


def test_the_second_of_two_decisions_is_told_who_decided_first_and_changes_nothing() -> None:
    lake = Lake()
    answer(Asked(ActionKind.DISCARD, BRANCH, ALICE, "bad file"), lake.cases())
    late = answer(Asked(ActionKind.DISCARD, BRANCH, BOB, "me too"), lake.cases())
    assert late.settled and late.private and "already discarded by alice (Slack U0ALICE01)" in late.private
    assert len(lake.decisions.records) == 1
    publish = answer(Asked(ActionKind.PUBLISH_REVIEWED, BRANCH, BOB, "fine"), lake.cases())
    assert publish.private == "Nothing done: it was already discarded by alice (Slack U0ALICE01) (bad file)."
    assert publish.line == "Discarded by alice (Slack U0ALICE01): bad file" and publish.settled
    assert len(lake.decisions.records) == 1 and lake.catalog.publications(TABLE, on="main") == []


def test_a_discard_after_a_publish_is_told_who_published() -> None:
    lake = Lake()
    answer(Asked(ActionKind.PUBLISH_REVIEWED, BRANCH, BOB, "fine"), lake.cases())
    late = answer(Asked(ActionKind.DISCARD, BRANCH, ALICE, "bad"), lake.cases())
    assert late.private == "Nothing done: it was already published by bob (Slack U0BOB0001) (fine)."
    assert lake.decisions.records == [] and len(lake.catalog.publications(TABLE, on="main")) == 1


def test_a_decision_on_a_branch_deleted_without_a_decision_says_so_and_settles() -> None:
    lake = Lake()
    branch = lake.catalog.find_branch(BRANCH)
    assert branch is not None
    lake.catalog.delete_branch(branch)  # as a newer attempt's clean-up deletes it: no decision recorded
    for action, person in ((ActionKind.PUBLISH_REVIEWED, ALICE), (ActionKind.DISCARD, BOB)):
        got = answer(Asked(action, BRANCH, person, "fine"), lake.cases())
        gone = f"{BRANCH} was deleted without a recorded decision; its rows are not on main"
        assert got.line == f"No longer open (asked by <@{person.user_id}>): {gone}." and got.settled
        assert got.private is not None and got.private.startswith(f"Nothing done: {gone} (a newer attempt")
    assert lake.decisions.records == [] and lake.catalog.publications(TABLE, on="main") == []


def test_publish_after_review_merges_with_the_person_as_actor() -> None:
    lake = Lake()
    got = answer(Asked(ActionKind.PUBLISH_REVIEWED, BRANCH, BOB, "nulls are expected"), lake.cases())
    assert got.settled and got.line.startswith(":white_check_mark: <@U0BOB0001> published it after review: nulls")
    [merge] = lake.catalog.publications(TABLE, on="main")
    assert merge.properties["wap.decision.actor"] == "bob (Slack U0BOB0001)"
    assert merge.properties["wap.decision.reaudit"] == "skipped"
    again = answer(Asked(ActionKind.PUBLISH_REVIEWED, BRANCH, ALICE, "twice"), lake.cases())
    assert again.private and "already published by bob (Slack U0BOB0001)" in again.private


def test_a_reaudit_that_still_fails_keeps_the_buttons_and_says_why() -> None:
    lake = Lake()
    got = answer(Asked(ActionKind.REAUDIT_PUBLISH, BRANCH, ALICE, "suite fixed"), lake.cases())
    assert not got.settled and "still fails: not_null(c) 3 nulls, expected 0 nulls" in got.line
    assert lake.catalog.find_branch(BRANCH) is not None and lake.catalog.publications(TABLE, on="main") == []
    passing = AuditReport("wap.orders", 20, (CheckResult("not_null", "c", CheckStatus.PASSED, "0", "0"),))
    assert answer(Asked(ActionKind.REAUDIT_PUBLISH, BRANCH, ALICE, "suite fixed"), lake.cases(passing)).settled


def test_a_decision_without_a_reason_does_nothing() -> None:
    lake = Lake()
    got = answer(Asked(ActionKind.DISCARD, BRANCH, ALICE, "  "), lake.cases())
    assert not got.update and got.private and "say why" in got.private
    assert lake.catalog.find_branch(BRANCH) is not None


def test_show_rows_replies_privately_with_the_samples() -> None:
    got = answer(Asked(ActionKind.SHOW_ROWS, BRANCH, ALICE), Lake().cases())
    assert not got.update and got.private is not None
    assert "not_null(c): c=null, id=&lt;b&gt;" in got.private and "20 new rows" in got.private


def test_retry_dead_letters_and_redrive() -> None:
    lake = Lake()
    got = answer(Asked(ActionKind.RETRY, "s3://src/orders/a#b?.csv", ALICE), lake.cases())
    assert lake.retried == [SourceObject("src", "orders/a#b?.csv")] and got.settled
    assert "published 7 rows into wap.orders" in got.line
    shown = answer(Asked(ActionKind.SHOW_DEAD_LETTERS, "dlq", ALICE), lake.cases())
    assert shown.private and "m1  received 3x" in shown.private and not shown.update
    assert "2 message(s) sent back" in answer(Asked(ActionKind.REDRIVE, "dlq", ALICE), lake.cases()).line
    assert "is not an object" in (answer(Asked(ActionKind.RETRY, "nope", ALICE), lake.cases()).private or "")


def test_an_infrastructure_failure_raises_for_the_queue_to_retry() -> None:
    cases = Lake().cases()

    def down(*_: object) -> None:
        raise CatalogUnavailableError("Nessie is down")

    with pytest.raises(CatalogUnavailableError):
        answer(Asked(ActionKind.DISCARD, BRANCH, ALICE, "x"), UseCases(cases.publish, down, cases.report, cases.retry,
                                                                        cases.dead_letters, cases.redrive))


# --- Block Kit -----------------------------------------------------------------------------------------------------

def test_the_alerts_buttons_and_the_forms_they_open() -> None:
    alert = alert_for_outcome(rejected())
    assert alert is not None
    blocks = blocks_for(alert)
    [actions] = [b for b in blocks if b.get("block_id") == ACTIONS_BLOCK]
    assert [(e["action_id"], e["value"], e.get("style")) for e in actions["elements"]] == [
        ("wap.show_rows", BRANCH, None), ("wap.reaudit_publish", BRANCH, None),
        ("wap.publish_reviewed", BRANCH, "primary"), ("wap.discard", BRANCH, "danger")]
    assert [kind_from(e["action_id"]) for e in actions["elements"]][-1] is ActionKind.DISCARD
    assert kind_from("other.app") is None and kind_from("wap.nope") is None
    pending = Pending(ActionKind.DISCARD, BRANCH, "C1", "1.2", "https://hooks.slack.com/actions/x")
    modal = modal_for(pending)
    assert modal["type"] == "modal" and modal["title"]["text"] == "Discard"
    assert Pending.from_metadata(modal["private_metadata"]) == pending
    [field] = [b for b in modal["blocks"] if b["type"] == "input"]
    assert field.get("optional") is False and field["element"]["min_length"] == 3
    state = {"values": {"reason": {"reason": {"type": "plain_text_input", "value": "why"}}}}
    assert reason_in(state) == "why" and reason_in({}) is None


def test_an_answered_alert_shows_the_line_and_loses_its_buttons_once_settled() -> None:
    alert = alert_for_outcome(rejected())
    assert alert is not None
    blocks = blocks_for(alert)
    kept = answered(blocks, Answer(":x: failed", settled=False))
    assert [b.get("block_id") for b in kept][-2:] == [RESULT_BLOCK, ACTIONS_BLOCK]
    done = answered(kept, Answer("Discarded by <@U1>: x", settled=True))
    assert [b.get("block_id") for b in done][-1] == RESULT_BLOCK and ACTIONS_BLOCK not in str(done)
    assert done[-1]["elements"][0]["text"] == "Discarded by <@U1>: x"
    text = answered_text(answered_text(alert.text, Answer("first", False)), Answer("second", True))
    assert text.endswith("\n\n>>> second") and "first" not in text
