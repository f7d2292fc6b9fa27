"""Requests from Slack's interactivity: verified, remembered, read.

- `verify`: Slack signs each request with the app's signing secret: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of
  `v0:<X-Slack-Request-Timestamp>:<raw body>` (slack-sdk's `SignatureVerifier` computes it). Refused, each with its
  reason: a request without the two headers (unsigned), with a header not in Slack's own form (malformed: the
  timestamp is 1 to 12 ASCII digits, the signature `v0=` and 64 lower-case hex digits; a header arrives as text, and
  `'²'.isdigit()` is true), with a timestamp older than five minutes (stale) or as far in the future, or whose
  signature does not match (forged, or signed with another app's secret).
- a request is served once: its signature is recorded in the lake bucket (adapters/aws/seen_requests.py).
- `interaction_from`: the form-encoded `payload=` body as the action it asks for (`Interaction`).
- `SignedRequest`: a verified request as it travels to the function (the ingest queue), verified again there; its
  `action_id` (the digest of the body Slack signed) is what the function records once before it acts (core.once).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

from wap_ingest.adapters.slack.blocks import DECISION_CALLBACK, Pending, kind_from, reason_in
from wap_ingest.core.alerts import ActionKind
from wap_ingest.core.errors import BadInputError, WapError
from wap_ingest.core.interactions import Person

KIND = "wap.slack-action"  # a verified request on the ingest queue
MAX_AGE_SECONDS = 300  # Slack's own advice: refuse requests signed more than five minutes ago
FORWARDED_MAX_AGE_SECONDS = 3600  # the function serves a forwarded request within this (its retries included)
# the headers' forms, by allow list (ASCII only: `str.isdigit` and `\d` accept other scripts' digits)
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


class RefusedRequestError(WapError):
    """The request is not Slack's, or not any more: answered 401 with this reason, nothing done."""


@dataclass(frozen=True)
class HttpRequest:
    method: str
    headers: Mapping[str, str]  # names lower-cased
    body: str

    @classmethod
    def from_http_api(cls, event: Mapping[str, Any]) -> HttpRequest:
        """An API Gateway HTTP API's Lambda event (payload format 2.0, as a function URL's): the raw body, decoded
        if base64. BadInputError when the body is not what the event says it is."""
        body = event.get("body") or ""
        if event.get("isBase64Encoded"):
            try:
                body = base64.b64decode(str(body), validate=True).decode("utf-8", errors="replace")
            except (binascii.Error, ValueError) as exc:
                raise BadInputError("the request's body is marked base64 and is not base64") from exc
        given = event.get("headers")
        headers = {str(k).lower(): str(v) for k, v in given.items()} if isinstance(given, Mapping) else {}
        context = event.get("requestContext")
        http = context.get("http") if isinstance(context, Mapping) else None
        method = str(http.get("method", "POST")) if isinstance(http, Mapping) else "POST"
        return cls(method.upper(), headers, str(body))


@dataclass(frozen=True)
class SignedRequest:
    timestamp: str
    signature: str
    body: str

    def to_message(self) -> str:
        return json.dumps({"kind": KIND, "timestamp": self.timestamp, "signature": self.signature, "body": self.body})

    @property
    def action_id(self) -> str:
        """The action the request asks, as the function records it once (core.once): the SHA-256 of the body Slack
        signed. Slack makes every interaction a body of its own (a click carries its own `trigger_id` and
        `actions[].action_ts`, a sent form its view's `id` and `state`), so two clicks are two actions, even on the
        same message (`container.message_ts`) by the same person; a replay, a redelivery or a re-sent dead letter
        carries the very body, whatever timestamp and signature it comes with, so it is the same action."""
        return "slack-" + hashlib.sha256(self.body.encode()).hexdigest()

    @classmethod
    def from_message(cls, data: Mapping[str, Any]) -> SignedRequest:
        values = [data.get(k) for k in ("timestamp", "signature", "body")]
        if not all(isinstance(v, str) and v for v in values):
            raise BadInputError("a Slack action message needs its timestamp, signature and body; it was not sent by "
                                "the interactivity endpoint.")
        return cls(*(str(v) for v in values))


def verify(headers: Mapping[str, str], body: str, secret: str, *, now: float,
           max_age: float = MAX_AGE_SECONDS) -> SignedRequest:
    """The request as signed by Slack, or RefusedRequestError saying why not."""
    timestamp = headers.get("x-slack-request-timestamp", "").strip()
    signature = headers.get("x-slack-signature", "").strip()
    if not timestamp or not signature:
        raise RefusedRequestError("unsigned: the request has no X-Slack-Signature and X-Slack-Request-Timestamp")
    return check(SignedRequest(timestamp, signature, body), secret, now=now, max_age=max_age)


def check(request: SignedRequest, secret: str, *, now: float, max_age: float) -> SignedRequest:
    """The request's headers in Slack's own form, its age within `max_age` and its signature the app's; otherwise
    RefusedRequestError with a one-line reason."""
    if not _TIMESTAMP.fullmatch(request.timestamp):
        raise RefusedRequestError("malformed: X-Slack-Request-Timestamp is not a time (1 to 12 ASCII digits: seconds "
                                  "since the epoch)")
    if not _SIGNATURE.fullmatch(request.signature):
        raise RefusedRequestError("malformed: X-Slack-Signature is not Slack's (v0= and 64 lower-case hex digits)")
    age = now - int(request.timestamp)
    if age > max_age:
        raise RefusedRequestError(f"stale: signed {age:.0f} s ago; requests older than {max_age:.0f} s are refused")
    if -age > max_age:
        raise RefusedRequestError(f"timestamp {-age:.0f} s in the future; the clocks disagree or it is forged")
    expected = SignatureVerifier(secret).generate_signature(timestamp=request.timestamp, body=request.body) or ""
    if not hmac.compare_digest(expected, request.signature):
        raise RefusedRequestError("forged: the signature does not match the app's signing secret")
    return request


@dataclass(frozen=True)
class Interaction:
    """What a request from Slack asks. `kind`: Slack's payload type (block_actions: a click; view_submission: a
    form sent; anything else is acknowledged and ignored)."""

    kind: str
    person: Person
    action: ActionKind | None = None
    target: str | None = None
    trigger_id: str | None = None
    response_url: str | None = None
    channel: str | None = None
    message_ts: str | None = None
    reason: str | None = None


def _text(data: Mapping[str, Any], *path: str) -> str | None:
    value: Any = data
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) and value else None


def interaction_from(body: str) -> Interaction:
    """The `payload=` form field, read; BadInputError when it is not an interaction payload in Slack's form."""
    try:
        return _interaction_in(body)
    except (AttributeError, TypeError, KeyError) as exc:  # a field of another type than Slack's
        raise BadInputError(f"the interaction payload is not in Slack's form ({type(exc).__name__})") from exc


def _interaction_in(body: str) -> Interaction:
    try:
        payload = json.loads(parse_qs(body, strict_parsing=False).get("payload", [""])[-1])
    except ValueError as exc:
        raise BadInputError(f"the request's payload is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise BadInputError("the request has no interaction payload (a form field `payload` with a JSON object)")
    user = _text(payload, "user", "id")
    if user is None:
        raise BadInputError("the interaction names no user")
    person = Person(user, _text(payload, "user", "username") or _text(payload, "user", "name") or user)
    kind = str(payload.get("type") or "")
    if kind == "block_actions":
        actions = payload.get("actions") or []
        first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        return Interaction(
            kind, person, kind_from(str(first.get("action_id") or "")), _text(first, "value"),
            _text(payload, "trigger_id"), _text(payload, "response_url"),
            _text(payload, "container", "channel_id") or _text(payload, "channel", "id"),
            _text(payload, "container", "message_ts") or _text(payload, "message", "ts"))
    if kind == "view_submission" and _text(payload, "view", "callback_id") == DECISION_CALLBACK:
        pending = Pending.from_metadata(_text(payload, "view", "private_metadata") or "")
        if pending is None:
            raise BadInputError("the submitted form carries no action (private_metadata)")
        return Interaction(kind, person, pending.action, pending.target, _text(payload, "trigger_id"),
                           pending.response_url, pending.channel, pending.message_ts,
                           reason_in(payload["view"].get("state") or {}))
    return Interaction(kind, person)
