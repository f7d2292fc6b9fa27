"""The WAP pipeline on the real components: moto S3 over HTTP, a Nessie server, Spark + Iceberg."""

from __future__ import annotations

import pytest
from pyiceberg.catalog import load_catalog

from tests.conftest import Lake, parquet_bytes
from tests.fakes import run_one
from wap_ingest.adapters.aws.s3 import S3ObjectStore, s3_client_for
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.core.errors import CatalogUnavailableError, ObjectStoreUnavailableError
from wap_ingest.core.models import OutcomeStatus, SourceObject
from wap_ingest.core.pipeline import Ports
from wap_stack.stack import free_port

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_clean_file_is_published(lake: Lake, table_name: str) -> None:
    outcome = lake.service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(25)))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert outcome.rows == 25
    assert lake.count(f"wap.{table_name}") == 25
    assert outcome.branch not in lake.wap_branches()


def test_file_with_nulls_is_rejected_and_kept_on_its_branch(lake: Lake, table_name: str) -> None:
    assert lake.service.ingest(lake.put(f"{table_name}/ok.parquet", parquet_bytes(10))).status.value == "published"
    main_before = lake.main_hash()
    outcome = lake.service.ingest(lake.put(f"{table_name}/bad.parquet", parquet_bytes(30, nulls=4)))
    assert outcome.status is OutcomeStatus.REJECTED
    assert outcome.report is not None
    assert [(c.check, c.target, c.measured) for c in outcome.report.failures] == [("not_null", "my_col_1", "4 nulls")]
    assert lake.main_hash() == main_before
    assert lake.count(f"wap.{table_name}") == 10
    assert outcome.branch in lake.wap_branches()
    assert lake.count(f"wap.{table_name}", ref=outcome.branch) == 40


def test_table_is_created_then_appended_and_pyiceberg_sees_main(lake: Lake, table_name: str) -> None:
    first = lake.service.ingest(lake.put(f"{table_name}/1.parquet", parquet_bytes(7)))
    second = lake.service.ingest(lake.put(f"{table_name}/2.csv", b"my_col_0,my_col_1,my_col_2\n1,a,0.5\n2,b,1.5\n"))
    assert [first.status, second.status] == [OutcomeStatus.PUBLISHED, OutcomeStatus.PUBLISHED], second.message
    assert lake.count(f"wap.{table_name}") == 9
    catalog = load_catalog(
        "nessie", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/main",
        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    arrow = catalog.load_table(f"wap.{table_name}").scan().to_arrow()
    assert arrow.num_rows == 9
    assert sorted(arrow.column("my_col_1").to_pylist()) == sorted([f"v{i}" for i in range(7)] + ["a", "b"])


def test_the_audit_reads_only_the_new_rows(lake: Lake, table_name: str) -> None:
    """Nulls already on main (published before this suite) do not fail a clean append."""
    lake.service.ingest(lake.put(f"{table_name}/1.parquet", parquet_bytes(5)))
    outcome = lake.service.ingest(lake.put(f"{table_name}/2.parquet", parquet_bytes(3)))
    assert outcome.report is not None
    assert [c.measured for c in outcome.report.checks] == ["0 nulls", "3 rows"]


def test_merge_commit_carries_the_source_identity(lake: Lake, table_name: str) -> None:
    import requests

    outcome = lake.service.ingest(lake.put(f"{table_name}/id.parquet", parquet_bytes(2)))
    log = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/main/history", timeout=10).json()
    # API v2 returns commit properties as `allProperties`: name -> list of values
    props = [{k: v[-1] for k, v in e["commitMeta"].get("allProperties", {}).items()} for e in log["logEntries"]]
    mine = [p for p in props if p.get("wap.source.key") == f"{table_name}/id.parquet"]
    assert len(mine) == 1
    assert mine[0]["wap.source.identity"] == outcome.source.identity
    assert mine[0]["wap.rows"] == "2"


@pytest.mark.parametrize(
    ("key", "body", "phrase"),
    [
        ("{t}/garbage.parquet", b"this is not parquet at all", "not a complete Parquet file"),
        ("{t}/empty.parquet", b"", "the object is empty"),
        ("{t}/header_only.csv", b"my_col_0,my_col_1,my_col_2\n", "no rows"),
        ("no_prefix_{t}.parquet", b"x", "no table prefix"),
        ("{t}-bad/x.parquet", b"x", "not a valid identifier"),
        ("{t}/x.xlsx", b"PK", "unsupported file type"),
    ],
)
def test_bad_input_is_reported_and_leaves_no_trace(lake: Lake, table_name: str, key: str, body: bytes,
                                                   phrase: str) -> None:
    main_before, branches_before = lake.main_hash(), lake.wap_branches()
    source = lake.put(key.format(t=table_name), body)
    outcome = lake.service.ingest(source)
    assert outcome.status is OutcomeStatus.INVALID
    assert phrase in outcome.message and source.uri in outcome.message and "Fix:" in outcome.message
    assert lake.wap_branches() == branches_before
    assert lake.main_hash() in (main_before, lake.service.ports.catalog.reference_hash("main"))
    assert f"wap.{table_name}" not in _tables_on_main(lake)


def test_missing_object_is_reported(lake: Lake, table_name: str) -> None:
    outcome = lake.service.ingest(SourceObject(lake.inbox_bucket, f"{table_name}/never-uploaded.parquet"))
    assert outcome.status is OutcomeStatus.INVALID
    assert "no such object" in outcome.message


def test_schema_mismatch_is_rejected_with_the_file_schema(lake: Lake, table_name: str) -> None:
    lake.service.ingest(lake.put(f"{table_name}/1.parquet", parquet_bytes(4)))
    outcome = lake.service.ingest(lake.put(f"{table_name}/2.csv", b"my_col_0,my_col_1,my_col_2\nx,y,not-a-number\n"))
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "do not fit table" in outcome.message and "File schema" in outcome.message
    assert lake.count(f"wap.{table_name}") == 4
    assert not [b for b in lake.wap_branches() if table_name in b]


def test_nessie_unreachable_raises_a_clear_error_and_main_is_untouched(lake: Lake, table_name: str) -> None:
    main_before = lake.main_hash()
    ports = Ports(catalog=NessieBranches(f"http://127.0.0.1:{free_port()}", timeout=2),
                  writer=lake.service.ports.writer, objects=lake.service.ports.objects)
    with pytest.raises(CatalogUnavailableError, match="unreachable") as info:
        run_one(lake.put(f"{table_name}/a.parquet", parquet_bytes(3)), ports=ports, suites=lake.service.suites,
                config=lake.service.config)
    assert "NESSIE_ENDPOINT" in str(info.value)
    assert lake.main_hash() == main_before


def test_s3_unreachable_raises_a_clear_error(lake: Lake, table_name: str) -> None:
    objects = S3ObjectStore(s3_client_for("us-east-1", f"http://127.0.0.1:{free_port()}", timeout=2))
    ports = Ports(catalog=lake.service.ports.catalog, writer=lake.service.ports.writer, objects=objects)
    main_before = lake.main_hash()
    with pytest.raises(ObjectStoreUnavailableError, match="unreachable"):
        run_one(SourceObject(lake.inbox_bucket, f"{table_name}/a.parquet"), ports=ports,
                suites=lake.service.suites, config=lake.service.config)
    assert lake.main_hash() == main_before


def _tables_on_main(lake: Lake) -> set[str]:
    spark = lake.service.ports.writer.spark
    return {f"wap.{r['tableName']}" for r in spark.sql("SHOW TABLES IN nessie.wap").collect()}
