"""The Nessie OAuth2 client credentials, the secret read once per process (SSM or Secrets Manager, or given), and
the token provider every Python client of the process shares."""

from __future__ import annotations

import functools
import logging

from wap_ingest.adapters.aws import secret_from_parameter
from wap_ingest.adapters.catalog.oauth2 import ClientCredentials, TokenProvider
from wap_ingest.core.errors import ConfigError

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def nessie_client(
    token_endpoint: str, client_id: str, scope: str | None, secret: str | None, secret_parameter: str | None,
    timeout: float,
) -> tuple[ClientCredentials, TokenProvider]:
    """Cached per process: the secret is fetched once, and one token provider serves every client."""
    if secret is None:
        if secret_parameter is None:
            raise ConfigError("WAP_NESSIE_CLIENT_SECRET_PARAMETER is not set. Fix: name the SecureString/secret.")
        secret = secret_from_parameter(secret_parameter, variable="WAP_NESSIE_CLIENT_SECRET_PARAMETER",
                                       what="the Nessie OAuth2 client secret", timeout=timeout)
    credentials = ClientCredentials(token_endpoint, client_id, secret, scope)
    log.info("Nessie client authentication: OAuth2 client %s, token endpoint %s", client_id, token_endpoint)
    return credentials, TokenProvider(credentials, timeout=timeout)
