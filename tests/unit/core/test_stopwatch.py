"""The stopwatch behind IngestOutcome.timings, and the stages the pipeline times."""

from __future__ import annotations

import itertools

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, run_one
from wap_ingest.core.audits import suites_from
from wap_ingest.core.models import OutcomeStatus, SourceObject
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.stopwatch import Stopwatch


def test_stages_accumulate_over_retries_in_first_run_order() -> None:
    ticks = itertools.count()
    watch = Stopwatch(clock=lambda: float(next(ticks)))
    for stage in ("branch", "append", "branch"):
        with watch.stage(stage):
            pass
    assert watch.laps() == {"branch": 2.0, "append": 1.0}


def test_a_stage_that_raises_is_still_timed() -> None:
    watch = Stopwatch(clock=iter([0.0, 0.5]).__next__)
    try:
        with watch.stage("merge"):
            raise RuntimeError("conflict")
    except RuntimeError:
        pass
    assert watch.laps() == {"merge": 0.5}


def run(rows: list[dict[str, object]], key: str = "t/a.parquet") -> tuple[OutcomeStatus, set[str]]:
    catalog, objects = FakeCatalog(), FakeObjectStore()
    objects.put("src", key, rows)
    ports = Ports(catalog=catalog, writer=FakeWriter(catalog, objects), objects=objects)
    suites = suites_from({"defaults": [{"check": "not_null", "columns": ["a"]}]}, default_namespace="wap")
    outcome = run_one(SourceObject("src", key), ports=ports, suites=suites,
                      config=PipelineConfig(default_namespace="wap", sleep=lambda _s: None))
    assert all(seconds >= 0 for seconds in outcome.timings.values())
    return outcome.status, set(outcome.timings)


def test_the_pipeline_times_each_stage_it_ran() -> None:
    assert run([{"a": 1}]) == (OutcomeStatus.PUBLISHED, {"route", "branch", "append", "audit", "merge"})
    # a rejected file's branch is kept: its ledger entry and the merge it would be are recorded on it
    assert run([{"a": None}]) == (OutcomeStatus.REJECTED, {"route", "branch", "append", "audit", "keep"})
    assert run([{"a": 1}], key="loose.parquet") == (OutcomeStatus.INVALID, {"route"})
