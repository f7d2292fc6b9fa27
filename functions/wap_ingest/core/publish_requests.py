"""Publishing a reviewed branch through the service: the operator's request and the service's answer.

Under the catalog's roles (wap_ingest.adapters.catalog.authz) only the service may commit to `main`: Nessie authorizes a
merge into `main` with the checks of a direct commit, so a role that may merge may also write `main` around the
audit. An operator therefore does not merge. `wap publish BRANCH` sends a publish request to the service's queue;
the service (the function, with the `service` role) checks who asks, re-audits the branch's new rows (unless the
request is an audited override with a reason), merges it and writes the answer where the operator's command
waits for it.

The message carries no credential. What it carries:
- the request itself (branch, reason, re-audit or not, a random request id, the queue it is addressed to, when it
  was issued and until when it is valid), whose SHA-256 digest (`digest`) binds everything below to it;
- a proof of who asks (`IdentityProof`): an AWS STS GetCallerIdentity request the operator signed with their own AWS
  credentials, with the digest in a signed header (`SIGNED_HEADER`), as HashiCorp Vault's AWS IAM login and EKS
  tokens do. The service sends that request to STS itself, with the digest it computed from the message: STS
  answers with the signer's ARN only if the signature covers exactly that digest, so a request changed in flight
  is refused by STS (and, first and with a clearer message, by the digest the proof names). The AWS secret key
  never leaves the operator's machine; the signed request can do nothing but ask STS who signed it, for at most
  15 minutes (STS's own limit), and only for this request.
Who may send to the queue at all is the queue policy's business (infra/iam/ingest-queue-policy.json: the operator
role, the functions' own role and the source bucket's notifications only); the service checks the signer against
WAP_PUBLISH_PRINCIPALS.

A request is used once and expires: it is an action recorded once under its request id (core.once: the random id
`wap publish` makes, inside the signed fields), before anything is checked or done: the first message that names a
request id claims it (an S3 object written with If-None-Match); another message with that id (a replay, a redrive, an
altered copy) is refused and changes nothing, a redelivery of the message once its request was answered does nothing
(only a delivery that failed on the infrastructure is retried), and a message past `expires_at` is refused. The
answer is written once (If-None-Match again): a second answer to one request id is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from wap_ingest.core.errors import BadInputError, InfrastructureError, WapError
from wap_ingest.core.once import ActionRecords, Repeat, once
from wap_ingest.core.review import Decision, ReauditFailedError

KIND = "wap.publish-request"
FORMAT = 2  # 1: the request carried the operator's bearer token (no longer accepted)
RESULT_PREFIX = "wap-requests"
QUEUE_VARIABLE = "WAP_PUBLISH_QUEUE_URL"  # where `wap publish` sends requests (the ingest queue); unset: it merges
PRINCIPALS_VARIABLE = "WAP_PUBLISH_PRINCIPALS"  # the IAM roles and users whose requests the service serves
LIFETIME_SECONDS = 600  # how long `wap publish` makes its request valid
MAX_LIFETIME_SECONDS = 900  # STS refuses a signed request older than 15 minutes: no request may claim longer
CLOCK_SKEW_SECONDS = 300  # how far in the future a request may say it was issued
SIGNED_HEADER = "X-Wap-Publish-Request"  # the header of the signed STS request that carries the digest
PROOF_SCHEME = "aws-sts-get-caller-identity"
_ARN = re.compile(r"arn:(?P<partition>aws[a-z-]*):(?P<service>iam|sts)::(?P<account>\d{12}):"
                  r"(?P<kind>role|user|assumed-role)/(?P<rest>[\w+=,.@/-]+)")


class RequestRefusedError(WapError):
    """The request cannot be served as it is (who asks, its age, its integrity, its format): an answer."""


@dataclass(frozen=True)
class IdentityProof:
    """A signed STS GetCallerIdentity request (headers only: the service supplies the method, URL and body). No
    credential: the signature (`authorization`) and the session token are useless without the secret key."""

    endpoint: str  # the STS endpoint it was signed for (the service verifies at its own and refuses another)
    digest: str  # the request's digest, as signed into SIGNED_HEADER
    authorization: str = field(repr=False)
    amz_date: str = ""
    security_token: str | None = field(default=None, repr=False)
    scheme: str = PROOF_SCHEME

    def to_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "endpoint": self.endpoint, "digest": self.digest,
                "authorization": self.authorization, "amz_date": self.amz_date,
                "security_token": self.security_token}

    @classmethod
    def from_dict(cls, data: Any) -> IdentityProof | None:
        if not isinstance(data, dict):
            return None
        values = {k: data.get(k) for k in ("scheme", "endpoint", "digest", "authorization", "amz_date")}
        text = {k: v for k, v in values.items() if isinstance(v, str) and v}
        if len(text) != len(values):
            return None
        token = data.get("security_token")
        return cls(endpoint=text["endpoint"], digest=text["digest"], authorization=text["authorization"],
                   amz_date=text["amz_date"], security_token=token if isinstance(token, str) and token else None,
                   scheme=text["scheme"])


def _now() -> int:
    return int(time.time())


@dataclass(frozen=True)
class PublishRequest:
    """One publish request as the queue carries it: what is asked (signed through `digest`) and the proof."""

    branch: str
    reason: str | None
    reaudit: bool
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    queue: str = ""  # the name of the queue it is addressed to
    issued_at: int = field(default_factory=_now)  # epoch seconds
    expires_at: int = 0  # epoch seconds; 0: issued_at + LIFETIME_SECONDS
    proof: IdentityProof | None = None
    format: int = FORMAT
    carried_token: bool = False  # a format-1 message carried a bearer token (dropped unread, never kept)

    def __post_init__(self) -> None:
        if not self.expires_at:
            object.__setattr__(self, "expires_at", self.issued_at + LIFETIME_SECONDS)

    def signed_fields(self) -> dict[str, Any]:
        return {"kind": KIND, "format": self.format, "request_id": self.request_id, "branch": self.branch,
                "reason": self.reason, "reaudit": self.reaudit, "queue": self.queue, "issued_at": self.issued_at,
                "expires_at": self.expires_at}

    def digest(self) -> str:
        """SHA-256 of the signed fields in canonical JSON: the value the operator's signature covers."""
        canonical = json.dumps(self.signed_fields(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def signed(self, proof: IdentityProof) -> PublishRequest:
        return replace(self, proof=proof)

    def to_body(self) -> str:
        return json.dumps(self.signed_fields() | {"proof": self.proof.to_dict() if self.proof else None})

    @classmethod
    def from_body(cls, body: str) -> PublishRequest | None:
        """The request a queue message carries, or None if the message is not a publish request. A bearer token
        an old client put there is dropped here, unread."""
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
        reason, queue = data.get("reason"), data.get("queue")
        numbers = [data.get(k) for k in ("format", "issued_at", "expires_at")]
        version, issued, expires = (n if isinstance(n, int) and not isinstance(n, bool) else 0 for n in numbers)
        return cls(branch=branch, reason=reason if isinstance(reason, str) else None,
                   reaudit=data.get("reaudit") is not False, request_id=request_id,
                   queue=queue if isinstance(queue, str) else "", issued_at=issued, expires_at=expires or -1,
                   proof=IdentityProof.from_dict(data.get("proof")), format=version or 1,
                   carried_token="token" in data)


def check_request(request: PublishRequest, *, now: float, queue: str | None) -> None:
    """Everything that can be judged without asking anybody: the format, the addressee, the age, the integrity
    of the request against the digest its proof names. Raises RequestRefusedError."""
    again = f"Nothing was published. Fix: run `wap publish {request.branch}` again"
    if request.carried_token or request.format != FORMAT:
        raise RequestRefusedError(
            f"request {request.request_id} is in an old format (format {request.format}"
            f"{', with a bearer token, which was not read' if request.carried_token else ''}): the service accepts "
            f"only signed requests without any token. {again} with this version of wap.")
    if request.proof is None or request.proof.scheme != PROOF_SCHEME:
        raise RequestRefusedError(f"request {request.request_id} is not signed (no {PROOF_SCHEME} proof). {again}.")
    if queue is not None and request.queue != queue:
        raise RequestRefusedError(
            f"request {request.request_id} is addressed to queue {request.queue!r}, not to this service's queue "
            f"{queue!r}. {again} with WAP_PUBLISH_QUEUE_URL set to this service's queue.")
    lifetime = request.expires_at - request.issued_at
    if request.issued_at <= 0 or not 0 < lifetime <= MAX_LIFETIME_SECONDS:
        raise RequestRefusedError(
            f"request {request.request_id} claims a validity of {lifetime} s (from {request.issued_at} to "
            f"{request.expires_at}); at most {MAX_LIFETIME_SECONDS} s is accepted. {again}.")
    if request.issued_at > now + CLOCK_SKEW_SECONDS:
        raise RequestRefusedError(
            f"request {request.request_id} says it was issued {request.issued_at - now:.0f} s in the future: the "
            f"operator's clock is wrong. {again} once the clock is synchronised.")
    if now > request.expires_at:
        raise RequestRefusedError(
            f"request {request.request_id} expired: it was valid for {lifetime} s until {request.expires_at} (epoch "
            f"s) and reached the service {now - request.expires_at:.0f} s later (a backed-up queue, a retry after "
            f"an outage, or a replay). {again}.")
    if request.proof.digest != request.digest():
        raise RequestRefusedError(
            f"request {request.request_id} was changed after it was signed (its content does not match the digest "
            f"its signature covers). {again}.")


# --- who may ask -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """An IAM role or user, as WAP_PUBLISH_PRINCIPALS names it or as STS names its caller."""

    account: str
    kind: str  # "role" or "user"
    name: str  # the role's or user's name (IAM names are unique per account whatever their path)
    session: str | None = None  # an assumed role's session name


def principal_from(arn: str) -> Principal | None:
    """An IAM role or user ARN (arn:aws:iam::<account>:role/<path/>name, .../user/<path/>name), or an STS caller ARN
    (arn:aws:sts::<account>:assumed-role/<role>/<session>); None for anything else (root, federated users...)."""
    match = _ARN.fullmatch(arn.strip())
    if match is None:
        return None
    kind, rest, service = match["kind"], match["rest"], match["service"]
    if kind == "assumed-role":
        role, _, session = rest.partition("/")
        return Principal(match["account"], "role", role, session) if service == "sts" and role and session else None
    if service != "iam" or rest.endswith("/"):
        return None
    return Principal(match["account"], kind, rest.rsplit("/", 1)[-1])


def principals_from(raw: str) -> tuple[str, ...]:
    """WAP_PUBLISH_PRINCIPALS: comma-separated IAM role or user ARNs. Raises BadInputError naming the bad one."""
    values = tuple(v.strip() for v in raw.split(",") if v.strip())
    for value in values:
        found = principal_from(value)
        if found is None or found.session is not None:
            raise BadInputError(
                f"{PRINCIPALS_VARIABLE}: {value!r} is not an IAM role or user ARN. Fix: export {PRINCIPALS_VARIABLE}="
                f"arn:aws:iam::<account>:role/<prefix>-operator (setup_aws.py creates that role), comma-separated.")
    return values


def requester_from(caller_arn: str, allowed: tuple[str, ...]) -> str:
    """The caller STS verified, if it is one of `allowed` (a role's ARN admits every session of that role)."""
    caller = principal_from(caller_arn)
    if not allowed:
        raise RequestRefusedError(
            f"this service serves no publish requests: {PRINCIPALS_VARIABLE} is empty (it names the operator role). "
            f"Fix: set {PRINCIPALS_VARIABLE} on the function (serverless.yml sets the <prefix>-operator role).")
    if caller is not None and any(replace(caller, session=None) == principal_from(a) for a in allowed):
        return caller_arn
    raise RequestRefusedError(
        f"{caller_arn} may not publish: publish requests are served for {', '.join(allowed)} only. Fix: assume the "
        f"operator role (docs/deploy.md, \"How an operator publishes\") and run wap publish again.")


# --- serving -----------------------------------------------------------------------------------------------


class RequestLedger(Protocol):
    """Where requests are answered, each once (adapters/publish_requests.S3RequestResults)."""

    def put_once(self, request_id: str, answer: dict[str, Any]) -> bool:
        """Write the answer unless one exists; False when one did (this answer was refused)."""


Identify = Callable[[PublishRequest], str]  # the caller's ARN as STS verified it, or RequestRefusedError
Publish = Callable[[PublishRequest, str], Decision]  # (request, actor) -> the decision (raises as publish_branch)


def decision_document(decision: Decision) -> dict[str, Any]:
    return {"branch": decision.branch, "table": decision.table.qualified, "action": decision.action,
            "reason": decision.reason, "actor": decision.actor, "merged_hash": decision.merged_hash,
            "already": decision.already, "reaudit": decision.reaudit.to_dict() if decision.reaudit else None,
            "source": decision.source, "recorded_at": decision.recorded_at}


def _as_is(caller: str) -> str:
    return caller


def serve(request: PublishRequest, *, identify: Identify, allowed: tuple[str, ...], publish: Publish, now: float,
          queue: str | None, describe: Callable[[str], str] = _as_is) -> dict[str, Any]:
    """The answer to one request. Refusals (its format, age or integrity, who asks, a failed re-audit, a conflict,
    a missing branch) are answers; an infrastructure failure raises, so the message is retried. `describe`: the
    actor recorded for a verified caller's ARN (StsRequesters.actor)."""
    base: dict[str, Any] = {"request_id": request.request_id, "branch": request.branch, "reason": request.reason}
    caller = None
    try:
        check_request(request, now=now, queue=queue)
        caller = identify(request)
        actor = describe(requester_from(caller, allowed))
    except RequestRefusedError as exc:
        return base | {"action": "refused", "actor": describe(caller) if caller else None, "error": str(exc)}
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


def answer_request(request: PublishRequest, message_id: str, *, records: ActionRecords, ledger: RequestLedger,
                   identify: Identify, allowed: tuple[str, ...], publish: Publish, now: float, queue: str | None,
                   describe: Callable[[str], str] = _as_is, noted: Callable[[str], None] = lambda _line: None
                   ) -> dict[str, Any]:
    """Record the request id for this message (core.once), serve it, write the answer once. A message whose request
    id another message claimed first is refused and changes nothing (its answer is not written: the id's answer is
    the first message's); so is a redelivery of a message whose request was served (or started, by a delivery that
    died). Only the same message after an infrastructure failure goes on. `written` says whether this answer is the
    one kept."""
    def act() -> dict[str, Any]:
        answer = serve(request, identify=identify, allowed=allowed, publish=publish, now=now, queue=queue,
                       describe=describe)
        return answer | {"written": ledger.put_once(request.request_id, answer)}

    done = once(records, request.request_id, message_id, f"publish request {request.request_id}", act, noted=noted)
    if isinstance(done, Repeat):
        return {"request_id": request.request_id, "branch": request.branch, "action": "refused", "actor": None,
                "written": False, "seen": done.seen.value,
                "error": f"{done.reason}. The request's answer is the first delivery's."}
    return done
