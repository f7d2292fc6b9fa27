"""What the EMR Serverless job is handed (entrypoints/emr_job.py): its use cases, from the job's environment. The
pipeline's Service is built with the submitted Spark session (`submitted=True`) only when the job has passed its
check of the audits file; the refusal's alert and the run's record need no engine."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property
from typing import Any

from wap_ingest.adapters.aws import EmrRecords, record_key
from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.ingest import Delivery, item_for_job
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import IngestOutcome, SourceObject, TableRef
from wap_ingest.core.naming import table_ref_from
from wap_ingest.core.operations import refusal_for
from wap_ingest.core.ports import Notifier

from . import builders
from .config import Settings
from .emr_request import audits_digest
from .root import Service

log = logging.getLogger(__name__)


class EmrJobUseCases:
    """`service` and `notifier` replace what would be built (tests hand in fakes)."""

    def __init__(self, settings: Settings, *, service: Callable[[], Service] | None = None,
                 notifier: Notifier | None = None) -> None:
        self._settings = settings
        self._service = service or (lambda: Service(settings, submitted=True).check())
        if notifier is not None:
            self.__dict__["notifier"] = notifier

    @cached_property
    def notifier(self) -> Notifier:
        return builders.notifier_for(self._settings)

    @cached_property
    def pipeline(self) -> Service:
        return self._service()

    def table(self, name: str, source: str) -> TableRef:
        return table_ref_from(name, default_namespace=self._settings.namespace, source=source)

    def refusal(self, expected: str | None, *, what: str, job_run_id: str, again: str) -> str | None:
        """Why this job must not run (its audits file, shipped with its artefacts, is not the function's: `expected`
        is the digest the request carries), alerted; None when it is the same."""
        audits = self._settings.audits_file
        try:
            found = audits_digest(audits)
        except ConfigError as exc:
            found = f"(unreadable: {exc})"
        return refusal_for(expected, found, what=what, job_run_id=job_run_id, audits_file=str(audits), again=again,
                           notifier=self.notifier)

    def ingest(self, source: SourceObject, table: TableRef, delivery: Delivery) -> IngestOutcome:
        """The object the function submitted, through the same pipeline: its outcome, or its failure raised."""
        (result,) = self.pipeline.ingest_all([item_for_job(source, table, delivery)])
        if isinstance(result, Exception):
            raise result
        return result

    def maintain(self, table: TableRef) -> MaintenanceReport | WapError:
        """A large table's maintenance, here (never sent to EMR again)."""
        (result,) = self.pipeline.maintain(table, here=True)
        return result

    def record(self, table: TableRef, source: SourceObject, job_run_id: str, result: dict[str, Any]) -> None:
        """Add this run's result to the submission record (best effort: the alert and the catalog already tell it),
        with a conditional write: never over a change made meanwhile, and never onto a later run's record (the sweep
        resubmitted this one, which it had found stuck)."""
        settings = self._settings
        records, key = EmrRecords(builders.s3_for(settings), settings.lake_bucket), record_key(table, source)
        try:
            for _ in range(5):
                stored = records.read(key)
                if stored is None:
                    base = {"object": source.uri, "bucket": source.bucket, "key": source.key,
                            "identity": source.identity, "table": table.qualified}
                    if records.create(key, base | result) is not None:
                        return
                    continue
                recorded = stored.body.get("job_run_id")
                if recorded and job_run_id not in ("local", recorded):
                    log.warning("the record at %s names job run %s, not this one (%s): a later run owns it; this "
                                "run's result is not recorded", records.uri(key), recorded, job_run_id)
                    return
                if records.replace(stored, stored.body | result) is not None:
                    return
            log.warning("the record at %s kept changing: this run's result is not recorded", records.uri(key))
        except WapError as exc:
            log.warning("could not record the outcome at %s: %s", records.uri(key), exc)
