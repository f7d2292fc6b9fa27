"""Iceberg format v3, and so VARIANT, on the pinned Nessie server (0.99.0): the evidence that tables stay at v2.

On a branch of its own: Spark 4.1 through the Nessie catalog creates a v3 table and a v3 table with a VARIANT column,
writes JSON into it (`parse_json`) and reads a field back (`variant_get`), and the Nessie API stores both tables'
pointers. But the server's Iceberg REST endpoint, through which PyIceberg, the ops CLI and every REST reader of `main`
load a table, refuses both: `Unkown Iceberg spec version 3` and `Unknown Iceberg primitive type 'variant'` (HTTP 400;
the server's own spellings). A table readers of `main` cannot load must never be published, so the service creates
tables at FORMAT_VERSION 2 and has no VARIANT column (README, "Pinned versions"). When the pinned server serves v3,
this test fails: then VARIANT can be built (issue 35, item 3)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import Lake
from wap_ingest.adapters.engine.tables import FORMAT_VERSION
from wap_ingest.core.errors import CatalogError
from wap_ingest.core.models import Branch, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


@pytest.fixture
def branch(lake: Lake) -> Iterator[str]:
    catalog = lake.service.ports.catalog
    lake.service.ports.writer.spark.sql("CREATE NAMESPACE IF NOT EXISTS nessie.wap")  # on main: the branch has it
    made = catalog.create_branch(f"probe-v3-{uuid.uuid4().hex[:8]}", catalog.reference_hash("main"))
    try:
        yield made.name
    finally:
        catalog.delete_branch(Branch(made.name, catalog.reference_hash(made.name)))


def _rest(lake: Lake, ref: str, table: str) -> requests.Response:
    return requests.get(f"{lake.env['NESSIE_ENDPOINT']}/iceberg/v1/{ref}/namespaces/wap/tables/{table}", timeout=30)


def _nessie_api(lake: Lake, ref: str, table: str) -> dict[str, Any]:
    found = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/{ref}/contents/wap.{table}", timeout=30)
    found.raise_for_status()
    content: dict[str, Any] = found.json()["content"]
    return content


def test_the_pinned_nessie_stores_a_v3_table_but_its_rest_endpoint_refuses_to_serve_it(lake: Lake,
                                                                                        branch: str) -> None:
    spark = lake.service.ports.writer.spark
    plain, variant = f"v3_plain_{branch[-8:]}", f"v3_variant_{branch[-8:]}"
    spark.sql(f"CREATE TABLE nessie.wap.`{plain}@{branch}` (id BIGINT, s STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO nessie.wap.`{plain}@{branch}` VALUES (1, 'a')")
    spark.sql(f"CREATE TABLE nessie.wap.`{variant}@{branch}` (id BIGINT, payload VARIANT) USING iceberg "
              "TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"""INSERT INTO nessie.wap.`{variant}@{branch}`
                  SELECT 1, parse_json('{{"a": 1, "b": [1, 2]}}') UNION ALL SELECT 2, parse_json('{{"a": "x"}}')""")
    read = spark.sql(f"SELECT id, variant_get(payload, '$.a', 'string') AS a FROM nessie.wap.`{variant}@{branch}` "
                     "ORDER BY id").collect()
    assert [(r["id"], r["a"]) for r in read] == [(1, "1"), (2, "x")]  # Spark, through the Nessie catalog: fine
    for table in (plain, variant):
        assert _nessie_api(lake, branch, table)["type"] == "ICEBERG_TABLE"  # the Nessie API: stored

    refused = {table: _rest(lake, branch, table) for table in (plain, variant)}
    assert refused[plain].status_code == 400 and "spec version 3" in refused[plain].text
    assert refused[variant].status_code == 400 and "primitive type 'variant'" in refused[variant].text
    for table in (plain, variant):  # PyIceberg, as the ops CLI reads: the same refusal
        with pytest.raises(CatalogError, match="HTTP 400"):
            lake.service.reader.row_count(TableRef("wap", table), branch)


def test_the_service_makes_v2_tables_which_every_reader_of_main_loads(lake: Lake, branch: str) -> None:
    """The same path, at the version the service creates tables with: served by REST and loaded by PyIceberg."""
    assert FORMAT_VERSION == "2"
    spark = lake.service.ports.writer.spark
    table = f"v2_plain_{branch[-8:]}"
    spark.sql(f"CREATE TABLE nessie.wap.`{table}@{branch}` (id BIGINT, s STRING) USING iceberg "
              f"TBLPROPERTIES ('format-version'='{FORMAT_VERSION}')")
    spark.sql(f"INSERT INTO nessie.wap.`{table}@{branch}` VALUES (1, 'a'), (2, 'b')")
    served = _rest(lake, branch, table)
    assert served.status_code == 200 and served.json()["metadata"]["format-version"] == 2
    assert lake.service.reader.row_count(TableRef("wap", table), branch) == 2
