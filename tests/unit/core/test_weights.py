"""Work weighed by what it becomes (core.weights), on the fakes: a file that inflates beyond WAP_MAX_INFLATION is a
bomb (INVALID, nothing started), one that inflates beyond the large-file threshold goes to EMR although it is small
in the store, and the staging budget and the disk check go by the inflated bytes. The real weighing of gzip, bzip2
and Parquet from their own bytes on moto: tests/integration/adapters/aws/test_weights_and_deadline.py."""

from __future__ import annotations

import pytest

from tests.fakes import FakeCatalog, FakeJobs, FakeNotifier, FakeObjectStore, FakeWriter
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import OverBudgetError
from wap_ingest.core.ingest import Item, LargeFiles, ingest
from wap_ingest.core.models import IngestOutcome, OutcomeStatus
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.weights import Weight, check_inflation

SUITES = suites_from({"defaults": [{"check": "row_count", "min": 1}]}, default_namespace="wap")
ROWS = [{"id": 1}, {"id": 2}]


class Lake:
    def __init__(self, **config: object) -> None:
        self.catalog, self.objects, self.jobs = FakeCatalog(), FakeObjectStore(), FakeJobs()
        self.writer = FakeWriter(self.catalog, self.objects)
        self.ports = Ports(catalog=self.catalog, writer=self.writer, objects=self.objects)
        self.config = PipelineConfig(default_namespace="wap", max_inflation=100.0, sleep=lambda _s: None,
                                     **config)  # type: ignore[arg-type]

    def run(self, *keys: str, threshold: int = 10**9) -> list[object]:
        sources = [self.objects.head("source", k) for k in keys]
        return ingest([Item(s) for s in sources], ports=self.ports, suites=SUITES, config=self.config,
                      notifier=FakeNotifier(), large_files=LargeFiles(self.jobs, threshold))


def test_a_file_inflating_beyond_the_limit_is_a_bomb_and_nothing_starts() -> None:
    lake = Lake()
    stored = lake.objects.put("source", "t/bomb.csv.bz2", ROWS).size or 0
    lake.objects.inflates["t/bomb.csv.bz2"] = stored * 5000
    (outcome,) = lake.run("t/bomb.csv.bz2")
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.INVALID
    assert "inflates 5000 times" in outcome.message and "WAP_MAX_INFLATION" in outcome.message
    assert lake.catalog.list_branches("wap-") == [] and lake.writer.batches == [] and lake.jobs.started == {}


def test_a_small_file_that_inflates_beyond_the_threshold_goes_to_emr() -> None:
    lake = Lake()
    stored = lake.objects.put("source", "t/big.csv.gz", ROWS).size or 0
    lake.objects.inflates["t/big.csv.gz"] = stored * 50  # within the ratio: legitimately large
    (outcome,) = lake.run("t/big.csv.gz", threshold=stored * 10)
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.SUBMITTED
    assert f"{stored * 50} bytes to process ({stored} stored)" in outcome.message
    assert lake.writer.batches == []


def test_the_staging_budget_and_the_disk_go_by_the_inflated_bytes() -> None:
    lake = Lake(staging_budget_bytes=10_000)
    for name in ("a", "b", "c"):
        lake.objects.put("source", f"t/{name}.csv.gz", ROWS)
        lake.objects.inflates[f"t/{name}.csv.gz"] = 6_000  # two would exceed the budget together
    results = lake.run("t/a.csv.gz", "t/b.csv.gz", "t/c.csv.gz")
    assert all(isinstance(r, IngestOutcome) and r.status is OutcomeStatus.PUBLISHED for r in results)
    assert lake.writer.batches == [1, 1, 1]  # one group each: the budget counts what they inflate to

    tight = Lake(free_bytes=lambda: 10_000)  # room for the stored bytes, not for what they inflate to
    tight.objects.put("source", "t/d.csv.gz", ROWS)
    tight.objects.inflates["t/d.csv.gz"] = 12_000  # 98 times: not a bomb
    (deferred,) = tight.run("t/d.csv.gz")
    assert isinstance(deferred, OverBudgetError) and tight.catalog.list_branches("wap-") == []


def test_the_inflation_check_itself() -> None:
    from wap_ingest.core.models import SourceObject

    source = SourceObject("b", "t/a.csv.gz", size=10)
    check_inflation(source, Weight(10, 1000, "gzip trailer"), 100.0)  # exactly at the limit: fine
    with pytest.raises(Exception, match=r"inflates 101 times \(10 bytes stored, about 1010 bytes to read, by its gzip"):
        check_inflation(source, Weight(10, 1010, "gzip trailer"), 100.0)
    assert Weight(0, 0).ratio == 1.0 and Weight(10, 30).local_bytes == 40
