"""What an attempt at a delivery means, decided here for every entry point: which results are alerted on which
attempt, when a message that failed comes back, and when an invocation stops starting work.

Alerts: a file's own fault (INVALID) and an audit's verdict (REJECTED) alert once; an infrastructure failure (the
message is retried) alerts on the first attempt ("will be retried") and the last ("in the dead-letter queue"), and
only logs the ones between, so a Nessie outage does not page once per retry. A deferred file (out of time, or of
disk) was not started: no alert. A message that cannot be read at all alerts on its first and last attempt too.

Retries: a failed or deferred message comes back after a capped exponential back-off from its receive count
(`BackOff`), set through the Retries port (SQS's ChangeMessageVisibility), not after the queue's whole visibility
timeout. Deadline: an invocation starts nothing once it has less than its reserve left (`deadline_for`).

`Deliveries` is the use case an object handler is handed (the function's SQS, S3 and EventBridge handler), so the
handler only maps the event to items and the results to its answer (`batchItemFailures`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .alerts import alert_for_failure, alert_for_outcome, alert_for_unreadable_event
from .errors import DeferredError, UnexpectedError, WapError
from .models import IngestOutcome, SourceObject, TableRef
from .ports import Notifier, Retries

log = logging.getLogger(__name__)

Result = IngestOutcome | WapError  # an object's outcome, or the error that fails it (as core.pipeline.Result)


@dataclass(frozen=True)
class Delivery:
    """Where this attempt stands in the event source's retries (None: unknown, e.g. a direct invoke), and
    the correlation id the entry point gave the object (on its log lines and its alert)."""

    attempt: int | None = None
    max_attempts: int | None = None
    correlation_id: str | None = None

    @property
    def final(self) -> bool:
        return self.attempt is None or self.max_attempts is None or self.attempt >= self.max_attempts

    @property
    def alert_worthy(self) -> bool:
        return self.attempt is None or self.attempt == 1 or self.final


UNKNOWN_DELIVERY = Delivery()


@dataclass(frozen=True)
class Item:
    """One object an entry point was told about: how it was delivered, and an explicit table (`wap ingest
    --table`) when the key is not to be routed."""

    source: SourceObject
    delivery: Delivery = UNKNOWN_DELIVERY
    table: TableRef | None = None


def notify(result: Result, source: SourceObject, delivery: Delivery, notifier: Notifier) -> None:
    """The alert policy of the module docstring for one object's result. A notifier that raises (it must not) is
    logged, never fatal."""
    try:
        if isinstance(result, DeferredError):
            return  # handed back before it started: nothing happened, nothing to tell
        if isinstance(result, WapError):
            if delivery.alert_worthy:
                notifier.notify(alert_for_failure(source, str(result), attempt=delivery.attempt,
                                                  final=delivery.final, correlation_id=delivery.correlation_id))
            else:
                log.warning("attempt %s failed (no alert between first and last): %s", delivery.attempt, result,
                            extra={"object_key": source.key, "correlation_id": delivery.correlation_id})
            return
        alert = alert_for_outcome(result, correlation_id=delivery.correlation_id)
        if alert is not None:
            notifier.notify(alert)
    except Exception:
        log.exception("the alert for %s could not be sent", source.uri)


def notify_unreadable(message_id: str, reason: str, delivery: Delivery, notifier: Notifier) -> None:
    """A message that is not an event this service reads: logged on every attempt, alerted on its first and last."""
    log.error("unreadable message", extra={"error": reason, "message_id": message_id})
    if not delivery.alert_worthy:
        return
    try:
        notifier.notify(alert_for_unreadable_event(message_id, reason, final=delivery.final))
    except Exception:
        log.exception("the alert for the unreadable message %s could not be sent", message_id)


def retry_delay_seconds(receive_count: int, base_seconds: float, max_seconds: float) -> int:
    """A failed or deferred message's next attempt: a capped exponential back-off from its receive count (the 1st
    retry after `base_seconds`, then twice as long each time, never more than `max_seconds`)."""
    return int(min(max_seconds, base_seconds * 2 ** max(0, receive_count - 1)))


@dataclass(frozen=True)
class BackOff:
    """WAP_RETRY_BASE_SECONDS and WAP_RETRY_MAX_SECONDS."""

    base_seconds: float
    max_seconds: float

    def seconds_for(self, receive_count: int) -> int:
        return retry_delay_seconds(receive_count, self.base_seconds, self.max_seconds)


@dataclass(frozen=True)
class Returned:
    """A message that failed or was deferred, as its queue knows it: it is to come back."""

    message_id: str
    queue_arn: str
    receipt_handle: str
    receive_count: int


def back_off(returned: Iterable[Returned], retries: Retries | None, policy: BackOff) -> dict[str, int]:
    """Each message made visible again after its back-off; the delays the queue took, by message id (none without a
    Retries port: the EMR job, a direct invocation)."""
    delayed: dict[str, int] = {}
    if retries is None:
        return delayed
    for message in returned:
        seconds = policy.seconds_for(message.receive_count)
        if retries.back_off(message.queue_arn, message.receipt_handle, seconds):
            delayed[message.message_id] = seconds
            log.info("retry delayed", extra={"message_id": message.message_id, "seconds": seconds,
                                             "receive_count": message.receive_count})
    return delayed


RemainingMillis = Callable[[], float]  # the invocation's time left (Lambda's context.get_remaining_time_in_millis)


def deadline_for(remaining_ms: RemainingMillis | None, reserve_seconds: float) -> Callable[[], bool]:
    """True once the invocation has less time left than `reserve_seconds` (WAP_TIME_RESERVE_SECONDS; never without a
    clock): what is not started by then is deferred, never cut off mid-merge."""
    if remaining_ms is None:
        return lambda: False
    reserve_ms = float(reserve_seconds) * 1000
    clock = remaining_ms
    return lambda: bool(clock() < reserve_ms)


@dataclass(frozen=True)
class Deliveries:
    """What an object handler is handed: `ingest` runs the objects it was delivered (routed, run and alerted by
    core.ingest, one result per item, never raising), `unreadable` alerts a message it cannot read, `returned` sets
    when the failed messages come back."""

    run: Callable[[Sequence[Item], Callable[[], bool]], list[Result]]  # core.ingest.ingest with its ports
    notifier: Notifier
    retries: Retries | None
    policy: BackOff
    reserve_seconds: float

    def ingest(self, items: Sequence[Item], remaining_ms: RemainingMillis | None = None) -> list[Result]:
        """One result per item, in order. Should the call itself raise (a bug, an adapter that cannot be built),
        every item it was given fails with that error, alerted by the policy, and nothing else does."""
        if not items:
            return []
        try:
            return self.run(items, deadline_for(remaining_ms, self.reserve_seconds))
        except Exception as exc:
            log.exception("ingesting the invocation's objects raised", extra={"error_type": type(exc).__name__})
            error = UnexpectedError(f"ingesting {len(items)} objects: unexpected {type(exc).__name__}: {exc}")
            for item in items:
                notify(error, item.source, item.delivery, self.notifier)
            return [error] * len(items)

    def unreadable(self, message_id: str, reason: str, delivery: Delivery) -> None:
        notify_unreadable(message_id, reason, delivery, self.notifier)

    def returned(self, messages: Iterable[Returned]) -> dict[str, int]:
        return back_off(messages, self.retries, self.policy)
