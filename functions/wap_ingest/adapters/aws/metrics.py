"""OutcomeMetrics: CloudWatch metrics (embedded metric format, printed to stdout) per ingestion outcome.

With Powertools `Metrics`: namespace from POWERTOOLS_METRICS_NAMESPACE (default "wap-lake"), the `service`
dimension from POWERTOOLS_SERVICE_NAME. Metrics are an observation, never a reason to fail: recording
and flushing log a warning and carry on when Powertools refuses something.
"""

from __future__ import annotations

import logging
import os

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import IngestOutcome, OutcomeStatus

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "wap-lake"
DEFAULT_SERVICE = "wap-ingest"

OUTCOME_METRICS = {
    OutcomeStatus.PUBLISHED: "FilesPublished",
    OutcomeStatus.REJECTED: "FilesRejected",
    OutcomeStatus.INVALID: "FilesInvalid",
    OutcomeStatus.FAILED: "FilesFailed",
    OutcomeStatus.DUPLICATE: "DuplicatesSkipped",
    OutcomeStatus.SUBMITTED: "FilesSubmittedToEmr",
}


def stage_metric(stage: str) -> str:
    """`append` -> `AppendDuration` (milliseconds)."""
    return f"{stage[:1].upper()}{stage[1:]}Duration"


class OutcomeMetrics:
    def __init__(self, namespace: str | None = None, service: str | None = None) -> None:
        self._metrics = Metrics(
            namespace=namespace or os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE,
            service=service or os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE,
        )

    def record(self, outcome: IngestOutcome) -> None:
        """Count the outcome, its merge retries, the rows it appended (published, or left on a rejected
        file's branch), and the time spent per stage."""
        try:
            self._metrics.add_metric(name=OUTCOME_METRICS[outcome.status], unit=MetricUnit.Count, value=1)
            if outcome.status is OutcomeStatus.FAILED:
                return  # nothing else is known about a run that raised
            self._metrics.add_metric(name="MergeRetries", unit=MetricUnit.Count, value=max(0, outcome.attempts - 1))
            if outcome.status in (OutcomeStatus.PUBLISHED, OutcomeStatus.REJECTED):  # written by this run
                self._metrics.add_metric(name="RowsAppended", unit=MetricUnit.Count, value=outcome.rows)
            for stage, seconds in outcome.timings.items():
                self._metrics.add_metric(name=stage_metric(stage), unit=MetricUnit.Milliseconds,
                                         value=round(seconds * 1000, 3))
        except Exception as exc:  # never fail an ingestion because of its metrics
            log.warning("metrics for %s not recorded: %s", outcome.source.uri, exc)

    def flush(self) -> None:
        """Print what was recorded as one EMF document (nothing when nothing was recorded)."""
        try:
            if self._metrics.metric_set:
                # Like every other JSON line of the function's log, the document has a `message`.
                self._metrics.add_metadata(key="message", value="metrics")
                self._metrics.flush_metrics()
        except Exception as exc:  # never fail an invocation because of its metrics
            log.warning("metrics not flushed: %s", exc)
            self._metrics.clear_metrics()


def record_maintenance(report: MaintenanceReport, namespace: str | None = None, service: str | None = None) -> None:
    """One EMF document per maintained table: data files and bytes before and after, snapshots dropped."""
    metrics = OutcomeMetrics(namespace, service)
    try:
        metrics._metrics.add_dimension(name="table", value=report.table)
        add = metrics._metrics.add_metric
        add(name="MaintenanceRuns", unit=MetricUnit.Count, value=1)
        add(name="DataFilesBefore", unit=MetricUnit.Count, value=report.before.data_files)
        add(name="DataBytesBefore", unit=MetricUnit.Bytes, value=report.before.data_bytes)
        if report.after is not None:
            add(name="DataFilesAfter", unit=MetricUnit.Count, value=report.after.data_files)
            add(name="DataBytesAfter", unit=MetricUnit.Bytes, value=report.after.data_bytes)
            add(name="SnapshotsDropped", unit=MetricUnit.Count, value=report.work.remove_snapshots)
        add(name="MaintenanceRetries", unit=MetricUnit.Count, value=max(0, report.attempts - 1))
        if report.swept is not None and report.swept.status == "removed":
            add(name="FilesSwept", unit=MetricUnit.Count, value=len(report.swept.removable))
            add(name="BytesSwept", unit=MetricUnit.Bytes, value=report.swept.removed_bytes)
    except Exception as exc:  # never fail a maintenance because of its metrics
        log.warning("maintenance metrics of %s not recorded: %s", report.table, exc)
    metrics.flush()
