"""Notifiers: SlackNotifier (slack-sdk WebClient; the blocks, buttons included, from adapters/slack/blocks.py) and
LogNotifier (no token configured: the alert's plain text, its actions as the commands it lists).

A Slack outage never blocks publishing: delivery errors are logged and `notify` returns False.
The token is never logged: only the channel and Slack's error code are.
"""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from wap_ingest.adapters.slack.blocks import blocks_for
from wap_ingest.core.alerts import Alert, readable
from wap_ingest.core.ports import Notifier

log = logging.getLogger(__name__)

__all__ = ["LogNotifier", "SlackNotifier", "blocks_for", "slack_client_for"]


def slack_client_for(token: str, base_url: str | None, timeout: float) -> WebClient:
    return WebClient(
        token=token,
        base_url=base_url or WebClient.BASE_URL,
        timeout=int(max(1, timeout)),
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2), ConnectionErrorRetryHandler(max_retry_count=2)],
    )


class SlackNotifier(Notifier):
    def __init__(self, client: WebClient, channel: str) -> None:
        self._client = client
        self._channel = channel

    def notify(self, alert: Alert) -> bool:
        try:
            self._client.chat_postMessage(channel=self._channel, text=alert.text, blocks=blocks_for(alert))
        except SlackApiError as exc:
            log.error("alert not delivered to Slack %s: %s (%s)", self._channel, exc.response.get("error"), alert.title)
            return False
        except (SlackClientError, OSError) as exc:
            log.error("alert not delivered to Slack %s: %s (%s)", self._channel, type(exc).__name__, alert.title)
            return False
        log.info("alert sent to Slack %s: %s", self._channel, alert.title)
        return True


class LogNotifier(Notifier):
    """No Slack token configured: the alert goes to the log, in full, as plain text (Slack's escaping undone)."""

    def notify(self, alert: Alert) -> bool:
        log.warning("ALERT (no Slack configured) %s", readable(alert.text))
        return True
