"""The files Iceberg metadata names, read with PyIceberg's FileIO and Avro readers (no JVM), for the lake's file
sweep (core.lake_files): from each table metadata file a live commit names, its table location, every snapshot's
manifest list, every manifest those list, and every data and delete file the manifests list.

Needed (a reader of a live commit opens them; one missing under a swept location stops the sweep): the metadata
files the commits name, the manifest lists, the manifests, and the data and delete files of every entry that is
ADDED or EXISTING. Kept but not needed (never removed, not missed when gone): the metadata files of each metadata
file's log (what it replaced), its statistics and partition statistics files, and the files a snapshot's manifest
lists as DELETED (the snapshot before still used them; they are needed through that one if it is listed).

Each file is read once per reading of the catalog (a manifest is shared by many snapshots, a snapshot by many
metadata files), by a few threads. A file that is not there (FileNotFoundError) is a problem of the table that names
it (the sweep of any location it may concern stops); any other storage failure (OSError) is
ObjectStoreUnavailableError, and stops every sweep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from wap_ingest.core.errors import ObjectStoreUnavailableError

THREADS = 8
T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """A file a live commit's metadata names that is not there, or cannot be read as what it should be."""

    path: str
    text: str


@dataclass
class NamedFiles:
    """What the live metadata of one content (one table) names."""

    locations: set[str] = field(default_factory=set)  # the `location` of each of its metadata files
    needed: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)  # files it names that are not there, or unreadable
    metadata_files: int = 0


class _MissingError(Exception):
    """A file that is not there, or not what it should be: the table's problem, not the store's."""


def normalized(path: str) -> str:
    """The s3:// form of a path (Hadoop's s3a:// and s3n:// name the same objects)."""
    for scheme in ("s3a://", "s3n://"):
        if path.startswith(scheme):
            return "s3://" + path[len(scheme):]
    return path


def table_root(metadata_path: str) -> str:
    """A metadata file's table location as Iceberg lays it out (`<location>/metadata/<file>`), for a table whose
    metadata cannot be read."""
    head, marker, _ = metadata_path.rpartition("/metadata/")
    return head if marker else metadata_path.rpartition("/")[0]


def pyarrow_io(s3_endpoint: str | None, region: str | None, timeout: float) -> Any:
    """PyIceberg's PyArrow FileIO on the service's S3 (credentials: this process's, as boto3's), as lake_tables'."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO({k: v for k, v in {
        "s3.endpoint": s3_endpoint, "s3.region": region, "s3.connect-timeout": str(min(timeout, 10.0)),
        "s3.request-timeout": str(timeout)}.items() if v})


class MetadataFiles:
    """Reads what metadata names, with PyIceberg's FileIO (`io`: its `new_input(path)`)."""

    def __init__(self, io: Any, threads: int = THREADS) -> None:
        self._io = io
        self._threads = threads

    def named(self, metadata_of: Mapping[str, Iterable[str]]) -> dict[str, NamedFiles]:
        """content id -> what the metadata files of `metadata_of[content id]` name."""
        found = {content: NamedFiles() for content in metadata_of}
        paths = {path for listed in metadata_of.values() for path in listed}
        documents = self._each(paths, self._metadata)
        lists: dict[str, set[str]] = {}  # manifest list -> contents naming it
        for content, listed in metadata_of.items():
            named = found[content]
            for path in listed:
                document = documents[path]
                named.metadata_files += 1
                named.needed.add(normalized(path))
                if isinstance(document, Problem):
                    named.problems.append(document)
                    continue
                _name_from_metadata(document, named, lists, content)
        manifests_of = self._each(set(lists), self._manifest_list)
        manifests: dict[str, set[str]] = {}
        for manifest_list, contents in lists.items():
            listed_manifests = manifests_of[manifest_list]
            for content in contents:
                found[content].needed.add(normalized(manifest_list))
                if isinstance(listed_manifests, Problem):
                    found[content].problems.append(listed_manifests)
                    continue
                found[content].needed.update(normalized(m.manifest_path) for m in listed_manifests)
                for manifest in listed_manifests:
                    manifests.setdefault(manifest.manifest_path, set()).add(content)
        by_path = {manifest.manifest_path: manifest for listed in manifests_of.values()
                   if not isinstance(listed, Problem) for manifest in listed}
        entries_of = self._each(set(manifests), lambda path: self._entries(by_path[path]))
        for manifest_path, contents in manifests.items():
            entries = entries_of[manifest_path]
            for content in contents:
                if isinstance(entries, Problem):
                    found[content].problems.append(entries)
                    continue
                needed, deleted = entries
                found[content].needed.update(needed)
                found[content].kept.update(deleted)
        return found

    def _each(self, paths: set[str], read: Callable[[str], T]) -> dict[str, T | Problem]:
        """`read` of each path, by a few threads; a missing or unreadable file gives its Problem."""
        def one(path: str) -> T | Problem:
            try:
                return read(path)
            except _MissingError as exc:
                return Problem(normalized(path), str(exc))

        ordered = sorted(paths)
        if len(ordered) <= 1:
            return {path: one(path) for path in ordered}
        with ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="wap-sweep") as pool:
            return dict(zip(ordered, pool.map(one, ordered), strict=True))

    def _read(self, path: str, what: str, parse: Callable[[Any], T]) -> T:
        try:
            return parse(self._io.new_input(path))
        except FileNotFoundError as exc:
            raise _MissingError(f"{what} {path} is not there") from exc
        except OSError as exc:
            raise ObjectStoreUnavailableError(f"S3 failed while reading {what} {path}: {exc}") from exc
        except (ValueError, KeyError, TypeError, EOFError) as exc:
            raise _MissingError(f"{what} {path} cannot be read ({type(exc).__name__}: {exc})") from exc

    def _metadata(self, path: str) -> dict[str, Any]:
        def parse(input_file: Any) -> dict[str, Any]:
            with input_file.open() as stream:
                document = json.loads(stream.read())
            if not isinstance(document, dict) or "location" not in document:
                raise ValueError("not an Iceberg table metadata file")
            return document

        return self._read(path, "the table metadata file", parse)

    def _manifest_list(self, path: str) -> list[Any]:
        from pyiceberg.manifest import read_manifest_list

        return self._read(path, "the manifest list", lambda input_file: list(read_manifest_list(input_file)))

    def _entries(self, manifest: Any) -> tuple[set[str], set[str]]:
        """(the files its ADDED and EXISTING entries list, those its DELETED entries list)."""
        from pyiceberg.manifest import ManifestEntryStatus

        def parse(_input_file: Any) -> tuple[set[str], set[str]]:
            needed, deleted = set[str](), set[str]()
            for entry in manifest.fetch_manifest_entry(self._io, discard_deleted=False):
                path = normalized(str(entry.data_file.file_path))
                (deleted if entry.status == ManifestEntryStatus.DELETED else needed).add(path)
            return needed, deleted

        return self._read(manifest.manifest_path, "the manifest", parse)


def _name_from_metadata(document: Mapping[str, Any], named: NamedFiles, lists: dict[str, set[str]],
                        content: str) -> None:
    named.locations.add(normalized(str(document["location"])).rstrip("/"))
    for entry in document.get("metadata-log") or []:
        if entry.get("metadata-file"):
            named.kept.add(normalized(str(entry["metadata-file"])))
    for key in ("statistics", "partition-statistics"):
        for entry in document.get(key) or []:
            if entry.get("statistics-path"):
                named.kept.add(normalized(str(entry["statistics-path"])))
    for snapshot in document.get("snapshots") or []:
        if snapshot.get("manifest-list"):
            lists.setdefault(str(snapshot["manifest-list"]), set()).add(content)
        else:  # format v1 may list manifests inline: not written by this service's engines
            named.problems.append(Problem(normalized(str(document["location"])), f"snapshot "
                                          f"{snapshot.get('snapshot-id')} has no manifest list (an Iceberg v1 layout "
                                          f"the sweep does not read)"))
