"""Slack: the client that posts alerts, Block Kit, the requests Slack sends (signatures, payloads) and the replies."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .actions import SlackReplies
    from .blocks import REASON_BLOCK, Pending, modal_for
    from .client import LogNotifier, SlackNotifier, slack_client_for
    from .incoming import (
        FORWARDED_MAX_AGE_SECONDS,
        KIND,
        HttpRequest,
        Interaction,
        RefusedRequestError,
        SignedRequest,
        check,
        interaction_from,
        verify,
    )

# What the rest of the service may use of this package, and the module each name lives in. Importing the face imports
# none of them: each is imported when first asked for (PEP 562), so an entry point pays only for what it uses.
_WHERE = {
    "FORWARDED_MAX_AGE_SECONDS": "incoming",
    "HttpRequest": "incoming",
    "Interaction": "incoming",
    "KIND": "incoming",
    "LogNotifier": "client",
    "Pending": "blocks",
    "REASON_BLOCK": "blocks",
    "RefusedRequestError": "incoming",
    "SignedRequest": "incoming",
    "SlackNotifier": "client",
    "SlackReplies": "actions",
    "check": "incoming",
    "interaction_from": "incoming",
    "modal_for": "blocks",
    "slack_client_for": "client",
    "verify": "incoming",
}
__all__ = [
    "FORWARDED_MAX_AGE_SECONDS", "KIND", "REASON_BLOCK", "HttpRequest", "Interaction", "LogNotifier", "Pending",
    "RefusedRequestError", "SignedRequest", "SlackNotifier", "SlackReplies", "check", "interaction_from",
    "modal_for", "slack_client_for", "verify",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
