"""Reading the lake without a JVM: PyIceberg through Nessie's Iceberg REST endpoint (`/iceberg/<ref>`).

Used by the ops CLI. `branch_changes` answers from Iceberg metadata only (the manifest entries the
branch's snapshot added: record and null counts per column), so it reads no data files.

Authentication: with an OAuth2 client configured, the catalog's requests carry a token from the service's
`TokenProvider` (PyIceberg's `auth` property, type `custom`, loads `TokenAuthManager`), refreshed as it expires.
The metadata files themselves are read from S3 with this process's AWS credentials: PyIceberg (0.10, 0.12) only uses a
remote signer when the catalog sends `s3.signer`, which Nessie 0.99 does not (checked against the server).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from wap_ingest.adapters.catalog.errors import error_for
from wap_ingest.adapters.catalog.oauth2 import TokenProvider
from wap_ingest.core import lineage
from wap_ingest.core.branches import identity_digest
from wap_ingest.core.errors import CatalogUnavailableError
from wap_ingest.core.models import TableRef

ADDED = 1  # manifest entry status


@dataclass(frozen=True)
class BranchChanges:
    table: str
    ref: str
    snapshot_id: int | None
    rows_added: int
    null_counts: dict[str, int] = field(default_factory=dict)
    summary: dict[str, str] = field(default_factory=dict)


class TokenAuthManager:
    """A PyIceberg AuthManager (it only needs `auth_header`): a bearer token from the service's provider."""

    def __init__(self, tokens: TokenProvider) -> None:
        self._tokens = tokens

    def auth_header(self) -> str:
        return f"Bearer {self._tokens.token()}"


class _Bounded(HTTPAdapter):
    """Every request through it gets `timeout` unless it names one (PyIceberg's REST client sets none)."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = (min(self._timeout, 10.0), self._timeout)
        return super().send(request, **kwargs)


def bounded_session(timeout: float) -> requests.Session:
    session = requests.Session()
    adapter = _Bounded(timeout)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class IcebergRestReader:
    def __init__(self, nessie_endpoint: str, tokens: TokenProvider | None = None, *, timeout: float = 30.0) -> None:
        """`timeout` bounds every call to the catalog (WAP_HTTP_TIMEOUT) and, through the FileIO's settings, to S3."""
        self._endpoint = nessie_endpoint.rstrip("/")
        self._tokens = tokens
        self._timeout = timeout
        self._catalogs: dict[str, Any] = {}
        self._building = threading.Lock()

    def _properties(self) -> dict[str, Any]:
        properties: dict[str, Any] = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
                                      "s3.connect-timeout": str(min(self._timeout, 10.0)),
                                      "s3.request-timeout": str(self._timeout)}
        if self._tokens is not None:
            impl = f"{TokenAuthManager.__module__}.{TokenAuthManager.__qualname__}"
            properties["auth"] = {"type": "custom", "impl": impl, "custom": {"tokens": self._tokens}}
        return properties

    def _catalog_call(self, doing: str, ref: str, call: Callable[[Any], Any]) -> Any:
        """`call` on the REST catalog of `ref` (cached), errors translated; None: no such table or namespace."""
        from pyiceberg import exceptions as iceberg

        # PyIceberg's REST errors, each raised for one HTTP status (pyiceberg.catalog.rest.response)
        statuses: tuple[tuple[type[Exception], int], ...] = (
            (iceberg.BadRequestError, 400), (iceberg.UnauthorizedError, 401), (iceberg.AuthorizationExpiredError, 401),
            (iceberg.ForbiddenError, 403), (iceberg.ServiceUnavailableError, 503), (iceberg.ServerError, 500))

        try:
            with self._building:  # one client per ref, also when several threads read at once (`wap tables`)
                if ref not in self._catalogs:
                    self._catalogs[ref] = self._client(ref)
            return call(self._catalogs[ref])
        except (iceberg.NoSuchTableError, iceberg.NoSuchNamespaceError):
            return None
        except tuple(kind for kind, _ in statuses) as exc:  # the same table as every other call to Nessie
            status = next(s for kind, s in statuses if isinstance(exc, kind))
            raise error_for(status, None, str(exc), doing=f"{doing} on {ref!r}", endpoint=self._endpoint,
                            client_id=self._tokens.client_id if self._tokens else None) from exc
        except (OSError, requests.RequestException) as exc:
            raise CatalogUnavailableError(f"{doing} on {ref!r} from {self._endpoint}: {exc}") from exc

    def _client(self, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog

        uri = f"{self._endpoint}/iceberg/{ref}"
        # PyIceberg's REST client sets no timeout and fetches its config while it is built: reach the
        # server within the timeout first, then bound every later call on the client's session.
        bounded_session(self._timeout).get(f"{uri}/v1/config")
        catalog = load_catalog(f"nessie-{ref}", type="rest", uri=uri, **self._properties())
        session = getattr(catalog, "_session", None)
        if isinstance(session, requests.Session):
            adapter = _Bounded(self._timeout)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        return catalog

    def _table(self, table: TableRef, ref: str) -> Any:
        return self._catalog_call(f"reading {table}", ref, lambda catalog: catalog.load_table(table.qualified))

    def row_count(self, table: TableRef, ref: str) -> int | None:
        """Rows in the table's current snapshot (from its summary), or None if it does not exist on `ref`."""
        loaded = self._table(table, ref)
        if loaded is None:
            return None
        snapshot = loaded.current_snapshot()
        return 0 if snapshot is None else int(snapshot.summary.additional_properties.get("total-records", 0))

    def branch_changes(self, table: TableRef, ref: str) -> BranchChanges:
        """What the branch's latest snapshot added, from manifest metadata."""
        import pyarrow.compute as pc

        loaded = self._table(table, ref)
        snapshot = None if loaded is None else loaded.current_snapshot()
        if snapshot is None:
            return BranchChanges(table.qualified, ref, None, 0)
        entries = loaded.inspect.entries()
        added = entries.filter(pc.and_(pc.equal(entries["snapshot_id"], snapshot.snapshot_id),
                                       pc.equal(entries["status"], ADDED)))
        names = {f.field_id: f.name for f in loaded.schema().fields}
        nulls: dict[str, int] = dict.fromkeys(names.values(), 0)
        rows = 0
        for data_file in added["data_file"].to_pylist():
            rows += int(data_file["record_count"])
            for field_id, count in data_file.get("null_value_counts") or []:
                if field_id in names:
                    nulls[names[field_id]] += int(count)
        return BranchChanges(table.qualified, ref, snapshot.snapshot_id, rows, nulls,
                             dict(snapshot.summary.additional_properties))

    def wap_source(self, table: TableRef, ref: str, digest: str) -> dict[str, str]:
        """The summary of the snapshot on `ref` whose source identity has this digest (the WAP append a branch
        was made for; later commits on the branch do not hide it), or {} if there is none."""
        loaded = self._table(table, ref)
        if loaded is None:
            return {}
        for snapshot in sorted(loaded.snapshots(), key=lambda s: s.timestamp_ms, reverse=True):
            summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
            identity = summary.get(lineage.IDENTITY)
            if identity is not None and identity_digest(identity) == digest:
                return summary
        return {}

    def null_counts(self, table: TableRef, ref: str) -> tuple[int, dict[str, int]] | None:
        """Rows and nulls per column in the table's current snapshot on `ref`, summed from the data files'
        metadata (no data file is read), or None if the table does not exist there."""
        loaded = self._table(table, ref)
        if loaded is None:
            return None
        names = {f.field_id: f.name for f in loaded.schema().fields}
        nulls: dict[str, int] = dict.fromkeys(names.values(), 0)
        if loaded.current_snapshot() is None:
            return 0, nulls
        files = loaded.inspect.data_files()
        rows = 0
        for record_count, counts in zip(files["record_count"].to_pylist(), files["null_value_counts"].to_pylist(),
                                        strict=True):
            rows += int(record_count)
            for field_id, count in counts or []:
                if field_id in names:
                    nulls[names[field_id]] += int(count)
        return rows, nulls

    def row_history(self, table: TableRef, ref: str) -> list[tuple[int, int]]:
        """(commit time in ms, rows in the table) for each snapshot in the history of `ref`, oldest first."""
        loaded = self._table(table, ref)
        if loaded is None:
            return []
        points = []
        for entry in loaded.history():
            snapshot = loaded.snapshot_by_id(entry.snapshot_id)
            if snapshot is not None and snapshot.summary is not None:
                total = snapshot.summary.additional_properties.get("total-records")
                if total is not None:
                    points.append((int(entry.timestamp_ms), int(total)))
        return points

    def tables(self, namespace: str, ref: str) -> list[TableRef]:
        """The tables of `namespace` on `ref` ([] if the namespace does not exist there)."""
        identifiers = self._catalog_call(f"listing the tables of {namespace}", ref,
                                         lambda catalog: catalog.list_tables(namespace)) or []
        return sorted((TableRef(str(ident[0]), str(ident[-1])) for ident in identifiers), key=lambda t: t.name)
