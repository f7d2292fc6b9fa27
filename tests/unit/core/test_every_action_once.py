"""Every action once (core.once), without a network: the record's table row by row on the fake store, and the
function's Slack actions (entrypoints/lambda_slack.py) handled through it: a click's message delivered again (SQS
redelivers it), a copy of it sent by someone who may send to the queue, a dead-lettered click re-sent, a click that
failed on the infrastructure and is retried. The same through the real stack:
tests/integration/entrypoints/test_slack_once.py; the store against moto:
tests/contract/test_action_records_contract.py."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from tests.fake_actions import FakeActionRecords
from wap_ingest.adapters.slack.incoming import SignedRequest
from wap_ingest.bootstrap import SlackActionUseCases
from wap_ingest.core.errors import InfrastructureError, ObjectStoreUnavailableError
from wap_ingest.core.interactions import Answer, Asked, Operators
from wap_ingest.core.once import Progress, Repeat, Seen, once, start
from wap_ingest.entrypoints.lambda_slack import on_slack_action

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


# --- the record, row by row ---------------------------------------------------------------------------------------

def test_an_action_runs_for_the_first_message_only_and_each_other_delivery_says_why_not() -> None:
    records, runs = FakeActionRecords(), []
    assert once(records, "slack-abc", "m1", "redrive", lambda: runs.append("m1") or "moved 2") == "moved 2"
    again = once(records, "slack-abc", "m1", "redrive", lambda: runs.append("again"))  # SQS redelivers m1
    copy = once(records, "slack-abc", "m2", "redrive", lambda: runs.append("copy"))  # a copy sent to the queue
    assert isinstance(again, Repeat) and again.seen is Seen.DONE and "redelivery of message m1" in again.reason
    assert isinstance(copy, Repeat) and copy.seen is Seen.COPY and "first received as message m1" in copy.reason
    assert runs == ["m1"] and records.records["slack-abc"].progress is Progress.DONE


def test_a_failure_is_retried_by_the_same_message_only() -> None:
    records, runs = FakeActionRecords(), []

    def act(name: str) -> str:
        runs.append(name)
        if len(runs) == 1:
            raise ObjectStoreUnavailableError("s3 down")
        return name

    with pytest.raises(ObjectStoreUnavailableError):
        once(records, "slack-abc", "m1", "redrive", lambda: act("m1"))
    assert records.records["slack-abc"].progress is Progress.FAILED
    dead_letter = once(records, "slack-abc", "m9", "redrive", lambda: act("m9"))  # re-sent: another message id
    assert isinstance(dead_letter, Repeat) and dead_letter.seen is Seen.COPY
    assert once(records, "slack-abc", "m1", "redrive", lambda: act("m1 again")) == "m1 again"  # its retry
    assert runs == ["m1", "m1 again"]


def test_a_delivery_that_died_mid_action_is_not_run_again_and_only_one_retry_takes_over() -> None:
    records = FakeActionRecords()
    started = start(records, "slack-abc", "m1", "redrive")  # ... and the process died here
    assert not isinstance(started, Repeat)
    later = once(records, "slack-abc", "m1", "redrive", lambda: pytest.fail("run again"))
    assert isinstance(later, Repeat) and later.seen is Seen.RUNNING and "not started again" in later.reason
    failed = records.change(started, Progress.FAILED)
    assert failed is not None
    first, second = start(records, "slack-abc", "m1", "redrive"), start(records, "slack-abc", "m1", "redrive")
    assert not isinstance(first, Repeat) and isinstance(second, Repeat) and second.seen is Seen.RUNNING


def test_the_outcome_stands_when_its_record_cannot_be_changed_and_the_store_down_does_nothing() -> None:
    records, noted = FakeActionRecords(), []

    def act() -> str:
        records.down = True  # the store goes down while the action runs
        return "done"

    assert once(records, "slack-abc", "m1", "redrive", act, noted=noted.append) == "done"
    assert "could not be marked done" in noted[0]
    records.down = False
    assert isinstance(once(records, "slack-abc", "m1", "redrive", lambda: "again"), Repeat)  # not run twice
    records.down = True
    with pytest.raises(InfrastructureError):  # the message is retried
        once(records, "slack-other", "m2", "show", lambda: pytest.fail("acted without a record"))


# --- the function's Slack actions ---------------------------------------------------------------------------------

@dataclass
class Replies:
    private: list[tuple[str | None, str]] = field(default_factory=list)
    updated: list[Answer] = field(default_factory=list)

    def reply(self, response_url: str | None, text: str) -> bool:
        self.private.append((response_url, text))
        return True

    def answer_on(self, channel: str, ts: str, answer: Answer) -> None:
        self.updated.append(answer)


@dataclass
class Slack:
    replies: Replies
    secret: str = SECRET
    operators: Operators = field(default_factory=lambda: Operators(frozenset({"U0ALICE01"}), lambda _g: frozenset()))


class Desk:
    """What on_slack_action is handed (its SlackActionUseCases): the Slack side, the action records, and `act` (here:
    a Redrive that moves whatever the dead-letter queue holds, or fails while `down`)."""

    def __init__(self) -> None:
        self.slack = Slack(Replies())
        self.actions = FakeActionRecords()
        self.dead_letters = ["d1", "d2"]
        self.redriven: list[str] = []
        self.down = False

    def act(self, asked: Asked) -> Answer:
        if self.down:
            raise ObjectStoreUnavailableError("SQS at https://sqs.internal.example/123/wap-events: unreachable")
        moved, self.dead_letters = self.dead_letters, []
        self.redriven += moved
        return Answer(f"Redriven by {asked.person.mention}: {len(moved)} message(s)", settled=True)

    def uses(self) -> SlackActionUseCases:
        return SlackActionUseCases(secret=lambda: self.slack.secret, records=lambda: self.actions,
                                   operators=lambda: self.slack.operators,
                                   replies=lambda: self.slack.replies,  # type: ignore[arg-type,return-value]
                                   act=self.act)


def click(user: str = "U0ALICE01", trigger: str = "1.2.3", action_ts: str = "1800000000.000100") -> SignedRequest:
    payload = {"type": "block_actions", "user": {"id": user, "username": "alice"}, "trigger_id": trigger,
               "token": "deprecated-verification-token", "response_url": "https://hooks.slack.com/actions/T1/2/x",
               "container": {"type": "message", "message_ts": "1800000000.000001", "channel_id": "C0123ABCD"},
               "actions": [{"action_id": "wap.redrive", "value": "wap-events-dlq", "type": "button",
                            "action_ts": action_ts}]}
    body = urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()))
    return SignedRequest(stamp, str(SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)), body)


def handled(desk: Desk, request: SignedRequest, message_id: str) -> dict[str, Any]:
    return on_slack_action(desk.uses(), request, message_id)


def test_a_redelivered_redrive_moves_nothing_and_says_so() -> None:
    desk, request = Desk(), click()
    assert handled(desk, request, "m1")["settled"] and desk.redriven == ["d1", "d2"]
    desk.dead_letters = ["d3"]  # dead-lettered since
    again = handled(desk, request, "m1")  # SQS delivers m1 again (its invocation died after the work, say)
    assert (again["answer"], again["seen"], desk.redriven, desk.dead_letters) == ("not run again", "done",
                                                                                  ["d1", "d2"], ["d3"])
    assert desk.slack.replies.private[-1][1] == "Nothing done again: this action was already done (reference m1)."


def test_a_copy_of_a_click_sent_to_the_queue_does_nothing_as_its_user() -> None:
    desk, request = Desk(), click()
    handled(desk, request, "m1")
    desk.dead_letters = ["d3"]
    resigned = SignedRequest(request.timestamp, request.signature, request.body)  # the body as it was forwarded
    copy = handled(desk, resigned, "m-sent-by-the-operator")
    assert (copy["seen"], desk.dead_letters) == ("copy", ["d3"])
    assert "received before and is never run twice" in desk.slack.replies.private[-1][1]


def test_two_clicks_on_the_same_message_are_two_actions() -> None:
    """The same person, the same button, the same alert (container.message_ts): Slack's trigger_id and action_ts
    differ, so do the bodies and their ids."""
    desk = Desk()
    first, second = click(trigger="1.2.3", action_ts="1800000000.000100"), click(trigger="1.2.4",
                                                                                action_ts="1800000007.000200")
    assert first.action_id != second.action_id and first.action_id.startswith("slack-")
    handled(desk, first, "m1")
    desk.dead_letters = ["d3"]
    assert handled(desk, second, "m2")["settled"] and desk.redriven == ["d1", "d2", "d3"]


def test_a_dead_lettered_click_re_sent_does_nothing_and_a_retried_one_runs_once() -> None:
    desk, request = Desk(), click()
    desk.down = True
    for _attempt in range(3):  # every attempt of m1 fails on the infrastructure: then it is dead-lettered
        with pytest.raises(ObjectStoreUnavailableError):
            handled(desk, request, "m1")
    told = [text for _url, text in desk.slack.replies.private]
    assert told == ["Not finished yet: it is retried automatically (reference m1)."] * 3  # no internal text
    desk.down = False
    redriven = handled(desk, request, "m2")  # `wap dlq redrive` sends it back: a new message id
    assert (redriven["seen"], desk.redriven) == ("copy", [])
    retried = handled(desk, request, "m1")  # had m1 come back before the dead-letter queue, it would run, once
    assert retried["settled"] and desk.redriven == ["d1", "d2"]


def test_someone_off_the_allow_list_is_told_only_that_and_it_counts_as_their_action() -> None:
    desk = Desk()
    refused = handled(desk, click(user="U0MALLORY"), "m1")
    assert refused["answer"] == "refused" and desk.redriven == []
    assert desk.slack.replies.private == [("https://hooks.slack.com/actions/T1/2/x",
                                           "Nothing done: <@U0MALLORY> may not act on WAP alerts.")]


def test_a_request_not_signed_by_slack_is_refused_before_anything_is_recorded() -> None:
    desk, request = Desk(), click()
    forged = SignedRequest(request.timestamp, "v0=" + "0" * 64, request.body)
    assert handled(desk, forged, "m1")["slack_action"] == "refused" and desk.actions.records == {}
    stamped = SignedRequest("1²", request.signature, request.body)  # a non-ASCII digit: refused, not a crash
    assert "malformed" in handled(desk, stamped, "m2")["error"] and desk.actions.records == {}
    assert handled(desk, request, "m3")["settled"]  # the genuine one still runs
