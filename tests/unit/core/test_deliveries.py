"""The alert and retry policy of deliveries (core/deliveries.py), on fakes: what is alerted on which attempt, the
back-off a failed message comes back after (through the Retries port), the invocation's deadline, and the object
handler's use case (`Deliveries`), which never raises."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from tests.fakes import FakeNotifier, FakeRetries
from wap_ingest.core.alerts import Alert, AlertKind
from wap_ingest.core.deliveries import (
    UNKNOWN_DELIVERY,
    BackOff,
    Deliveries,
    Delivery,
    Item,
    Result,
    Returned,
    back_off,
    deadline_for,
    notify,
    notify_unreadable,
)
from wap_ingest.core.errors import CatalogUnavailableError, OutOfTimeError, UnexpectedError
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject

SOURCE = SourceObject("source", "orders/a.parquet", size=10)
NESSIE_DOWN = CatalogUnavailableError("Nessie at http://nessie:19120 is unreachable")
QUEUE = "arn:aws:sqs:us-east-1:123456789012:wap-events"


def attempt(n: int | None, of: int | None = 5) -> Delivery:
    return Delivery(n, of, correlation_id=f"m1:{SOURCE.key}")


@pytest.mark.parametrize(("delivery", "alerted"), [
    (attempt(1), True), (attempt(2), False), (attempt(4), False), (attempt(5), True), (attempt(7), True),
    (UNKNOWN_DELIVERY, True),  # a direct invocation: every attempt may be the last
])
def test_an_infrastructure_failure_alerts_on_the_first_and_the_last_attempt(delivery: Delivery,
                                                                            alerted: bool) -> None:
    notifier = FakeNotifier()
    notify(NESSIE_DOWN, SOURCE, delivery, notifier)
    assert len(notifier.alerts) == int(alerted)
    if alerted:
        [alert] = notifier.alerts
        assert alert.kind is AlertKind.INFRASTRUCTURE and "not a data problem" in alert.summary
        assert ("dead-letter queue" in alert.summary) is delivery.final


def test_the_files_fault_and_the_audits_verdict_alert_once_whatever_the_attempt_and_a_publish_not() -> None:
    notifier = FakeNotifier()
    invalid = IngestOutcome(SOURCE, OutcomeStatus.INVALID, table="wap.orders", message="not Parquet")
    published = IngestOutcome(SOURCE, OutcomeStatus.PUBLISHED, table="wap.orders", rows=1)
    for delivery in (attempt(1), attempt(3)):
        notify(invalid, SOURCE, delivery, notifier)
        notify(published, SOURCE, delivery, notifier)
    assert [a.kind for a in notifier.alerts] == [AlertKind.INVALID, AlertKind.INVALID]


def test_a_deferred_file_is_not_alerted_and_a_notifier_that_raises_is_not_fatal() -> None:
    notifier = FakeNotifier()
    notify(OutOfTimeError("not started, the invocation is nearly out of time"), SOURCE, attempt(1), notifier)
    assert notifier.alerts == []

    class Raising(FakeNotifier):
        def notify(self, alert: Alert) -> bool:
            raise RuntimeError("slack_sdk blew up")

    notify(NESSIE_DOWN, SOURCE, attempt(1), Raising())  # logged, not raised
    notify_unreadable("m1", "not JSON", attempt(1), Raising())


@pytest.mark.parametrize(("delivery", "alerted"), [(attempt(1), True), (attempt(3), False), (attempt(5), True)])
def test_an_unreadable_message_alerts_on_its_first_and_last_attempt(delivery: Delivery, alerted: bool) -> None:
    notifier = FakeNotifier()
    notify_unreadable("m7", "not an S3 notification", delivery, notifier)
    assert [("m7" in a.summary, "dead-letter" in a.summary) for a in notifier.alerts] == (
        [(True, delivery.final)] if alerted else [])


def test_the_back_off_doubles_per_receive_is_capped_and_goes_through_the_retries_port() -> None:
    policy = BackOff(30, 600)
    assert [policy.seconds_for(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]
    retries = FakeRetries()
    delayed = back_off([Returned("m0", QUEUE, "r0", 1), Returned("m1", QUEUE, "r1", 3)], retries, policy)
    assert delayed == {"m0": 30, "m1": 120} and retries.delays == [(QUEUE, "r0", 30), (QUEUE, "r1", 120)]
    assert back_off([Returned("m0", QUEUE, "r0", 1)], None, policy) == {}  # no queue to tell (the EMR job)
    retries.refusing = True  # the queue did not take it: the message waits for its visibility timeout
    assert back_off([Returned("m0", QUEUE, "r0", 2)], retries, policy) == {}


def test_the_deadline_keeps_the_reserve_and_never_passes_without_a_clock() -> None:
    left = [60_000.0]
    deadline = deadline_for(lambda: left[0], 30)
    assert not deadline()
    left[0] = 29_999.0
    assert deadline()
    assert not deadline_for(None, 30)()


def run_recording(calls: list[tuple[list[Item], bool]], results: Callable[[Sequence[Item]], list[Result]]
                  ) -> Callable[[Sequence[Item], Callable[[], bool]], list[Result]]:
    def run(items: Sequence[Item], out_of_time: Callable[[], bool]) -> list[Result]:
        calls.append((list(items), out_of_time()))
        return results(items)

    return run


def test_the_handlers_use_case_ingests_with_the_deadline_and_never_raises() -> None:
    notifier, retries, calls = FakeNotifier(), FakeRetries(), []  # type: ignore[var-annotated]
    ok = Deliveries(run_recording(calls, lambda items: [IngestOutcome(i.source, OutcomeStatus.PUBLISHED)
                                                        for i in items]),
                    notifier, retries, BackOff(30, 900), reserve_seconds=30)
    items = [Item(SOURCE, attempt(2)), Item(SourceObject("source", "orders/b.parquet"), attempt(2))]
    assert [r.status for r in ok.ingest(items, lambda: 10_000.0)] == [OutcomeStatus.PUBLISHED] * 2  # type: ignore[union-attr]
    assert calls == [(items, True)]  # 10 s left, 30 s reserved: the run sees its deadline passed
    assert ok.ingest([]) == [] and len(calls) == 1  # nothing to do: nothing run

    def broken(items: Sequence[Item]) -> list[Result]:
        raise RuntimeError("a bug")

    failing = Deliveries(run_recording(calls, broken), notifier, retries, BackOff(30, 900), reserve_seconds=30)
    first = [Item(SOURCE, attempt(1))]
    [error] = failing.ingest(first)
    assert isinstance(error, UnexpectedError) and "unexpected RuntimeError: a bug" in str(error)
    assert [a.kind for a in notifier.alerts] == [AlertKind.INFRASTRUCTURE]  # alerted by the policy: 1st attempt
    failing.ingest(items)  # the 2nd attempt of each: logged, not alerted
    assert len(notifier.alerts) == 1
    failing.unreadable("m9", "not JSON", attempt(5))
    assert len(notifier.alerts) == 2 and failing.returned([Returned("m9", QUEUE, "r9", 5)]) == {"m9": 480}
