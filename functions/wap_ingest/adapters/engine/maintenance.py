"""SparkTableMaintainer: the TableMaintainer port on Spark + Iceberg (Nessie catalog), with the metadata-only
snapshot trim the pipeline asks for after an append to keep a table's current metadata bounded.

Compaction is Iceberg's `rewrite_data_files` procedure (bin-pack within each partition; `sort` by the table's sort
order when it has one), the manifests Iceberg's `rewrite_manifests`, both on the WAP branch of the maintenance
(`<table>@<branch>`), never on main. Dropping old snapshots is a metadata change only: Iceberg's `expire_snapshots`
deletes the files of the snapshots it expires, which on Nessie other branches and older commits still use, so the
service never calls it; it sets `gc.enabled=false` (what Nessie asks of Iceberg tables) and removes the snapshots
from the current metadata with Iceberg's TableMetadata builder. Nessie's GC is the one that may delete files.
"""

from __future__ import annotations

import logging
from typing import Any

from wap_ingest.adapters.engine.errors import EngineStep, engine_failure
from wap_ingest.adapters.engine.session import CATALOG, SparkEngine
from wap_ingest.adapters.engine.tables import IcebergTables, snapshot_count
from wap_ingest.core.layout import Layout
from wap_ingest.core.maintenance import MB, MaintenanceSettings, MaintenanceWork, TableHealth
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import TableMaintainer

log = logging.getLogger(__name__)
NESSIE_SAFE = {"gc.enabled": "false", "write.metadata.delete-after-commit.enabled": "false"}


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def trim_snapshots(jvm: Any, iceberg: Any, keep: int) -> int:
    """Drop all but the newest `keep` snapshots of the current snapshot's history from the table's current metadata
    (one metadata commit, no file deleted), along with any other unreferenced snapshot; returns how many."""
    current = iceberg.currentSnapshot()
    if current is None:
        return 0
    kept: set[int] = set()
    snapshot = current
    while snapshot is not None and len(kept) < keep:
        kept.add(int(snapshot.snapshotId()))
        parent = snapshot.parentId()
        snapshot = None if parent is None else iceberg.snapshot(parent)
    ops = iceberg.operations()
    base = ops.current()
    referenced = {int(ref.snapshotId()) for ref in jvm.java.util.ArrayList(base.refs().values())}
    dropped = [int(s.snapshotId()) for s in base.snapshots() if int(s.snapshotId()) not in kept | referenced]
    if not dropped:
        return 0
    ids = jvm.java.util.HashSet()  # a Set: Py4J would pick the builder's List<Snapshot> overload for a List
    for snapshot_id in dropped:
        ids.add(jvm.java.lang.Long.valueOf(snapshot_id))
    ops.commit(base, jvm.org.apache.iceberg.TableMetadata.buildFrom(base).removeSnapshots(ids).build())
    return len(dropped)


class SparkTableMaintainer(TableMaintainer):
    def __init__(self, engine: SparkEngine) -> None:
        self._engine = engine

    @property
    def spark(self) -> Any:
        return self._engine.session()

    def health(self, table: TableRef, ref: str, small_file_bytes: int) -> TableHealth | None:
        spark = self.spark
        with IcebergTables(spark) as tables:
            return self._health(spark, tables, table, ref, small_file_bytes)

    @staticmethod
    def _health(spark: Any, tables: IcebergTables, table: TableRef, ref: str, small_file_bytes: int
                ) -> TableHealth | None:
        doing = f"reading the health of {table} on {ref!r}"
        if tables.schema(table, ref) is None:
            return None
        try:
            iceberg = tables.iceberg_table(table, ref)
            current = iceberg.currentSnapshot()
            if current is None:
                return TableHealth()
            manifests = int(current.allManifests(iceberg.io()).size())
            # the live data files of the table just loaded (Spark's `.data_files` metadata table could show an
            # earlier read's: a compaction's `after` once showed the files before it)
            files = data_bytes = records = small = 0
            tasks = iceberg.newScan().useSnapshot(current.snapshotId()).planFiles()
            try:
                found = tasks.iterator()
                while found.hasNext():
                    file = found.next().file()
                    size = int(file.fileSizeInBytes())
                    files, data_bytes, records = files + 1, data_bytes + size, records + int(file.recordCount())
                    small += size < int(small_file_bytes)
            finally:
                tasks.close()
            return TableHealth(rows=records, data_files=files, data_bytes=data_bytes, small_files=small,
                               manifests=manifests, snapshots=snapshot_count(spark.sparkContext._jvm, iceberg))
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.CATALOG, doing=doing, table=table.qualified) from exc

    def trim_snapshots(self, table: TableRef, branch: str, keep: int) -> int:
        spark = self.spark
        with IcebergTables(spark) as tables:
            try:
                return trim_snapshots(spark.sparkContext._jvm, tables.iceberg_table(table, branch), keep)
            except Exception as exc:
                raise engine_failure(exc, step=EngineStep.CATALOG, doing=f"dropping old snapshots of {table} from "
                                     f"its current metadata on {branch!r}", table=table.qualified) from exc

    def maintain(self, table: TableRef, branch: str, work: MaintenanceWork, settings: MaintenanceSettings,
                 layout: Layout) -> None:
        spark = self.spark
        with IcebergTables(spark) as tables:
            self._maintain(spark, tables, table, branch, work, settings, layout)

    @staticmethod
    def _maintain(spark: Any, tables: IcebergTables, table: TableRef, branch: str, work: MaintenanceWork,
                  settings: MaintenanceSettings, layout: Layout) -> None:
        name = _sql_string(f"{table.namespace}.`{table.name}@{branch}`")
        doing = f"maintaining {table} on {branch!r} ({work.describe()})"
        try:
            iceberg = tables.iceberg_table(table, branch)
            properties = iceberg.properties()
            if any(properties.get(k) != v for k, v in NESSIE_SAFE.items()):
                update = iceberg.updateProperties()
                for key, value in NESSIE_SAFE.items():
                    update = update.set(key, value)
                update.commit()
            if work.compact:
                sorted_ = not iceberg.sortOrder().isUnsorted()
                target = dict(layout.properties).get("write.target-file-size-bytes") or properties.get(
                    "write.target-file-size-bytes") or str(512 * MB)
                options = {"min-input-files": str(settings.min_input_files), "target-file-size-bytes": str(target),
                           "min-file-size-bytes": str(settings.small_file_mb * MB), "rewrite-job-order": "bytes-desc"}
                listed = ", ".join(f"{_sql_string(k)}, {_sql_string(v)}" for k, v in options.items())
                result = spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => {name}, strategy => "
                                   f"{_sql_string('sort' if sorted_ else 'binpack')}, options => map({listed}))"
                                   ).collect()
                log.info("%s on %s: compaction rewrote %s file(s) into %s", table, branch,
                         result[0]["rewritten_data_files_count"], result[0]["added_data_files_count"])
            if work.rewrite_manifests:
                spark.sql(f"CALL {CATALOG}.system.rewrite_manifests(table => {name}, use_caching => false)").collect()
            if work.remove_snapshots:
                fresh = tables.iceberg_table(table, branch)  # the one object the procedures committed through
                trim_snapshots(spark.sparkContext._jvm, fresh, settings.keep_snapshots)
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.WRITE, doing=doing, table=table.qualified) from exc
