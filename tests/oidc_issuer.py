"""The local OIDC issuer (wap_stack.oidc) with one client that gets any scope it asks for, as the
client-authentication tests use it. Issuers of several clients with fixed scopes: `wap_stack.oidc`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from wap_stack.oidc import Issuer, OidcClient, TokenRequest
from wap_stack.oidc import running_issuer as _running

__all__ = ["Issuer", "TokenRequest", "running_issuer"]


@contextmanager
def running_issuer(client_id: str, client_secret: str, *, audience: str = "nessie", lifetime: int = 300
                   ) -> Iterator[Issuer]:
    """Start the issuer on a free port of 127.0.0.1 (in a thread of this process); stop it on exit."""
    with _running({client_id: OidcClient(client_secret)}, audience=audience, lifetime=lifetime) as issuer:
        yield issuer
