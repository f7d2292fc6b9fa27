"""Secrets read at start-up from SSM Parameter Store (a SecureString name) or Secrets Manager (a secret ARN).

Used for the Slack token (WAP_SLACK_TOKEN_PARAMETER) and the Nessie OAuth2 client secret
(WAP_NESSIE_CLIENT_SECRET_PARAMETER). The value is returned to the caller only: it is never logged (not even
by botocore at DEBUG), and errors name the variable, the parameter and the fix, never the value.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.aws.errors import SECRETS_MANAGER, SSM, Failure, aws_error
from wap_ingest.core.errors import ConfigError

SECRETS_MANAGER_ARN = "arn:aws:secretsmanager:"
_RESPONSE_BODY_LOGGER = "botocore.parsers"  # logs every response body at DEBUG: the decrypted value included


# A parameter that does not exist: the table's NO_RESOURCE, with the fix for a secret
_NOT_THERE = {Failure.NO_RESOURCE: Verdict(ConfigError, "there is no such parameter or secret",
                                           "create the SecureString/secret, or set {setting} to the one that holds it")}


@contextmanager
def _response_bodies_unlogged() -> Iterator[None]:
    """At DEBUG, botocore would log the response, i.e. the secret: its response-body logger is held at INFO."""
    logger = logging.getLogger(_RESPONSE_BODY_LOGGER)
    previous = logger.level
    logger.setLevel(max(previous, logging.INFO))
    try:
        yield
    finally:
        logger.setLevel(previous)


def secret_from_parameter(name: str, *, variable: str, what: str, ssm: Any = None, secrets: Any = None,
                          timeout: float = 30.0) -> str:
    """The value of `name`: a Secrets Manager secret if it is one's ARN, else an SSM (SecureString) parameter.

    `variable` is the setting that named the parameter and `what` the secret it holds, for the error message;
    `timeout` bounds each call (WAP_HTTP_TIMEOUT), as every other network call of the service.
    """
    import boto3  # imported here: boto3 is slow to import and only needed when a parameter is configured
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    bounded = Config(connect_timeout=min(timeout, 10), read_timeout=timeout,
                     retries={"max_attempts": 2, "mode": "standard"})
    try:
        with _response_bodies_unlogged():
            if name.startswith(SECRETS_MANAGER_ARN):
                client = secrets or boto3.client("secretsmanager", config=bounded)
                value = str(client.get_secret_value(SecretId=name)["SecretString"]).strip()
            else:
                client = ssm or boto3.client("ssm", config=bounded)
                value = str(client.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]).strip()
    except (BotoCoreError, ClientError) as exc:  # the value is in no error: only the parameter's name is named
        service = SECRETS_MANAGER if name.startswith(SECRETS_MANAGER_ARN) else SSM
        raise aws_error(exc, service=service, doing=f"{variable}={name!r}: cannot read {what} from", resource=name,
                        setting=variable, special=_NOT_THERE) from exc
    if not value:
        raise ConfigError(f"{variable}={name!r}: {what} is empty. Fix: store the value in the SecureString/secret.")
    return value
