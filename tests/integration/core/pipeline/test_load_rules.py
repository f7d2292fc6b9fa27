"""A multi-table load keeps every rule a lone file keeps (issue 23), on the real Spark, Nessie and moto: its files
are quarantined as their tables say; a load kept for review and published by an operator records one ledger entry
per file, so its manifest run again adds nothing, and every table's history shows the decision; an entry naming a
table the audits file does not list (`strict_tables`) or a table the service owns is refused with nothing created;
a load killed mid-run leaves a branch that the next run of its manifest removes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake, parquet_bytes
from tests.integration.core.pipeline.test_crash_recovery import kill_at
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.branches import RunKind, parse_branch
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def quarantine_parquet(base: int) -> bytes:
    """Rows for tests/data/audits.yml's `quarantined` table: two of ten fail its row-level checks."""
    import io

    kinds = ["a"] * 10
    kinds[3] = "zebra"  # accepted_values
    names = [f"v{i}" for i in range(10)]
    names[5] = None  # type: ignore[call-overload]  # not_null
    table = pa.table({"my_col_0": pa.array([base + i for i in range(10)], pa.int64()),
                      "my_col_1": pa.array(names, pa.string()),
                      "my_col_2": pa.array([float(i) for i in range(10)], pa.float64()),
                      "kind": pa.array(kinds, pa.string())})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def manifest(lake: Lake, run: str, files: list[object]) -> object:
    return lake.put(f"_loads/{run}.json", json.dumps({"files": files}).encode())


def test_a_file_of_a_load_is_quarantined_as_its_table_says(lake: Lake) -> None:
    run, base = uuid.uuid4().hex[:8], uuid.uuid4().int % 10**9 * 100
    other = f"other_{run}"
    lake.put(f"_pending/quarantined/{run}.parquet", quarantine_parquet(base))
    lake.put(f"_pending/{other}/a.parquet", parquet_bytes(3))
    outcome = lake.service.ingest(manifest(lake, run, [f"_pending/quarantined/{run}.parquet",
                                                       f"_pending/{other}/a.parquet"]))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    moved = outcome.parts[0].quarantined
    assert moved is not None and moved.rows == 2 and moved.table == "wap.quarantined_quarantine"
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable("nessie.wap.quarantined_quarantine")
    aside = spark.sql(f"SELECT count(*) AS n FROM nessie.wap.quarantined_quarantine WHERE my_col_0 BETWEEN {base} "
                      f"AND {base + 99}").collect()[0]["n"]
    assert aside == 2
    spark.catalog.refreshTable("nessie.wap.quarantined")
    kept = spark.sql(f"SELECT count(*) AS n FROM nessie.wap.quarantined WHERE my_col_0 BETWEEN {base} AND "
                     f"{base + 99}").collect()[0]["n"]
    assert kept == 8 and lake.count(f"wap.{other}") == 3
    [merge] = lake.service.ports.catalog.publications(TableRef("wap", other))
    listed = {f["key"]: f for f in json.loads(merge.properties[lineage.SOURCES])}
    assert listed[f"_pending/quarantined/{run}.parquet"]["quarantined"] == 2


def test_a_reviewed_load_records_every_file_so_its_manifest_again_adds_nothing(lake: Lake) -> None:
    run = uuid.uuid4().hex[:8]
    good, bad = f"good_{run}", f"bad_{run}"
    lake.put(f"_pending/{good}/a.parquet", parquet_bytes(4))
    lake.put(f"_pending/{bad}/a.parquet", parquet_bytes(5, nulls=1))  # the defaults suite: not_null(my_col_1)
    load = manifest(lake, run, [f"_pending/{good}/a.parquet", f"_pending/{bad}/a.parquet"])
    rejected = lake.service.ingest(load)
    assert rejected.status is OutcomeStatus.REJECTED and rejected.branch is not None
    run_branch = parse_branch(rejected.branch)
    assert run_branch is not None and run_branch.kind is RunKind.LOAD

    decision = lake.service.publish(rejected.branch, reason="nulls expected", actor="ann", reaudit=False)
    assert decision.merged_hash and lake.count(f"wap.{good}") == 4 and lake.count(f"wap.{bad}") == 5
    for table in (good, bad):  # one merge, every table's history, with the decision
        [line] = [e for e in lake.service.history(TableRef("wap", table)) if e.action == "published"]
        assert line.how.startswith("reviewed (load") and line.actor == "ann" and line.reason == "nulls expected"
        assert line.hash == decision.merged_hash
    again = lake.service.ingest(load)  # the same manifest version, delivered again
    assert again.status is OutcomeStatus.DUPLICATE, again.message
    assert lake.count(f"wap.{good}") == 4 and lake.count(f"wap.{bad}") == 5
    assert not [b for b in lake.wap_branches() if run_branch.digest in b]


def test_an_unlisted_or_owned_table_in_a_manifest_is_refused_with_nothing_created(lake: Lake) -> None:
    run = uuid.uuid4().hex[:8]
    listed, unlisted = f"listed_{run}", f"unlisted_{run}"
    strict = lake.service.replaced(suites=suites_from(
        {"strict_tables": True, "tables": {listed: [{"check": "row_count", "min": 1}]}}, default_namespace="wap"))
    lake.put(f"_pending/{listed}/a.parquet", parquet_bytes(3))
    lake.put(f"_pending/{unlisted}/a.parquet", parquet_bytes(13))
    main = lake.main_hash()
    outcome = strict.ingest(manifest(lake, run, [f"_pending/{listed}/a.parquet",
                                                 {"key": f"_pending/{unlisted}/a.parquet", "table": unlisted}]))
    assert outcome.status is OutcomeStatus.INVALID
    assert f"routes to table wap.{unlisted}, which the audits file does not list, and strict_tables" in outcome.message
    owned = strict.ingest(manifest(lake, f"{run}b", [
        f"_pending/{listed}/a.parquet", {"key": f"_pending/{unlisted}/a.parquet", "table": f"{listed}_quarantine"}]))
    assert owned.status is OutcomeStatus.INVALID and "quarantine table, which only the service writes" in owned.message
    assert lake.main_hash() == main and not [b for b in lake.wap_branches() if run in b]
    spark = lake.service.ports.writer.spark
    names = {r["tableName"] for r in spark.sql("SHOW TABLES IN nessie.wap").collect()}
    assert {listed, unlisted, f"{listed}_quarantine"}.isdisjoint(names)


def test_a_load_killed_mid_run_leaves_a_branch_the_next_run_removes(lake: Lake, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    first, second = f"first_{run}", f"second_{run}"
    lake.put(f"_pending/{first}/a.parquet", parquet_bytes(6))
    lake.put(f"_pending/{second}/a.parquet", parquet_bytes(7))
    load = manifest(lake, run, [f"_pending/{first}/a.parquet", f"_pending/{second}/a.parquet"])
    kill_at("after_append:1", tmp_path / "reached", load.bucket, [load.key])  # type: ignore[attr-defined]
    left = [b for b in lake.wap_branches() if b.startswith(f"wap-{first}-")]
    assert len(left) == 1 and parse_branch(left[0]).kind is RunKind.LOAD  # type: ignore[union-attr]
    outcome = lake.service.ingest(load)  # the manifest's event, redelivered
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert lake.count(f"wap.{first}") == 6 and lake.count(f"wap.{second}") == 7
    assert [b for b in lake.wap_branches() if b.startswith((f"wap-{first}-", f"wap-{second}-"))] == []
