"""The files a register path commit writes (adapters/catalog/lake_io.py): each one PutObject started when closed and
waited for by `settle`, its length known without a HEAD, "do not overwrite" S3's own conditional put, the puts of
one commit at once, and a commit whose put fails never reaching Nessie, against the local stack's moto."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from tests.conftest import Lake
from wap_ingest.adapters.catalog.lake_io import put_file_io

pytestmark = [pytest.mark.stack]


def test_a_commit_file_is_one_put_of_its_bytes_and_refuses_to_overwrite(lake: Lake, table_name: str) -> None:
    objects = lake.service.objects
    puts: list[tuple[str, int, bool]] = []

    def put(uri: str, data: bytes, *, overwrite: bool) -> None:
        puts.append((uri, len(data), overwrite))
        objects.write(uri, data, overwrite=overwrite)

    file_io = put_file_io({"s3.endpoint": lake.env["AWS_ENDPOINT_URL"], "s3.region": lake.env["AWS_REGION"]}, put)
    uri = f"s3://{lake.env['LAKE_BUCKET']}/warehouse/{table_name}/metadata/00001.metadata.json"
    output = file_io.new_output(uri)
    with output.create(overwrite=False) as stream:
        stream.write(b'{"format-version": 2}')
        assert puts == []  # nothing sent before the file is closed
    assert len(output) == 21  # known without asking S3
    file_io.puts.settle()
    assert puts == [(uri, 21, False)]
    assert file_io.new_input(uri).open().read() == b'{"format-version": 2}'  # read back by PyArrow
    with file_io.new_output(uri).create(overwrite=False) as stream:
        stream.write(b"another")
    with pytest.raises(FileExistsError):
        file_io.puts.settle()
    with file_io.new_output(uri).create(overwrite=True) as stream:
        stream.write(b"replaced")
    file_io.puts.settle()
    assert file_io.new_input(uri).open().read() == b"replaced"


def test_the_files_of_one_commit_are_put_at_once_and_a_drained_failure_is_forgotten(lake: Lake,
                                                                                   table_name: str) -> None:
    together = threading.Barrier(4, timeout=10)  # passes only if four puts run at the same time

    def put(uri: str, data: bytes, *, overwrite: bool) -> None:
        together.wait()
        lake.service.objects.write(uri, data, overwrite=overwrite)

    file_io = put_file_io({"s3.endpoint": lake.env["AWS_ENDPOINT_URL"], "s3.region": lake.env["AWS_REGION"]}, put)
    base = f"s3://{lake.env['LAKE_BUCKET']}/warehouse/{table_name}"
    for i in range(4):
        with file_io.new_output(f"{base}/f{i}").create(overwrite=True) as stream:
            stream.write(b"x" * i)
    file_io.puts.settle()  # one after the other, the first would wait for the others in vain (BrokenBarrierError)
    assert [file_io.new_input(f"{base}/f{i}").open().read() for i in range(4)] == [b"x" * i for i in range(4)]

    failing = put_file_io({"s3.endpoint": lake.env["AWS_ENDPOINT_URL"]}, lambda *_a, **_k: 1 / 0)
    with failing.new_output(f"{base}/lost").create(overwrite=True) as stream:
        stream.write(b"never")
    failing.puts.drain()  # an attempt that ended before its commit
    failing.puts.settle()  # the next commit does not inherit its failure


def test_a_commit_whose_file_is_not_written_never_reaches_the_catalog(lake: Lake, table_name: str) -> None:
    from wap_ingest.adapters.catalog.audit_results import arrow_schema, iceberg_schema
    from wap_ingest.bootstrap import builders
    from wap_ingest.core.errors import WapError
    from wap_ingest.core.models import TableRef

    def put(uri: str, data: bytes, *, overwrite: bool) -> None:
        if uri.endswith(".parquet"):
            raise PermissionError(f"refused: {uri}")
        lake.service.objects.write(uri, data, overwrite=overwrite)

    tables = builders.branch_tables_for(lake.service.settings, None, lake.service.objects)
    tables._put = put  # the data files of this test's appends are refused
    catalog = lake.service.catalog
    branch = catalog.create_branch(f"lake-io-{table_name}", catalog.reference_hash("main"))
    catalog.ensure_namespace(branch.name, "lake_io")
    target = TableRef("lake_io", table_name)
    made = tables.create(target, branch.name, iceberg_schema(), f"s3://{lake.env['LAKE_BUCKET']}/warehouse/"
                         f"lake_io/{table_name}", {"format-version": "2"})
    head = catalog.reference_hash(branch.name)
    with pytest.raises((PermissionError, WapError), match="refused"):
        made.append(pa.Table.from_pylist([{name: None for name in arrow_schema().names}], schema=arrow_schema()))
    assert catalog.reference_hash(branch.name) == head  # Nessie never saw the commit
    reloaded = tables.load(target, branch.name)
    assert reloaded is not None and reloaded.current_snapshot() is None


def test_the_next_commit_reads_the_manifest_list_this_process_wrote_from_memory(lake: Lake, table_name: str,
                                                                                 monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    from wap_ingest.adapters.catalog.audit_results import arrow_schema, iceberg_schema
    from wap_ingest.bootstrap import builders
    from wap_ingest.core.models import TableRef

    read: list[str] = []
    original = PyArrowFileIO.new_input
    monkeypatch.setattr(PyArrowFileIO, "new_input", lambda self, location: read.append(location) or original(
        self, location))
    tables = builders.branch_tables_for(lake.service.settings, None, lake.service.objects)
    catalog = lake.service.catalog
    branch = catalog.create_branch(f"lake-io-{table_name}", catalog.reference_hash("main"))
    catalog.ensure_namespace(branch.name, "lake_io")
    target = TableRef("lake_io", table_name)
    tables.create(target, branch.name, iceberg_schema(), f"s3://{lake.env['LAKE_BUCKET']}/warehouse/"
                  f"lake_io/{table_name}", {"format-version": "2"})
    rows = [{name: None for name in arrow_schema().names} | {"load": f"load-{i}"} for i in range(3)]
    for row in rows:
        loaded = tables.load(target, branch.name)
        assert loaded is not None
        loaded.append(pa.Table.from_pylist([row], schema=arrow_schema()))
    parents = [s.manifest_list for s in loaded.snapshots()][:-1]  # what the 2nd and 3rd appends read
    assert len(parents) == 2 and not set(parents) & set(read)  # neither asked of S3
    fresh = builders.branch_tables_for(lake.service.settings, None, lake.service.objects)  # nothing kept
    again = fresh.load(target, branch.name)
    assert again is not None
    assert sorted(again.scan().to_arrow().column("load").to_pylist()) == ["load-0", "load-1", "load-2"]
    for snapshot in again.snapshots():  # what S3 holds (read by the fresh FileIO) is what was kept
        assert [m.manifest_path for m in snapshot.manifests(again.io)] == [
            m.manifest_path for m in snapshot.manifests(loaded.io)]
    assert set(parents) <= set(read)
