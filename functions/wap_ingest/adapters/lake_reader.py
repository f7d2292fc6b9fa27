"""Reading the lake without a JVM: PyIceberg through Nessie's Iceberg REST endpoint (`/iceberg/<ref>`).

Used by the ops CLI. `branch_changes` answers from Iceberg metadata only (the manifest entries the
branch's snapshot added: record and null counts per column), so it reads no data files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


class IcebergRestReader:
    def __init__(self, nessie_endpoint: str) -> None:
        self._endpoint = nessie_endpoint.rstrip("/")
        self._catalogs: dict[str, Any] = {}

    def _table(self, table: TableRef, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        if ref not in self._catalogs:
            self._catalogs[ref] = load_catalog(
                f"nessie-{ref}", type="rest", uri=f"{self._endpoint}/iceberg/{ref}",
                **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
            )
        try:
            return self._catalogs[ref].load_table(table.qualified)
        except NoSuchTableError:
            return None
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
