"""What the function's entry points are handed: their use cases, built by the composition root from the process's
Service (root.py), each family on first use, and kept for warm invocations (`bootstrap.function()`,
`bootstrap.slack_endpoint()`). A handler reads no setting and reaches no adapter through a service object: it gets
the use cases it serves, as Powertools' `process_partial_response` gets its processor and record handler.
`Deliveries` (core/deliveries.py) ingests, alerts an unreadable message and sets the retries' back-off by the core's
policy; `FunctionUseCases` builds it, and the other families, from the Service's adapters.

| entry point | handed |
|---|---|
| the object handler (SQS batches, direct S3 and EventBridge events) | `core.deliveries.Deliveries` |
| an operator's publish request (in an SQS batch) | `FunctionUseCases.answer` |
| the alarm, a job run that ended, the schedule | `OperationUseCases` |
| a Slack action (in an SQS batch) | `SlackActionUseCases` |
| the interactivity endpoint (its own function) | `SlackEndpointUseCases` |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from wap_ingest.core.alerts import Alert
from wap_ingest.core.dead_letters import QueueAlarm
from wap_ingest.core.deliveries import BackOff, Deliveries, RemainingMillis, deadline_for
from wap_ingest.core.errors import WapError
from wap_ingest.core.interactions import Answer, Asked, Operators
from wap_ingest.core.job_sweep import SweepReport
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.once import ActionRecords
from wap_ingest.core.operations import JobEnded, job_run_ended, tell_alarm
from wap_ingest.core.ports import LargeFileJobs, Notifier
from wap_ingest.core.publish_requests import PublishRequest

from .root import Service

if TYPE_CHECKING:
    from wap_ingest.adapters.aws import SeenRequests
    from wap_ingest.adapters.slack import SlackReplies


@dataclass(frozen=True)
class OperationUseCases:
    """The function's operational events: the dead-letter queue's alarm (said in Slack), a large file's EMR run that
    ended (resubmitted, or alerted once its attempts are used up), and the schedule (the sweep of the EMR runs, then
    every table's maintenance while the invocation has time left)."""

    alarm: Callable[[QueueAlarm], None]
    job_ended: Callable[[str, str, str], JobEnded]  # (application id, job run id, state)
    sweep_job_runs: Callable[[], SweepReport | None]  # None: EMR is not configured
    maintain_all: Callable[[RemainingMillis | None], list[MaintenanceReport | WapError]]


@dataclass(frozen=True)
class SlackActionUseCases:
    """An action asked from an alert in Slack, forwarded through the queue: the signing secret it is verified with
    again, where each action is recorded once, the allow list, the replies, and the action itself (the use cases the
    `wap` commands run: core.interactions)."""

    secret: Callable[[], str]
    records: Callable[[], ActionRecords]
    operators: Callable[[], Operators]
    replies: Callable[[], SlackReplies]
    act: Callable[[Asked], Answer]


@dataclass(frozen=True)
class SlackEndpointUseCases:
    """The interactivity endpoint (its own function): the signing secret, the replay record, the allow list, the
    replies, and the ingest queue it hands verified requests to."""

    secret: Callable[[], str]
    seen: Callable[[], SeenRequests]
    operators: Callable[[], Operators]
    replies: Callable[[], SlackReplies]
    forward: Callable[[str], None]


class _NotifierOnFirstAlert(Notifier):
    """The process's notifier, built when the first alert is sent (its Slack token may come from the secret store):
    a notifier that cannot be built fails that alert (logged by the core), never the invocation."""

    def __init__(self, build: Callable[[], Notifier]) -> None:
        self._build = build

    def notify(self, alert: Alert) -> bool:
        return self._build().notify(alert)


class FunctionUseCases:
    """The Lambda function's use cases, one family per kind of request, each built from the process's Service on
    first use (its adapters are built once, there) and kept: a warm container reuses them."""

    def __init__(self, root: Service) -> None:
        self._root = root
        # the event reader's one parameter: an SQS message's last attempt (the queue's maxReceiveCount)
        self.max_receives: int = root.settings.max_receives

    @cached_property
    def deliveries(self) -> Deliveries:
        root, settings = self._root, self._root.settings
        return Deliveries(run=lambda items, out_of_time: root.ingest_all(items, out_of_time),
                          notifier=_NotifierOnFirstAlert(lambda: root.notifier), retries=root.retries,
                          policy=BackOff(settings.retry_base_seconds, settings.retry_max_seconds),
                          reserve_seconds=settings.time_reserve_seconds)

    @cached_property
    def operations(self) -> OperationUseCases:
        root, reserve = self._root, self._root.settings.time_reserve_seconds

        def jobs() -> LargeFileJobs | None:
            return None if root.large_files is None else root.large_files.jobs

        return OperationUseCases(
            alarm=lambda alarm: tell_alarm(alarm, root.notifier),
            job_ended=lambda application, run, state: job_run_ended(application, run, state, jobs=jobs(),
                                                                    notifier=root.notifier),
            sweep_job_runs=lambda: root.sweep_job_runs(),
            maintain_all=lambda remaining: root.maintain(None, out_of_time=deadline_for(remaining, reserve)))

    def answer(self, request: PublishRequest, message_id: str, queue_arn: str | None = None) -> dict[str, Any]:
        """An operator's publish request, served with the service's own catalog role (Service.answer)."""
        return self._root.answer(request, message_id, queue_arn)

    @cached_property
    def slack(self) -> SlackActionUseCases:
        root = self._root
        return SlackActionUseCases(secret=lambda: root.slack.secret, records=lambda: root.actions,
                                   operators=lambda: root.slack.operators, replies=lambda: root.slack.replies,
                                   act=lambda asked: root.act(asked))


def slack_endpoint_for(root: Service) -> SlackEndpointUseCases:
    """The endpoint's use cases; nothing is built until a request needs it (the secret, the clients)."""
    return SlackEndpointUseCases(secret=lambda: root.slack.secret, seen=lambda: root.slack.seen,
                                 operators=lambda: root.slack.operators, replies=lambda: root.slack.replies,
                                 forward=lambda message: root.slack.forward(message))
