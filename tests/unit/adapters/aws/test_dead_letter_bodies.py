"""A dead letter's body, as `wap dlq list` and the alarm's Show may show it (adapters/aws/dead_letters.py): by allow
list. Every kind of message the ingest queue carries, made as its sender makes it (a click and a sent form as the local
Slack workspace posts them and the endpoint forwards them, a signed publish request, S3's and EventBridge's
notifications), and something nobody foresaw: no signature, token, response URL, form metadata or unknown field is
shown, in the JSON or in the one-line listing. Over moto through the CLI:
tests/integration/adapters/aws/test_dead_letters.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.credentials import ReadOnlyCredentials

from wap_ingest.adapters.aws.dead_letters import DeadLetter, shown_body, summary_of
from wap_ingest.adapters.aws.publish_requests import StsRequesters
from wap_ingest.adapters.slack.blocks import Pending, modal_for
from wap_ingest.adapters.slack.incoming import SignedRequest
from wap_ingest.core.alerts import ActionKind
from wap_ingest.core.publish_requests import PublishRequest
from wap_stack.slack_workspace import Workspace, read_messages

SESSION = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"


def forwarded(payload: dict[str, Any]) -> str:
    """The ingest queue's message for a click or form, as the endpoint forwards it (signed request and all)."""
    return SignedRequest("1800000000", "v0=" + "a1" * 32, urlencode({"payload": json.dumps(payload)})).to_message()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    made = Workspace(tmp_path / "alerts.jsonl", base_url="http://127.0.0.1:1")
    made.post("#wap-alerts", "alert", [{"type": "actions", "block_id": "wap.actions", "elements": [
        {"type": "button", "action_id": "wap.redrive", "value": "wap-events-dlq",
         "text": {"type": "plain_text", "text": "Redrive"}},
        {"type": "button", "action_id": "wap.discard", "value": "wap-t-0123456789abcdef-f1",
         "text": {"type": "plain_text", "text": "Discard"}}]}])
    return made


def secrets_in(payload: dict[str, Any]) -> list[str]:
    found = [str(payload.get("response_url", "")), str(payload.get("trigger_id", "")),
             str(payload.get("token", "")), "a1" * 32]
    if "view" in payload:
        found.append(payload["view"]["private_metadata"])
        found.append(json.loads(payload["view"]["private_metadata"])["r"])
    return [f for f in found if f]


def test_a_forwarded_click_shows_who_did_what_and_none_of_its_secrets(workspace: Workspace) -> None:
    [message] = read_messages(workspace.record)
    payload = workspace.click("U0ALICE01", "#wap-alerts", message["ts"], "wap.redrive")
    body = forwarded(payload)
    shown = shown_body(body)
    assert shown == {"kind": "wap.slack-action", "signature": "(not shown)", "timestamp": "1800000000",
                     "interaction": {"type": "block_actions", "user": "U0ALICE01", "name": "alice",
                                     "action": "redrive", "target": "wap-events-dlq", "channel": message["channel_id"],
                                     "message_ts": message["ts"]}}
    letter = DeadLetter("m1", 3, "1", (), body)
    everything = json.dumps(letter.to_dict()) + letter.line + repr(letter)
    assert [s for s in secrets_in(payload) if s in everything] == []
    assert letter.line == "m1  received 3x  Slack action redrive on wap-events-dlq by U0ALICE01"


def test_a_forwarded_form_shows_its_reason_and_not_the_response_url_in_its_metadata(workspace: Workspace) -> None:
    [message] = read_messages(workspace.record)
    click = workspace.click("U0BOB0001", "#wap-alerts", message["ts"], "wap.discard")
    pending = Pending(ActionKind.DISCARD, "wap-t-0123456789abcdef-f1", "C1", "1.5", str(click["response_url"]))
    assert workspace.open_view(str(click["trigger_id"]), modal_for(pending)) is None
    payload = workspace.submit("U0BOB0001", "the producer resends it")
    body = forwarded(payload)
    shown = shown_body(body)["interaction"]
    assert (shown["action"], shown["target"], shown["reason"], shown["user"]) == (
        "discard", "wap-t-0123456789abcdef-f1", "the producer resends it", "U0BOB0001")
    assert [s for s in secrets_in(payload) if s in json.dumps(shown_body(body)) + summary_of(body)] == []


def test_a_publish_request_shows_what_it_asks_and_not_its_proof() -> None:
    credentials = ReadOnlyCredentials("ASIAEXAMPLEEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", SESSION)
    request = StsRequesters("https://sts.us-east-1.amazonaws.com", "us-east-1", timeout=1,
                            credentials=lambda: credentials).sign(
        PublishRequest("wap-orders-0123456789abcdef-1a2b3c4d", "nulls expected", reaudit=False, queue="wap-events"))
    body = json.loads(request.to_body()) | {"token": "eyJhbGciOiJSUzI1NiJ9.old.bearer", "extra": "who knows"}
    shown = shown_body(json.dumps(body))
    assert request.proof is not None
    for secret in (SESSION, request.proof.authorization, "eyJhbGciOiJSUzI1NiJ9.old.bearer", "who knows"):
        assert secret not in json.dumps(shown) + summary_of(json.dumps(body))
    assert (shown["branch"], shown["reason"], shown["request_id"], shown["token"]) == (
        "wap-orders-0123456789abcdef-1a2b3c4d", "nulls expected", request.request_id, "(not shown)")


def test_an_s3_or_eventbridge_notification_shows_its_objects_only() -> None:
    s3 = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "eventTime": "2026-11-27T10:00:00Z",
                       "userIdentity": {"principalId": "AWS:AIDAEXAMPLEPRINCIPAL"},
                       "requestParameters": {"sourceIPAddress": "203.0.113.9"},
                       "responseElements": {"x-amz-request-id": "REQ", "x-amz-id-2": "HOSTID"},
                       "s3": {"bucket": {"name": "inbox", "arn": "arn:aws:s3:::inbox"},
                              "object": {"key": "orders/a.parquet", "size": 10, "eTag": "e1", "versionId": "v1"}}}]}
    shown = shown_body(json.dumps(s3))
    assert shown == {"kind": "s3 notification", "records": [
        {"event": "ObjectCreated:Put", "time": "2026-11-27T10:00:00Z", "bucket": "inbox", "key": "orders/a.parquet",
         "size": 10, "etag": "e1", "version_id": "v1"}]}
    assert summary_of(json.dumps(s3)) == "s3://inbox/orders/a.parquet"
    bridge = {"source": "aws.s3", "detail-type": "Object Created", "account": "123456789012",
              "detail": {"bucket": {"name": "inbox"}, "object": {"key": "k.csv", "size": 1, "etag": "e"},
                         "requester": "123456789012", "source-ip-address": "203.0.113.9"}}
    assert "203.0.113.9" not in json.dumps(shown_body(json.dumps(bridge)))
    assert summary_of(json.dumps(bridge)) == "s3://inbox/k.csv (EventBridge)"


TOKEN = "xoxb-1234-secret-token"


@pytest.mark.parametrize("body", ["poison " + TOKEN, json.dumps({"token": TOKEN}),
                                  json.dumps({"kind": "wap.slack-action", "body": 7, "token": TOKEN}),
                                  json.dumps([{"response_url": TOKEN}])])
def test_anything_else_shows_its_size_and_a_digest_only(body: str) -> None:
    shown, line = shown_body(body), summary_of(body)
    assert TOKEN not in json.dumps(shown) + line
    assert shown.get("content", shown.get("interaction")) == "(not shown)"
