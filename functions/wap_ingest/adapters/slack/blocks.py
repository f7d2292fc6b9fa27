"""Slack Block Kit for alerts (slack-sdk's `models.blocks` and `models.views`): an alert's blocks with its actions as
buttons, the form a decision opens (a modal asking for the reason), and a message updated once acted on.

The core decides what an alert says and offers (core/alerts.py, values already escaped for mrkdwn); this module only
renders it. Each button carries its action in `action_id` (`wap.<kind>`) and its raw target (a branch, an s3:// URI, a
queue name) in `value`; the modal carries what the submission needs in `private_metadata` (JSON: the action, the
target, the alert's channel and timestamp, and the click's `response_url`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from wap_ingest.core.alerts import Action, ActionKind, Alert, mrkdwn_escape
from wap_ingest.core.interactions import Answer

ACTION_PREFIX = "wap."
ACTIONS_BLOCK = "wap.actions"
RESULT_BLOCK = "wap.result"
DECISION_CALLBACK = "wap.decision"
REASON_BLOCK = REASON_INPUT = "reason"
TEXT_LIMIT = 2900  # a section's text holds 3000 characters
VALUE_LIMIT = 2000  # a button's value


def action_id_for(kind: ActionKind) -> str:
    return f"{ACTION_PREFIX}{kind.value}"


def kind_from(action_id: str) -> ActionKind | None:
    """The action a button's `action_id` names, None for anything else."""
    if not action_id.startswith(ACTION_PREFIX):
        return None
    try:
        return ActionKind(action_id.removeprefix(ACTION_PREFIX))
    except ValueError:
        return None


def blocks_for(alert: Alert) -> list[dict[str, Any]]:
    """The alert's values are already escaped for mrkdwn by the core (core/alerts.py `mrkdwn_escape`)."""
    blocks: list[dict[str, Any]] = [
        HeaderBlock(text=alert.title[:150]).to_dict(),
        {"type": "section", "text": {"type": "mrkdwn", "text": alert.summary[:TEXT_LIMIT]}},
    ]
    if alert.fields:
        blocks.append({
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f"*{name}*\n`{value}`"[:2000]} for name, value in alert.fields[:10]],
        })
    if alert.details:
        body = "\n".join(alert.details)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{body[:TEXT_LIMIT]}```"}})
    if alert.commands:
        # a code block, not an inline span: the SQL command holds its own backticks (`name@branch`)
        body = "\n".join(f"*{label}:*\n```{command}```" for label, command in alert.commands)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": body[:TEXT_LIMIT]}})
    buttons = [_button(action) for action in alert.actions if len(action.target) <= VALUE_LIMIT]
    if buttons:
        blocks.append(ActionsBlock(block_id=ACTIONS_BLOCK, elements=buttons).to_dict())
    return blocks


def _button(action: Action) -> ButtonElement:
    confirm = None if action.confirm is None else ConfirmObject(
        title=action.label[:100], text=mrkdwn_escape(action.confirm), confirm=action.label[:30], deny="Cancel")
    return ButtonElement(text=action.label[:75], action_id=action_id_for(action.kind), value=action.target,
                         style=action.style, confirm=confirm)


@dataclass(frozen=True)
class Pending:
    """What a decision's form carries from the click to its submission."""

    action: ActionKind
    target: str
    channel: str | None
    message_ts: str | None
    response_url: str | None

    def metadata(self) -> str:
        return json.dumps({"a": self.action.value, "t": self.target, "c": self.channel, "m": self.message_ts,
                           "r": self.response_url}, separators=(",", ":"))

    @classmethod
    def from_metadata(cls, text: str) -> Pending | None:
        try:
            data = json.loads(text)
            kind = ActionKind(data["a"])
        except (ValueError, KeyError, TypeError):
            return None
        target = data.get("t")
        if not isinstance(target, str) or not target:
            return None
        return cls(kind, target, *(data.get(k) if isinstance(data.get(k), str) else None for k in ("c", "m", "r")))


def modal_for(pending: Pending) -> dict[str, Any]:
    """The form a decision opens: what it does, and the reason (required; at most 500 characters)."""
    title, submit, text = pending.action.form.title, pending.action.form.submit, pending.action.form.text
    view = View(
        type="modal", callback_id=DECISION_CALLBACK, title=title, submit=submit, close="Cancel",
        private_metadata=pending.metadata(),
        blocks=[
            SectionBlock(text=MarkdownTextObject(text=text.format(target=mrkdwn_escape(pending.target)))),
            InputBlock(block_id=REASON_BLOCK, label="Reason (recorded)", optional=False, element=PlainTextInputElement(
                action_id=REASON_INPUT, multiline=True, min_length=3, max_length=500,
                placeholder="Why? e.g. the nulls are expected for this producer")),
        ],
    )
    return view.to_dict()


def reason_in(state: Mapping[str, Any]) -> str | None:
    """The reason typed in a submitted form (`view.state`)."""
    value = (((state.get("values") or {}).get(REASON_BLOCK) or {}).get(REASON_INPUT) or {}).get("value")
    return value if isinstance(value, str) else None


def answered(blocks: Sequence[Mapping[str, Any]], answer: Answer) -> list[dict[str, Any]]:
    """The alert's blocks once acted on: the answer's line where the last one was, above the buttons, which go when
    the answer settles the alert."""
    kept = [dict(b) for b in blocks if b.get("block_id") != RESULT_BLOCK
            and not (answer.settled and b.get("block_id") == ACTIONS_BLOCK)]
    result = ContextBlock(block_id=RESULT_BLOCK,
                          elements=[MarkdownTextObject(text=answer.line[:TEXT_LIMIT])]).to_dict()
    at = next((i for i, b in enumerate(kept) if b.get("block_id") == ACTIONS_BLOCK), len(kept))
    return [*kept[:at], result, *kept[at:]]


def answered_text(text: str, answer: Answer) -> str:
    """The message's text (the notification's, and every plain-text reader's) once acted on: the line appended."""
    return f"{text.split(_RESULT_MARK, maxsplit=1)[0].rstrip()}{_RESULT_MARK}{answer.line}"


_RESULT_MARK = "\n\n>>> "
