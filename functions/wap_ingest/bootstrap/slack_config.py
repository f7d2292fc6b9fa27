"""The settings of acting on alerts from Slack (part of `config.Settings`, read at the edge and validated).

Interactivity is on when a signing secret is configured: `WAP_SLACK_SIGNING_SECRET_PARAMETER` (an SSM SecureString
name or a Secrets Manager ARN, read on first use like the Slack token) or, for local use, `WAP_SLACK_SIGNING_SECRET`.
`WAP_SLACK_OPERATORS` lists who may act (Slack user ids and user-group ids); empty, no one may. The interactivity
endpoint hands each verified request to the function through the ingest queue, `WAP_QUEUE_URL` (locally
`WAP_STACK_QUEUE_URL`), the same queue the dead letters are redriven to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from wap_ingest.core.errors import ConfigError
from wap_ingest.core.interactions import operators_from

QUEUE_VARIABLES = ("WAP_QUEUE_URL", "WAP_STACK_QUEUE_URL")


@dataclass(frozen=True)
class SlackActionSettings:
    operators: frozenset[str]
    signing_secret_parameter: str | None = None
    signing_secret: str | None = field(default=None, repr=False)  # a secret: never printed
    queue_url: str | None = None  # the ingest queue: where the endpoint sends the work, where dead letters go back


def slack_actions_from(env: Mapping[str, str]) -> SlackActionSettings | None:
    """None when no signing secret is configured (alerts carry no buttons' endpoint: nothing to verify with)."""
    parameter = env.get("WAP_SLACK_SIGNING_SECRET_PARAMETER", "").strip() or None
    secret = env.get("WAP_SLACK_SIGNING_SECRET", "").strip() or None
    operators = operators_from(env.get("WAP_SLACK_OPERATORS", ""))
    if parameter and secret:
        raise ConfigError("WAP_SLACK_SIGNING_SECRET and WAP_SLACK_SIGNING_SECRET_PARAMETER are both set. Fix: unset "
                          "one (the parameter in AWS; the direct value only for local use).")
    if parameter is None and secret is None:
        if operators:
            raise ConfigError("WAP_SLACK_OPERATORS is set but no Slack signing secret is: requests from Slack cannot "
                              "be verified. Fix: export WAP_SLACK_SIGNING_SECRET_PARAMETER=<SSM SecureString name> "
                              "(docs/deploy.md, \"Acting on alerts from Slack\"), or unset WAP_SLACK_OPERATORS.")
        return None
    queue = next((env[name].strip() for name in QUEUE_VARIABLES if env.get(name, "").strip()), None)
    return SlackActionSettings(operators, parameter, secret, queue)
