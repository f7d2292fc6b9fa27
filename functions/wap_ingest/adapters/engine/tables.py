"""Iceberg tables on a Nessie branch, through one SparkSession: the engine's public table API (schema, create or
append with lineage, schema evolution on the branch, the snapshot just committed, the appends that carry a
source identity). Tables are addressed as ``nessie.<ns>.`<table>@<branch>` `` so writes land on the WAP branch
without switching the session's reference. DataFrames never leave the adapters.

One load per table per run: the session's catalog caches loaded tables (engine/session.py turns Iceberg's caching
catalog on), so the schema check, Spark's write, the snapshot read after it and the audit's scan share one Java
table object, which every commit through it keeps current. The cache is per run, never across runs: an
`IcebergTables` is used as a context manager and, on leaving, drops every table it touched from the cache, so
the next run loads each table fresh from Nessie.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from wap_ingest.adapters.engine.errors import EngineStep, engine_failure, first_line, value_does_not_fit
from wap_ingest.adapters.engine.layout import apply_layout
from wap_ingest.adapters.engine.py4j_lookup import static
from wap_ingest.adapters.engine.session import CATALOG
from wap_ingest.core import lineage
from wap_ingest.core.errors import SchemaDriftError
from wap_ingest.core.layout import Layout
from wap_ingest.core.models import AppendResult, TableRef

log = logging.getLogger(__name__)
# Every table the service creates, on both write paths. Not 3: the pinned Nessie server stores a v3 table but its
# Iceberg REST endpoint, which PyIceberg and the REST readers of `main` use, refuses to serve one (and a VARIANT
# column); tests/integration/adapters/catalog/test_format_v3.py keeps the evidence, README "Pinned versions".
FORMAT_VERSION = "2"


def table_identifier(table: TableRef, branch: str) -> str:
    """Identifiers are validated by core.naming; branch names are `[A-Za-z0-9_-]` by construction."""
    return f"{CATALOG}.{table.namespace}.`{table.name}@{branch}`"


def _not_found(exc: BaseException) -> bool:
    from pyspark.errors import AnalysisException

    if not isinstance(exc, AnalysisException):
        return False
    error_class = exc.getCondition() if hasattr(exc, "getCondition") else None  # getErrorClass before Spark 4
    return error_class == "TABLE_OR_VIEW_NOT_FOUND" or "cannot be found" in str(exc)


def _no_such_table(exc: BaseException) -> bool:
    """Iceberg's or Spark's NoSuchTableException in the Java cause chain of a Py4J error (by class, not message)."""
    java = getattr(exc, "java_exception", None)
    for _ in range(20):
        if java is None:
            return False
        if str(java.getClass().getSimpleName()) == "NoSuchTableException":
            return True
        java = java.getCause()
    return False


class IcebergTables:
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._loaded: dict[tuple[TableRef, str], Any] = {}  # one run's loaded tables (an instance serves one run)
        self._touched: set[tuple[TableRef, str]] = set()  # what the session's catalog may have cached for this run
        self._identifiers: dict[tuple[TableRef, str], Any] = {}  # Spark's Identifier of each, made once
        self._plugin: Any = None

    def __enter__(self) -> IcebergTables:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.forget()

    def forget(self) -> None:
        """Drop the tables this run touched from the session catalog's cache (nothing to drop on a dead engine)."""
        touched, self._touched = self._touched, set()
        self._loaded.clear()
        with contextlib.suppress(Exception):
            catalog = self._catalog()
            for table, ref in touched:
                catalog.invalidateTable(self._identifier(table, ref))

    def find(self, table: TableRef, ref: str) -> Any | None:
        """The Iceberg (Java) table on `ref` (`iceberg_table`), or None if there is no such table."""
        try:
            return self.iceberg_table(table, ref)
        except Exception as exc:
            if _not_found(exc) or _no_such_table(exc):
                return None
            raise

    def create(self, table: TableRef, ref: str, spark_schema: Any, transforms: Any,
               properties: Mapping[str, str]) -> None:
        """Create the table on `ref` through the session's catalog (Spark's TableCatalog API: the Iceberg schema is
        converted from the Java `spark_schema` as a Spark write's would be), with no rows and no Spark job."""
        self._touched.add((table, ref))
        self._loaded.pop((table, ref), None)
        self._catalog().createTable(self._identifier(table, ref), spark_schema, transforms, dict(properties))

    def schema(self, table: TableRef, ref: str) -> Any:
        """The table's Spark schema on `ref`, or None if there is no such table (metadata only: the Iceberg
        schema of the run's one load, converted as Spark's own table does)."""
        try:
            iceberg = self.iceberg_table(table, ref)
            converted = static(self.spark.sparkContext._jvm, "org.apache.iceberg.spark.SparkSchemaUtil", "convert")(
                iceberg.schema())
        except Exception as exc:
            if _not_found(exc) or _no_such_table(exc):
                return None
            raise engine_failure(exc, step=EngineStep.CATALOG, doing=f"reading the schema of {table} on {ref!r}",
                                 table=table.qualified) from exc
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(converted.json()))

    def write(
        self, frame: Any, source_uri: str, table: TableRef, branch: str, properties: Mapping[str, str], *,
        allow_new_columns: bool = False, layout: Layout | None = None,
    ) -> tuple[bool, tuple[str, ...]]:
        self._touched.add((table, branch))
        try:
            return self._write(frame, source_uri, table, branch, properties, allow_new_columns=allow_new_columns,
                               layout=layout)
        finally:  # a table Spark created is not the object loaded before: the next use asks the catalog again
            self._loaded.pop((table, branch), None)

    def _write(
        self, frame: Any, source_uri: str, table: TableRef, branch: str, properties: Mapping[str, str], *,
        allow_new_columns: bool = False, layout: Layout | None = None,
    ) -> tuple[bool, tuple[str, ...]]:
        """Append `frame` (or create the table from it) in one snapshot carrying `properties`; returns (created,
        the columns added to the table on the branch). With a `layout`, a new table gets it before its first rows
        and an existing one is evolved to it on the branch. Raises SchemaDriftError when the frame does not fit."""
        from pyspark.errors import AnalysisException

        ident = table_identifier(table, branch)
        writer = frame.writeTo(ident)
        for key, value in properties.items():
            writer = writer.option(f"snapshot-property.{key}", value)
        current = self.schema(table, branch)
        created = current is None
        doing = f"appending {source_uri} to {table} on {branch!r}"
        if current is None and not layout:
            try:
                writer.tableProperty("format-version", FORMAT_VERSION).create()
                return True, ()
            except Exception as exc:
                raise engine_failure(exc, step=EngineStep.WRITE, doing=doing, source_uri=source_uri,
                                     table=table.qualified) from exc
        if current is None:  # the layout first (an empty table), then the rows: they are written with it
            try:
                frame.limit(0).writeTo(ident).tableProperty("format-version", FORMAT_VERSION).create()
            except Exception as exc:
                raise engine_failure(exc, step=EngineStep.WRITE, doing=doing, source_uri=source_uri,
                                     table=table.qualified) from exc
            current = frame.schema
        if layout:
            self.apply_layout(table, branch, layout, source_uri)
        difference, new = schema_difference(current, frame.schema)
        if new and not allow_new_columns:
            raise drift(source_uri, table, frame, difference, "the suite's schema policy rejects new columns",
                        "add `new_columns: allow` to the table's schema check in the audits file to add them (on "
                        "the branch; main gets them when the file is published), or drop them from the file")
        if new:
            self.add_columns(table, branch, frame, new)
        try:
            writer.append()
            return created, new
        except AnalysisException as exc:
            raise drift(source_uri, table, frame, difference, first_line(exc),
                        "align the file's column names and types with the table, or ingest it into a new table "
                        "with --table") from exc
        except Exception as exc:
            if (why := value_does_not_fit(exc)) is not None:
                raise drift(source_uri, table, frame, difference, why,
                            "widen the table's column to the file's type (Iceberg widens int to bigint, float to "
                            "double and a decimal's precision in place: ALTER TABLE ... ALTER COLUMN ... TYPE ...), "
                            "or write the file's values in the table's type") from exc
            raise engine_failure(exc, step=EngineStep.WRITE, doing=doing, source_uri=source_uri,
                                 table=table.qualified) from exc

    def apply_layout(self, table: TableRef, branch: str, layout: Layout, source_uri: str) -> None:
        """The table's partition spec, sort order and write properties, as the audits file says, on the branch."""
        try:
            changes = apply_layout(self.spark.sparkContext._jvm, self.iceberg_table(table, branch), layout)
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.WRITE, doing=f"setting the layout of {table} on {branch!r}",
                                 source_uri=source_uri, table=table.qualified) from exc
        if changes:
            log.info("%s on %s: layout changed (%s)", table, branch, "; ".join(changes))

    def add_columns(self, table: TableRef, branch: str, frame: Any, new: tuple[str, ...]) -> None:
        """Add the file's new columns to the table on the branch (a schema commit there, not on main)."""
        try:
            jvm = self.spark.sparkContext._jvm
            added = static(jvm, "org.apache.iceberg.spark.SparkSchemaUtil", "convert")(frame.select(*new)._jdf.schema())
            self.iceberg_table(table, branch).updateSchema().unionByNameWith(added).commit()
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.CATALOG, doing=f"adding columns {', '.join(new)} to {table} "
                                 f"on {branch!r}", table=table.qualified) from exc

    def iceberg_table(self, table: TableRef, ref: str) -> Any:
        """The Iceberg (Java) table on `ref`, loaded through the session's catalog (one catalog call, no job) once
        per run: later calls, and Spark's own reads and writes of it in this run, get the same object from the
        catalog's cache (a commit through it keeps it current) until `forget`."""
        if (table, ref) in self._loaded:
            return self._loaded[(table, ref)]
        self._touched.add((table, ref))
        loaded = self._loaded[(table, ref)] = self._catalog().loadTable(self._identifier(table, ref)).table()
        return loaded

    def _catalog(self) -> Any:
        if self._plugin is None:  # the session's catalog plugin, the same object for the run (4 round trips once)
            self._plugin = self.spark._jsparkSession.sessionState().catalogManager().catalog(CATALOG)
        return self._plugin

    def _identifier(self, table: TableRef, ref: str) -> Any:
        found = self._identifiers.get((table, ref))
        if found is None:
            gateway = self.spark.sparkContext._gateway
            namespace = gateway.new_array(static(gateway.jvm, "java.lang.String"), 1)
            namespace[0] = table.namespace
            of = static(gateway.jvm, "org.apache.spark.sql.connector.catalog.Identifier", "of")
            found = self._identifiers[(table, ref)] = of(namespace, f"{table.name}@{ref}")
        return found

    def last_append(
        self, table: TableRef, branch: str, created: bool, columns: tuple[str, ...], added: tuple[str, ...] = ()
    ) -> AppendResult | None:
        """The snapshot the write just committed on the branch (ours alone writes there), with how many snapshots the
        table's current metadata lists (the core bounds it through the maintainer), or None if it committed none (an
        empty file). Reads only."""
        try:
            iceberg = self.iceberg_table(table, branch)
            snapshot = iceberg.currentSnapshot()
            if snapshot is None:
                return None
            parent = snapshot.parentId()
            records = snapshot.summary().get("added-records")
            count = snapshot_count(self.spark.sparkContext._jvm, iceberg)
            return AppendResult(rows=int(records or 0), snapshot_id=int(snapshot.snapshotId()),
                                parent_snapshot_id=None if parent is None else int(parent), table_created=created,
                                columns=columns, added_columns=added, snapshots=int(count))
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.CATALOG, doing=f"reading the new snapshot of {table} on "
                                 f"{branch!r}", table=table.qualified) from exc

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        """Walk back from the table's current snapshot on `ref` through the newest lineage.RECENT_APPENDS, in the
        table's metadata (no Spark job). The identity is compared as a value, never put into SQL."""
        doing = f"looking for {identity!r} in the recent snapshots of {table} on {ref!r}"
        try:
            iceberg = self.iceberg_table(table, ref)
            snapshot = iceberg.currentSnapshot()
            for _ in range(lineage.RECENT_APPENDS):
                if snapshot is None:
                    return None
                rows = lineage.identities_in_snapshot(dict(snapshot.summary())).get(identity)
                parent = snapshot.parentId()
                if rows is not None:
                    return AppendResult(rows=rows, snapshot_id=int(snapshot.snapshotId()),
                                        parent_snapshot_id=None if parent is None else int(parent),
                                        table_created=parent is None,
                                        columns=tuple(str(c.name()) for c in iceberg.schema().columns()))
                snapshot = None if parent is None else iceberg.snapshot(parent)
            return None
        except Exception as exc:
            if _not_found(exc) or _no_such_table(exc):
                return None
            raise engine_failure(exc, step=EngineStep.CATALOG, doing=doing, table=table.qualified) from exc


def schema_difference(table: Any, file: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column by column, the file's Spark schema against the table's (names compared case-insensitively): the
    lines of the difference, and the names of the file's new columns."""
    mine = {f.name.lower(): f for f in file.fields}
    theirs = {f.name.lower(): f for f in table.fields}
    lines = [f"missing {f.name} ({f.dataType.simpleString()})" for k, f in theirs.items() if k not in mine]
    lines += [f"{f.name}: {theirs[k].dataType.simpleString()} in the table, {f.dataType.simpleString()} in the file"
              for k, f in mine.items() if k in theirs and theirs[k].dataType != f.dataType]
    new = tuple(f.name for k, f in mine.items() if k not in theirs)
    lines += [f"new {f.name} ({f.dataType.simpleString()})" for k, f in mine.items() if k not in theirs]
    return tuple(lines), new


def drift(source_uri: str, table: TableRef, frame: Any, difference: tuple[str, ...], why: str,
          fix: str) -> SchemaDriftError:
    shown = "; ".join(difference) or "no column differs by name; a type or nullability does not fit"
    return SchemaDriftError(
        f"{source_uri}: its columns do not fit table {table} ({why}). Difference (file vs table): {shown}. "
        f"File schema: {frame.schema.simpleString()}. Fix: {fix}.", difference,
    )


def snapshot_count(jvm: Any, iceberg: Any) -> int:
    """How many snapshots the (Java) table's current metadata lists."""
    return int(static(jvm, "org.apache.iceberg.relocated.com.google.common.collect.Iterables", "size")(
        iceberg.snapshots()))
