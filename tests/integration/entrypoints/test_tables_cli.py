"""`wap tables` on the real stack: each table's rows on main, last load, open branches and quarantined rows, read
from the catalog and the tables' metadata (the command's process starts no Spark)."""

from __future__ import annotations

import json
import uuid

import jsonschema
import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.models import OutcomeStatus
from wap_ingest.entrypoints.cli import main
from wap_ingest.entrypoints.ops_schema import SCHEMAS

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def tables(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    capsys.readouterr()
    assert main(["tables", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMAS["tables"])
    return {str(t["table"]): t for t in document["tables"]}


def test_tables_lists_rows_last_load_open_branches_and_quarantined_rows(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    service = lake.service
    assert service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(7))).status is OutcomeStatus.PUBLISHED
    rejected = service.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(5, nulls=1)))
    fresh = f"{table_name}_new"  # its first file was rejected: only a branch holds it
    waiting = service.ingest(lake.put(f"{fresh}/c.parquet", parquet_bytes(3, nulls=3)))
    before = tables(capsys).get("wap.quarantined", {}).get("quarantined_rows") or 0
    # my_col_0 as bigint, as tests/integration/adapters/engine/test_quarantine.py writes it: whichever test runs first
    # creates the shared table `quarantined`, and an int column there cannot hold that test's values
    quarantined = service.ingest(lake.put(f"quarantined/{uuid.uuid4().hex[:8]}.parquet",
                                          parquet_bytes(10, nulls=1, extra={"kind": ["a"] * 10,
                                                                     "my_col_0": list(range(10))})))
    assert quarantined.quarantined is not None and quarantined.quarantined.rows == 1

    listed = tables(capsys)
    assert listed[f"wap.{table_name}"] | {"last_load": None} == {
        "table": f"wap.{table_name}", "rows_on_main": 7, "last_load": None,
        "last_source": f"s3://inbox/{table_name}/a.parquet", "open_branches": [rejected.branch],
        "quarantined_rows": None, "error": None}
    assert listed[f"wap.{table_name}"]["last_load"]
    assert listed[f"wap.{fresh}"] | {"table": None} == {"table": None, "rows_on_main": None, "last_load": None,
                                                          "last_source": None, "open_branches": [waiting.branch],
                                                          "quarantined_rows": None, "error": None}
    assert listed["wap.quarantined"]["quarantined_rows"] == int(str(before)) + 1
    assert "wap.quarantined_quarantine" not in listed  # shown with its table
    assert not [name for name in listed if name.startswith("wap_ledger")]

    assert main(["tables"]) == 0
    text = capsys.readouterr().out
    print(text)
    header, *rows = text.splitlines()
    assert header.split() == ["table", "rows", "on", "main", "last", "load", "open", "branches", "quarantined"]
    [line] = [r for r in rows if r.startswith(f"wap.{table_name} ")]
    assert line.split()[1:2] == ["7"] and line.split()[-2:] == ["1", "-"]
    [line] = [r for r in rows if r.startswith(f"wap.{fresh} ")]
    assert line.split()[1:] == ["-", "-", "1", "-"]


def test_a_table_that_cannot_be_read_is_named_with_the_reason_and_the_others_still_listed(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Found in the full suite: one table whose metadata file was gone (another test's) made the whole listing fail."""
    service, broken = lake.service, f"{table_name}_broken"
    for name in (table_name, broken):
        assert service.ingest(lake.put(f"{name}/a.parquet", parquet_bytes(4))).status is OutcomeStatus.PUBLISHED
    bucket = lake.env["LAKE_BUCKET"]
    listed = lake.s3.list_objects_v2(Bucket=bucket, Prefix=f"warehouse/wap/{broken}")["Contents"]  # <name>_<uuid>/
    metadata = [item["Key"] for item in listed if item["Key"].endswith(".metadata.json")]
    assert metadata
    for key in metadata:
        lake.s3.delete_object(Bucket=bucket, Key=key)

    found = tables(capsys)
    assert found[f"wap.{table_name}"]["rows_on_main"] == 4 and found[f"wap.{table_name}"]["error"] is None
    assert found[f"wap.{broken}"]["rows_on_main"] is None
    assert "metadata" in str(found[f"wap.{broken}"]["error"])
    assert main(["tables"]) == 0
    text = capsys.readouterr().out
    [line] = [r for r in text.splitlines() if r.startswith(f"wap.{broken} ") and "could not be read" not in r]
    assert line.split()[1] == "unreadable"
    assert f"wap.{broken} could not be read: " in text
