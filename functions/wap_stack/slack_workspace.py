"""The local Slack workspace the sink plays: its people, its channel's messages, the forms open for each person, and
the interaction requests it sends to the app's interactivity endpoint, as Slack sends them.

People: alice (an operator by her user id), bob (an operator as a member of the on-call user group) and mallory (not
on the allow list). `LOCAL_OPERATORS` is the stack's WAP_SLACK_OPERATORS; `SIGNING_SECRET` is the local app's signing
secret (not a secret: it signs requests on loopback only), stored by the stack in moto's SSM as Slack's would be in
AWS (`install`).

A click or a sent form becomes Slack's payload (`block_actions`, `view_submission`), form-encoded as `payload=<JSON>`,
signed (`X-Slack-Request-Timestamp`, `X-Slack-Signature: v0=HMAC-SHA256("v0:<timestamp>:<body>")`) and posted to the
interactivity URL; a click's `trigger_id` opens a form for three seconds, and its `response_url` takes up to five
replies for thirty minutes, as Slack's do.

The channel is a JSON-lines record: each message as posted, then each update of it and each private (ephemeral)
message as lines of their own; `read_messages` folds the updates into the messages.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

TEAM_ID = "T0WAPLOCAL"
APP_ID = "A0WAPLOCAL"
USERS = {"U0ALICE01": "alice", "U0BOB0001": "bob", "U0MALLORY": "mallory"}
GROUPS = {"S0ONCALL1": ("U0BOB0001",)}  # @data-oncall
LOCAL_OPERATORS = "U0ALICE01,S0ONCALL1"
SIGNING_SECRET = "local-signing-secret-not-a-secret"  # the loopback stack's, like SINK_TOKEN
SIGNING_SECRET_PARAMETER = "/wap/slack-signing-secret"
TRIGGER_SECONDS = 3.0
RESPONSE_URL_SECONDS, RESPONSE_URL_USES = 1800.0, 5


def install(ssm: Any) -> dict[str, str]:
    """Store the local app's signing secret as a SecureString (as setup_aws.py does in AWS); the variables that
    configure acting on alerts from the local channel."""
    ssm.put_parameter(Name=SIGNING_SECRET_PARAMETER, Value=SIGNING_SECRET, Type="SecureString", Overwrite=True)
    return {"WAP_SLACK_SIGNING_SECRET_PARAMETER": SIGNING_SECRET_PARAMETER, "WAP_SLACK_OPERATORS": LOCAL_OPERATORS}


def channel_id_for(name: str) -> str:
    """Slack's id of a channel: the sink names `#wap-alerts` C + 8 letters derived from the name."""
    if name.startswith("C") and name.isalnum():
        return name
    return "C" + hashlib.sha1(name.encode()).hexdigest()[:8].upper()


def read_lines(record: Path) -> list[dict[str, Any]]:
    if not record.is_file():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_messages(record: Path) -> list[dict[str, Any]]:
    """The channel's messages as they read now: each update applied (`edited`, and `edited_at`: when, in seconds
    since the epoch), private messages left out."""
    messages: dict[tuple[str, str], dict[str, Any]] = {}
    for line in read_lines(record):
        if line.get("ephemeral"):
            continue
        key = (line.get("channel_id") or channel_id_for(str(line.get("channel"))), str(line["ts"]))
        if line.get("update"):
            if key in messages:
                messages[key] |= {"text": line.get("text", ""), "blocks": line.get("blocks", []), "edited": True,
                                  "edited_at": line.get("at")}
            continue
        messages[key] = dict(line)
    return list(messages.values())


def read_ephemerals(record: Path, user: str | None = None) -> list[dict[str, Any]]:
    """The private messages, to `user` or to anyone."""
    return [line for line in read_lines(record) if line.get("ephemeral") and user in (None, line.get("user"))]


@dataclass
class _Trigger:
    user: str
    expires: float


@dataclass
class _ResponseUrl:
    user: str
    channel_id: str
    expires: float
    uses: int = 0


@dataclass
class Workspace:
    record: Path
    interactivity_url: str | None = None
    base_url: str = ""  # http://127.0.0.1:<port>: where response URLs point
    lock: threading.Lock = field(default_factory=threading.Lock)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # the form open for each user
    triggers: dict[str, _Trigger] = field(default_factory=dict)
    responses: dict[str, _ResponseUrl] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)  # the last requests posted to the app, and its answers

    # --- the Web API the app calls ----------------------------------------------------------------------

    def append(self, line: dict[str, Any]) -> None:
        with self.lock, self.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    def post(self, channel: str, text: str, blocks: list[Any]) -> dict[str, Any]:
        message = {"channel": channel, "channel_id": channel_id_for(channel), "text": text, "blocks": blocks,
                   "ts": f"{time.time():.6f}"}
        self.append(message)
        return message

    def find(self, channel: str, ts: str) -> dict[str, Any] | None:
        wanted = channel_id_for(channel)
        return next((m for m in read_messages(self.record) if m["channel_id"] == wanted and m["ts"] == ts), None)

    def update(self, channel: str, ts: str, text: str, blocks: list[Any]) -> str | None:
        """None, or Slack's error code."""
        if self.find(channel, ts) is None:
            return "message_not_found"
        self.append({"update": True, "channel_id": channel_id_for(channel), "ts": ts, "text": text, "blocks": blocks,
                     "at": time.time()})
        return None

    def ephemeral(self, channel: str, user: str, text: str, blocks: list[Any]) -> dict[str, Any]:
        line = {"ephemeral": True, "channel_id": channel_id_for(channel), "user": user, "text": text,
                "blocks": blocks, "ts": f"{time.time():.6f}"}
        self.append(line)
        return line

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> str | None:
        """None, or Slack's error code (a trigger is good once, for three seconds)."""
        with self.lock:
            trigger = self.triggers.pop(trigger_id, None)
            if trigger is None:
                return "invalid_trigger_id"
            if time.monotonic() > trigger.expires:
                return "expired_trigger_id"
            self.views[trigger.user] = view | {"id": "V" + secrets.token_hex(5).upper(),
                                               "hash": secrets.token_hex(8)}
        return None

    def respond(self, response_id: str, message: dict[str, Any]) -> str | None:
        """A reply through a click's response_url; None, or why it was refused."""
        with self.lock:
            url = self.responses.get(response_id)
            if url is None or time.monotonic() > url.expires or url.uses >= RESPONSE_URL_USES:
                return "expired_url"
            url.uses += 1
        if message.get("response_type") == "in_channel" or message.get("replace_original"):
            return "unsupported: the app only sends private replies here"
        self.ephemeral(url.channel_id, url.user, str(message.get("text", "")), list(message.get("blocks") or []))
        return None

    # --- what a person does in the channel page -----------------------------------------------------------

    def _response_url(self, user: str, channel_id: str) -> str:
        ident = secrets.token_hex(12)
        with self.lock:
            self.responses[ident] = _ResponseUrl(user, channel_id, time.monotonic() + RESPONSE_URL_SECONDS)
        return f"{self.base_url}/response/{ident}"

    def click(self, user: str, channel: str, ts: str, action_id: str) -> dict[str, Any]:
        """The `block_actions` payload of `user` clicking the button `action_id` on message `ts`."""
        message = self.find(channel, ts)
        if message is None:
            raise LookupError(f"no message {ts} in {channel}")
        button, block_id = _button(message["blocks"], action_id)
        trigger = _trigger_id()
        with self.lock:
            self.triggers[trigger] = _Trigger(user, time.monotonic() + TRIGGER_SECONDS)
        cid = message["channel_id"]
        return {
            "type": "block_actions", "user": _user(user), "api_app_id": APP_ID, "token": "deprecated",
            "container": {"type": "message", "message_ts": ts, "channel_id": cid, "is_ephemeral": False},
            "trigger_id": trigger, "team": {"id": TEAM_ID, "domain": "wap-local"},
            "channel": {"id": cid, "name": str(message["channel"]).lstrip("#")},
            "message": {k: message[k] for k in ("text", "blocks", "ts")} | {"type": "message"},
            "response_url": self._response_url(user, cid),
            "actions": [{"type": "button", "action_id": action_id, "block_id": block_id, "text": button.get("text"),
                         "value": button.get("value"), "style": button.get("style"),
                         "action_ts": f"{time.time():.6f}"}],
        }

    def submit(self, user: str, reason: str) -> dict[str, Any]:
        """The `view_submission` payload of `user` sending the open form with `reason` typed in."""
        view = self.views.get(user)
        if view is None:
            raise LookupError(f"{USERS.get(user, user)} has no form open")
        values = {b["block_id"]: {b["element"]["action_id"]: {"type": "plain_text_input", "value": reason}}
                  for b in view.get("blocks", []) if b.get("type") == "input"}
        return {"type": "view_submission", "user": _user(user), "api_app_id": APP_ID, "token": "deprecated",
                "team": {"id": TEAM_ID, "domain": "wap-local"}, "trigger_id": _trigger_id(),
                "view": view | {"state": {"values": values}, "team_id": TEAM_ID, "app_id": APP_ID}}

    def close(self, user: str) -> None:
        with self.lock:
            self.views.pop(user, None)

    def deliver(self, payload: dict[str, Any], *, timestamp: int | None = None) -> tuple[int, str]:
        """Post an interaction to the app as Slack does; the app's status and body."""
        if self.interactivity_url is None:
            return 0, "this sink has no interactivity endpoint to post to (--endpoint)"
        body = urlencode({"payload": json.dumps(payload)})
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
                   "X-Slack-Request-Timestamp": stamp,
                   "X-Slack-Signature": str(SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=stamp,
                                                                                                 body=body))}
        started = time.monotonic()
        status, answer = self._post(body, headers)
        seconds, answered_at = time.monotonic() - started, time.time()  # what Slack times against its 3 seconds
        with self.lock:
            self.sent = [*self.sent[-49:], {"headers": headers, "body": body, "status": status, "answer": answer,
                                            "seconds": seconds, "answered_at": answered_at}]
        return status, answer

    def _post(self, body: str, headers: dict[str, str]) -> tuple[int, str]:
        assert self.interactivity_url is not None
        request = urllib.request.Request(self.interactivity_url, data=body.encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status), answer.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return 0, f"the interactivity endpoint did not answer: {exc}"


def _trigger_id() -> str:
    """A new interaction's trigger_id, in Slack's form: every click and every sent form has its own."""
    return f"{int(time.time())}.{secrets.randbelow(10**9)}.{secrets.token_hex(8)}"


def _user(user: str) -> dict[str, str]:
    name = USERS.get(user, user)
    return {"id": user, "username": name, "name": name, "team_id": TEAM_ID}


def _button(blocks: list[dict[str, Any]], action_id: str) -> tuple[dict[str, Any], str]:
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == action_id:
                return element, str(block.get("block_id", ""))
    raise LookupError(f"the message has no button {action_id!r} (any more)")
