"""What the interactivity endpoint answers (entrypoints/slack_interactivity.py), without a network: a malformed
request gets a 400 or 401 with a one-line reason, never a 500, whatever its headers hold (an HTTP API hands them to
the handler as text: `'²'.isdigit()` is true); a failure on the service's side shows the person a short line and a
reference, never its text (the log has it under that reference); someone off the allow list is told only that they
may not act. The same over HTTP through the stack's endpoint: tests/integration/entrypoints/test_slack_once.py."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from wap_ingest.adapters.aws.seen_requests import SeenRequests
from wap_ingest.adapters.slack.actions import SlackReplies
from wap_ingest.adapters.slack.blocks import Pending
from wap_ingest.core.alerts import ActionKind
from wap_ingest.core.errors import ConfigError, ObjectStoreUnavailableError, WapError
from wap_ingest.core.interactions import Asked, Operators, Person, UseCases, answer
from wap_ingest.entrypoints import slack_interactivity
from wap_ingest.entrypoints.slack_interactivity import Endpoint

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
INTERNAL = "https://sqs.us-east-1.amazonaws.com/123456789012/wap-events"  # what no person should see


class Replies(SlackReplies):
    def __init__(self) -> None:  # no client: nothing here reaches Slack
        self.private: list[str] = []
        self.forms: list[str] = []

    def reply(self, response_url: str | None, text: str) -> bool:
        self.private.append(text)
        return True

    def open_form(self, trigger_id: str, view: Any) -> None:
        self.forms.append(trigger_id)


class Seen(SeenRequests):
    def __init__(self) -> None:
        self.signatures: set[str] = set()

    def first_time(self, signature: str, timestamp: str) -> bool:
        new = signature not in self.signatures
        self.signatures.add(signature)
        return new


def failing_queue(message: str) -> None:
    raise ObjectStoreUnavailableError(f"SQS could not be reached at {INTERNAL} (handing a Slack action to the "
                                      f"function). Fix: check WAP_QUEUE_URL")


class Wired:
    def __init__(self, *, forward: Any = None, secret: Any = None) -> None:
        self.replies, self.forwarded = Replies(), []
        self.endpoint = Endpoint(secret=secret or (lambda: SECRET), seen=Seen,
                                 operators=lambda: Operators(frozenset({"U0ALICE01"}), lambda _g: frozenset()),
                                 replies=lambda: self.replies, forward=forward or self.forwarded.append)


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> Wired:
    made = Wired()
    monkeypatch.setattr(slack_interactivity, "_endpoint", [made.endpoint])  # the process's endpoint, wired so
    return made


def body_of(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def click(user: str = "U0ALICE01", action: str = "wap.show_dead_letters") -> str:
    return body_of({"type": "block_actions", "user": {"id": user, "username": user.lower()}, "trigger_id": "1.2.3",
                    "response_url": "https://hooks.slack.com/actions/T1/2/x",
                    "container": {"type": "message", "message_ts": "1.5", "channel_id": "C0123ABCD"},
                    "actions": [{"action_id": action, "value": "wap-events-dlq", "type": "button"}]})


def form(user: str = "U0ALICE01") -> str:
    pending = Pending(ActionKind.DISCARD, "wap-t-0123456789abcdef-f1", "C0123ABCD", "1.5",
                      "https://hooks.slack.com/actions/T1/2/x")
    return body_of({"type": "view_submission", "user": {"id": user, "username": user.lower()}, "trigger_id": "9.9",
                    "view": {"id": "V1", "callback_id": "wap.decision", "private_metadata": pending.metadata(),
                             "state": {"values": {"reason": {"reason": {"value": "the producer resends it"}}}}}})


def signed(body: str, at: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    return {"X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": str(SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body))}


def event(body: str, headers: Any, **more: Any) -> dict[str, Any]:
    """An HTTP API's event (payload format 2.0): headers as text, as the route hands them to the function."""
    return {"version": "2.0", "routeKey": "POST /slack/actions", "rawPath": "/slack/actions", "body": body,
            "isBase64Encoded": False, "headers": headers, "requestContext": {"http": {"method": "POST"}}} | more


def one_line(answer: dict[str, Any]) -> str:
    text = str(answer["body"])
    assert "\n" not in text and "Traceback" not in text and len(text) < 300, text
    return text


STAMP, SIGNATURE = "x-slack-request-timestamp", "x-slack-signature"


@pytest.mark.parametrize(("header", "value"), [
    (STAMP, "²"), (STAMP, "1²"), (STAMP, "\uff11\uff18" + "\uff10" * 8), (STAMP, "٣٤٥"), (STAMP, "-1"), (STAMP, "1e9"),
    (STAMP, "1_800_000_000"), (STAMP, "1800000000 1"), (STAMP, "9" * 400), (STAMP, "1800000000\x00"),
    (SIGNATURE, "v0=" + "é" * 64), (SIGNATURE, "v0=" + "²" * 64), (SIGNATURE, "v0=" + "A" * 64),
    (SIGNATURE, "v1=" + "0" * 64), (SIGNATURE, "v0=" + "0" * 65), (SIGNATURE, "v0=" + "0" * 10_000),
], ids=lambda value: value if len(value) < 16 else f"{value[:8]}...{len(value)}")
def test_a_malformed_header_is_refused_in_one_line_never_a_500(wired: Wired, header: str, value: str) -> None:
    body = click()
    headers = {k.lower(): v for k, v in signed(body).items()} | {header: value}
    answer = slack_interactivity.handler(event(body, headers), None)
    assert answer["statusCode"] == 401, answer
    assert one_line(answer).startswith("refused: malformed: X-Slack-")
    assert wired.forwarded == []


@pytest.mark.parametrize("made", [
    {"isBase64Encoded": True, "body": "not base64 at all!"},
    {"headers": "X-Slack-Signature: v0=1"},
    {"headers": None, "requestContext": "POST"},
    {"body": "payload=" + "%7B%22type%22%3A%5B%5D%7D"},
])
def test_a_malformed_event_or_body_is_refused_in_one_line(wired: Wired, made: dict[str, Any]) -> None:
    body = made.get("body", click())
    answer = slack_interactivity.handler(event(body, {k.lower(): v for k, v in signed(body).items()}) | made, None)
    assert answer["statusCode"] in (400, 401), answer
    assert one_line(answer).startswith("refused: ")


def test_a_payload_of_another_shape_is_refused_as_unreadable(wired: Wired) -> None:
    body = body_of({"type": "view_submission", "user": {"id": "U0ALICE01"},
                    "view": {"callback_id": "wap.decision", "private_metadata": Pending(
                        ActionKind.DISCARD, "b", None, None, None).metadata(), "state": {"values": ["x"]}}})
    answer = slack_interactivity.handler(event(body, {k.lower(): v for k, v in signed(body).items()}), None)
    assert answer["statusCode"] == 400 and one_line(answer).startswith("refused: the interaction payload")


def test_a_failure_on_our_side_shows_a_reference_and_logs_the_error_under_it(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    made = Wired(forward=failing_queue)
    monkeypatch.setattr(slack_interactivity, "_endpoint", [made.endpoint])
    slack_interactivity.log.addHandler(caplog.handler)  # the function's logging setup may stop propagation
    try:
        clicked = slack_interactivity.handler(event(click(), {k.lower(): v for k, v in signed(click()).items()}),
                                              None)
        sent = slack_interactivity.handler(event(form(), {k.lower(): v for k, v in signed(form()).items()}), None)
    finally:
        slack_interactivity.log.removeHandler(caplog.handler)
    assert clicked["statusCode"] == 200
    [told] = made.replies.private
    shown = json.loads(sent["body"])["errors"]["reason"]
    for text in (told, shown):
        assert INTERNAL not in text and "WAP_QUEUE_URL" not in text and "SQS" not in text, text
        assert text.startswith("Nothing done: something failed on our side") and "reference " in text
    logged = {getattr(r, "correlation_id", None): r.getMessage() for r in caplog.records if "not served" in
              r.getMessage()}
    for text in (told, shown):  # each person's reference names the log line with the error
        assert INTERNAL in logged[text.rsplit("reference ", 1)[1].rstrip(").")]


def test_the_endpoint_that_cannot_serve_answers_500_with_a_reference_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_secret() -> str:
        raise ConfigError("the parameter /wap/slack-signing-secret could not be read: AccessDenied for "
                          "arn:aws:iam::123456789012:role/wap-slack. Fix: grant ssm:GetParameter")

    monkeypatch.setattr(slack_interactivity, "_endpoint", [Wired(secret=no_secret).endpoint])
    answer = slack_interactivity.handler(event(click(), {k.lower(): v for k, v in signed(click()).items()}), None)
    assert answer["statusCode"] == 500
    text = one_line(answer)
    assert "arn:aws" not in text and "/wap/" not in text and "reference " in text


def test_someone_off_the_allow_list_sees_only_that_they_may_not_act(wired: Wired) -> None:
    body = click(user="U0MALLORY")
    assert slack_interactivity.handler(event(body, {k.lower(): v for k, v in signed(body).items()}), None)[
        "statusCode"] == 200
    assert wired.replies.private == ["Nothing done: <@U0MALLORY> may not act on WAP alerts."]
    body = form(user="U0MALLORY")
    sent = slack_interactivity.handler(event(body, {k.lower(): v for k, v in signed(body).items()}), None)
    assert json.loads(sent["body"])["errors"]["reason"] == "Nothing done: <@U0MALLORY> may not act on WAP alerts."
    assert wired.forwarded == []


def test_an_action_that_fails_on_our_side_is_answered_with_a_reference_not_its_text() -> None:
    def dead_letters(queue: str) -> list[str]:
        raise ConfigError(f"SQS has no such resource finding the dead-letter queue {queue} at {INTERNAL}. Fix: check "
                          f"the alarm's QueueName")

    cases = UseCases(publish=_never, discard=_never, report=_never, retry=_never, dead_letters=dead_letters,
                     redrive=_never)
    got = answer(Asked(ActionKind.SHOW_DEAD_LETTERS, "wap-events-dlq", Person("U0ALICE01", "alice"), ref="m-42"),
                 cases)
    assert got.line == ":x: Listing the dead letters asked by <@U0ALICE01> failed on our side; nothing was done " \
                       "(reference `m-42`)."
    assert got.private == "Nothing done: something failed on our side. Try again in a moment (reference m-42)."
    assert got.logged is not None and INTERNAL in got.logged  # for the log, under the same reference


def _never(*_args: Any) -> Any:
    raise WapError("not called")
