"""One behaviour suite for the LakeFiles port (core.lake_files), run against the in-memory fake and the real adapter
(adapters/catalog/lake_files.py: Nessie's REST API v2, Iceberg metadata read with PyIceberg, S3 on the stack's moto).
The real tables are made and written by PyIceberg through Nessie's Iceberg REST endpoint, on branches as Nessie makes
them; tags and branch deletions through Nessie's REST API v2."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest
import requests

from tests.fake_lake_files import FakeLakeFiles
from wap_ingest.core.errors import CatalogError, WapError
from wap_ingest.core.lake_files import LakeFiles
from wap_ingest.core.models import TableRef


class World(Protocol):
    """A catalog of Iceberg tables and its object store, changed from outside the port."""

    files: LakeFiles

    def add_table(self, table: TableRef) -> str: ...
    def append(self, table: TableRef, ref: str = "main") -> str: ...
    def overwrite(self, table: TableRef, ref: str = "main") -> str: ...
    def metadata_of(self, table: TableRef, ref: str = "main") -> str: ...
    def branch(self, name: str, source: str = "main") -> None: ...
    def tag(self, name: str, source: str = "main") -> None: ...
    def drop(self, name: str) -> None: ...
    def put(self, path: str) -> str: ...
    def lose(self, path: str) -> None: ...


class Fake:
    def __init__(self) -> None:
        self.files = self.lake = FakeLakeFiles()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lake, name)


class Real:
    """The stack's Nessie and moto; every name made unique, as the session shares one catalog."""

    def __init__(self, env: dict[str, str], s3: Any) -> None:
        from wap_ingest.adapters.catalog.iceberg_files import MetadataFiles, pyarrow_io
        from wap_ingest.adapters.catalog.lake_files import CatalogLakeFiles
        from wap_ingest.adapters.catalog.live import NessieLiveContents

        self.env, self.s3, self.token = env, s3, uuid.uuid4().hex[:8]
        self.endpoint = env["NESSIE_ENDPOINT"]
        self.files = CatalogLakeFiles(NessieLiveContents(self.endpoint, timeout=10),
                                      MetadataFiles(pyarrow_io(env["AWS_ENDPOINT_URL"], env["AWS_REGION"], 10)), s3)
        self._catalogs: dict[str, Any] = {}

    def _name(self, ref: str) -> str:
        return ref if ref == "main" else f"{ref}-{self.token}"

    def _catalog(self, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog

        name = self._name(ref)
        if name not in self._catalogs:
            self._catalogs[name] = load_catalog(
                name, type="rest", uri=f"{self.endpoint}/iceberg/{name}", **{
                    "s3.endpoint": self.env["AWS_ENDPOINT_URL"], "s3.region": self.env["AWS_REGION"],
                    "s3.access-key-id": self.env["AWS_ACCESS_KEY_ID"],
                    "s3.secret-access-key": self.env["AWS_SECRET_ACCESS_KEY"]})
        return self._catalogs[name]

    def add_table(self, table: TableRef) -> str:
        import pyarrow as pa

        catalog = self._catalog("main")
        catalog.create_namespace_if_not_exists(table.namespace)
        return str(catalog.create_table(table.qualified, schema=pa.schema([("a", pa.int64())])).location())

    def _write(self, table: TableRef, ref: str, how: str) -> str:
        import pyarrow as pa

        loaded = self._catalog(ref).load_table(table.qualified)
        before = {task.file.file_path for task in loaded.scan().plan_files()}
        getattr(loaded, how)(pa.table({"a": [1, 2, 3]}))
        (added,) = {task.file.file_path for task in loaded.scan().plan_files()} - before
        return str(added)

    def append(self, table: TableRef, ref: str = "main") -> str:
        return self._write(table, ref, "append")

    def overwrite(self, table: TableRef, ref: str = "main") -> str:
        return self._write(table, ref, "overwrite")

    def metadata_of(self, table: TableRef, ref: str = "main") -> str:
        return str(self._catalog(ref).load_table(table.qualified).metadata_location)

    def _reference(self, name: str) -> dict[str, Any]:
        answer = requests.get(f"{self.endpoint}/api/v2/trees/{self._name(name)}", timeout=10)
        answer.raise_for_status()
        return dict(answer.json()["reference"])

    def _create(self, name: str, kind: str, source: str) -> None:
        answer = requests.post(f"{self.endpoint}/api/v2/trees", params={"name": self._name(name), "type": kind},
                               json=self._reference(source), timeout=10)
        answer.raise_for_status()

    def branch(self, name: str, source: str = "main") -> None:
        self._create(name, "BRANCH", source)

    def tag(self, name: str, source: str = "main") -> None:
        self._create(name, "TAG", source)

    def drop(self, name: str) -> None:
        found = self._reference(name)
        answer = requests.delete(f"{self.endpoint}/api/v2/trees/{found['name']}@{found['hash']}",
                                 params={"type": found["type"]}, timeout=10)
        answer.raise_for_status()

    def put(self, path: str) -> str:
        bucket, _, key = path.removeprefix("s3://").partition("/")
        self.s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 100)
        return path

    def lose(self, path: str) -> None:
        bucket, _, key = path.removeprefix("s3://").partition("/")
        self.s3.delete_object(Bucket=bucket, Key=key)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.stack)])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    if request.param == "fake":
        yield Fake()
        return
    yield Real(request.getfixturevalue("stack_env"), request.getfixturevalue("stack_s3"))


@pytest.fixture
def table() -> TableRef:
    return TableRef(f"c{uuid.uuid4().hex[:8]}", "events")


def needed(world: World, table: TableRef) -> frozenset[str]:
    found = world.files.referenced(table, datetime.now(UTC))
    assert found is not None
    return found.referenced


def test_the_files_of_every_branch_and_tag_are_needed_until_their_reference_goes(world: World,
                                                                                  table: TableRef) -> None:
    location = world.add_table(table)
    on_main = world.append(table)
    world.branch("review")
    on_review = world.append(table, "review")
    world.branch("tagged")
    on_tagged = world.append(table, "tagged")
    world.tag("keep", "tagged")
    world.drop("tagged")  # the tag still points at its commit
    found = world.files.referenced(table, datetime.now(UTC))
    assert found is not None and found.locations == (location,)
    assert {on_main, on_review, on_tagged} <= found.referenced
    assert found.references >= 3 and found.commits >= 4 and found.metadata_files >= 4
    world.drop("review")
    after = needed(world, table)
    assert on_review not in after and {on_main, on_tagged} <= after
    world.drop("keep")
    assert on_tagged not in needed(world, table)


def test_a_file_only_an_older_commit_of_main_uses_is_needed(world: World, table: TableRef) -> None:
    world.add_table(table)
    replaced = world.append(table)
    replaced_by = world.overwrite(table)
    assert {replaced, replaced_by} <= needed(world, table)


def test_the_metadata_files_of_every_live_commit_are_needed(world: World, table: TableRef) -> None:
    world.add_table(table)
    world.append(table)
    first = world.metadata_of(table)
    world.append(table)
    assert {first, world.metadata_of(table)} <= needed(world, table)


def test_a_table_no_reference_has_is_none(world: World, table: TableRef) -> None:
    world.add_table(table)
    assert world.files.referenced(TableRef(table.namespace, "nowhere"), datetime.now(UTC)) is None


def test_a_reading_begun_before_since_is_not_reused(world: World, table: TableRef) -> None:
    world.add_table(table)
    needed(world, table)
    later = world.append(table)
    assert later in needed(world, table)


def test_stored_lists_what_is_inside_the_location_with_size_and_time(world: World, table: TableRef) -> None:
    location = world.add_table(table)
    inside = world.put(f"{location}/data/leftover.parquet")
    sibling = world.put(f"{location}_quarantine/data/other.parquet")  # a prefix of it, not inside it
    stored = {f.path: f for f in world.files.stored(location)}
    assert inside in stored and sibling not in stored
    assert stored[inside].size == 100
    assert abs(stored[inside].modified - datetime.now(UTC)) < timedelta(minutes=2)


def test_remove_deletes_files_inside_the_location_and_refuses_any_outside(world: World, table: TableRef) -> None:
    location = world.add_table(table)
    gone, kept = world.put(f"{location}/data/gone.parquet"), world.put(f"{location}/data/kept.parquet")
    outside = world.put(f"{location}_quarantine/data/other.parquet")
    world.files.remove(location, [gone])
    paths = {f.path for f in world.files.stored(location)}
    assert gone not in paths and kept in paths
    with pytest.raises(CatalogError, match="not a file inside"):
        world.files.remove(location, [kept, outside])
    assert kept in {f.path for f in world.files.stored(location)}
    assert outside in {f.path for f in world.files.stored(f"{location}_quarantine")}


def test_a_missing_metadata_file_stops_the_reading(world: World, table: TableRef) -> None:
    world.add_table(table)
    world.append(table)
    world.lose(world.metadata_of(table))
    with pytest.raises(WapError, match="not there"):
        world.files.referenced(table, datetime.now(UTC))
