"""OAuth2 access tokens for the service's Nessie clients: the client-credentials grant (RFC 6749 section 4.4).

`TokenProvider` asks the token endpoint for an access token (the client authenticated with HTTP Basic,
section 2.3.1), keeps it until shortly before `expires_in` runs out, and is shared safely between threads.
`BearerAuth` is the `requests` hook that puts a current token on every request (pynessie, the REST v2 calls).

Failures: an unreachable token endpoint, a 5xx or a 429 raise `CatalogUnavailableError` (the event is retried);
a refused client (400/401 `invalid_client`), scope or grant raise `ConfigError` naming the client id and the
setting to fix. The client secret is never logged and never part of an error message or a repr.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests
from requests.auth import AuthBase

from wap_ingest.adapters.catalog.http import json_object
from wap_ingest.core.errors import CatalogUnavailableError, ConfigError

log = logging.getLogger(__name__)

REFRESH_MARGIN = 60.0  # seconds before expiry at which a cached token is replaced
DEFAULT_LIFETIME = 60.0  # seconds, when the endpoint does not say (`expires_in` is only RECOMMENDED)
_CHECK_CLIENT = (
    "check WAP_NESSIE_CLIENT_ID and its secret (the value stored in WAP_NESSIE_CLIENT_SECRET_PARAMETER, "
    "or WAP_NESSIE_CLIENT_SECRET locally), and that the client may use the client-credentials grant."
)


@dataclass(frozen=True)
class ClientCredentials:
    token_endpoint: str
    client_id: str
    client_secret: str = field(repr=False)  # a secret: never printed
    scope: str | None = None


@dataclass
class _Cached:
    token: str
    refresh_at: float


class TokenProvider:
    """A cached, thread-safe client-credentials access token."""

    def __init__(
        self,
        credentials: ClientCredentials,
        *,
        timeout: float,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
        refresh_margin: float = REFRESH_MARGIN,
    ) -> None:
        self._credentials = credentials
        self._timeout = timeout
        self._session = session or requests.Session()
        self._clock = clock
        self._margin = refresh_margin
        self._lock = threading.Lock()
        self._cached: _Cached | None = None

    @property
    def client_id(self) -> str:
        return self._credentials.client_id

    @property
    def token_endpoint(self) -> str:
        return self._credentials.token_endpoint

    def __repr__(self) -> str:
        return f"TokenProvider(client_id={self.client_id!r}, token_endpoint={self.token_endpoint!r})"

    def token(self) -> str:
        """A valid access token: the cached one, or a new one once it is about to expire."""
        with self._lock:
            cached = self._cached
            if cached is None or self._clock() >= cached.refresh_at:
                cached = self._cached = self._fetch()
            return cached.token

    def subject(self) -> str:
        """Who the issuer says this client is: the `sub` claim of a current access token (Cognito: the app
        client id), for the decision log. The token is not verified here (it came from the configured token
        endpoint; Nessie verifies it); a token that is not a JWT with a `sub` gives the client id."""
        return subject_of(self.token()) or self.client_id

    def invalidate(self, token: str | None = None) -> None:
        """Forget the cached token (only if it is still `token`, when given): the next call fetches a new one."""
        with self._lock:
            if self._cached is not None and (token is None or self._cached.token == token):
                self._cached = None

    # --- the grant ---------------------------------------------------------------------------------

    def _fetch(self) -> _Cached:
        creds = self._credentials
        started = self._clock()
        data = {"grant_type": "client_credentials"}
        if creds.scope:
            data["scope"] = creds.scope
        # RFC 6749 2.3.1: id and secret are form-urlencoded, then sent with HTTP Basic.
        basic = (quote(creds.client_id, safe=""), quote(creds.client_secret, safe=""))
        try:
            response = self._session.post(
                creds.token_endpoint, data=data, auth=basic, headers={"Accept": "application/json"},
                timeout=self._timeout,
            )
        except requests.RequestException as exc:
            raise CatalogUnavailableError(
                f"the OAuth2 token endpoint {creds.token_endpoint} is unreachable ({type(exc).__name__}) while "
                f"getting a token for client {creds.client_id!r}. Fix: check WAP_NESSIE_TOKEN_ENDPOINT and the "
                f"network; the event is retried."
            ) from exc
        payload = json_object(response)
        if response.status_code != 200:
            raise self._refused(response.status_code, payload)
        token = payload.get("access_token")
        token_type = str(payload.get("token_type", "bearer")).lower()
        if not isinstance(token, str) or not token or token_type != "bearer":
            raise ConfigError(
                f"the OAuth2 token endpoint {creds.token_endpoint} answered without a bearer access token "
                f"(HTTP 200). Fix: check WAP_NESSIE_TOKEN_ENDPOINT is the token endpoint (e.g. Cognito's "
                f"https://<domain>.auth.<region>.amazoncognito.com/oauth2/token)."
            )
        lifetime = _lifetime(payload.get("expires_in"))
        log.info("OAuth2 access token obtained for client %s (expires in %.0fs)", creds.client_id, lifetime)
        return _Cached(token, started + lifetime - min(self._margin, lifetime / 2))

    def _refused(self, status: int, payload: dict[str, Any]) -> Exception:
        creds = self._credentials
        error = self._redacted(str(payload.get("error", "")))[:100]
        described = self._redacted(str(payload.get("error_description", "")))[:200]
        said = f"HTTP {status}" + "".join(f", {part}" for part in (error, described) if part)
        where = f"the OAuth2 token endpoint {creds.token_endpoint}"
        if status >= 500 or status == 429:
            return CatalogUnavailableError(
                f"{where} failed ({said}) while getting a token for client {creds.client_id!r}; the event is retried."
            )
        if error == "invalid_scope":
            return ConfigError(
                f"{where} refused the scope {creds.scope!r} for client {creds.client_id!r} ({said}). Fix: set "
                f"WAP_NESSIE_SCOPE to a scope the client is allowed (e.g. nessie/catalog), or unset it."
            )
        if status == 401 or error in ("invalid_client", "unauthorized_client", "unsupported_grant_type"):
            return ConfigError(f"{where} refused client {creds.client_id!r} ({said}). Fix: {_CHECK_CLIENT}")
        return ConfigError(
            f"{where} answered {said} for client {creds.client_id!r}. Fix: check WAP_NESSIE_TOKEN_ENDPOINT is the "
            f"token endpoint; {_CHECK_CLIENT}"
        )

    def _redacted(self, text: str) -> str:
        secret = self._credentials.client_secret
        return text.replace(secret, "***") if secret else text


class BearerAuth(AuthBase):
    """`Authorization: Bearer <token>` on each request, with a token from the provider (cached there).

    A 401 answer makes the provider forget that token, so the next request (the retried event) gets a new one.
    """

    def __init__(self, tokens: TokenProvider) -> None:
        self._tokens = tokens

    @property
    def client_id(self) -> str:
        return self._tokens.client_id

    def __repr__(self) -> str:
        return f"BearerAuth({self._tokens!r})"

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        token = self._tokens.token()
        request.headers["Authorization"] = f"Bearer {token}"

        def forget_refused(response: requests.Response, *_: Any, **__: Any) -> requests.Response:
            if response.status_code == 401:
                self._tokens.invalidate(token)
            return response

        request.hooks["response"].append(forget_refused)  # what register_hook does (untyped)
        return request


def subject_of(token: str) -> str | None:
    """The `sub` claim of a JWT's payload (not verified), or None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return sub if isinstance(sub, str) and sub else None


def _lifetime(expires_in: object) -> float:
    try:
        seconds = float(str(expires_in))
    except ValueError:
        return DEFAULT_LIFETIME
    return seconds if seconds > 0 else DEFAULT_LIFETIME

