"""The stack's local Slack, for tests: its channel as the sink records it, a person's clicks and forms through the
sink's page calls (which post to the app exactly as Slack does), and requests made by hand (signed or not) posted to
the interactivity endpoint."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import requests
from slack_sdk.signature import SignatureVerifier

from tests.conftest import Lake, parquet_bytes
from tests.waiting import wait_for
from wap_stack.slack_sink import ENDPOINT_PATH
from wap_stack.slack_workspace import SIGNING_SECRET, channel_id_for
from wap_stack.state import StackState

ALICE, BOB, MALLORY = "U0ALICE01", "U0BOB0001", "U0MALLORY"
CHANNEL = "#wap-alerts"


@dataclass(frozen=True)
class Channel:
    url: str  # http://127.0.0.1:<slack port>

    @classmethod
    def of(cls, state: StackState) -> Channel:
        return cls(f"http://127.0.0.1:{state.slack_port}")

    @property
    def endpoint(self) -> str:
        return self.url + ENDPOINT_PATH

    def messages(self) -> list[dict[str, Any]]:
        return list(requests.get(f"{self.url}/messages", timeout=10).json())

    def message_about(self, needle: str) -> dict[str, Any] | None:
        return next((m for m in self.messages() if needle in m["text"]), None)

    def ephemerals(self, user: str) -> list[str]:
        return [str(e["text"]) for e in requests.get(f"{self.url}/ephemerals", params={"user": user},
                                                     timeout=10).json()]

    def sent(self) -> list[dict[str, Any]]:
        return list(requests.get(f"{self.url}/sent", timeout=10).json())

    def view_of(self, user: str) -> str | None:
        view = requests.get(f"{self.url}/ui/state", params={"user": user}, timeout=10).json()["view_id"]
        return str(view) if view else None

    def click(self, user: str, ts: str, action_id: str) -> dict[str, Any]:
        """A person clicking a button in the page: the sink posts the click to the app; its status and body."""
        return dict(requests.post(f"{self.url}/ui/click", json={"user": user, "ts": ts, "action_id": action_id},
                                  timeout=60).json())

    def submit(self, user: str, reason: str) -> dict[str, Any]:
        return dict(requests.post(f"{self.url}/ui/submit", json={"user": user, "reason": reason}, timeout=60).json())

    def post(self, body: str, headers: dict[str, str]) -> requests.Response:
        """A request made by hand, posted to the interactivity endpoint."""
        return requests.post(self.endpoint, data=body.encode(), headers=headers, timeout=60)


def form_body(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def signed_headers(body: str, *, secret: str = SIGNING_SECRET, at: float | None = None) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    return {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": str(SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body))}


def decision_form(user: str, name: str, action: str, branch: str, ts: str, reason: str) -> dict[str, Any]:
    """A decision form sent without having been opened: what a forger would have to send."""
    metadata = json.dumps({"a": action, "t": branch, "c": channel_id_for(CHANNEL), "m": ts, "r": None})
    return {"type": "view_submission", "user": {"id": user, "username": name},
            "view": {"id": "VFORGED", "callback_id": "wap.decision", "private_metadata": metadata,
                     "state": {"values": {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}}}}


def reaudit_form_open(lake: Lake, channel: Channel, table_name: str) -> str:
    """A file with two nulls dropped into `table_name`, its alert's "Re-audit and publish" clicked by Alice and her
    form shown: the rejected file's branch."""
    lake.drop(f"{table_name}/nulls.parquet", parquet_bytes(10, nulls=2))
    alert = wait_for(lambda: channel.message_about(f"wap.{table_name}"), "the rejected file's alert")
    [branch] = [b for b in lake.wap_branches() if f"-{table_name}-" in b]
    assert channel.click(ALICE, str(alert["ts"]), "wap.reaudit_publish")["status"] == 200
    wait_for(lambda: channel.view_of(ALICE), "alice's form")
    return branch


def edited(channel: Channel, needle: str) -> dict[str, Any] | None:
    """The message about `needle` once it has been updated, else None."""
    message = channel.message_about(needle)
    return message if message is not None and message.get("edited") else None
