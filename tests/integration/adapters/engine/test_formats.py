"""Every supported suffix read by the real Spark into an Iceberg table on the local stack (issue 16, item 4), the
table's `format_options` applied, and the bad ones refused as INVALID with the table named."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow import orc

from tests.conftest import Lake
from wap_ingest.core.models import OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]

ROWS = 7
HEADER = "my_col_0,my_col_1,my_col_2"


def csv_text(sep: str = ",") -> bytes:
    lines = [HEADER.replace(",", sep)] + [sep.join((str(i), f"v{i}", str(i / 2))) for i in range(ROWS)]
    return ("\n".join(lines) + "\n").encode()


def json_lines() -> bytes:
    return "".join(json.dumps({"my_col_0": i, "my_col_1": f"v{i}", "my_col_2": i / 2}) + "\n"
                   for i in range(ROWS)).encode()


def orc_bytes() -> bytes:
    table = pa.table({"my_col_0": pa.array(range(ROWS), pa.int32()),
                      "my_col_1": [f"v{i}" for i in range(ROWS)], "my_col_2": [i / 2 for i in range(ROWS)]})
    sink = io.BytesIO()
    orc.write_table(table, sink)
    return sink.getvalue()


CASES = {
    ".csv.gz": lambda: gzip.compress(csv_text()),
    ".csv.bz2": lambda: bz2.compress(csv_text()),
    ".tsv": lambda: csv_text("\t"),
    ".tsv.gz": lambda: gzip.compress(csv_text("\t")),
    ".jsonl": json_lines,
    ".ndjson": json_lines,
    ".json": json_lines,
    ".json.gz": lambda: gzip.compress(json_lines()),
    ".orc": orc_bytes,
}


def rows_of(lake: Lake, table: str) -> list[tuple[object, ...]]:
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.{table}")  # the session's catalog caches tables: read it as it is now
    found = spark.sql(f"SELECT my_col_0, my_col_1, my_col_2 FROM nessie.{table} ORDER BY my_col_0").collect()
    return [(int(r[0]), r[1], float(r[2]) if r[2] is not None else None) for r in found]


@pytest.mark.parametrize("suffix", list(CASES))
def test_each_format_is_published_with_its_rows(lake: Lake, table_name: str, suffix: str) -> None:
    outcome = lake.service.ingest(lake.put(f"{table_name}/data{suffix}", CASES[suffix]()))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert rows_of(lake, f"wap.{table_name}") == [(i, f"v{i}", i / 2) for i in range(ROWS)]


def test_avro_is_read_with_the_pinned_spark_avro_module(lake: Lake, table_name: str, tmp_path: Path) -> None:
    spark = lake.service.ports.writer.spark
    out = tmp_path / "avro"
    rows = [(i, f"v{i}", i / 2) for i in range(ROWS)]
    spark.createDataFrame(rows, "my_col_0 int, my_col_1 string, my_col_2 double").coalesce(1).write.format(
        "avro").save(str(out))
    [part] = list(out.glob("part-*.avro"))
    outcome = lake.service.ingest(lake.put(f"{table_name}/data.avro", part.read_bytes()))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert rows_of(lake, f"wap.{table_name}") == [(i, f"v{i}", i / 2) for i in range(ROWS)]


def test_format_options_read_semicolons_and_na_as_null(lake: Lake) -> None:
    """`semicolons` (tests/data/audits.yml): delimiter ';', null_value 'NA', date_format dd/MM/yyyy."""
    marker = uuid.uuid4().int % 1_000_000
    body = (f"my_col_0;my_col_1;my_col_2;day\n{marker};NA;0.5;31/12/2024\n{marker + 1};b;NA;01/02/2025\n").encode()
    outcome = lake.service.ingest(lake.put(f"semicolons/{marker}.csv", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable("nessie.wap.semicolons")
    found = spark.sql(f"SELECT my_col_1, my_col_2, CAST(day AS STRING) AS day FROM nessie.wap.semicolons "
                      f"WHERE my_col_0 IN ({marker}, {marker + 1}) ORDER BY my_col_0").collect()
    assert [(r[0], r[1], r[2]) for r in found] == [(None, 0.5, "2024-12-31"), ("b", None, "2025-02-01")]


def test_a_json_document_reads_with_multiline(lake: Lake) -> None:
    marker = uuid.uuid4().int % 1_000_000
    body = json.dumps([{"my_col_0": marker + i, "my_col_1": "x", "my_col_2": 1.5} for i in range(3)], indent=2)
    outcome = lake.service.ingest(lake.put(f"json_documents/{marker}.json", body.encode()))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert outcome.rows == 3


@pytest.mark.parametrize(
    ("suffix", "body", "phrase"),
    [
        (".csv.gz", gzip.compress(csv_text(), mtime=0)[:40], "is not a complete gzip file"),
        (".json", json.dumps({"my_col_0": 1}, indent=2).encode(), "multiline: true"),
        (".xlsx", b"PK\x03\x04", ".csv.gz"),
    ],
)
def test_bad_files_are_invalid_and_name_the_table(lake: Lake, table_name: str, suffix: str, body: bytes,
                                                  phrase: str) -> None:
    source = lake.put(f"{table_name}/bad{suffix}", body)
    outcome = lake.service.ingest(source)
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert phrase in outcome.message and source.uri in outcome.message and f"wap.{table_name}" in outcome.message
    spark = lake.service.ports.writer.spark
    assert table_name not in {r["tableName"] for r in spark.sql("SHOW TABLES IN nessie.wap").collect()}
    assert not [b for b in lake.wap_branches() if table_name in b]
