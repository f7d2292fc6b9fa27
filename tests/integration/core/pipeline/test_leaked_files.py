"""No leaked files (issue 33, item 5), through the real stack (moto S3, the Nessie server, the service and `wap` as an
operator runs it): a rejected file discarded with `wap discard` leaves its registered copy, manifests and metadata in
the lake bucket, referenced by no branch; `wap maintain --dry-run` lists exactly those files and removes nothing;
`wap maintain` (its grace period shortened by WAP_SWEEP_GRACE_SECONDS) compacts the table, then removes them, and
`wap history` says so. Kept: the files of an open review branch, of a tag whose branch was discarded, of main's
current snapshot and of the snapshots and commits the compaction replaced (main read at its older commit still
reads), and a file younger than the grace period (a run in flight). The next file ingested publishes and reads back
through PyIceberg on main, and a full scan of the table still works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.audits import suites_from
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
GRACE = 30  # seconds: longer than starting `wap maintain` takes, shorter than this test's wait
CHECKS = [{"check": "not_null", "columns": ["my_col_1"]}]


def wap(*argv: str, env: dict[str, str]) -> str:
    """`wap ARGV` as its own process, as an operator runs it; its standard output (exit 0 required)."""
    done = subprocess.run([sys.executable, "-m", "wap_ingest.entrypoints.cli", *argv], check=False, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"wap {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def stored(lake: Lake, location: str) -> dict[str, datetime]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    found = {}
    for page in lake.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for item in page.get("Contents", []):
            found[f"s3://{bucket}/{item['Key']}"] = item["LastModified"]
    return found


def content_at(lake: Lake, table: TableRef, ref: str) -> dict[str, Any]:
    """The table's Nessie content at `ref` (a branch, a tag, or `main@<hash>`)."""
    answer = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/{ref}/contents/{table.qualified}", timeout=10)
    answer.raise_for_status()
    return dict(answer.json()["content"])


def rows_at(lake: Lake, table: TableRef, ref: str) -> list[int]:
    """my_col_0 of every row of the table at `ref`, read by PyIceberg from the metadata file Nessie names there."""
    from pyiceberg.table import StaticTable

    env = lake.env
    loaded = StaticTable.from_metadata(content_at(lake, table, ref)["metadataLocation"], {
        "s3.endpoint": env["AWS_ENDPOINT_URL"], "s3.region": env["AWS_REGION"],
        "s3.access-key-id": env["AWS_ACCESS_KEY_ID"], "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"]})
    return sorted(loaded.scan().to_arrow()["my_col_0"].to_pylist())


def rows_on_main(lake: Lake, table: TableRef) -> list[int]:
    """As a downstream reader reads main (README): PyIceberg through Nessie's Iceberg REST endpoint."""
    from pyiceberg.catalog import load_catalog

    env = lake.env
    catalog = load_catalog(f"main-{time.monotonic_ns()}", type="rest", uri=f"{env['NESSIE_ENDPOINT']}/iceberg/main",
                           **{"s3.endpoint": env["AWS_ENDPOINT_URL"], "s3.region": env["AWS_REGION"],
                              "s3.access-key-id": env["AWS_ACCESS_KEY_ID"],
                              "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"]})
    return sorted(catalog.load_table(table.qualified).scan().to_arrow()["my_col_0"].to_pylist())


def data_files(lake: Lake, table: TableRef, ref: str) -> set[str]:
    from pyiceberg.table import StaticTable

    env = lake.env
    loaded = StaticTable.from_metadata(content_at(lake, table, ref)["metadataLocation"], {
        "s3.endpoint": env["AWS_ENDPOINT_URL"], "s3.region": env["AWS_REGION"]})
    return {task.file.file_path for task in loaded.scan().plan_files()}


def test_a_discarded_runs_files_are_listed_then_removed_and_every_live_file_stays(lake: Lake, table_name: str,
                                                                                   tmp_path: Path) -> None:
    table = TableRef("wap", table_name)
    raw = {"tables": {table_name: {"checks": CHECKS, "maintenance": {"min_input_files": 2}}}}
    audits = tmp_path / "audits.yml"
    audits.write_text(yaml.safe_dump(raw))
    service = lake.service.replaced(suites=suites_from(raw, default_namespace="wap"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAP_EMR_")} | {  # no EMR: tables maintained here
        "WAP_AUDITS_FILE": str(audits), "WAP_WORK_DIR": str(tmp_path / "work"),
        "WAP_SWEEP_GRACE_SECONDS": str(GRACE), "WAP_ABANDONED_BRANCH_SECONDS": "10"}

    def ingest(name: str, rows: int, nulls: int = 0, first: int = 0) -> IngestOutcome:
        body = parquet_bytes(rows, nulls)
        if first:  # values of its own, to find its rows on main
            import io

            import pyarrow as pa
            import pyarrow.parquet as pq

            sink = io.BytesIO()
            frame = pq.read_table(io.BytesIO(body))
            pq.write_table(frame.set_column(0, "my_col_0", pa.array(range(first, first + rows), pa.int32())), sink)
            body = sink.getvalue()
        return service.ingest(lake.put(f"{table_name}/{name}", body), table)

    published = ingest("a.parquet", 10)
    assert published.status is OutcomeStatus.PUBLISHED, published.message
    bucket, _, key = content_at(lake, table, "main")["metadataLocation"].removeprefix("s3://").partition("/")
    location = json.loads(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())["location"]

    def run(name: str) -> tuple[IngestOutcome, set[str]]:
        """A rejected file's run: its outcome and the files it wrote under the table's location."""
        before = set(stored(lake, location))
        outcome = ingest(name, 10, nulls=3)
        assert outcome.status is OutcomeStatus.REJECTED and outcome.branch, outcome.message
        return outcome, set(stored(lake, location)) - before

    discarded, leaked = run("leaked.parquet")
    wap("discard", str(discarded.branch), "--reason", "bad rows", env=env)
    assert discarded.branch not in lake.wap_branches()
    copies = {p for p in leaked if "/data/" in p}
    assert copies and leaked <= set(stored(lake, location))  # the registered copy stays in the lake bucket
    leaked_at = max(stored(lake, location)[p] for p in leaked)

    review, reviewed = run("review.parquet")  # left open for review
    tagged_run, tagged = run("tagged.parquet")
    head = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/{tagged_run.branch}", timeout=10).json()
    requests.post(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees", params={"name": f"keep-{table_name}", "type": "TAG"},
                  json=head["reference"], timeout=10).raise_for_status()
    wap("discard", str(tagged_run.branch), "--reason", "kept by a tag", env=env)
    second = ingest("c.parquet", 10, first=100)
    assert second.status is OutcomeStatus.PUBLISHED, second.message
    before_compaction = lake.main_hash()
    replaced = data_files(lake, table, "main")
    assert len(replaced) == 2

    time.sleep(max(0.0, (leaked_at.timestamp() + GRACE + 3) - time.time()))  # the leaked files past the grace period
    dry = wap("maintain", table.qualified, "--dry-run", env=env)
    listed = {line.split()[2] for line in dry.splitlines() if line.strip().startswith("would remove s3://")}
    assert listed == leaked, dry
    assert f"would remove {len(leaked)} file(s)" in dry and leaked <= set(stored(lake, location))

    in_flight = f"{location}/data/00000-in-flight.parquet"  # written by a run that has not committed yet
    bucket, _, key = in_flight.removeprefix("s3://").partition("/")
    lake.s3.put_object(Bucket=bucket, Key=key, Body=parquet_bytes(3))
    done = wap("maintain", table.qualified, env=env)
    removed = {line.split()[1] for line in done.splitlines() if line.strip().startswith("removed s3://")}
    assert removed == leaked, done
    assert "maintained (compact the small data files" in done and "1 unreferenced file(s) younger than 30s kept" in done

    left = set(stored(lake, location))
    assert not leaked & left
    assert reviewed | tagged | replaced | {in_flight} <= left
    assert not replaced & data_files(lake, table, "main")  # compacted: the replaced files only older snapshots use
    assert rows_on_main(lake, table) == rows_at(lake, table, f"main@{before_compaction}") == sorted(
        [*range(10), *range(100, 110)])
    assert rows_at(lake, table, str(review.branch)) == rows_at(lake, table, f"keep-{table_name}") == sorted(
        [*range(10), *range(10)])

    history = wap("history", table.qualified, env=env)
    assert f"swept by wap maintain: removed {len(leaked)} file(s)" in history, history

    after = ingest("next.parquet", 10, first=200)
    assert after.status is OutcomeStatus.PUBLISHED, after.message
    assert rows_on_main(lake, table) == sorted([*range(10), *range(100, 110), *range(200, 210)])
    assert lake.count(table.qualified) == 30  # a full scan by Spark
