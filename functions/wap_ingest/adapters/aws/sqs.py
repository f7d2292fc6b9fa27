"""SqsRetries: a failed or deferred message's next attempt, delayed with ChangeMessageVisibility.

Lambda's SQS event source leaves a message reported in `batchItemFailures` invisible for the queue's whole
visibility timeout (5,400 s here: it must be >= 6x the function's timeout), so five attempts would take hours.
The function sets each such message's visibility itself, from its receive count (core.deliveries.BackOff),
before it returns; the local worker does the same, so retries behave alike in AWS and locally.
A failure to change the visibility is logged, never raised: the message then waits for the queue's timeout.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import SQS, aws_error
from wap_ingest.core.ports import Retries

log = logging.getLogger(__name__)

MAX_VISIBILITY_SECONDS = 43_200  # SQS's limit (12 hours)


def queue_url_parts(queue_arn: str) -> tuple[str, str]:
    """(account id, queue name) from `arn:aws:sqs:<region>:<account>:<name>`."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    return parts[4], parts[5]


class SqsRetries(Retries):
    def __init__(self, client: Any) -> None:
        self._sqs = client
        self._urls: dict[str, str] = {}

    def back_off(self, queue_arn: str, receipt_handle: str, seconds: int) -> bool:
        """Make the message visible again in `seconds`; True if SQS took it."""
        seconds = max(0, min(int(seconds), MAX_VISIBILITY_SECONDS))
        try:
            url = self._url(queue_arn)
            self._sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds)
            return True
        except ValueError as exc:
            why: Exception = exc
        except (ClientError, BotoCoreError) as exc:
            why = aws_error(exc, service=SQS, doing=f"delaying a message's retry by {seconds}s on", resource=queue_arn)
        log.warning("the message waits for the queue's visibility timeout instead: %s", why)
        return False

    def _url(self, queue_arn: str) -> str:
        if queue_arn not in self._urls:
            account, name = queue_url_parts(queue_arn)
            self._urls[queue_arn] = str(self._sqs.get_queue_url(QueueName=name,
                                                                QueueOwnerAWSAccountId=account)["QueueUrl"])
        return self._urls[queue_arn]
