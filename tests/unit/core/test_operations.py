"""The function's operational events and the operators' prune as use cases (core/operations.py), on fakes: the
alarm said in Slack, a large file's ended run resubmitted or alerted once its attempts are used up, one summary
alert per prune, and the EMR job's refusal of another audits file than the function's."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.fakes import FakeJobs, FakeNotifier
from wap_ingest.core.alerts import Alert, AlertKind
from wap_ingest.core.dead_letters import QueueAlarm
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.operations import job_run_ended, prune_and_tell, refusal_for, tell_alarm
from wap_ingest.core.review import OpenBranch, Pruned

SOURCE = SourceObject("source", "orders/huge.csv", size=5 * 1024**3, etag="e1")
TABLE = TableRef("wap", "orders")


def alarm(state: str) -> QueueAlarm:
    return QueueAlarm("wap-ingest-dead-letters", state, "Threshold Crossed", "wap-ingest-dlq", "2026-11-22T12:00:00Z")


def test_the_alarm_is_said_when_it_fires_or_clears_and_not_without_data() -> None:
    notifier = FakeNotifier()
    for state in ("ALARM", "INSUFFICIENT_DATA", "OK"):
        tell_alarm(alarm(state), notifier)
    assert len(notifier.alerts) == 2 and "wap-ingest-dlq" in notifier.alerts[0].title


def test_a_failed_run_is_resubmitted_then_alerted_once_its_attempts_are_used_up() -> None:
    jobs, notifier = FakeJobs(max_attempts=2), FakeNotifier()
    first = jobs.submit(SOURCE, TABLE)
    assert job_run_ended("app", first.job_run_id, "SUCCESS", jobs=jobs, notifier=notifier).resubmitted is None
    jobs.end(first)
    again = job_run_ended("app", first.job_run_id, "FAILED", jobs=jobs, notifier=notifier)
    assert again.resubmitted is not None and again.error is None and notifier.alerts == []
    jobs.end(jobs.started[(TABLE.qualified, SOURCE.identity)], "CANCELLED")
    last = job_run_ended("app", again.resubmitted, "CANCELLED", jobs=jobs, notifier=notifier)
    assert last.resubmitted is None and last.error is not None and "failed 2 time(s)" in last.error
    assert last.to_dict() == {"job_run": again.resubmitted, "state": "CANCELLED", "resubmitted": None,
                              "error": last.error}
    [alert] = notifier.alerts
    assert alert.kind is AlertKind.INFRASTRUCTURE


def test_without_emr_an_ended_run_is_only_acknowledged() -> None:
    notifier = FakeNotifier()
    ended = job_run_ended("app", "run-1", "FAILED", jobs=None, notifier=notifier)
    assert ended.to_dict() == {"job_run": "run-1", "state": "FAILED", "resubmitted": None} and notifier.alerts == []


def test_a_prune_says_once_what_it_discarded_and_a_dry_run_nothing() -> None:
    notifier = FakeNotifier()
    old = OpenBranch("wap-orders-1", "abc", TABLE, datetime(2026, 1, 1, tzinfo=UTC))
    done = Pruned((old,), ())
    assert prune_and_tell(lambda: done, dry_run=True, reason="r", actor="alice", notifier=notifier) is done
    prune_and_tell(lambda: Pruned((), ()), dry_run=False, reason="r", actor="alice", notifier=notifier)
    assert notifier.alerts == []
    prune_and_tell(lambda: done, dry_run=False, reason="pruned: older than 0m", actor="alice", notifier=notifier)
    [alert] = notifier.alerts
    assert alert.kind is AlertKind.MAINTENANCE and "wap-orders-1 (wap.orders)" in alert.details


def test_the_emr_job_refuses_another_audits_file_with_an_alert_that_may_fail() -> None:
    notifier = FakeNotifier()
    facts = {"what": "s3://source/orders/huge.csv into wap.orders", "job_run_id": "run-1",
             "audits_file": "/opt/audits.yml", "again": "the sweep resubmits it"}
    assert refusal_for("d1", "d1", notifier=notifier, **facts) is None and notifier.alerts == []
    message = refusal_for("d1", "d2", notifier=notifier, **facts)
    assert message is not None and "sha256 d2" in message and "make emr-artifacts" in message
    [alert] = notifier.alerts
    assert ("Job's audits (sha256)", "d2") in alert.fields
    assert "carries no --audits-digest" in str(refusal_for(None, "d2", notifier=notifier, **facts))

    class Raising(FakeNotifier):
        def notify(self, alert: Alert) -> bool:
            raise RuntimeError("Slack is down")

    assert refusal_for("d1", "d2", notifier=Raising(), **facts) == message  # the refusal stands
