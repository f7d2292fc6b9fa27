"""Publishing a reviewed branch through the service: the operator's request and the service's answer.

Under the catalog's roles (wap_ingest.catalog_authz) only the service may commit to `main`: Nessie authorizes a
merge into `main` with the checks of a direct commit, so a role that may merge may also write `main` around the
audit. An operator therefore does not merge. `wap publish BRANCH` sends a publish request to the service's queue;
the service (the function, with the `service` role) checks who asks, re-audits the branch's new rows (unless the
request is an audited override with a reason), merges it and writes the answer where the operator's command
waits for it.

Who asks: the request carries the operator's own catalog access token. The service never uses it to act; it asks
the catalog to accept it (so an expired, forged or foreign token is refused by the catalog itself), then reads the
requester's subject and roles from it: only `operator` or `service` may request a publish. Without catalog
authentication (the default local stack) nothing can be verified and the recorded actor says so.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wap_ingest.core.errors import BadInputError, InfrastructureError, WapError
from wap_ingest.core.review import Decision, ReauditFailedError

KIND = "wap.publish-request"
RESULT_PREFIX = "wap-requests"
QUEUE_VARIABLE = "WAP_PUBLISH_QUEUE_URL"  # where `wap publish` sends requests (the ingest queue); unset: it merges


class RequestRefusedError(WapError):
    """The request cannot be served as it is (not a verified operator, or a malformed request)."""


@dataclass(frozen=True)
class PublishRequest:
    branch: str
    reason: str | None
    reaudit: bool
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    token: str | None = field(default=None, repr=False)  # the requester's access token: a credential, never logged
    claimed_actor: str | None = None  # who the requester says they are (recorded as unverified without a token)

    def to_body(self) -> str:
        return json.dumps({"kind": KIND, "request_id": self.request_id, "branch": self.branch,
                           "reason": self.reason, "reaudit": self.reaudit, "token": self.token,
                           "claimed_actor": self.claimed_actor})

    @classmethod
    def from_body(cls, body: str) -> PublishRequest | None:
        """The request a queue message carries, or None if the message is not a publish request."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("kind") != KIND:
            return None
        branch, request_id = data.get("branch"), data.get("request_id")
        if not isinstance(branch, str) or not branch or not isinstance(request_id, str) or not request_id.isalnum():
            raise BadInputError(f"a publish request needs a branch and an alphanumeric request_id; got {branch!r}, "
                                f"{request_id!r}. Fix: send it with `wap publish BRANCH`.")
        reason, token, claimed = data.get("reason"), data.get("token"), data.get("claimed_actor")
        return cls(branch=branch, reason=reason if isinstance(reason, str) else None,
                   reaudit=data.get("reaudit") is not False, request_id=request_id,
                   token=token if isinstance(token, str) and token else None,
                   claimed_actor=claimed if isinstance(claimed, str) and claimed else None)


Identify = Callable[[PublishRequest], str]  # the verified actor, or RequestRefusedError
Publish = Callable[[PublishRequest, str], Decision]  # (request, actor) -> the decision (raises as publish_branch)


def decision_document(decision: Decision) -> dict[str, Any]:
    return {"branch": decision.branch, "table": decision.table.qualified, "action": decision.action,
            "reason": decision.reason, "actor": decision.actor, "merged_hash": decision.merged_hash,
            "already": decision.already, "reaudit": decision.reaudit.to_dict() if decision.reaudit else None,
            "source": decision.source, "recorded_at": decision.recorded_at}


def serve(request: PublishRequest, *, identify: Identify, publish: Publish) -> dict[str, Any]:
    """The answer to one request. Refusals (who asks, a failed re-audit, a conflict, a missing branch) are answers;
    an infrastructure failure raises, so the message is retried."""
    base: dict[str, Any] = {"request_id": request.request_id, "branch": request.branch, "reason": request.reason}
    try:
        actor = identify(request)
    except RequestRefusedError as exc:
        return base | {"action": "refused", "actor": request.claimed_actor, "error": str(exc)}
    try:
        decision = publish(request, actor)
    except ReauditFailedError as exc:
        return base | {"action": "refused", "actor": actor, "error": str(exc), "reaudit": exc.report.to_dict(),
                       "table": exc.report.table}
    except InfrastructureError:
        raise
    except WapError as exc:
        return base | {"action": "refused", "actor": actor, "error": str(exc)}
    return base | decision_document(decision) | {"request_id": request.request_id}


def requester_from(claims: Mapping[str, Any], allowed_roles: tuple[str, ...]) -> str:
    """The subject of a token the catalog accepted, if its scopes hold one of `allowed_roles`."""
    scopes = str(claims.get("scope", "")).split()
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise RequestRefusedError("the request's token names no subject (`sub`): it cannot be recorded. Fix: use "
                                  "the operator client of docs/deploy.md, \"Give an operator their own client\".")
    if not any(role in scopes for role in allowed_roles):
        raise RequestRefusedError(
            f"{subject} may not publish: a publish request needs one of the scopes {', '.join(allowed_roles)} "
            f"(the token has {' '.join(scopes) or 'none'}). Fix: ask for an operator client (docs/deploy.md).")
    return subject
