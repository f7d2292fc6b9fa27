"""The use case the entry points call: run the pipeline for one object and tell the operator.

Alert policy for infrastructure failures (the event is retried by SQS/Lambda): alert on the first
attempt ("will be retried") and on the last ("in the dead-letter queue"), log the ones between, so a
Nessie outage does not page once per retry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .alerts import alert_for_failure, alert_for_outcome
from .audits import AuditSuites
from .errors import WapError
from .models import IngestOutcome, SourceObject, TableRef
from .pipeline import PipelineConfig, Ports, run_wap
from .ports import Notifier

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
