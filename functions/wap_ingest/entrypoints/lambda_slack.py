"""The function's side of an action asked from an alert in Slack: the interactivity endpoint (slack_interactivity.py)
verified the request and handed it over through the ingest queue, as Slack signed it.

Here it is verified again (the signing secret, and at most an hour old: the queue's retries included), so a message
put on the queue by anyone else is refused, and the person checked against the allow list again. Then the action runs
with the Service's use cases (`Service.act`: the ones `wap publish`, `wap discard`, `wap ingest` and `wap dlq` run),
the person as the actor, and the answer goes back to Slack: the alert's message updated in place (`chat.update`), a
private reply to the person (the click's `response_url`). A refusal, or a decision someone else made first, is an
answer, and the message is consumed; an infrastructure failure raises, so the message is retried (the person is told).
"""

from __future__ import annotations

import time
from typing import Any

from wap_ingest.adapters.slack_requests import (
    FORWARDED_MAX_AGE_SECONDS,
    RefusedRequestError,
    SignedRequest,
    check,
    interaction_from,
)
from wap_ingest.bootstrap import Service
from wap_ingest.core.errors import BadInputError, InfrastructureError, WapError
from wap_ingest.core.interactions import Answer, Asked
from wap_ingest.entrypoints.lambda_observability import logger


def on_slack_action(svc: Service, request: SignedRequest, message_id: str) -> dict[str, Any]:
    slack = svc.slack
    try:
        check(request, slack.secret, now=time.time(), max_age=FORWARDED_MAX_AGE_SECONDS)
        interaction = interaction_from(request.body)
    except (RefusedRequestError, BadInputError) as exc:  # not Slack's, or too old: nothing is done, nobody answered
        logger.error("Slack action refused", extra={"error": str(exc), "message_id": message_id})
        return {"slack_action": "refused", "error": str(exc)}
    person, action = interaction.person, interaction.action
    if action is None or interaction.target is None:
        return {"slack_action": "ignored", "user": person.user_id}
    summary = {"slack_action": action.value, "user": person.user_id, "target": interaction.target}
    if not slack.operators.allows(person.user_id):
        logger.warning("Slack user not allowed to act", extra=summary)
        slack.replies.reply(interaction.response_url, slack.operators.refusal(person))
        return summary | {"answer": "refused"}
    try:
        answer = svc.act(Asked(action, interaction.target, person, interaction.reason))
    except InfrastructureError as exc:
        logger.error("Slack action failed; retried", extra=summary | {"error": str(exc)})
        slack.replies.reply(interaction.response_url, f"Not finished yet (it is retried automatically): {exc}")
        raise
    logger.info("Slack action answered", extra=summary | {"line": answer.line, "settled": answer.settled})
    _deliver(svc, answer, interaction.channel, interaction.message_ts, interaction.response_url)
    return summary | {"answer": answer.line or answer.private, "settled": answer.settled}


def _deliver(svc: Service, answer: Answer, channel: str | None, ts: str | None, response_url: str | None) -> None:
    """The message updated, the private reply sent. The action is done: a failure here is logged, never retried."""
    replies = svc.slack.replies
    if answer.update and channel and ts:
        try:
            replies.answer_on(channel, ts, answer)
        except WapError as exc:
            logger.error("the alert's message was not updated", extra={"error": str(exc), "channel": channel})
    if answer.private:
        replies.reply(response_url, answer.private)
