"""`wap ingest` as a user runs it: a separate process, pointed at the stack by its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import Lake, parquet_bytes

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def wap(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wap_ingest.entrypoints.cli", *args],
        env=os.environ | env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_ingest_a_prefix_reports_each_file_and_fails_when_one_is_rejected(lake: Lake, table_name: str) -> None:
    lake.put(f"{table_name}/1-clean.parquet", parquet_bytes(10))
    lake.put(f"{table_name}/2-nulls.parquet", parquet_bytes(10, nulls=2))
    result = wap(lake.env, "ingest", f"s3://{lake.inbox_bucket}/{table_name}/", "--json")
    assert result.returncode == 1, result.stderr
    outcomes = json.loads(result.stdout)["outcomes"]
    assert [(o["object"].rsplit("/", 1)[1], o["status"], o["rows"]) for o in outcomes] == [
        ("1-clean.parquet", "published", 10),
        ("2-nulls.parquet", "rejected", 10),
    ]
    assert outcomes[1]["branch"] in lake.wap_branches()
    assert lake.count(f"wap.{table_name}") == 10


def test_ingest_one_object_into_an_explicit_table_prints_a_summary(lake: Lake, table_name: str) -> None:
    lake.put("loose-file.parquet", parquet_bytes(3))
    result = wap(lake.env, "ingest", f"s3://{lake.inbox_bucket}/loose-file.parquet", "--table", f"raw.{table_name}")
    assert result.returncode == 0, result.stderr
    assert "PUBLISHED" in result.stdout and f"table=raw.{table_name}" in result.stdout
    assert "1 published, 0 rejected, 0 invalid, 0 duplicate, 0 failed" in result.stdout
    assert lake.count(f"raw.{table_name}") == 3


def test_configuration_errors_name_the_variable(lake: Lake) -> None:
    env = dict(lake.env) | {"NESSIE_ENDPOINT": "not-a-url"}
    result = wap(env, "ingest", f"s3://{lake.inbox_bucket}/x/")
    assert result.returncode == 2
    assert "NESSIE_ENDPOINT='not-a-url' is not an http(s) URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_prefix_is_a_clear_error(lake: Lake, table_name: str) -> None:
    result = wap(lake.env, "ingest", f"s3://{lake.inbox_bucket}/{table_name}-nothing-here/")
    assert result.returncode == 1
    assert "no object or prefix with that name" in result.stderr
