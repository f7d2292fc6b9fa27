"""The Nessie adapter's errors for an unreachable server and a refused request (HTTP 401/403): each says what
failed, where, and the fix."""

from __future__ import annotations

from wap_ingest.core.errors import CatalogError, CatalogUnavailableError, ConfigError, WapError


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
