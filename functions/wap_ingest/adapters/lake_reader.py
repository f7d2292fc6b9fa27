"""Reading the lake without a JVM: PyIceberg through Nessie's Iceberg REST endpoint (`/iceberg/<ref>`).

Used by the ops CLI. `branch_changes` answers from Iceberg metadata only (the manifest entries the
branch's snapshot added: record and null counts per column), so it reads no data files.

Authentication: with an OAuth2 client configured, the catalog's requests carry a token from the service's
`TokenProvider` (PyIceberg's `auth` property, type `custom`, loads `TokenAuthManager`), refreshed as it expires.
The metadata files themselves are read from S3 with this process's AWS credentials: PyIceberg 0.10 only uses a
remote signer when the catalog sends `s3.signer`, which Nessie 0.99 does not (checked against the server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wap_ingest.adapters.oauth2 import TokenProvider
from wap_ingest.core.errors import CatalogError, CatalogUnavailableError, ConfigError
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


class IcebergRestReader:
    def __init__(self, nessie_endpoint: str, tokens: TokenProvider | None = None) -> None:
        self._endpoint = nessie_endpoint.rstrip("/")
        self._tokens = tokens
        self._catalogs: dict[str, Any] = {}

    def _properties(self) -> dict[str, Any]:
        properties: dict[str, Any] = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
        if self._tokens is not None:
            impl = f"{TokenAuthManager.__module__}.{TokenAuthManager.__qualname__}"
            properties["auth"] = {"type": "custom", "impl": impl, "custom": {"tokens": self._tokens}}
        return properties

    def _table(self, table: TableRef, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import ForbiddenError, NoSuchTableError, UnauthorizedError

        try:
            if ref not in self._catalogs:
                self._catalogs[ref] = load_catalog(
                    f"nessie-{ref}", type="rest", uri=f"{self._endpoint}/iceberg/{ref}", **self._properties()
                )
            return self._catalogs[ref].load_table(table.qualified)
        except NoSuchTableError:
            return None
        except UnauthorizedError as exc:
            who = f"the token of OAuth2 client {self._tokens.client_id!r}" if self._tokens else "a tokenless request"
            raise ConfigError(
                f"reading {table} on {ref!r}: Nessie at {self._endpoint} refused {who}: authentication failed "
                f"(HTTP 401). Fix: set WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and "
                f"WAP_NESSIE_CLIENT_SECRET_PARAMETER for a client of the issuer Nessie trusts."
            ) from exc
        except ForbiddenError as exc:
            raise CatalogError(f"reading {table} on {ref!r}: Nessie at {self._endpoint} denied it (HTTP 403).") from exc
        except OSError as exc:
            raise CatalogUnavailableError(f"reading {table} on {ref!r} from {self._endpoint}: {exc}") from exc

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
