"""The interactivity endpoint: `wap_ingest.entrypoints.slack_interactivity.handler`, its own small function behind an
HTTP API route, `POST /slack/actions` (serverless.yml, `slack`), which Slack posts every click on an alert's button
and every form sent to (the Slack app's Interactivity Request URL).

Each request, in order (nothing is done for one that fails a step):
1. verified: signed with the app's signing secret (from the secret store), signed less than five minutes ago, never
   served before (adapters/slack/incoming.py); otherwise 401 with the reason;
2. read: a click (`block_actions`) or a sent decision form (`view_submission`); any other payload is acknowledged;
3. the person checked against the allow list (WAP_SLACK_OPERATORS: users and user groups); anyone else is told why,
   privately (a click) or in the form (a submission);
4. a decision's button opens its form, which asks for the reason (`views.open`: Slack allows it within the click's
   three seconds); every other action, and a sent form with its reason, is handed to the function through the ingest
   queue, the signed request as it came (the function verifies it again and does the work: lambda_slack.py), and
   acknowledged at once. A form sent without a reason is answered in the form.
The answer comes back in Slack: the alert's message updated in place, and private replies.

A malformed request (a header not in Slack's form, a body that is not what the event says) is answered 400 or 401
with a one-line reason, never 500. When something on the service's side fails (the secret store, Slack, the queue,
a bug), the person sees a short message and a reference, never the error's text; the log has the error under that
reference (`correlation_id`). Someone not on the allow list is told only that they may not act.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wap_ingest.adapters.aws import SeenRequests
from wap_ingest.adapters.slack import (
    REASON_BLOCK,
    HttpRequest,
    Interaction,
    Pending,
    RefusedRequestError,
    SlackReplies,
    interaction_from,
    modal_for,
    verify,
)
from wap_ingest.bootstrap import slack_endpoint
from wap_ingest.core.errors import BadInputError, WapError
from wap_ingest.core.interactions import Operators, not_done, reference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Response:
    status: int
    body: str = ""
    content_type: str = "text/plain; charset=utf-8"

    def to_http_api(self) -> dict[str, Any]:
        return {"statusCode": self.status, "headers": {"Content-Type": self.content_type}, "body": self.body}


def _form_errors(message: str) -> Response:
    """A sent form answered in the form itself (Slack shows the message under the reason's field)."""
    return Response(200, json.dumps({"response_action": "errors", "errors": {REASON_BLOCK: message[:300]}}),
                    "application/json")


class Endpoint:
    def __init__(self, *, secret: Callable[[], str], seen: Callable[[], SeenRequests],
                 operators: Callable[[], Operators], replies: Callable[[], SlackReplies],
                 forward: Callable[[str], None], clock: Callable[[], float] = time.time) -> None:
        self._secret, self._seen, self._operators, self._replies = secret, seen, operators, replies
        self._forward, self._clock = forward, clock

    def serve(self, request: HttpRequest) -> Response:
        if request.method != "POST":
            return Response(405, "Slack's interactivity requests are POSTs")
        try:
            signed = verify(request.headers, request.body, self._secret(), now=self._clock())
            if not self._seen().first_time(signed.signature, signed.timestamp):
                raise RefusedRequestError("replayed: this very request was served before")
        except RefusedRequestError as exc:
            log.warning("Slack request refused: %s", exc)
            return Response(401, f"refused: {exc}")
        try:
            interaction = interaction_from(request.body)
        except BadInputError as exc:
            log.warning("Slack request unreadable: %s", exc)
            return Response(400, f"refused: {exc}")
        try:
            return self._act(interaction, forwarded=signed.to_message())
        except WapError as exc:  # Slack, the queue or a setting failed: the person is told, without its text
            ref = reference()
            log.error("Slack request not served: %s", exc, extra={"user": interaction.person.user_id,
                                                                  "correlation_id": ref})
            if interaction.kind == "view_submission":
                return _form_errors(not_done(ref))
            self._reply(interaction, not_done(ref))
            return Response(200)

    def _act(self, interaction: Interaction, *, forwarded: str) -> Response:
        if interaction.action is None or interaction.target is None:
            return Response(200)  # a payload that asks nothing of this app (a closed form, another app's button)
        person = interaction.person
        operators = self._operators()
        if not operators.allows(person.user_id):
            log.warning("Slack user not allowed to act: %s", operators.refused_because(),
                        extra={"user": person.user_id, "action": interaction.action})
            if interaction.kind == "view_submission":
                return _form_errors(operators.refusal(person))
            self._reply(interaction, operators.refusal(person))
            return Response(200)
        if interaction.kind == "block_actions" and interaction.action.asks_reason:
            if interaction.trigger_id is None:
                return Response(400, "refused: a click without a trigger_id cannot open a form")
            self._replies().open_form(interaction.trigger_id, modal_for(Pending(
                interaction.action, interaction.target, interaction.channel, interaction.message_ts,
                interaction.response_url)))
            return Response(200)
        if interaction.kind == "view_submission" and len((interaction.reason or "").strip()) < 3:
            return _form_errors("Say why, in a few words: the reason is recorded with your name.")
        self._forward(forwarded)
        log.info("Slack action handed to the function", extra={"user": person.user_id,
                                                               "action": interaction.action.value})
        return Response(200)

    def _reply(self, interaction: Interaction, text: str) -> None:
        try:
            self._replies().reply(interaction.response_url, text)
        except WapError as exc:
            log.error("private reply not sent: %s", exc)


_endpoint: list[Endpoint] = []


def endpoint() -> Endpoint:
    """The process's endpoint, wired once with the use cases the composition root hands it (warm invocations reuse
    the secret, the clients and the allow list)."""
    if not _endpoint:
        uses = slack_endpoint()
        _endpoint.append(Endpoint(secret=uses.secret, seen=uses.seen, operators=uses.operators, replies=uses.replies,
                                  forward=uses.forward))
    return _endpoint[0]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """An HTTP API's event (payload format 2.0) -> the HTTP answer Slack gets. A malformed request is refused (400
    or 401, one line); anything else that fails (a setting, the secret store, a bug) is a 500 with a reference only,
    the error logged under it (the person's click fails visibly in Slack)."""
    try:
        request = HttpRequest.from_http_api(event)
    except BadInputError as exc:
        log.warning("Slack request unreadable: %s", exc)
        return Response(400, f"refused: {exc}").to_http_api()
    try:
        return endpoint().serve(request).to_http_api()
    except Exception as exc:
        ref = reference()
        log.error("the interactivity endpoint cannot serve: %s", exc, exc_info=not isinstance(exc, WapError),
                  extra={"correlation_id": ref})
        return Response(500, f"the endpoint cannot serve this request now; nothing was done (reference {ref})"
                        ).to_http_api()
