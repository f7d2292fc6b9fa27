"""An Iceberg table on a Nessie branch, loaded and committed from Python (PyIceberg), without a JVM.

The register path (spark_register) commits a registered file through this: a fitting Parquet file into an existing
table needs no Spark at all, and a Lambda's first file then starts no JVM (issue 27's cold start).

Why not Nessie's Iceberg REST endpoint (`/iceberg/<ref>`, which the lake reader uses): it serves, and a commit through
it writes, a table's metadata with only its current snapshot (projectnessie/nessie#9634: Nessie keeps the history in
its own commits). The audit's incremental scan (from the parent snapshot), the exactly-once lookup of recent appends,
`wap history` and snapshot trimming all read the Iceberg history. So this does what Iceberg's Java
NessieTableOperations does: read the table's content on the branch (its metadata file's location, its content id)
and that metadata file from S3; let PyIceberg make the new snapshot (manifest, manifest list) and the next metadata
file, with the whole history; and commit it to the branch as one Nessie commit that expects the hash the table was
read at and keeps the content id. Another change to the table on the branch since is a conflict (StaleHashError,
retried from main, as the Java commit's).

The last metadata file this process wrote and Nessie took for each table (a commit's, a table's first) is kept in
memory with its location (for the WRITTEN tables committed last; one per table, as a big table's metadata can be
large): a later `load` whose branch points at that location takes it from there instead of
reading and parsing the file again (a warm function's next file, on a branch made from the `main` its last run merged,
finds its tables where it left them). Only what this process itself wrote and committed is kept, never a file read:
a metadata file is never rewritten in place (every commit writes a new one, named by a fresh UUID), so the file at
that location is the metadata kept.

Errors: Nessie's answers through the one Nessie table (nessie_errors.error_for); S3 failures while reading or writing
metadata (PyArrow's OSError) are ObjectStoreUnavailableError (retried).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

import requests

from wap_ingest.adapters.catalog.errors import checked, unavailable
from wap_ingest.adapters.catalog.http import endpoint_session, json_object
from wap_ingest.adapters.catalog.lake_io import Put, put_file_io
from wap_ingest.adapters.catalog.oauth2 import BearerAuth
from wap_ingest.core.errors import ObjectStoreUnavailableError, WapError
from wap_ingest.core.models import TableRef

if TYPE_CHECKING:
    from pyiceberg.table import Table

COMMIT_MESSAGE = "wap-lake: register a file into {table}"
WRITTEN = 16  # the tables whose last metadata this process wrote and committed it keeps (the oldest forgotten)


class BranchTables:
    """Loads tables on a branch (`load`); a loaded table's transactions commit to that branch."""

    def __init__(self, endpoint: str, *, timeout: float = 30.0, auth: BearerAuth | None = None,
                 s3_endpoint: str | None = None, region: str | None = None,
                 remove: Callable[[str], None] | None = None, put: Put | None = None) -> None:
        """`remove` deletes a metadata file no commit refers to (the service's S3 client; PyArrow's delete would
        leave an empty `metadata/` directory marker behind); `put` writes each file a commit makes in one request
        (lake_io; None: PyArrow's own output streams)."""
        self._endpoint = endpoint.rstrip("/")
        self.remove = remove or (lambda uri: self.file_io().delete(uri))
        self._put = put
        self._timeout = timeout
        self._auth = auth
        self._http = endpoint_session(self._endpoint)
        # table -> (location, TableMetadata): the last metadata file written and committed here for it
        self._written: OrderedDict[TableRef, tuple[str, Any]] = OrderedDict()
        self._written_lock = threading.Lock()
        if auth is not None:
            self._http.auth = auth
        self._io_properties = {k: v for k, v in {
            "s3.endpoint": s3_endpoint, "s3.region": region, "s3.connect-timeout": str(min(timeout, 10.0)),
            "s3.request-timeout": str(timeout)}.items() if v}
        self._io: Any = None

    def file_io(self) -> Any:
        """PyIceberg's PyArrow FileIO on the service's S3 (credentials: this process's, as boto3's)."""
        if self._io is None:
            from pyiceberg.io.pyarrow import PyArrowFileIO

            self._io = PyArrowFileIO(dict(self._io_properties)) if self._put is None else put_file_io(
                dict(self._io_properties), self._put)
        return self._io

    def settle(self) -> None:
        """Wait for the files this FileIO is still writing (lake_io), raising the first failure."""
        puts = getattr(self._io, "puts", None)
        if puts is not None:
            puts.settle()

    def drain(self) -> None:
        """Wait for the files this FileIO is still writing and forget their failures."""
        puts = getattr(self._io, "puts", None)
        if puts is not None:
            puts.drain()

    def load(self, table: TableRef, branch: str) -> Table | None:
        """The table as the branch has it now (a PyIceberg Table whose commits go to the branch), or None if the
        branch has no such table."""
        from pyiceberg.serializers import FromInputFile

        doing = f"reading {table} on {branch!r}"
        found = self._call("get", f"trees/{quote(branch, safe='')}/contents/{_key(table)}", doing, missing_ok=True)
        if found is None:
            return None
        content = found.get("content") or {}
        if content.get("type") != "ICEBERG_TABLE" or not content.get("metadataLocation"):
            return None
        location = str(content["metadataLocation"])
        self.drain()  # a new transaction: the puts of one that never reached its commit are not its own
        metadata = self.written(table, location)
        if metadata is None:
            with storage_errors(f"{doing} (its metadata file {location})"):
                metadata = FromInputFile.table_metadata(self.file_io().new_input(location))
        committer = _BranchCommitter(self, table, branch, str(found["effectiveReference"]["hash"]), str(content["id"]))
        return branch_table()((table.namespace, table.name), metadata, location, self.file_io(), cast(Any, committer))

    def written(self, table: TableRef, location: str) -> Any | None:
        """The metadata this process wrote at `location` for `table` and committed, if it is the one it keeps."""
        with self._written_lock:
            kept = self._written.get(table)
        return kept[1] if kept is not None and kept[0] == location else None

    def _committed(self, table: TableRef, location: str, metadata: Any) -> None:
        with self._written_lock:
            self._written.pop(table, None)
            self._written[table] = (location, metadata)
            while len(self._written) > WRITTEN:
                self._written.popitem(last=False)

    def create(self, table: TableRef, branch: str, schema: Any, location: str,
               properties: Mapping[str, str]) -> Table:
        """Make `table` (unpartitioned, unsorted, `schema`, its files under `location`) on the branch, in one Nessie
        commit expecting the branch's head as read here, and return it loaded. A table made there meanwhile is a
        conflict (StaleHashError, retried from main with the run), never overwritten."""
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.serializers import ToOutputFile
        from pyiceberg.table.metadata import new_table_metadata
        from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

        doing = f"creating {table} on {branch!r}"
        reference = (self._call("get", f"trees/{quote(branch, safe='')}", doing) or {}).get("reference") or {}
        metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location,
                                      dict(properties))
        path = f"{location.rstrip('/')}/metadata/00000-{uuid.uuid4()}.metadata.json"
        with storage_errors(f"{doing} (writing {path})"):
            ToOutputFile.table_metadata(metadata, self.file_io().new_output(path))
            self.settle()
        content = {"type": "ICEBERG_TABLE", "metadataLocation": path, "snapshotId": -1,
                   "schemaId": metadata.current_schema_id, "specId": metadata.default_spec_id,
                   "sortOrderId": metadata.default_sort_order_id}
        body = {"commitMeta": {"message": f"wap-lake: create {table}"},
                "operations": [{"type": "PUT", "key": {"elements": [table.namespace, table.name]},
                                "content": content}]}
        try:
            self._call("post", f"trees/{quote(branch, safe='')}@{reference.get('hash')}/history/commit", doing,
                       body)
        except WapError:
            with contextlib.suppress(Exception):
                self.remove(path)
            raise
        self._committed(table, path, metadata)
        made = self.load(table, branch)
        if made is None:  # pragma: no cover (the commit above succeeded)
            raise WapError(f"{table} is not on {branch!r} right after it was created there")
        return made

    def _call(self, method: str, path: str, doing: str, body: Mapping[str, Any] | None = None, *,
              missing_ok: bool = False) -> dict[str, Any] | None:
        try:
            response = self._http.request(method, f"{self._endpoint}/api/v2/{path}",
                                          json=None if body is None else dict(body), timeout=self._timeout)
        except requests.RequestException as exc:
            raise unavailable(self._endpoint, doing, exc) from exc
        client_id = self._auth.client_id if self._auth else None
        if missing_ok and response.status_code == 404 and json_object(response).get("errorCode") == "CONTENT_NOT_FOUND":
            return None
        return checked(response, doing, endpoint=self._endpoint, client_id=client_id)


class _BranchCommitter:
    """What a PyIceberg Table needs of its catalog to commit (`commit_table`): here, one Nessie commit on the branch
    the table was read from, expecting the hash it was read at."""

    def __init__(self, tables: BranchTables, table: TableRef, branch: str, read_at: str, content_id: str) -> None:
        self._tables, self._table, self._branch = tables, table, branch
        self._hash, self._content_id = read_at, content_id

    def commit_table(self, table: Any, requirements: tuple[Any, ...], updates: tuple[Any, ...]) -> Any:
        from pyiceberg.catalog import MetastoreCatalog
        from pyiceberg.serializers import ToOutputFile
        from pyiceberg.table import CommitTableResponse
        from pyiceberg.table.update import update_table_metadata

        for requirement in requirements:  # against the table as read; Nessie checks nothing changed since
            requirement.validate(table.metadata)
        updated = update_table_metadata(table.metadata, updates, metadata_location=table.metadata_location)
        version = MetastoreCatalog._parse_metadata_version(table.metadata_location) + 1
        location = f"{updated.location.rstrip('/')}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
        doing = f"committing to {self._table} on {self._branch!r}"
        with storage_errors(f"{doing} (writing {location})"):
            ToOutputFile.table_metadata(updated, self._tables.file_io().new_output(location))
            self._tables.settle()  # every file of the commit written before Nessie points at them
        content = {"type": "ICEBERG_TABLE", "id": self._content_id, "metadataLocation": location,
                   "snapshotId": updated.current_snapshot_id if updated.current_snapshot_id is not None else -1,
                   "schemaId": updated.current_schema_id, "specId": updated.default_spec_id,
                   "sortOrderId": updated.default_sort_order_id}
        body = {"commitMeta": {"message": COMMIT_MESSAGE.format(table=self._table)},
                "operations": [{"type": "PUT", "key": {"elements": [self._table.namespace, self._table.name]},
                                "content": content}]}
        try:
            committed = self._tables._call(
                "post", f"trees/{quote(self._branch, safe='')}@{self._hash}/history/commit", doing, body) or {}
        except WapError:
            with contextlib.suppress(Exception):  # nothing refers to it: the branch did not take the commit
                self._tables.remove(location)
            raise
        self._hash = str(committed.get("targetBranch", {}).get("hash") or self._hash)
        self._tables._committed(self._table, location, updated)
        return CommitTableResponse.model_validate({"metadata": updated, "metadata-location": location})

    def supports_server_side_planning(self) -> bool:
        """A scan of the table is planned here, from its manifests (PyIceberg asks its catalog)."""
        return False

    def _delete_old_metadata(self, io: Any, base: Any, metadata: Any) -> None:
        """As every PyIceberg catalog: old metadata files go only when the table says so."""
        from pyiceberg.catalog import Catalog

        Catalog._delete_old_metadata(io, base, metadata)


@functools.cache
def branch_table() -> type[Table]:
    """PyIceberg's Table, whose transactions work out the table's metadata with their updates once per update.

    PyIceberg's Transaction works it out again (every update applied to the table's metadata, then a deep copy of the
    whole of it) each time a snapshot producer asks for it: some 30 times for one append and its commit. The copy grows
    with the table's history, so a warm function's every file got slower as its tables' snapshots piled up (0.25 s
    for the 2nd small file into a table, 0.47 s for the 20th; deep copies of its metadata and its results table's,
    107 ms of each, profiled). Here the metadata with the updates so far is kept until the next update (PyIceberg
    replaces the tuple of updates on each one, and every reader of the metadata only reads it)."""
    from pyiceberg.table import Table, Transaction

    class _Transaction(Transaction):
        _worked_out: tuple[Any, Any, Any] | None = None  # (the table's metadata, the updates, the metadata with them)

        @property
        def table_metadata(self) -> Any:
            base, updates, kept = self._table.metadata, self._updates, self._worked_out
            if kept is None or kept[0] is not base or kept[1] is not updates:
                worked_out = Transaction.table_metadata.fget(self)  # type: ignore[attr-defined]
                kept = self._worked_out = (base, updates, worked_out)
            return kept[2]

    class _Table(Table):
        def transaction(self) -> Transaction:
            return _Transaction(self)

    return _Table


def _key(table: TableRef) -> str:
    """Nessie's content key in a URL path: elements joined by dots (names are validated: no dot, no slash)."""
    return quote(f"{table.namespace}.{table.name}", safe="")


@contextlib.contextmanager
def storage_errors(doing: str) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ObjectStoreUnavailableError(f"S3 failed while {doing}: {exc}") from exc
