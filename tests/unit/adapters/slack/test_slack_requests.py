"""Requests from Slack, without a network: the signature check (unsigned, stale, future, forged, malformed), the
payloads read as actions, the settings, the queue message the function gets, and the local channel page's rendering
(what a message says is shown as text, never run as markup)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from wap_ingest.adapters.slack.blocks import Pending
from wap_ingest.adapters.slack.incoming import (
    HttpRequest,
    RefusedRequestError,
    SignedRequest,
    check,
    interaction_from,
    verify,
)
from wap_ingest.bootstrap.slack_config import slack_actions_from
from wap_ingest.core.alerts import ActionKind
from wap_ingest.core.errors import BadInputError, ConfigError
from wap_ingest.entrypoints.inbound import Unreadable, message_from
from wap_stack.slack_page import channel_html, mrkdwn
from wap_stack.slack_workspace import SIGNING_SECRET, Workspace, read_ephemerals, read_messages

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_800_000_000


def signed(body: str, *, secret: str = SECRET, at: int = NOW) -> dict[str, str]:
    from slack_sdk.signature import SignatureVerifier

    stamp = str(at)
    return {"x-slack-request-timestamp": stamp,
            "x-slack-signature": str(SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body))}


def click_body(action_id: str = "wap.discard", value: str = "wap-t-0123456789abcdef-f1") -> str:
    payload = {"type": "block_actions", "user": {"id": "U0ALICE01", "username": "alice"}, "trigger_id": "1.2.3",
               "response_url": "https://hooks.slack.com/actions/T1/2/x",
               "container": {"type": "message", "message_ts": "1.5", "channel_id": "C0123ABCD"},
               "actions": [{"action_id": action_id, "value": value, "type": "button"}]}
    return urlencode({"payload": json.dumps(payload)})


def test_a_request_slack_signed_now_is_accepted() -> None:
    body = click_body()
    request = verify(signed(body), body, SECRET, now=NOW + 10)
    assert request.body == body and request.timestamp == str(NOW)


@pytest.mark.parametrize(("headers", "now", "reason"), [
    ({}, NOW, "unsigned"),
    ({"x-slack-request-timestamp": str(NOW)}, NOW, "unsigned"),
    ("stale", NOW + 301, "stale: signed 301 s ago"),
    ("stale", NOW - 400, "in the future"),
    ("other secret", NOW, "forged"),
    ("tampered", NOW, "forged"),
    ({"x-slack-request-timestamp": "12:00", "x-slack-signature": "v0=00"}, NOW, "malformed"),
])
def test_a_request_not_signed_by_slack_now_is_refused(headers: object, now: int, reason: str) -> None:
    body = click_body()
    if headers == "stale":
        headers = signed(body)
    elif headers == "other secret":
        headers = signed(body, secret="another-apps-secret")
    elif headers == "tampered":
        headers = signed(body.replace("discard", "publish_reviewed"))
    assert isinstance(headers, dict)
    with pytest.raises(RefusedRequestError, match=reason):
        verify(headers, body, SECRET, now=now)


def test_the_function_checks_a_forwarded_request_again_within_an_hour() -> None:
    body = click_body()
    request = SignedRequest(str(NOW), signed(body)["x-slack-signature"], body)
    assert check(request, SECRET, now=NOW + 3000, max_age=3600) == request
    with pytest.raises(RefusedRequestError, match="stale"):
        check(request, SECRET, now=NOW + 3700, max_age=3600)
    with pytest.raises(RefusedRequestError, match="forged"):
        check(SignedRequest(str(NOW), "v0=" + "0" * 64, body), SECRET, now=NOW, max_age=3600)


def test_a_click_and_a_sent_form_read_as_actions() -> None:
    click = interaction_from(click_body())
    assert (click.kind, click.action, click.target, click.person.actor) == (
        "block_actions", ActionKind.DISCARD, "wap-t-0123456789abcdef-f1", "alice (Slack U0ALICE01)")
    assert (click.channel, click.message_ts, click.trigger_id) == ("C0123ABCD", "1.5", "1.2.3")
    pending = Pending(ActionKind.PUBLISH_REVIEWED, "wap-t-0123456789abcdef-f1", "C0123ABCD", "1.5",
                      "https://hooks.slack.com/actions/T1/2/x")
    form = {"type": "view_submission", "user": {"id": "U0BOB0001", "username": "bob"},
            "view": {"callback_id": "wap.decision", "private_metadata": pending.metadata(),
                     "state": {"values": {"reason": {"reason": {"value": "looks fine"}}}}}}
    sent = interaction_from(urlencode({"payload": json.dumps(form)}))
    assert (sent.action, sent.target, sent.reason, sent.channel, sent.response_url) == (
        ActionKind.PUBLISH_REVIEWED, pending.target, "looks fine", "C0123ABCD", pending.response_url)
    other = interaction_from(click_body(action_id="another.apps.button"))
    assert other.action is None
    with pytest.raises(BadInputError):
        interaction_from("payload=not-json")
    with pytest.raises(BadInputError, match="names no user"):
        interaction_from(urlencode({"payload": json.dumps({"type": "block_actions"})}))


def test_a_http_api_event_gives_the_raw_body() -> None:
    import base64

    event = {"version": "2.0", "routeKey": "POST /slack/actions", "headers": {"X-Slack-Signature": "v0=1"},
             "body": base64.b64encode(b"payload=%7B%7D").decode(),
             "isBase64Encoded": True, "requestContext": {"http": {"method": "post"}}}
    request = HttpRequest.from_http_api(event)
    assert (request.method, request.body, request.headers) == ("POST", "payload=%7B%7D", {"x-slack-signature": "v0=1"})


def test_the_settings_of_acting_from_slack() -> None:
    assert slack_actions_from({}) is None
    on = slack_actions_from({"WAP_SLACK_SIGNING_SECRET_PARAMETER": "/wap/slack-signing-secret",
                             "WAP_SLACK_OPERATORS": "U0ALICE01 S0ONCALL1", "WAP_STACK_QUEUE_URL": "http://q"})
    assert on is not None and on.operators == {"U0ALICE01", "S0ONCALL1"} and on.queue_url == "http://q"
    assert "s3cr3t" not in repr(slack_actions_from({"WAP_SLACK_SIGNING_SECRET": "s3cr3t"}))
    with pytest.raises(ConfigError, match="both set"):
        slack_actions_from({"WAP_SLACK_SIGNING_SECRET": "x", "WAP_SLACK_SIGNING_SECRET_PARAMETER": "/p"})
    with pytest.raises(ConfigError, match="no Slack signing secret"):
        slack_actions_from({"WAP_SLACK_OPERATORS": "U0ALICE01"})


def _record(body: str) -> SQSRecord:
    return SQSRecord({"messageId": "m1", "receiptHandle": "r", "body": body, "eventSource": "aws:sqs",
                      "eventSourceARN": "arn:aws:sqs:us-east-1:1:q", "attributes": {"ApproximateReceiveCount": "1"}})


def test_the_queue_message_of_a_slack_action() -> None:
    request = SignedRequest(str(NOW), "v0=ab", click_body())
    assert message_from(_record(request.to_message()), 5).request == request
    unsigned = message_from(_record(json.dumps({"kind": "wap.slack-action", "body": "x"})), 5).request
    assert isinstance(unsigned, Unreadable) and "timestamp, signature and body" in unsigned.reason


def test_the_channel_page_shows_text_never_markup(tmp_path: Path) -> None:
    shown = mrkdwn("<script>alert(1)</script> &lt;b&gt; a & b `x<y` <@U0ALICE01> <javascript:alert(1)|x> "
                   "```a <b> &amp;```")
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "<span class=\"mention\">@alice</span>" in shown
    assert "href" not in shown and "<pre>a &lt;b&gt; &amp;</pre>" in shown
    workspace = Workspace(tmp_path / "alerts.jsonl")
    message = workspace.post("#wap-alerts", "hi", [{"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}}])
    workspace.update("#wap-alerts", message["ts"], "bye", [])
    workspace.ephemeral("#wap-alerts", "U0BOB0001", "only bob", [])
    [read] = read_messages(workspace.record)
    assert (read["text"], read["edited"]) == ("bye", True)
    assert [e["text"] for e in read_ephemerals(workspace.record, "U0BOB0001")] == ["only bob"]
    assert read_ephemerals(workspace.record, "U0ALICE01") == []
    assert "Only visible to you" in channel_html([read], read_ephemerals(workspace.record, "U0BOB0001"))


def test_the_workspace_signs_as_slack_does(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "alerts.jsonl")
    posted = workspace.post("#wap-alerts", "alert", [{"type": "actions", "block_id": "wap.actions", "elements": [
        {"type": "button", "action_id": "wap.discard", "value": "b", "text": {"type": "plain_text", "text": "D"}}]}])
    payload = workspace.click("U0ALICE01", "#wap-alerts", posted["ts"], "wap.discard")
    body = urlencode({"payload": json.dumps(payload)})
    interaction = interaction_from(body)
    assert (interaction.action, interaction.target, interaction.message_ts) == (ActionKind.DISCARD, "b", posted["ts"])
    assert workspace.open_view(str(payload["trigger_id"]), {"type": "modal", "blocks": []}) is None
    assert workspace.open_view(str(payload["trigger_id"]), {"type": "modal"}) == "invalid_trigger_id"  # once only
    late = workspace.click("U0ALICE01", "#wap-alerts", posted["ts"], "wap.discard")
    workspace.triggers[str(late["trigger_id"])].expires = time.monotonic() - 1
    assert workspace.open_view(str(late["trigger_id"]), {"type": "modal"}) == "expired_trigger_id"
    assert verify(signed(body, secret=SIGNING_SECRET, at=int(time.time())), body, SIGNING_SECRET, now=time.time())


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_plain_text_readers_get_plain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The log without Slack and `wap stack alerts` show an alert as a person reads it; Slack gets the escaped form."""
    from wap_ingest.adapters.slack import client as slack
    from wap_ingest.adapters.slack.client import LogNotifier
    from wap_ingest.core.alerts import alert_for_outcome
    from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject
    from wap_ingest.entrypoints.cli import main

    outcome = IngestOutcome(SourceObject("src", "t/a&b`c.csv"), OutcomeStatus.INVALID, table="wap.t",
                            message="a <bad> file. Fix: upload it again")
    alert = alert_for_outcome(outcome)
    assert alert is not None and "a &lt;bad&gt; file" in alert.text
    kept = _Kept()  # on the adapter's own logger: the function's logging setup may stop it propagating
    slack.log.addHandler(kept)
    try:
        LogNotifier().notify(alert)
    finally:
        slack.log.removeHandler(kept)
    [line] = kept.lines
    assert "a <bad> file" in line and "wap ingest 's3://src/t/a&b`c.csv'" in line
    assert "&lt;" not in line and "&amp;" not in line
    workspace = Workspace(tmp_path / "alerts.jsonl")
    posted = workspace.post("#wap-alerts", alert.text, [])
    workspace.update("#wap-alerts", posted["ts"], alert.text + "\n\n>>> Retried by <@U0ALICE01>: invalid again", [])
    monkeypatch.setenv("WAP_STACK_DIR", str(tmp_path))
    assert main(["stack", "alerts"]) == 0
    shown = capsys.readouterr().out
    assert "(edited)" in shown and "a <bad> file. Fix: upload it again" in shown and "&lt;" not in shown
    assert main(["stack", "alerts", "--json"]) == 0
    assert "a &lt;bad&gt; file" in capsys.readouterr().out  # as Slack got it
