"""EmrMaintenanceJobs: the MaintenanceJobs port on EMR Serverless (`wap maintain` of a table above its
`emr_above_mb`, run by the same job entry point with `--maintain <table>`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import EMR_SERVERLESS, aws_error
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import MaintenanceJobs

RequestFor = Callable[[TableRef, str], dict[str, Any]]  # (table, day) -> start_job_run arguments


class EmrMaintenanceJobs(MaintenanceJobs):
    def __init__(self, emr_client: Any, request_for: RequestFor, *, today: Callable[[], str] | None = None) -> None:
        self._emr, self._request_for = emr_client, request_for
        self._today = today or (lambda: datetime.now(UTC).date().isoformat())

    def submit_maintenance(self, table: TableRef) -> str:
        request = self._request_for(table, self._today())
        try:
            started = self._emr.start_job_run(**request)
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=EMR_SERVERLESS, doing=f"submitting the maintenance job of {table} to",
                            resource=f"application {request.get('applicationId')}",
                            setting="WAP_EMR_APPLICATION_ID and WAP_EMR_EXECUTION_ROLE_ARN") from exc
        return str(started["jobRunId"])
