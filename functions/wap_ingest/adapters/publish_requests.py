"""Publish requests on AWS and the catalog: sent on the ingest queue, answered in the lake bucket, the requester
checked by the catalog (wap_ingest.core.publish_requests says why an operator asks instead of merging).

- `SqsPublishRequests` sends a request to the function's own queue (the operator needs sqs:SendMessage on it);
- `S3RequestResults` keeps the answer at s3://<LAKE_BUCKET>/wap-requests/<request id>.json (written once);
- `CatalogRequesters` asks Nessie to accept the requester's token (GET /api/v2/config with it) before reading
  its subject and scopes; the token is never used for anything else, never logged, never stored.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import requests
from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.core.publish_requests import RESULT_PREFIX, PublishRequest, RequestRefusedError, requester_from

from .aws_errors import SQS, aws_error
from .http import json_object
from .nessie_errors import error_for, unavailable
from .s3_reports import S3ReportStore
from .verdicts import Verdict

UNVERIFIED = "(unverified: the catalog has no authentication)"
# 401/403 here judge the requester's token, not the service's: the request is refused (answered), not retried
_TOKEN_REFUSED = Verdict(RequestRefusedError, "the catalog did not accept the requester's token (expired, or not "
                         "issued for this catalog)", "run wap publish <branch> again (a fresh token)")
_REQUESTER_REFUSED: dict[int | str, Verdict] = {401: _TOKEN_REFUSED, 403: _TOKEN_REFUSED}


class SqsPublishRequests:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs, self._queue_url = sqs, queue_url

    def send(self, request: PublishRequest) -> None:
        try:
            self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=request.to_body())
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=SQS, doing=f"sending the publish request for {request.branch!r} to",
                            resource=self._queue_url, setting="WAP_PUBLISH_QUEUE_URL (the ingest queue's URL)") from exc


class S3RequestResults:
    """The answers, one JSON object per request id, kept by the audit reports' store under `wap-requests/`."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._store = S3ReportStore(s3, bucket, prefix=f"{RESULT_PREFIX}/", what="the publish request's answer")

    def uri(self, request_id: str) -> str:
        return self._store.uri(request_id)

    def put(self, request_id: str, answer: dict[str, Any]) -> None:
        self._store.save(request_id, answer)

    def get(self, request_id: str) -> dict[str, Any] | None:
        return self._store.load(request_id)

    def wait(self, request_id: str, timeout: float, *, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> dict[str, Any] | None:
        """The answer once written, or None after `timeout` seconds."""
        deadline = clock() + timeout
        while True:
            answer = self.get(request_id)
            if answer is not None or clock() >= deadline:
                return answer
            sleep(2.0)


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's payload, not verified here (the catalog verified the token first)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise RequestRefusedError("the request's token is not a JWT. Fix: send it with `wap publish` and an "
                                  "operator client configured (WAP_NESSIE_*).")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError as exc:
        raise RequestRefusedError("the request's token has an unreadable payload.") from exc
    if not isinstance(claims, dict):
        raise RequestRefusedError("the request's token has an unreadable payload.")
    return claims


class CatalogRequesters:
    """Who asks, as the catalog sees it. `authenticated`: the service itself talks to a catalog with authentication
    (then every request must carry a token the catalog accepts)."""

    def __init__(self, endpoint: str, *, authenticated: bool, allowed_roles: tuple[str, ...], timeout: float,
                 session: requests.Session | None = None) -> None:
        self._endpoint, self._authenticated = endpoint.rstrip("/"), authenticated
        self._allowed, self._timeout = allowed_roles, timeout
        self._http = session or requests.Session()

    def identify(self, request: PublishRequest) -> str:
        if not self._authenticated:
            return f"{request.claimed_actor or 'unknown'} {UNVERIFIED}"
        if request.token is None:
            raise RequestRefusedError(
                f"the publish request for {request.branch!r} carries no access token, and the catalog requires one. "
                f"Fix: configure your operator client (WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID, ...) and "
                f"run wap publish again.")
        url = f"{self._endpoint}/api/v2/config"
        doing = f"checking the requester of {request.branch!r}"
        try:
            response = self._http.get(url, headers={"Authorization": f"Bearer {request.token}"},
                                      timeout=self._timeout)
        except requests.RequestException as exc:
            raise unavailable(self._endpoint, doing, exc) from exc
        if response.status_code >= 400:
            payload = json_object(response)
            raise error_for(response.status_code, payload.get("errorCode"), str(payload.get("message") or ""),
                            doing=doing, endpoint=self._endpoint, special=_REQUESTER_REFUSED)
        return requester_from(claims_of(request.token), self._allowed)
