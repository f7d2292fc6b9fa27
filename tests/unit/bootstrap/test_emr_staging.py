"""Where a file is staged decides which disk guards it: the function downloads it to its /tmp (what does not fit the
free disk is deferred), the EMR job stages a server-side copy in the lake bucket (WAP_STAGE=s3, the request's
driver environment) and its driver's disk holds none of it, so it is never refused for that disk. The pipeline's
configuration is the Service's own, built from the settings (bootstrap/root.py)."""

from __future__ import annotations

import pytest

from tests.fakes import FakeCatalog, FakeNotifier, FakeObjectStore, FakeWriter, rows_on
from tests.paths import DATA
from wap_ingest.bootstrap import Service, builders
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import OverBudgetError
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject
from wap_ingest.core.pipeline import Ports

AUDITS = DATA / "audits.yml"
ROWS = [{"my_col_0": i, "my_col_1": f"value {i}", "my_col_2": i / 2} for i in range(100)]


def service_staging(stage: str) -> tuple[Service, FakeCatalog]:
    catalog, objects = FakeCatalog(), FakeObjectStore()
    objects.put("source", "customer_data_log/huge.parquet", ROWS)
    settings = Settings.from_env({"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:1",
                                  "WAP_AUDITS_FILE": str(AUDITS), "WAP_STAGE": stage})
    service = Service(settings, ports=Ports(catalog=catalog, writer=FakeWriter(catalog, objects), objects=objects),
                      suites=suites_from({"defaults": []}, default_namespace="wap"), objects=objects,  # type: ignore[arg-type]
                      notifier=FakeNotifier())
    return service, catalog


@pytest.fixture
def full_driver_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's local disk has no room left for any file (its size against twice the file's)."""
    monkeypatch.setattr(builders, "free_bytes_in", lambda directory: lambda: 0)


@pytest.mark.usefixtures("full_driver_disk")
def test_a_file_staged_in_s3_is_not_refused_for_the_drivers_local_disk() -> None:
    job, catalog = service_staging("s3")  # the EMR job (emr_request.job_environment: WAP_STAGE=s3)

    [outcome] = job.ingest_all([Item(SourceObject("source", "customer_data_log/huge.parquet"))])

    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.PUBLISHED, outcome
    assert len(rows_on(catalog, "main", "wap.customer_data_log")) == 100


@pytest.mark.usefixtures("full_driver_disk")
def test_a_file_downloaded_to_local_disk_still_waits_for_room() -> None:
    function, catalog = service_staging("download")  # the function (and the local EMR runner)

    [outcome] = function.ingest_all([Item(SourceObject("source", "customer_data_log/huge.parquet"))])

    assert isinstance(outcome, OverBudgetError) and "free local disk" in str(outcome)
    assert rows_on(catalog, "main", "wap.customer_data_log") == []
