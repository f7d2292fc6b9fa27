"""Row quarantine on the real Spark and Nessie (issue 16, item 1), table `quarantined` of tests/data/audits.yml:
not_null, accepted_values, unique within the file and a custom_sql that names rows quarantine their failing rows
into `quarantined_quarantine` (with the checks, the source and the time), published with the good rows in one
merge; a custom_sql aggregate stays a whole-file check; above the fraction the file is rejected whole; a
redelivery changes neither table; the alert and the downstream event say what was set aside."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake
from tests.downstream import about_object, events_about
from wap_ingest.core import lineage
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
TABLE, QUARANTINE = "wap.quarantined", "wap.quarantined_quarantine"


def parquet(rows: list[tuple[int, str | None, float, str]]) -> bytes:
    import io

    table = pa.table({"my_col_0": pa.array([r[0] for r in rows], pa.int64()),
                      "my_col_1": pa.array([r[1] for r in rows], pa.string()),
                      "my_col_2": pa.array([r[2] for r in rows], pa.float64()),
                      "kind": pa.array([r[3] for r in rows], pa.string())})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def count(lake: Lake, table: str, where: str) -> int:
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.{table}")  # the session's catalog caches tables: read it as it is now
    return int(spark.sql(f"SELECT count(*) AS n FROM nessie.{table} WHERE {where}").collect()[0]["n"])


def test_failing_rows_are_quarantined_and_published_with_the_good_ones(lake: Lake) -> None:
    base = uuid.uuid4().int % 10**9 * 100
    rows = [(base + i, f"v{i}", float(i), "a") for i in range(12)]
    rows[1] = (base + 1, None, 1.0, "a")  # not_null
    rows[2] = (base + 2, "v2", 2.0, "zebra")  # accepted_values
    rows[3] = (base + 3, "v3", -3.0, "b")  # the custom query names it
    rows += [(base + 4, "again", 4.0, "b")]  # my_col_0 repeated: both rows with it
    key = f"quarantined/{base}.parquet"
    outcome = lake.service.ingest(lake.put(key, parquet(rows)))
    uri = f"s3://{lake.inbox_bucket}/{key}"
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert outcome.rows == 8 and outcome.quarantined is not None and outcome.quarantined.rows == 5
    assert outcome.quarantined.by_check == {"not_null(my_col_1)": 1, "accepted_values(kind)": 1,
                                            "custom_sql(negative_halves)": 1, "unique(my_col_0)": 2}
    assert f"SELECT * FROM nessie.{QUARANTINE} WHERE _wap_source = '{uri}'" in outcome.message
    assert count(lake, TABLE, f"my_col_0 BETWEEN {base} AND {base + 99}") == 8
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.{QUARANTINE}")
    moved = spark.sql(f"SELECT my_col_0, _wap_failed_checks, _wap_source, _wap_loaded_at FROM nessie.{QUARANTINE} "
                      f"WHERE _wap_source = '{uri}' ORDER BY my_col_0").collect()
    assert [(r[0] - base, sorted(r[1])) for r in moved] == [
        (1, ["not_null(my_col_1)"]), (2, ["accepted_values(kind)"]), (3, ["custom_sql(negative_halves)"]),
        (4, ["unique(my_col_0)"]), (4, ["unique(my_col_0)"])]
    assert all(r[2] == uri and r[3] is not None for r in moved)
    publications = lake.service.ports.catalog.publications(TableRef("wap", "quarantined"))
    [merge] = [p for p in publications if p.hash == outcome.merged_hash]
    assert merge.properties[lineage.QUARANTINED_ROWS] == "5"  # one merge commit published both tables
    [event] = events_about(lake.env, about_object(key), 1)
    assert event["detail-type"] == "Table Published" and event["detail"]["quarantined"]["rows"] == 5

    again = lake.service.ingest(lake.put(key, parquet(rows)))  # a redelivery of the same version
    assert again.status is OutcomeStatus.DUPLICATE
    assert count(lake, QUARANTINE, f"_wap_source = '{uri}'") == 5
    assert count(lake, TABLE, f"my_col_0 BETWEEN {base} AND {base + 99}") == 8


def test_above_the_fraction_the_whole_file_is_rejected(lake: Lake) -> None:
    base = uuid.uuid4().int % 10**9 * 100
    rows = [(base + i, None if i < 3 else "v", 1.0, "a") for i in range(4)]  # 3 of 4 fail: above 0.5
    outcome = lake.service.ingest(lake.put(f"quarantined/{base}.parquet", parquet(rows)))
    assert outcome.status is OutcomeStatus.REJECTED and outcome.quarantined is None
    assert lake.count(TABLE, ref=outcome.branch) >= 4  # every row on the branch, as with `reject`
    assert count(lake, TABLE, f"my_col_0 BETWEEN {base} AND {base + 99}") == 0


def test_history_shows_what_was_quarantined(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from wap_ingest.entrypoints import ops_cli

    base = uuid.uuid4().int % 10**9 * 100
    rows = [(base + i, None if i == 0 else "v", 1.0, "a") for i in range(6)]
    outcome = lake.service.ingest(lake.put(f"quarantined/{base}-h.parquet", parquet(rows)))
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.quarantined is not None
    parser = argparse.ArgumentParser(prog="wap")
    ops_cli.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["history", "quarantined"])
    assert args.func(args) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if outcome.merged_hash[:12] in line]
    assert f"1 rows quarantined in {QUARANTINE}" in line
