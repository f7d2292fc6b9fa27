"""Acting on alerts from Slack, refused or answered cleanly, through the real stack: each rejected file is dropped into
the source bucket (the function ingests it and alerts the stack's Slack sink), then requests reach the interactivity
endpoint over HTTP, either as the sink posts a person's clicks (exactly as Slack does) or made by hand. Whatever is
refused changes nothing: the branch stays open, main keeps its hash, no decision is recorded, the alert is not edited.

| request | answer |
|---|---|
| unsigned, signed with another secret, signed six minutes ago | 401 `refused: unsigned` / `forged` / `stale` |
| a real click posted a second time | 401 `refused: replayed`; the click was served once |
| a click by someone not on the allow list | 200; no form opens; a private reply saying why |
| a decision form sent by them (forged, well signed) | the form's error saying why |
| a form without a reason | the form's error asking for one |
| a decision on a branch discarded meanwhile (in a terminal) | privately: "Nothing done: it was already discarded by" |
| a decision on a branch deleted undecided (replaced by a newer attempt) | "No longer open"; privately: "Nothing done" |
| two people deciding at once | one decision; the other person is told who decided first |
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.slack_channel import (
    ALICE,
    BOB,
    MALLORY,
    Channel,
    decision_form,
    form_body,
    signed_headers,
)
from tests.waiting import wait_for
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.entrypoints.cli import main
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]


@dataclass(frozen=True)
class Alerted:
    table: TableRef
    branch: str
    ts: str  # the alert's message


@pytest.fixture
def channel(local_stack: StackState) -> Channel:
    return Channel.of(local_stack)


def rejected(lake: Lake, channel: Channel) -> Alerted:
    """A file with nulls, dropped as a producer drops it: its branch and its alert's message."""
    name = f"slack_{uuid.uuid4().hex[:8]}"
    lake.drop(f"{name}/nulls.parquet", parquet_bytes(20, nulls=2))
    message = wait_for(lambda: channel.message_about(f"wap.{name}"), "the rejected file's alert")
    [branch] = [b for b in lake.wap_branches() if f"-{name}-" in b]
    assert branch in message["text"]
    return Alerted(TableRef("wap", name), branch, str(message["ts"]))


def unchanged(lake: Lake, channel: Channel, alert: Alerted, main_hash: str) -> None:
    assert alert.branch in lake.wap_branches()
    assert lake.main_hash() == main_hash
    assert lake.service.history(alert.table) == []
    message = channel.message_about(alert.branch)
    assert message is not None and not message.get("edited")


def test_unsigned_forged_stale_and_replayed_requests_are_refused(lake: Lake, channel: Channel) -> None:
    alert = rejected(lake, channel)
    main_hash = lake.main_hash()
    form = form_body(decision_form(ALICE, "alice", "discard", alert.branch, alert.ts, "forged discard"))
    answers = {
        "unsigned": channel.post(form, {"Content-Type": "application/x-www-form-urlencoded"}),
        "forged": channel.post(form, signed_headers(form, secret="another-apps-signing-secret")),
        "stale": channel.post(form, signed_headers(form, at=time.time() - 6 * 60)),
    }
    for reason, answer in answers.items():
        print(f"{reason}: {answer.status_code} {answer.text}")
        assert answer.status_code == 401 and answer.text.startswith(f"refused: {reason}"), (reason, answer.text)
    # a real click, as the sink posted it, posted again
    assert channel.click(ALICE, alert.ts, "wap.show_rows")["status"] == 200
    [sent] = [s for s in channel.sent() if alert.branch in s["body"] and "show_rows" in s["body"]]
    replayed = channel.post(sent["body"], sent["headers"])
    print(f"replayed: {replayed.status_code} {replayed.text}")
    assert replayed.status_code == 401 and replayed.text == "refused: replayed: this very request was served before"
    # the click was served, once (the requests refused before it were never handed to the function)
    wait_for(lambda: [e for e in channel.ephemerals(ALICE) if alert.branch in e], "the rows, privately to alice")
    time.sleep(3)
    [shown] = [e for e in channel.ephemerals(ALICE) if alert.branch in e]
    assert "not_null(my_col_1)" in shown and "my_col_1=null" in shown
    unchanged(lake, channel, alert, main_hash)


def test_someone_not_on_the_allow_list_is_told_why_and_nothing_changes(lake: Lake, channel: Channel) -> None:
    alert = rejected(lake, channel)
    main_hash = lake.main_hash()
    assert channel.click(MALLORY, alert.ts, "wap.discard")["status"] == 200
    refusal = wait_for(lambda: [e for e in channel.ephemerals(MALLORY) if "may not act" in e], "mallory's refusal")[-1]
    print(f"mallory sees: {refusal}")
    assert refusal == "Nothing done: <@U0MALLORY> may not act on WAP alerts."  # only that: no setting, no fix
    assert channel.view_of(MALLORY) is None  # no form opened for her
    body = form_body(decision_form(MALLORY, "mallory", "discard", alert.branch, alert.ts, "I say so"))
    answer = channel.post(body, signed_headers(body))
    assert answer.status_code == 200 and "may not act" in json.loads(answer.text)["errors"]["reason"]
    blank = form_body(decision_form(ALICE, "alice", "discard", alert.branch, alert.ts, "  "))
    answer = channel.post(blank, signed_headers(blank))
    assert answer.status_code == 200 and "Say why" in json.loads(answer.text)["errors"]["reason"]
    time.sleep(3)
    unchanged(lake, channel, alert, main_hash)
    # bob may (by the on-call user group): his decision is the only one recorded
    assert channel.click(BOB, alert.ts, "wap.discard")["status"] == 200
    wait_for(lambda: channel.view_of(BOB), "bob's form")
    assert channel.submit(BOB, "the producer sends a fixed file")["status"] == 200
    wait_for(lambda: (channel.message_about(alert.branch) or {}).get("edited"), "the alert updated")
    [entry] = lake.service.history(alert.table)
    assert (entry.action, entry.actor, entry.reason) == ("discarded", "bob (Slack U0BOB0001)",
                                                         "the producer sends a fixed file")


def test_a_decision_on_a_branch_decided_meanwhile_changes_nothing(lake: Lake, channel: Channel,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    alert = rejected(lake, channel)
    main_hash = lake.main_hash()
    assert channel.click(BOB, alert.ts, "wap.publish_reviewed")["status"] == 200
    wait_for(lambda: channel.view_of(BOB), "bob's form")
    monkeypatch.setenv("WAP_ACTOR", "carol")
    assert main(["discard", alert.branch, "--reason", "done in a terminal"]) == 0  # meanwhile, in a terminal
    assert channel.submit(BOB, "looks fine to me")["status"] == 200
    told = wait_for(lambda: [e for e in channel.ephemerals(BOB) if "done in a terminal" in e], "bob told")[-1]
    print(f"bob sees: {told}")
    assert told.startswith("Nothing done: it was already discarded by carol (unverified")
    message = wait_for(lambda: (m := channel.message_about(alert.branch)) and m.get("edited") and m, "the update")
    assert "Discarded by carol (unverified" in message["text"]
    assert not [b for b in message["blocks"] if b.get("type") == "actions"]  # settled: no buttons left
    assert lake.main_hash() == main_hash
    [entry] = lake.service.history(alert.table)
    assert (entry.action, entry.actor.split()[0]) == ("discarded", "carol")


def test_two_people_deciding_at_once_one_wins_and_the_other_is_told(lake: Lake, channel: Channel) -> None:
    alert = rejected(lake, channel)
    assert channel.click(ALICE, alert.ts, "wap.discard")["status"] == 200
    assert channel.click(BOB, alert.ts, "wap.publish_reviewed")["status"] == 200
    wait_for(lambda: channel.view_of(ALICE) and channel.view_of(BOB), "both forms open")
    with ThreadPoolExecutor(2) as pool:
        sent = list(pool.map(lambda who: channel.submit(*who), [(ALICE, "alice discards it"),
                                                                (BOB, "bob publishes it")]))
    assert [s["status"] for s in sent] == [200, 200]
    told = wait_for(lambda: [(u, e) for u in (ALICE, BOB) for e in channel.ephemerals(u)
                             if e.startswith("Nothing done") and ("alice discards" in e or "bob publishes" in e)],
                    "the one who came second told")
    [(loser, text)] = told
    print(f"{loser} sees: {text}")
    [entry] = lake.service.history(alert.table)
    if entry.action == "published":
        assert (loser, entry.actor) == (ALICE, "bob (Slack U0BOB0001)")
        assert text == "Nothing done: it was already published by bob (Slack U0BOB0001) (bob publishes it)."
        assert lake.count(alert.table.qualified) == 20
    else:
        assert (loser, entry.actor) == (BOB, "alice (Slack U0ALICE01)")
        assert text == "Nothing done: it was already discarded by alice (Slack U0ALICE01) (alice discards it)."
    assert alert.branch not in lake.wap_branches()
    message = channel.message_about(alert.branch)
    assert message is not None and message.get("edited")


def test_a_decision_on_a_branch_deleted_without_a_decision_is_told_so(lake: Lake, channel: Channel) -> None:
    alert = rejected(lake, channel)
    # the same file ingested again (what `wap ingest s3://...` runs): rejected again, its run keeps its own branch and
    # its clean-up deletes this older attempt's; no one decided it, so nothing is recorded
    again = lake.service.ingest(SourceObject(lake.source_bucket, f"{alert.table.name}/nulls.parquet"))
    assert again.status is OutcomeStatus.REJECTED and again.branch not in (None, alert.branch)
    branches = lake.wap_branches()
    assert alert.branch not in branches and again.branch in branches
    main_hash = lake.main_hash()
    # two people act on the old alert: alice publishes after review, bob discards
    assert channel.click(ALICE, alert.ts, "wap.publish_reviewed")["status"] == 200
    assert channel.click(BOB, alert.ts, "wap.discard")["status"] == 200
    wait_for(lambda: channel.view_of(ALICE) and channel.view_of(BOB), "both forms open")
    gone = f"{alert.branch} was deleted without a recorded decision; its rows are not on main"
    for user, name, reason in ((ALICE, "alice", "the nulls are expected"), (BOB, "bob", "the producer resends")):
        assert channel.submit(user, reason) == {"status": 200, "body": ""}
        told = wait_for(lambda u=user: [e for e in channel.ephemerals(u) if gone in e], f"{name} told")[-1]
        print(f"{name} sees: {told}")
        assert told.startswith(f"Nothing done: {gone} (a newer attempt at the same file replaces it")
        line = f"No longer open (asked by <@{user}>): {gone}."
        message = wait_for(lambda ln=line: (m := channel.message_about(alert.branch)) and ln in m["text"] and m,
                           f"the alert answered for {name}")
        print(f"the alert now ends: {message['text'].rsplit(chr(10), 1)[-1]}")
        assert not [b for b in message["blocks"] if b.get("type") == "actions"]  # settled: no buttons left
    assert lake.main_hash() == main_hash
    assert lake.service.history(alert.table) == []  # no decision recorded, nothing published
    assert again.branch in lake.wap_branches()  # the newer attempt, untouched: its own alert decides it
