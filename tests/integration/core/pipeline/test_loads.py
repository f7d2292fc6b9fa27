"""Multi-table atomic loads on the real stack (issue 16, item 2): files under _pending/ wait; a manifest publishes
two tables in one Nessie merge (through the event path, and by hand with `wap ingest`), or, when one table's file
fails its audit, neither table changes; the downstream event says Load Published."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.downstream import about_object, events_about
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def tables_on_main(lake: Lake) -> set[str]:
    spark = lake.service.ports.writer.spark
    return {r["tableName"] for r in spark.sql("SHOW TABLES IN nessie.wap").collect()}


def test_a_two_table_manifest_publishes_both_in_one_merge_through_the_event_path(lake: Lake) -> None:
    run = uuid.uuid4().hex[:8]
    orders, lines = f"orders_{run}", f"lines_{run}"
    lake.drop(f"_pending/{orders}/a.parquet", parquet_bytes(5))
    lake.drop(f"_pending/{lines}/a.parquet", parquet_bytes(7))
    time.sleep(3)  # their own notifications are consumed without ingesting anything
    assert {orders, lines}.isdisjoint(tables_on_main(lake))
    body = {"files": [f"_pending/{orders}/a.parquet", {"key": f"_pending/{lines}/a.parquet", "table": lines}]}
    lake.drop(f"_loads/{run}.json", json.dumps(body).encode())
    [event] = events_about(lake.env, about_object(f"_loads/{run}.json"), 1)
    assert event["detail-type"] == "Load Published", event
    assert sorted(event["detail"]["tables"]) == sorted([f"wap.{orders}", f"wap.{lines}"])
    assert event["detail"]["rows"] == 12
    catalog = lake.service.ports.catalog
    [first] = catalog.publications(TableRef("wap", orders))
    [second] = catalog.publications(TableRef("wap", lines))  # Nessie's CEL filter finds the load's merge for each
    assert first.hash == second.hash == event["detail"]["merged_hash"]
    assert lake.count(f"wap.{orders}") == 5 and lake.count(f"wap.{lines}") == 7


def test_a_failing_table_leaves_both_unchanged_and_wap_ingest_runs_a_manifest_by_hand(lake: Lake) -> None:
    run = uuid.uuid4().hex[:8]
    good, bad = f"good_{run}", f"bad_{run}"
    lake.put(f"_pending/{good}/a.parquet", parquet_bytes(4))
    lake.put(f"_pending/{bad}/a.parquet", parquet_bytes(4, nulls=1))  # the defaults suite: not_null(my_col_1)
    manifest = lake.put(f"_loads/{run}.json",
                        json.dumps({"files": [f"_pending/{good}/a.parquet", f"_pending/{bad}/a.parquet"]}).encode())
    outcome = lake.service.ingest(manifest)  # what `wap ingest s3://inbox/_loads/<run>.json` does
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message
    assert {good, bad}.isdisjoint(tables_on_main(lake))
    assert outcome.branch in lake.wap_branches()
    assert lake.count(f"wap.{good}", ref=outcome.branch) == 4 and lake.count(f"wap.{bad}", ref=outcome.branch) == 4
    assert [p.status for p in outcome.parts] == [OutcomeStatus.PUBLISHED, OutcomeStatus.REJECTED]
    assert f"s3://inbox/_pending/{bad}/a.parquet into wap.{bad}: not_null(my_col_1)" in outcome.message
