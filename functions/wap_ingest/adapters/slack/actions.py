"""What the service says back in Slack when someone acts on an alert (slack-sdk `WebClient` and `WebhookClient`):
open a decision's form (`views.open`), update the alert's message in place (`conversations.history` for its blocks,
then `chat.update`), reply to the person privately (the click's `response_url`), and the members of an allow-listed
user group (`usergroups.users.list`, remembered for a minute).

Scopes the Slack app needs: chat:write, channels:history (groups:history for a private channel), usergroups:read
(docs/deploy.md has the manifest). A `response_url` is only ever posted to on Slack's own host (or, with
WAP_SLACK_BASE_URL set, the local sink's): the URL comes in a signed request, and is checked again here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.webhook import WebhookClient

from wap_ingest.adapters.slack.blocks import answered, answered_text
from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.interactions import Answer

log = logging.getLogger(__name__)

SLACK_HOOKS = "https://hooks.slack.com"
MEMBERS_TTL_SECONDS = 60.0


class SlackCallError(InfrastructureError):
    """Slack refused or did not answer a call (its error code in the message; never the token)."""


class SlackReplies:
    def __init__(self, client: WebClient, *, base_url: str | None = None, timeout: float = 10.0,
                 clock: Any = time.monotonic) -> None:
        self._client, self._timeout, self._clock = client, timeout, clock
        local = urlparse(base_url) if base_url else None
        self._hooks = (f"{local.scheme}://{local.netloc}" if local is not None else SLACK_HOOKS)
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, method)(**kwargs)
        except SlackApiError as exc:
            raise SlackCallError(f"Slack answered {exc.response.get('error')!r} to {method}. Fix: check the app's "
                                 f"scopes and that it is in the channel (docs/deploy.md).") from exc
        except (SlackClientError, OSError) as exc:
            raise SlackCallError(f"Slack could not be reached for {method}: {type(exc).__name__}") from exc

    def open_form(self, trigger_id: str, view: Mapping[str, Any]) -> None:
        self._call("views_open", trigger_id=trigger_id, view=dict(view))

    def members(self, group: str) -> frozenset[str]:
        """The users of a user group (cached for MEMBERS_TTL_SECONDS: a warm process asks once a minute)."""
        with self._lock:
            cached = self._members.get(group)
            if cached is not None and self._clock() - cached[0] < MEMBERS_TTL_SECONDS:
                return cached[1]
        users = frozenset(str(u) for u in self._call("usergroups_users_list", usergroup=group).get("users") or [])
        with self._lock:
            self._members[group] = (self._clock(), users)
        return users

    def answer_on(self, channel: str, ts: str, answer: Answer) -> None:
        """The alert's message with the answer's line (and without its buttons once settled)."""
        found = self._call("conversations_history", channel=channel, latest=ts, inclusive=True, limit=1)
        messages = [m for m in found.get("messages") or [] if m.get("ts") == ts]
        if not messages:
            raise SlackCallError(f"the alert's message {ts} is not in channel {channel} any more (deleted?)")
        message = messages[0]
        self._call("chat_update", channel=channel, ts=ts, text=answered_text(str(message.get("text", "")), answer),
                   blocks=answered(message.get("blocks") or [], answer))

    def allowed(self, response_url: str) -> bool:
        parsed = urlparse(response_url)
        return f"{parsed.scheme}://{parsed.netloc}" == self._hooks and parsed.path.startswith("/")

    def reply(self, response_url: str | None, text: str) -> bool:
        """A message only the person who acted sees; False (logged) when it could not be sent."""
        if not response_url or not self.allowed(response_url):
            log.warning("private reply not sent: the response_url is not Slack's (%s)", urlparse(
                response_url or "").netloc or "none")
            return False
        try:
            sent = WebhookClient(response_url, timeout=int(max(1, self._timeout))).send(
                text=text, response_type="ephemeral", replace_original=False)
        except (SlackClientError, OSError) as exc:
            log.error("private reply not sent: %s", type(exc).__name__)
            return False
        if sent.status_code != 200:
            log.error("private reply not sent: Slack answered %s", sent.status_code)
            return False
        return True
