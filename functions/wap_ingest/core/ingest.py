"""The use case the entry points call: run the pipeline for one object and tell the operator.

Alert policy for infrastructure failures (the event is retried by SQS/Lambda): alert on the first
attempt ("will be retried") and on the last ("in the dead-letter queue"), log the ones between, so a
Nessie outage does not page once per retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .alerts import alert_for_failure, alert_for_outcome
from .audits import AuditSuites
from .batch import Result, run_batch
from .errors import BadInputError, OutOfTimeError, WapError
from .models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from .naming import table_for_key
from .pipeline import PipelineConfig, Ports, run_wap
from .ports import BatchTableWriter, LargeFileJobs, Notifier

log = logging.getLogger(__name__)


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


def ingest_and_notify(
    source: SourceObject,
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    notifier: Notifier,
    delivery: Delivery = UNKNOWN_DELIVERY,
    table: TableRef | None = None,
) -> IngestOutcome:
    """Run WAP for one object; alert on rejection or invalid input. Infrastructure errors re-raise."""
    context = {"object_key": source.key, "bucket": source.bucket, "correlation_id": delivery.correlation_id}
    try:
        outcome = run_wap(source, ports=ports, suites=suites, config=config, table=table)
    except WapError as exc:
        if delivery.alert_worthy:
            notifier.notify(alert_for_failure(source, str(exc), attempt=delivery.attempt, final=delivery.final,
                                              correlation_id=delivery.correlation_id))
        else:
            log.warning("attempt %s failed (no alert between first and last): %s", delivery.attempt, exc,
                        extra=context)
        raise
    alert = alert_for_outcome(outcome, correlation_id=delivery.correlation_id)
    if alert is not None:
        notifier.notify(alert)
    return outcome


def _notify(result: Result, source: SourceObject, delivery: Delivery, notifier: Notifier) -> None:
    """The same alert policy as `ingest_and_notify`, for a result computed elsewhere."""
    if isinstance(result, OutOfTimeError):
        return  # handed back before it started: nothing happened, nothing to tell
    if isinstance(result, WapError):
        if delivery.alert_worthy:
            notifier.notify(alert_for_failure(source, str(result), attempt=delivery.attempt, final=delivery.final,
                                              correlation_id=delivery.correlation_id))
        return
    alert = alert_for_outcome(result, correlation_id=delivery.correlation_id)
    if alert is not None:
        notifier.notify(alert)


def ingest_batch_and_notify(
    items: Sequence[tuple[SourceObject, Delivery]],
    *,
    ports: Ports,
    batch_writer: BatchTableWriter,
    suites: AuditSuites,
    config: PipelineConfig,
    notifier: Notifier,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[Result]:
    """Run WAP for a delivery's objects, the small files of one table together (core.batch); alert per object
    as `ingest_and_notify` does. Infrastructure failures are returned (per object), not raised."""
    results = run_batch([s for s, _ in items], ports=ports, batch_writer=batch_writer, suites=suites, config=config,
                        out_of_time=out_of_time)
    for (source, delivery), result in zip(items, results, strict=True):
        _notify(result, source, delivery, notifier)
    return results


def submit_large_file(
    source: SourceObject,
    *,
    jobs: LargeFileJobs,
    config: PipelineConfig,
    notifier: Notifier,
    delivery: Delivery = UNKNOWN_DELIVERY,
) -> IngestOutcome:
    """Hand a file too large for the function to the distributed engine, which runs the same pipeline (and
    alerts on its outcome). A key that names no valid table is refused here, without starting a job."""
    try:
        table = table_for_key(source.key, default_namespace=config.default_namespace, bucket=source.bucket)
    except BadInputError as exc:
        outcome = IngestOutcome(source=source, status=OutcomeStatus.INVALID, message=str(exc))
        _notify(outcome, source, delivery, notifier)
        return outcome
    try:
        run = jobs.submit(source, table)
    except WapError as exc:
        _notify(exc, source, delivery, notifier)
        raise
    again = " (already submitted by an earlier delivery; not started twice)" if run.already_submitted else ""
    log.info("large file %s submitted as job run %s%s", source.uri, run.job_run_id, again,
             extra={"object_key": source.key, "job_run_id": run.job_run_id, "correlation_id": delivery.correlation_id})
    return IngestOutcome(
        source=source, status=OutcomeStatus.SUBMITTED, table=table.qualified,
        message=f"{source.size} bytes: running on EMR Serverless as job run {run.job_run_id} "
        f"(application {run.application_id}){again}",
    )
