from __future__ import annotations

import pytest

from wap_ingest.core.errors import InvalidTableNameError, UnsupportedFormatError
from wap_ingest.core.formats import format_for_key
from wap_ingest.core.models import FileFormat, SourceObject, TableRef
from wap_ingest.core.naming import check_target, table_for_key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("customer_data_log/2026/a.parquet", TableRef("wap", "customer_data_log")),
        ("Customer_Data_Log/a.parquet", TableRef("wap", "customer_data_log")),
        ("raw.events/a.csv", TableRef("raw", "events")),
        ("//orders//x.parquet", TableRef("wap", "orders")),
    ],
)
def test_table_for_key(key: str, expected: TableRef) -> None:
    assert table_for_key(key, default_namespace="wap") == expected


@pytest.mark.parametrize(
    ("key", "phrase"),
    [
        ("x.parquet", "no table prefix"),
        ("my-table/x.parquet", "'my_table/'"),
        ("1abc/x.parquet", "not a valid identifier"),
        ("a.b.c/x.parquet", "3 dot-separated parts"),
        ("t; DROP TABLE x/x.parquet", "not a valid identifier"),
        ("tbl`@main/x.parquet", "not a valid identifier"),
        ("wap_ledger.orders/x.parquet", "reserved for the service's exactly-once ledger"),
        (f"{'a' * 129}/x.parquet", "not a valid identifier"),
    ],
)
def test_unroutable_keys_are_refused_with_a_fix(key: str, phrase: str) -> None:
    with pytest.raises(InvalidTableNameError) as info:
        table_for_key(key, default_namespace="wap", bucket="src")
    assert phrase in str(info.value)
    assert f"s3://src/{key}" in str(info.value) and "Fix:" in str(info.value)


@pytest.mark.parametrize(
    ("key", "fmt"),
    [("t/a.parquet", FileFormat.PARQUET), ("t/A.PQ", FileFormat.PARQUET), ("t/a.csv", FileFormat.CSV),
     ("t/a.csv.gz", FileFormat.CSV), ("t/a.CSV.BZ2", FileFormat.CSV), ("t/a.tsv", FileFormat.TSV),
     ("t/a.tsv.gz", FileFormat.TSV), ("t/a.json", FileFormat.JSON), ("t/a.jsonl", FileFormat.JSON),
     ("t/a.ndjson", FileFormat.JSON), ("t/a.jsonl.gz", FileFormat.JSON), ("t/a.orc", FileFormat.ORC),
     ("t/a.avro", FileFormat.AVRO)],
)
def test_format_for_key(key: str, fmt: FileFormat) -> None:
    assert format_for_key(key) is fmt


def test_unknown_format_names_the_supported_ones_and_the_table() -> None:
    with pytest.raises(UnsupportedFormatError, match=r"s3://src/t/a.xlsx for table wap.t: .*\.csv\.gz.*\.avro"):
        format_for_key("t/a.xlsx", bucket="src", table=TableRef("wap", "t"))
    with pytest.raises(UnsupportedFormatError):
        format_for_key("t/a.parquet.gz")  # Parquet compresses inside the file: a compressed one is not read


def test_identity_prefers_version_id_over_etag() -> None:
    assert SourceObject("b", "k", etag="e", version_id="v").identity == "b/k#v"
    assert SourceObject("b", "k", etag='"e"').identity == "b/k#e"


def test_tables_the_service_owns_are_refused_as_targets() -> None:
    check_target(TableRef("wap", "orders"), "s3://b/orders/x.csv")
    with pytest.raises(InvalidTableNameError, match=r"orders_quarantine is a quarantine table.*file to orders"):
        check_target(TableRef("wap", "orders_quarantine"), "s3://b/orders_quarantine/x.csv")
    with pytest.raises(InvalidTableNameError, match="reserved for the service's exactly-once ledger"):
        check_target(TableRef("wap_ledger", "x"), "s3://b/k")
