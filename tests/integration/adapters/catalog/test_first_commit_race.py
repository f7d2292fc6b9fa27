"""projectnessie/nessie#10062 (fixed in 0.101.1) against the local Nessie server (0.99.0): which paths it reaches.

The bug: Nessie's Iceberg REST endpoint ignored the requirement `assert-ref-snapshot-id` with no snapshot id ("the
table must have no current snapshot yet"), so of two writers appending to a table that has no snapshot, the one that
commits second replaces the first one's snapshot and its rows are gone. The fix (nessie 8b3058b) checks it.

1. The REST endpoint: reproduced here with PyIceberg (whose append commits the metadata it loaded, with that
   requirement), two writers on one reference. On 0.99 the second commit is accepted and the first one's rows are
   lost; from 0.101.1 on it is refused.
2. The service's path: it never commits through the REST endpoint. Its writes go through Iceberg's NessieCatalog
   (REST API v2 commits, each against the hash its table was read at, so Nessie refuses a stale one), each run on
   its own branch, published by a merge that expects main's hash. Two first ingestions of one new table both create
   it on their branches; the second merge conflicts (both added the table) and is retried from the new main, where
   the table exists: both files' rows, once each.
3. The readers (adapters/catalog/reader.py, `wap show`; the tests' PyIceberg client): they only read, and a read
   cannot lose a commit. Checked on the requests they send."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException

from tests.conftest import Lake, parquet_bytes
from wap_ingest.adapters.catalog.reader import IcebergRestReader
from wap_ingest.core.models import OutcomeStatus, TableRef
from wap_stack.components import NESSIE_VERSION

pytestmark = [pytest.mark.stack, pytest.mark.spark]

FIXED_IN = (0, 101, 1)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@pytest.fixture
def scratch_branch(lake: Lake) -> Iterator[str]:
    """A Nessie branch from main for the REST writers (so that main never sees them), deleted afterwards."""
    api = f"{lake.env['NESSIE_ENDPOINT']}/api/v2"
    name = f"race-{uuid.uuid4().hex[:10]}"
    main = requests.get(f"{api}/trees/main", timeout=10).json()["reference"]
    created = requests.post(f"{api}/trees", params={"name": name, "type": "BRANCH"},
                            json={"type": "BRANCH", "name": "main", "hash": main["hash"]}, timeout=10)
    assert created.status_code == 200, created.text
    yield name
    head = requests.get(f"{api}/trees/{name}", timeout=10).json()["reference"]["hash"]
    requests.delete(f"{api}/trees/{name}@{head}", timeout=10)


def _rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64())})


def test_on_the_rest_endpoint_a_stale_first_append_replaces_the_other_writers_rows(
        lake: Lake, table_name: str, scratch_branch: str) -> None:
    catalog = load_catalog("race", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/{scratch_branch}",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    catalog.create_namespace_if_not_exists("wap")
    catalog.create_table(f"wap.{table_name}", schema=_rows(0, 0).schema)
    # two writers that both loaded the table while it had no snapshot
    first, second = catalog.load_table(f"wap.{table_name}"), catalog.load_table(f"wap.{table_name}")
    assert first.current_snapshot() is None and second.current_snapshot() is None

    first.append(_rows(0, 3))
    if _version(NESSIE_VERSION) >= FIXED_IN:
        with pytest.raises(CommitFailedException):
            second.append(_rows(100, 5))
        assert catalog.load_table(f"wap.{table_name}").scan().to_arrow().num_rows == 3
        return
    second.append(_rows(100, 5))  # accepted by Nessie 0.99: its "no snapshot yet" requirement is not checked

    ids = sorted(catalog.load_table(f"wap.{table_name}").scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(100, 105))  # the first writer's three rows are gone


def test_two_first_ingestions_of_one_new_table_publish_both_files_once(
        lake: Lake, table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both runs append (each creating the table on its own branch) before either merges: the race of the bug, on the
    service's path. One merge conflicts and is retried from the new main."""
    writer = lake.service.ports.writer
    real_append = writer.append
    both_appended = threading.Barrier(2, timeout=300)
    first_calls: set[int] = set()
    lock = threading.Lock()

    def append_then_wait_for_the_other(*args: Any, **kwargs: Any) -> Any:
        appended = real_append(*args, **kwargs)
        with lock:
            first = threading.get_ident() not in first_calls
            first_calls.add(threading.get_ident())
        if first:  # each run's first append only: the retry must not wait for a partner
            both_appended.wait()
        return appended

    # A warm engine, as in a warm Lambda, its catalog loaded. (Not a detail: Spark loads a catalog with the conf of
    # the calling thread's active session, and a Py4J thread that did not start the session has none, so a catalog
    # first loaded from such a thread is "not defined". The service's processes run the pipeline on one thread.)
    writer.spark.sql("SHOW NAMESPACES IN nessie").collect()
    monkeypatch.setattr(writer, "append", append_then_wait_for_the_other)
    sources = [lake.put(f"{table_name}/a.parquet", parquet_bytes(3)), lake.put(f"{table_name}/b.parquet",
                                                                               parquet_bytes(5))]
    outcomes: list[Any] = [None, None]

    def ingest(index: int) -> None:
        outcomes[index] = lake.service.ingest(sources[index])

    threads = [threading.Thread(target=ingest, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)
    monkeypatch.setattr(writer, "append", real_append)

    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED] * 2, [o.message for o in outcomes]
    assert sorted(o.attempts for o in outcomes) == [1, 2]  # one merge conflicted, and was retried once
    assert lake.count(f"wap.{table_name}") == 3 + 5
    log = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/main/history", params={"maxRecords": 200},
                       timeout=10).json()["logEntries"]
    keys = [e["commitMeta"].get("allProperties", {}).get("wap.source.key", [None])[0] for e in log]
    assert sorted(k for k in keys if k and k.startswith(f"{table_name}/")) == sorted(s.key for s in sources)
    assert not [b for b in lake.wap_branches() if table_name in b]
    # the REST endpoint's readers see the same rows
    reader = IcebergRestReader(lake.env["NESSIE_ENDPOINT"])
    assert reader.row_count(TableRef("wap", table_name), "main") == 8


def test_the_rest_readers_only_read(lake: Lake, table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lake.service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(4)))
    sent: list[tuple[str, str]] = []
    real_send = requests.Session.send

    def recording_send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        sent.append((str(request.method), str(request.url)))
        return real_send(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", recording_send)
    reader = IcebergRestReader(lake.env["NESSIE_ENDPOINT"])
    assert reader.row_count(TableRef("wap", table_name), "main") == 4
    assert reader.branch_changes(TableRef("wap", table_name), "main") is not None
    catalog = load_catalog("independent", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/main",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    assert catalog.load_table(f"wap.{table_name}").scan().to_arrow().num_rows == 4

    to_nessie = [(method, url) for method, url in sent if url.startswith(lake.env["NESSIE_ENDPOINT"])]
    assert to_nessie and {method for method, _ in to_nessie} <= {"GET", "HEAD"}, to_nessie
