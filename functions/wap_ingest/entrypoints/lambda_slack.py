"""The function's side of an action asked from an alert in Slack: the interactivity endpoint (slack_interactivity.py)
verified the request and handed it over through the ingest queue, as Slack signed it.

Here it is verified again (the signing secret, and at most an hour old: the queue's retries included), so a message
put on the queue by anyone else is refused. Then the action is recorded once (core.once, under the digest of the body
Slack signed: `SignedRequest.action_id`) before anything is done: a copy of the message (a replay by someone who may
send to the queue, a re-sent dead letter) or a redelivery of a message whose action finished or started does nothing,
and says so in the log and to the person. Then the person is checked against the allow list again and the action runs
with the use cases it is handed (`SlackActionUseCases.act`: the ones `wap publish`, `wap discard`, `wap ingest` and
`wap dlq` run),
the person as the actor, and the answer goes back to Slack: the alert's message updated in place (`chat.update`), a
private reply to the person (the click's `response_url`). A refusal, or a decision someone else made first, is an
answer, and the message is consumed; an infrastructure failure raises, so the message is retried (the person is told,
with the message id as the reference: never the error's text).
"""

from __future__ import annotations

import time
from typing import Any

from wap_ingest.adapters.slack import (
    FORWARDED_MAX_AGE_SECONDS,
    Interaction,
    RefusedRequestError,
    SignedRequest,
    check,
    interaction_from,
)
from wap_ingest.bootstrap import SlackActionUseCases
from wap_ingest.core.errors import BadInputError, InfrastructureError, WapError
from wap_ingest.core.interactions import Answer, Asked
from wap_ingest.core.once import Repeat, Seen, once
from wap_ingest.entrypoints.lambda_observability import logger

REPEATED = {  # what the person is told when a delivery does nothing (core.once)
    Seen.DONE: "Nothing done again: this action was already done (reference {ref}).",
    Seen.RUNNING: "Nothing done again: this action was started before and is never run twice. If it did not happen, "
                  "use the alert's button again (reference {ref}).",
    Seen.COPY: "Nothing done: this action was received before and is never run twice. If it did not happen, use the "
               "alert's button again (reference {ref}).",
}


def on_slack_action(uses: SlackActionUseCases, request: SignedRequest, message_id: str) -> dict[str, Any]:
    try:
        check(request, uses.secret(), now=time.time(), max_age=FORWARDED_MAX_AGE_SECONDS)
        interaction = interaction_from(request.body)
    except (RefusedRequestError, BadInputError) as exc:  # not Slack's, or too old: nothing is done, nobody answered
        logger.error("Slack action refused", extra={"error": str(exc), "message_id": message_id})
        return {"slack_action": "refused", "error": str(exc)}
    person, action, target = interaction.person, interaction.action, interaction.target
    if action is None or target is None:
        return {"slack_action": "ignored", "user": person.user_id}
    summary = {"slack_action": action.value, "user": person.user_id, "target": target,
               "action_id": request.action_id, "message_id": message_id}
    done = once(uses.records(), request.action_id, message_id, f"Slack action {action.value} on {target} by "
                f"{person.user_id}", lambda: _serve(uses, interaction, summary, message_id),
                noted=lambda line: logger.error(line, extra=summary))
    if isinstance(done, Repeat):
        logger.warning("Slack action not run again", extra=summary | {"reason": done.reason, "seen": done.seen.value})
        _tell(uses, interaction, REPEATED[done.seen].format(ref=message_id))
        return summary | {"answer": "not run again", "seen": done.seen.value}
    return done


def _serve(uses: SlackActionUseCases, interaction: Interaction, summary: dict[str, Any], ref: str
           ) -> dict[str, Any]:
    """The action, once recorded: the allow list, then the use case, then the answer in Slack."""
    operators, person = uses.operators(), interaction.person
    assert interaction.action is not None and interaction.target is not None  # on_slack_action: ignored otherwise
    if not operators.allows(person.user_id):
        logger.warning("Slack user not allowed to act", extra=summary | {"why": operators.refused_because()})
        _tell(uses, interaction, operators.refusal(person))
        return summary | {"answer": "refused"}
    try:
        answer = uses.act(Asked(interaction.action, interaction.target, person, interaction.reason, ref=ref))
    except InfrastructureError as exc:
        logger.error("Slack action failed; retried", extra=summary | {"error": str(exc), "correlation_id": ref})
        _tell(uses, interaction, f"Not finished yet: it is retried automatically (reference {ref}).")
        raise
    if answer.logged:
        logger.error("Slack action failed", extra=summary | {"error": answer.logged, "correlation_id": ref})
    logger.info("Slack action answered", extra=summary | {"line": answer.line, "settled": answer.settled})
    _deliver(uses, answer, interaction.channel, interaction.message_ts, interaction.response_url)
    return summary | {"answer": answer.line or answer.private, "settled": answer.settled}


def _tell(uses: SlackActionUseCases, interaction: Interaction, text: str) -> None:
    """A private reply to the person; a failure to send it (or to build the client) is logged, never raised."""
    try:
        uses.replies().reply(interaction.response_url, text)
    except WapError as exc:
        logger.error("private reply not sent", extra={"error": str(exc)})


def _deliver(uses: SlackActionUseCases, answer: Answer, channel: str | None, ts: str | None,
             response_url: str | None) -> None:
    """The message updated, the private reply sent. The action is done: a failure here is logged, never retried."""
    replies = uses.replies()
    if answer.update and channel and ts:
        try:
            replies.answer_on(channel, ts, answer)
        except WapError as exc:
            logger.error("the alert's message was not updated", extra={"error": str(exc), "channel": channel})
    if answer.private:
        replies.reply(response_url, answer.private)
