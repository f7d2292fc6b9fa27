"""The Slack side of acting on alerts, wired once per process from the Settings: the signing secret (read from the
secret store on first use), the replay record, the allow list, the replies, and the ingest queue the endpoint hands
the work to (and dead letters go back to)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws import SQS, SeenRequests, SqsDeadLetters, aws_error, secret_from_parameter
from wap_ingest.adapters.slack import SlackReplies, slack_client_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.slack_config import SlackActionSettings
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.interactions import Operators

from . import builders

SHOW_HIDES_SECONDS = 5  # a listed dead letter is hidden this long (an SQS receive), then can be redriven

NOT_CONFIGURED = ("acting on alerts from Slack is not configured: no signing secret. Fix: export "
                  "WAP_SLACK_SIGNING_SECRET_PARAMETER=<SSM SecureString name> (docs/deploy.md, \"Acting on alerts from "
                  "Slack\").")


class SlackActions:
    def __init__(self, settings: Settings, s3: Callable[[], Any], sqs: Callable[[], Any]) -> None:
        self._settings, self._s3, self._sqs = settings, s3, sqs

    @cached_property
    def config(self) -> SlackActionSettings:
        if self._settings.slack_actions is None:
            raise ConfigError(NOT_CONFIGURED)
        return self._settings.slack_actions

    @cached_property
    def secret(self) -> str:
        config = self.config
        if config.signing_secret is not None:
            return config.signing_secret
        assert config.signing_secret_parameter is not None  # slack_actions_from: one of the two
        return secret_from_parameter(config.signing_secret_parameter, variable="WAP_SLACK_SIGNING_SECRET_PARAMETER",
                                     what="the Slack signing secret", timeout=self._settings.http_timeout)

    @cached_property
    def replies(self) -> SlackReplies:
        settings = self._settings
        token = builders.slack_token_from(settings)
        if token is None:
            raise ConfigError("acting on alerts from Slack needs the Slack token (forms, message updates). Fix: export "
                              "WAP_SLACK_TOKEN_PARAMETER=<SSM SecureString name> (or SLACK_TOKEN locally).")
        client = slack_client_for(token, settings.slack_base_url, settings.http_timeout)
        return SlackReplies(client, base_url=settings.slack_base_url, timeout=settings.http_timeout)

    @cached_property
    def operators(self) -> Operators:
        return Operators(self.config.operators, self.replies.members)

    @cached_property
    def seen(self) -> SeenRequests:
        return SeenRequests(self._s3(), self._settings.lake_bucket)

    def _queue(self) -> str:
        if self.config.queue_url is None:
            raise ConfigError("WAP_QUEUE_URL is not set: the interactivity endpoint hands Slack actions to the "
                              "function through the ingest queue. Fix: export WAP_QUEUE_URL=<the ingest queue's URL> "
                              "(serverless.yml sets it).")
        return self.config.queue_url

    def forward(self, message: str) -> None:
        """Hand a verified request to the function (the ingest queue)."""
        queue = self._queue()
        try:
            self._sqs().send_message(QueueUrl=queue, MessageBody=message)
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=SQS, doing="handing a Slack action to the function through", resource=queue,
                            setting="WAP_QUEUE_URL") from exc

    def dead_letters(self, queue_name: str) -> SqsDeadLetters:
        """The dead-letter queue an alarm named, with the ingest queue its messages go back to."""
        try:
            url = str(self._sqs().get_queue_url(QueueName=queue_name)["QueueUrl"])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=SQS, doing="finding the dead-letter queue", resource=queue_name,
                            setting="the alarm's QueueName") from exc
        return SqsDeadLetters(self._sqs(), url, self._queue(), peek_seconds=SHOW_HIDES_SECONDS)
