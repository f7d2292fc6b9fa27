"""The interactivity endpoint acknowledges a click at once and leaves the work to the function, through the real stack.

Slack waits three seconds for the endpoint's answer, and shows the person an error after that. "Re-audit and publish"
is slow work (the function re-audits the branch's rows with Spark), so the endpoint only hands the signed request to
the ingest queue and answers an empty 200; the function does the work and updates the alert's message later. The
stack's local Slack records when each answer came (`sent`: `seconds`, `answered_at`) and when a message was updated
(`edited_at`), on one clock: the proof is the order (answered, then updated), not a stopwatch.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import pytest

from tests.conftest import Lake
from tests.slack_channel import ALICE, Channel, edited, reaudit_form_open
from tests.waiting import wait_for
from wap_ingest.core.models import TableRef
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]

SLACK_SECONDS = 3.0  # Slack's own limit for the acknowledgement


@pytest.fixture
def channel(local_stack: StackState) -> Channel:
    return Channel.of(local_stack)


def submission_about(channel: Channel, branch: str) -> dict[str, Any] | None:
    """The decision form sent to the app about `branch`, as the channel posted it, with the app's answer."""
    for sent in reversed(channel.sent()):
        payload = json.loads(parse_qs(sent["body"])["payload"][0])
        if payload["type"] == "view_submission" and branch in payload["view"]["private_metadata"]:
            return sent
    return None


def test_a_slow_reaudit_is_acknowledged_at_once_and_answered_in_the_message_later(lake: Lake, channel: Channel,
                                                                                 table_name: str) -> None:
    branch = reaudit_form_open(lake, channel, table_name)
    # the acknowledgement: an empty 200, no result of the work in it
    assert channel.submit(ALICE, "the suite was fixed (it was not)") == {"status": 200, "body": ""}
    sent = submission_about(channel, branch)
    assert sent is not None and (sent["status"], sent["answer"]) == (200, "")
    # the work, done later by the function: the re-audit (with Spark) still fails and the message says so
    message = wait_for(lambda: edited(channel, branch), "the alert updated")
    assert ":x: Re-audit asked by <@U0ALICE01> still fails: not_null(my_col_1) 2 nulls" in message["text"]
    print(f"acknowledged in {sent['seconds']:.3f} s; the message updated "
          f"{message['edited_at'] - sent['answered_at']:.1f} s after the acknowledgement")
    # the order, on the sink's one clock: answered first, the work's result after (an endpoint that did the work
    # before answering would have updated the message before its answer came)
    assert message["edited_at"] > sent["answered_at"]
    # the contract: the answer came within Slack's three seconds. Generous: the endpoint's part is a signature check
    # and one SendMessage on loopback (tens of milliseconds); it is the order above that shows the work was not done
    # before answering, this bound only that no slow step crept into the answer
    assert sent["seconds"] < SLACK_SECONDS, sent["seconds"]
    assert branch in lake.wap_branches() and lake.service.history(TableRef("wap", table_name)) == []
