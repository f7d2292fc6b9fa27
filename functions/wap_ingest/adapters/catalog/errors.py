"""Every Nessie HTTP failure, judged once: Nessie's error code (the `errorCode` of its JSON error body, where one
status covers several meanings) or else the HTTP status, to the project's errors, in one table. Every REST call of
adapters/catalog/nessie.py (REST v2 with `requests`, and pynessie's v1 calls, whose exceptions carry the same status and
code) and of the lake reader (adapters/catalog/reader.py) goes through `error_for` (PyIceberg's
`_handle_non_200_response(exc, {404: NoSuchTableError})` is the model: a caller passes only what its call changes).

- REFERENCE_NOT_FOUND (404: a branch, or a commit on it): BranchNotFoundError (a WAP run starts again from main).
- CONTENT_NOT_FOUND, NAMESPACE_NOT_FOUND (404): CatalogError (no such table or namespace on that reference).
- REFERENCE_ALREADY_EXISTS (409): BranchExistsError (a WAP run starts again under a new name).
- REFERENCE_CONFLICT (409): StaleHashError, and MergeConflictError for a merge (`MERGE`). Nessie has one code for
  "not at the expected hash" (a delete, a commit at a stale hash) and for a merge whose keys changed on the target.
- BAD_REQUEST (400: a bad name, CEL filter or body), and any 4xx not listed: CatalogError (resending cannot help).
- 401: ConfigError, 403 (FORBIDDEN): CatalogError, each naming the OAuth2 client and the fix (`refused`).
- 404 without a Nessie error code: ConfigError (the URL is not Nessie's API: NESSIE_ENDPOINT is wrong).
- 409 without a code: MergeConflictError; 412 (pynessie's "please retry"): StaleHashError; both retried from main.
- TOO_MANY_REQUESTS (429) and every 5xx: CatalogUnavailableError (an outage or overload: the message is retried),
  except a 5xx whose message names a Java exception of `BY_SERVER_EXCEPTION` (a branch deleted mid-request).
- No answer (connection refused, a timeout): CatalogUnavailableError (`unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.catalog.http import json_object
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    CatalogUnavailableError,
    ConfigError,
    MergeConflictError,
    StaleHashError,
    WapError,
)

_NOT_FOUND = Verdict(CatalogError, "no such table or namespace there", "check the name (wap history <table>)")
BY_CODE: dict[str, Verdict] = {
    "REFERENCE_NOT_FOUND": Verdict(BranchNotFoundError, "no such branch, or no such commit on it",
                                   "check the name (wap branches lists the open ones); a WAP run starts again from "
                                   "a fresh main by itself"),
    "CONTENT_NOT_FOUND": _NOT_FOUND,
    "NAMESPACE_NOT_FOUND": _NOT_FOUND,
    "REFERENCE_ALREADY_EXISTS": Verdict(BranchExistsError, "a branch of that name exists already",
                                        "a WAP run starts again under a new name by itself; by hand: pick another "
                                        "name, or delete that branch"),
    "REFERENCE_CONFLICT": Verdict(StaleHashError, "the reference is no longer at the expected hash",
                                  "a WAP run starts again from a fresh main by itself; by hand: read the branch "
                                  "again (wap branches)"),
    "TOO_MANY_REQUESTS": Verdict(CatalogUnavailableError, "Nessie is overloaded (its version store throttles)",
                                 "none needed if it passes: the message is retried with back-off"),
}
_REFUSED = Verdict(ConfigError, "")  # 401/403: `refused`, which names the client
BY_STATUS: dict[int, Verdict] = {
    400: Verdict(CatalogError, "Nessie refused the request as invalid",
                 "check the name or value the message names (a branch name: a letter, then letters, digits, ./_-)"),
    401: _REFUSED,
    403: _REFUSED,
    404: Verdict(ConfigError, "this is not Nessie's API (no Nessie error code)",
                 "set NESSIE_ENDPOINT to the server's base URL, e.g. http://127.0.0.1:19120 (without /api/v1 or "
                 "/api/v2)"),
    409: Verdict(MergeConflictError, "a conflict with another writer", "none needed: a WAP run starts again from main"),
    412: Verdict(StaleHashError, "the reference moved during the request", "none needed: it is retried from main"),
    429: BY_CODE["TOO_MANY_REQUESTS"],
}
# A server error with no code whose message names a Java exception that means a known answer. Nessie 0.99 answers a
# commit onto a branch deleted during the request (a concurrent duplicate's clean-up) with HTTP 500 "Internal reference
# not found, caused by ...RefNotFoundException: Reference refs/heads/<branch> does not exist" (seen in
# tests/integration/core/pipeline/test_exactly_once.py's ten concurrent deliveries): the branch is gone, as
# REFERENCE_NOT_FOUND.
BY_SERVER_EXCEPTION: dict[str, Verdict] = {
    "RefNotFoundException": Verdict(BranchNotFoundError, "the branch was deleted while Nessie worked on the request",
                                    "none needed: a WAP run starts again from a fresh main by itself"),
}
_OTHER_CLIENT_ERROR = Verdict(CatalogError, "Nessie refused the request", "see Nessie's message")
_SERVER_ERROR = Verdict(CatalogUnavailableError, "Nessie failed (a server error)",
                        "none needed if it passes: the message is retried; if it lasts, see Nessie's log")
# A merge: REFERENCE_CONFLICT means the target changed the same content since the expected hash (no fix: the caller's)
MERGE: dict[int | str, Verdict] = {
    "REFERENCE_CONFLICT": Verdict(MergeConflictError, "the target changed the same content since the expected hash")}


def error_for(status: int, code: str | None, message: str, *, doing: str, endpoint: str, client_id: str | None = None,
              special: Mapping[int | str, Verdict] | None = None) -> WapError:
    """The project's error for Nessie's answer `status` (+ its `errorCode` and `message`) to `doing`. `special`: the
    verdicts this call gives a code or a status (a code first: the call's, then the table's; then the status, the
    call's, then the table's); `client_id`: the OAuth2 client whose token the request carried (None: none), for a
    401/403."""
    code = code if code and code != "UNKNOWN" else None  # pynessie says UNKNOWN when the body had no code
    special = special or {}
    by_code = (special.get(code) or BY_CODE.get(code)) if code else None  # a code says more than a status
    named = next((v for name, v in BY_SERVER_EXCEPTION.items() if name in message), None) if status >= 500 else None
    verdict = (by_code or named or special.get(status) or BY_STATUS.get(status)
               or (_SERVER_ERROR if status >= 500 else _OTHER_CLIENT_ERROR))
    if verdict is _REFUSED:
        return refused(endpoint, client_id, doing, status)
    said = f"Nessie at {endpoint} answered HTTP {status}" + (f" {code}" if code else "")
    text = " ".join(message.split())[:300].rstrip(".")
    return verdict.raised(doing, f"{said}: {text}" if text else said)


def checked(response: requests.Response, doing: str, *, endpoint: str, client_id: str | None = None,
            special: Mapping[int | str, Verdict] | None = None) -> dict[str, Any]:
    """A REST v2 answer's JSON object; an answer of HTTP 400 or more raises the table's error for it."""
    payload = json_object(response)
    if response.status_code >= 400:
        raise error_for(response.status_code, payload.get("errorCode"),
                        str(payload.get("message") or response.text[:300]), doing=doing, endpoint=endpoint,
                        client_id=client_id, special=special)
    return payload


def unavailable(endpoint: str, doing: str, exc: Exception) -> CatalogUnavailableError:
    return CatalogUnavailableError(
        f"Nessie at {endpoint} is unreachable while {doing}: {type(exc).__name__}. "
        f"Fix: check NESSIE_ENDPOINT and that the server is up (locally: `wap stack status`)."
    )


def refused(endpoint: str, client_id: str | None, doing: str, status: int) -> WapError:
    """Nessie said 401 (no valid token) or 403 (not allowed): a setting to fix, not an outage. `client_id`: the
    OAuth2 client the requests carried a token of, None without one."""
    where = f"Nessie at {endpoint}"
    if status == 403:
        who = f"OAuth2 client {client_id!r}" if client_id else "anonymous requests"
        return CatalogError(
            f"{doing}: {where} denied the request (HTTP 403) for {who}. Fix: allow it in Nessie's "
            f"authorization rules (nessie.server.authorization.rules.*), or use a client that is allowed."
        )
    if client_id is None:
        return ConfigError(
            f"{doing}: {where} requires authentication: authentication failed (HTTP 401), and no OAuth2 "
            f"client is configured. Fix: set WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and "
            f"WAP_NESSIE_CLIENT_SECRET_PARAMETER (docs/deploy.md, \"Client authentication\")."
        )
    return ConfigError(
        f"{doing}: {where} refused the access token of OAuth2 client {client_id!r}: authentication "
        f"failed (HTTP 401). Fix: check WAP_NESSIE_CLIENT_ID and WAP_NESSIE_TOKEN_ENDPOINT name a client of "
        f"the issuer Nessie trusts (its quarkus.oidc.auth-server-url)."
    )
