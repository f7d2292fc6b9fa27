"""FakeLakeFiles: the LakeFiles port (core.lake_files) in memory, for the sweep's unit tests; tests/contract/
test_lake_files_contract.py holds it to the real adapter's behaviour.

A small model of a Nessie catalog of Iceberg tables: commits (each with its parent and, per table, the metadata file
it names), references (branches and tags) at commits, metadata files (each naming its table's location and the files
its snapshots need) and the objects of a store, each with its time of writing. `add_table`, `append`, `overwrite`,
`branch`, `tag`, `drop`, `put` and `lose` change it as Iceberg and Nessie would."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from wap_ingest.core.errors import CatalogError, CatalogUnavailableError
from wap_ingest.core.lake_files import LakeFiles, StoredFile, TableFiles, under
from wap_ingest.core.models import TableRef


@dataclass(frozen=True)
class FakeCommit:
    parent: str | None
    tables: dict[str, str]  # dotted table name -> its metadata file


@dataclass(frozen=True)
class FakeMetadata:
    location: str
    needed: frozenset[str]  # the data files and manifests its snapshots need (and itself)
    data: frozenset[str]  # the data files of its current snapshot


class FakeLakeFiles(LakeFiles):
    def __init__(self, warehouse: str = "s3://lake/warehouse",
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.warehouse, self.clock = warehouse.rstrip("/"), clock
        self.objects: dict[str, StoredFile] = {}
        self.commits: dict[str, FakeCommit] = {"c0": FakeCommit(None, {})}
        self.refs: dict[str, str] = {"BRANCH:main": "c0"}  # TYPE:name -> commit
        self.metadata: dict[str, FakeMetadata] = {}
        self.down = False  # the catalog answers nothing
        self.removed: list[str] = []
        self._ids = itertools.count(1)

    # --- the port ---------------------------------------------------------------------------------------

    def referenced(self, table: TableRef, since: datetime) -> TableFiles | None:
        if self.down:
            raise CatalogUnavailableError("Nessie at fake is unreachable while listing the catalog's references")
        named: dict[str, set[str]] = {}  # table -> every metadata file a live commit names
        seen: set[str] = set()
        for head in self.refs.values():
            cursor: str | None = head
            while cursor is not None and cursor not in seen:
                seen.add(cursor)
                for name, path in self.commits[cursor].tables.items():
                    named.setdefault(name, set()).add(path)
                cursor = self.commits[cursor].parent
        if table.qualified not in named:
            return None
        locations = tuple(sorted({self._read(p).location for p in named[table.qualified]}))
        needed: set[str] = set()
        for path in {p for paths in named.values() for p in paths}:
            if path in self.objects:
                needed |= self.metadata[path].needed
            elif any(under(path, location) for location in locations):  # another table's, where it may concern
                raise CatalogError(f"the table metadata file {path} is not there")
        return TableFiles(table.qualified, locations,
                          frozenset(f for f in needed if any(under(f, loc) for loc in locations)),
                          references=len(self.refs), commits=len(seen),
                          metadata_files=sum(len(paths) for paths in named.values()))

    def stored(self, location: str) -> list[StoredFile]:
        return [f for path, f in sorted(self.objects.items()) if under(path, location)]

    def remove(self, location: str, paths: Sequence[str]) -> None:
        outside = [p for p in paths if not under(p, location)]
        if outside:
            raise CatalogError(f"refusing to remove {outside[0]}: it is not a file inside {location}/")
        for path in paths:
            self.objects.pop(path, None)
            self.removed.append(path)

    def _read(self, path: str) -> FakeMetadata:
        if path not in self.objects:
            raise CatalogError(f"the table metadata file {path} is not there")
        return self.metadata[path]

    # --- what Iceberg and Nessie do -----------------------------------------------------------------------

    def put(self, path: str, at: datetime | None = None, size: int = 100) -> str:
        self.objects[path] = StoredFile(path, size, at or self.clock())
        return path

    def lose(self, path: str) -> None:
        self.objects.pop(path)

    def add_table(self, table: TableRef, ref: str = "main") -> str:
        """A new table with no rows on `ref`; returns its location."""
        location = f"{self.warehouse}/{table.namespace}/{table.name}_{next(self._ids):04d}"
        self._commit(ref, table, self._metadata(location, frozenset(), frozenset()))
        return location

    def append(self, table: TableRef, ref: str = "main") -> str:
        """A data file appended to `table` on `ref` (one commit); returns the data file."""
        current = self.metadata[self._head_tables(ref)[table.qualified]]
        data = self.put(f"{current.location}/data/{next(self._ids):05d}.parquet")
        manifest = self.put(f"{current.location}/metadata/{next(self._ids):05d}-m0.avro")
        self._commit(ref, table, self._metadata(current.location, current.needed | {data, manifest},
                                                current.data | {data}))
        return data

    def overwrite(self, table: TableRef, ref: str = "main") -> str:
        """Every row of `table` on `ref` replaced by one new data file (the older files are needed only by older
        commits); returns the new file."""
        current = self.metadata[self._head_tables(ref)[table.qualified]]
        data = self.put(f"{current.location}/data/{next(self._ids):05d}.parquet")
        manifest = self.put(f"{current.location}/metadata/{next(self._ids):05d}-m0.avro")
        self._commit(ref, table, self._metadata(current.location, frozenset({data, manifest}), frozenset({data})))
        return data

    def metadata_of(self, table: TableRef, ref: str = "main") -> str:
        return self._head_tables(ref)[table.qualified]

    def branch(self, name: str, source: str = "main") -> None:
        self.refs[f"BRANCH:{name}"] = self.refs[self._ref(source)]

    def tag(self, name: str, source: str = "main") -> None:
        self.refs[f"TAG:{name}"] = self.refs[self._ref(source)]

    def drop(self, name: str) -> None:
        self.refs.pop(self._ref(name))

    def _ref(self, name: str) -> str:
        return next(key for key in self.refs if key.split(":", 1)[1] == name)

    def _head_tables(self, ref: str) -> dict[str, str]:
        return self.commits[self.refs[self._ref(ref)]].tables

    def _metadata(self, location: str, needed: frozenset[str], data: frozenset[str]) -> str:
        path = self.put(f"{location}/metadata/{next(self._ids):05d}.metadata.json")
        self.metadata[path] = FakeMetadata(location, needed | {path}, data)
        return path

    def _commit(self, ref: str, table: TableRef, metadata: str) -> None:
        key = self._ref(ref) if any(k.split(":", 1)[1] == ref for k in self.refs) else f"BRANCH:{ref}"
        parent = self.refs.get(key)
        tables = dict(self.commits[parent].tables) if parent else {}
        commit = f"c{next(self._ids)}"
        self.commits[commit] = FakeCommit(parent, tables | {table.qualified: metadata})
        self.refs[key] = commit
