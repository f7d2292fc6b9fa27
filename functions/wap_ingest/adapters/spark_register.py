"""Registering a Parquet file into an Iceberg table on a branch, without rewriting it (issue 27).

The file's footer is read from the source object (one ranged GET of exactly the announced version) and judged by
parquet_fit against the table's schema as the branch has it (a new table: the schema the rewrite path would create
from Spark's reading of the same footer). When it fits, the object is copied server-side into the table's data
location (never downloaded), and appended on the branch through Iceberg's Java API in the Spark driver, in one
commit: `AppendFiles.appendFile(DataFile)` whose metrics come from the footer (`ParquetUtil.footerMetrics` with the
table's metrics config and name mapping), stamped with the run's snapshot properties, and, when the table has none
yet, the table's name mapping (`schema.name-mapping.default`, MappingUtil.create), so readers find the columns of
files written without Iceberg field ids by name. No Spark job runs.

A partitioned table takes a file whose rows all fall in one partition: each partition field's value is derived from
the file's metrics (its null count and bounds, through the field's transform: identity of an integer, string, date or
boolean; year, month, day, hour of a date or timestamp; truncate of an integer, or of a string whose bounds are
equal). Anything else (a file spanning partitions, a bucket) is rewritten.

`register` returns the Registration, or the reason the file is rewritten instead; it raises a WapError for failures.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from wap_ingest.core import lineage
from wap_ingest.core.layout import Layout
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.write_paths import REGISTERED, WritePath

from .parquet_fit import (
    TAIL_BYTES,
    Footer,
    FooterError,
    first_problem,
    fit,
    footer_from,
    footer_length,
    mapping_gap,
    nanosecond_problem,
)
from .py4j_lookup import static
from .spark_errors import EngineStep, engine_failure
from .spark_tables import IcebergTables

log = logging.getLogger(__name__)

NAME_MAPPING = "schema.name-mapping.default"
FORMAT_VERSION = "2"  # what the rewrite path creates tables with
_EPOCH = date(1970, 1, 1)
MICROS_PER_HOUR = 3_600_000_000


class LakeCopies(Protocol):
    """What registration needs of the object store (adapters.s3.S3ObjectStore)."""

    def read_tail(self, source: SourceObject, max_bytes: int) -> tuple[bytes, int]: ...

    def copy_into(self, source: SourceObject, uri: str) -> None: ...

    def remove(self, uri: str) -> None: ...


@dataclass(frozen=True)
class Registration:
    """A file registered as a data file of the table on the branch: the commit is the table's current snapshot."""

    created: bool  # the table was created (from the file's schema) for it
    columns: tuple[str, ...]  # the file's top-level columns
    location: str  # the data file's URI in the table's location
    reason: str  # why it could be registered (for the log, the snapshot and the merge)
    data_file: Any = None  # the (Java) DataFile appended: its metrics, without reading the manifest back


def schema_json(jvm: Any, schema: Any) -> Any:
    """An Iceberg (Java) schema as its JSON document (SchemaParser), parsed."""
    return json.loads(str(static(jvm, "org.apache.iceberg.SchemaParser", "toJson")(schema)))


def read_footer(store: LakeCopies, source: SourceObject) -> tuple[Footer, int]:
    """The file's footer and its size, from its tail (a second, exact read when the footer is larger than the first
    one). Raises FooterError when the tail is not a Parquet footer."""
    tail, size = store.read_tail(source, TAIL_BYTES)
    needed = footer_length(tail)
    if needed > len(tail) and needed <= size:
        tail, size = store.read_tail(source, needed)
    return footer_from(tail, size), size


def register(tables: IcebergTables, store: LakeCopies, source: SourceObject, table: TableRef, branch: str,
             properties: Mapping[str, str], layout: Layout | None,
             ready: Callable[[], None] = lambda: None) -> Registration | str:
    """Register `source` into `table` on `branch` in one snapshot carrying `properties`, or return why it is to be
    rewritten instead. Raises a WapError (SourceNotFoundError for a source gone since its head). `ready` is called
    before anything is written (the table made or evolved, or the append committed: its exception stops the
    registration and leaves nothing behind), so a check of the file can run meanwhile."""
    try:
        footer, size = read_footer(store, source)
    except FooterError as exc:
        return f"{exc} (the rewrite path reads it and says what is wrong)"
    problem = footer.problem or first_problem(footer.columns) or ("it has no rows" if footer.rows == 0 else "")
    if problem:
        return problem
    jvm, doing = tables.spark.sparkContext._jvm, f"registering {source.uri} into {table} on {branch!r}"
    try:
        current = tables.find(table, branch)
        if current is not None and not current.sortOrder().isUnsorted():
            return "the table has a sort order (its rows are written sorted)"
        if current is None:
            version = int(FORMAT_VERSION)
            spark_schema = nanosecond_problem(footer.columns, version) or _spark_schema(tables.spark, footer.raw)
            if isinstance(spark_schema, str):
                return spark_schema
            schema = static(jvm, "org.apache.iceberg.spark.SparkSchemaUtil", "convert")(spark_schema)
        else:
            version = int(static(jvm, "org.apache.iceberg.TableUtil", "formatVersion")(current))
            schema = current.schema()
        reason = fit(footer.columns, schema_json(jvm, schema), version)
        if reason:
            return reason
        created = current is None
        if created or layout:
            ready()
        if created:
            _create(tables, table, branch, spark_schema)
        if layout:  # as the rewrite path does: a new table gets it before its first rows, an existing one evolves
            tables.apply_layout(table, branch, layout, source.uri)
        return _append(tables, store, source, table, branch, tables.iceberg_table(table, branch), footer, size,
                       properties, created, ready)
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.CATALOG, doing=doing, source_uri=source.uri,
                             table=table.qualified) from exc


def _spark_schema(spark: Any, raw: bytes) -> Any:
    """The (Java) Spark schema a read of this footer gives, made nullable as Spark's file sources make it: the
    schema the rewrite path creates a new table from (spark_read.footer_schema, from the footer's bytes); or why
    Spark cannot make one (the rewrite path's read then says so, classified)."""
    from py4j.protocol import Py4JJavaError

    jvm, session = spark.sparkContext._jvm, spark._jsparkSession
    parquet = "org.apache.spark.sql.execution.datasources.parquet"
    metadata = _footer_metadata("org.apache.parquet", jvm, raw)
    footer = static(jvm, "org.apache.parquet.hadoop.Footer")(static(jvm, "org.apache.hadoop.fs.Path")(
        "file:/footer.parquet"), metadata)
    try:
        schema = static(jvm, f"{parquet}.ParquetFileFormat", "readSchemaFromFooter")(
            footer, static(jvm, f"{parquet}.ParquetToSparkSchemaConverter")(session.sessionState().conf()))
    except Py4JJavaError as exc:  # Spark refuses a type of the file (the JVM answered: it is alive)
        return f"Spark cannot read its schema ({exc.java_exception.getMessage()!s})"
    nullable = _nullable(json.loads(str(schema.json())))
    return static(jvm, "org.apache.spark.sql.types.DataType", "fromJson")(json.dumps(nullable))


def _footer_metadata(parquet: str, jvm: Any, raw: bytes) -> Any:
    """The footer's bytes as the ParquetMetadata of the Parquet in package `parquet` (Spark's, or the one Iceberg
    shades), read with default read options (the converter's own default has no message size limit set, which newer
    Parquet refuses)."""
    converter = f"{parquet}.format.converter.ParquetMetadataConverter"
    options = static(jvm, f"{parquet}.ParquetReadOptions", "builder")().build()
    return static(jvm, converter)(options).readParquetMetadata(static(jvm, "java.io.ByteArrayInputStream")(raw),
                                                              static(jvm, converter, "NO_FILTER"))


def _nullable(kind: Any) -> Any:
    """Spark's `asNullable` on a schema's JSON: every field, element and value may be null."""
    if not isinstance(kind, dict):
        return kind
    if kind.get("type") == "struct":
        return kind | {"fields": [f | {"nullable": True, "type": _nullable(f["type"])} for f in kind["fields"]]}
    if kind.get("type") == "array":
        return kind | {"containsNull": True, "elementType": _nullable(kind["elementType"])}
    if kind.get("type") == "map":
        return kind | {"valueContainsNull": True, "keyType": _nullable(kind["keyType"]),
                       "valueType": _nullable(kind["valueType"])}
    return kind


def _create(tables: IcebergTables, table: TableRef, branch: str, spark_schema: Any) -> None:
    """Create the table on the branch from the Spark schema, as the rewrite path would (no rows, no Spark job)."""
    gateway = tables.spark.sparkContext._gateway
    transforms = gateway.new_array(gateway.jvm.org.apache.spark.sql.connector.expressions.Transform, 0)
    tables.create(table, branch, spark_schema, transforms, {"format-version": FORMAT_VERSION})


def _append(tables: IcebergTables, store: LakeCopies, source: SourceObject, table: TableRef, branch: str,
            iceberg: Any, footer: Footer, size: int, properties: Mapping[str, str], created: bool,
            ready: Callable[[], None]) -> Registration | str:
    jvm = tables.spark.sparkContext._jvm
    mapping_json = iceberg.properties().get(NAME_MAPPING)
    if mapping_json is not None:  # kept current by Iceberg's schema updates; one set by hand may lag behind
        gap = mapping_gap(json.loads(str(mapping_json)), schema_json(jvm, iceberg.schema()))
        if gap:
            return gap
    if mapping_json is None:
        mapping = static(jvm, "org.apache.iceberg.mapping.MappingUtil", "create")(iceberg.schema())
    else:
        mapping = static(jvm, "org.apache.iceberg.mapping.NameMappingParser", "fromJson")(mapping_json)
    metadata = _footer_metadata("org.apache.iceberg.shaded.org.apache.parquet", jvm, footer.raw)
    parquet = "org.apache.iceberg.parquet.ParquetUtil"
    config = static(jvm, "org.apache.iceberg.MetricsConfig", "forTable")(iceberg)
    metrics = static(jvm, parquet, "footerMetrics")(metadata, static(jvm, "java.util.stream.Stream", "empty")(), config,
                                                     mapping)
    spec = iceberg.spec()
    offsets = static(jvm, parquet, "getSplitOffsets")(metadata)
    builder = static(jvm, "org.apache.iceberg.DataFiles", "builder")(spec).withFormat("parquet") \
        .withFileSizeInBytes(size).withMetrics(metrics).withSplitOffsets(offsets)
    name = f"wap-{hashlib.sha256(source.identity.encode()).hexdigest()[:16]}-{uuid.uuid4().hex}.parquet"
    locations = iceberg.locationProvider()
    if spec.isPartitioned():
        values = partition_values(jvm, iceberg, spec, metrics)
        if isinstance(values, str):
            return values
        placed = builder.withPartitionValues(values).withPath(name).build()  # its partition, for the location
        location = str(locations.newDataLocation(spec, placed.partition(), name))
    else:
        location = str(locations.newDataLocation(name))
    data_file = builder.withPath(location).build()
    reason = "a new table made from the file's schema" if created else "the file's schema fits the table"
    store.copy_into(replace(source, size=size), location)  # its size as read: one CopyObject, or parts above 5 GiB
    try:
        ready()  # (once: a no-op when it was called before the table was made)
        # The table's first registered file also sets its name mapping, in the same commit (a transaction); later
        # ones append alone: a transaction refreshes the table once more before it commits (two more catalog
        # calls, a quarter of the append's time measured on the local stack).
        transaction = iceberg.newTransaction() if mapping_json is None else None
        if transaction is not None:
            transaction.updateProperties().set(NAME_MAPPING, static(
                jvm, "org.apache.iceberg.mapping.NameMappingParser", "toJson")(mapping)).commit()
        # A fast append: one new manifest, the others kept as they are (a merging append reads and weighs them
        # first); `wap maintain` rewrites the manifests once they are too many.
        append = (iceberg if transaction is None else transaction).newFastAppend().appendFile(data_file)
        for key, value in (dict(properties) | lineage.write_properties([WritePath(REGISTERED, reason)])).items():
            append = append.set(key, value)
        append.commit()
        if transaction is not None:
            transaction.commitTransaction()
    except BaseException:
        store.remove(location)  # nothing refers to it: the branch did not take the commit
        raise
    return Registration(created, tuple(c.name for c in footer.columns), location, reason, data_file)


def partition_values(jvm: Any, iceberg: Any, spec: Any, metrics: Any) -> list[str | None] | str:
    """Each partition field's value for every row of the file, as Iceberg's partition strings, from the file's
    metrics; or why they cannot be derived (the file spans partitions, a bound is missing, a bucket)."""
    schema = schema_json(jvm, iceberg.schema())
    types = {int(f["id"]): (str(f["name"]), f["type"]) for f in schema["fields"]}
    fields = json.loads(str(static(jvm, "org.apache.iceberg.PartitionSpecParser", "toJson")(spec)))["fields"]
    rows = int(metrics.recordCount())
    values: list[str | None] = []
    for field in fields:
        name, kind = types.get(int(field["source-id"]), ("?", None))
        transform = str(field["transform"])
        if transform == "void":
            values.append(None)
            continue
        nulls = metrics.nullValueCounts().get(int(field["source-id"]))
        if nulls is not None and int(nulls) == rows:
            values.append(None)
            continue
        low, high = (_bound(jvm, bounds.get(int(field["source-id"])), kind)
                     for bounds in (metrics.lowerBounds(), metrics.upperBounds()))
        where = f"the table is partitioned by {transform}({name}) and"
        if nulls is None or int(nulls) > 0 or low is None or high is None:
            return f"{where} the file's metrics do not give one value of it (nulls, or no bounds)"
        value = derive(transform, kind, low, high)
        if value is None:
            return f"{where} the file's rows span several partitions (or the value cannot be derived)"
        values.append(value)
    return values


def _bound(jvm: Any, buffer: Any, kind: Any) -> int | str | bool | None:
    """A bound in Iceberg's single-value serialization, decoded for the types a partition value is derived from."""
    if buffer is None or not isinstance(kind, str):
        return None
    data = bytes(static(jvm, "org.apache.iceberg.util.ByteBuffers", "toByteArray")(buffer))
    if kind in ("int", "long", "date", "timestamp", "timestamptz"):
        return int.from_bytes(data, "little", signed=True)
    if kind == "string":
        return data.decode("utf-8")
    if kind == "boolean":
        return data != b"\x00"
    return None


def derive(transform: str, kind: Any, low: int | str | bool, high: int | str | bool) -> str | None:
    """The partition string of `transform` on a column of `kind` when the file's bounds [low, high] lie in one
    partition, else None."""
    if transform == "identity" and low == high and kind in ("int", "long", "string", "boolean", "date"):
        if kind == "date":
            return (_EPOCH + timedelta(days=int(low))).isoformat()
        return str(low).lower() if kind == "boolean" else str(low)
    if transform in ("year", "month", "day", "hour") and kind in ("date", "timestamp", "timestamptz"):
        found = {_temporal(transform, kind, int(bound)) for bound in (low, high)}
        return found.pop() if len(found) == 1 else None  # {None}: None
    if transform.startswith("truncate[") and kind in ("int", "long"):
        width = int(transform[len("truncate["):-1])
        starts = {int(bound) - int(bound) % width for bound in (low, high)}
        return str(starts.pop()) if len(starts) == 1 else None
    if transform.startswith("truncate[") and kind == "string" and low == high:
        return str(low)[:int(transform[len("truncate["):-1])]
    return None


def _temporal(transform: str, kind: str, value: int) -> str | None:
    """Iceberg's year/month/day/hour of a date (days) or timestamp (microseconds), as its partition string."""
    if transform == "hour":
        return str(value // MICROS_PER_HOUR) if kind != "date" else None  # Iceberg has no hour of a date
    moment = datetime.fromtimestamp(0, UTC) + (timedelta(days=value) if kind == "date" else timedelta(
        microseconds=value))
    if transform == "day":
        return moment.date().isoformat()
    if transform == "month":
        return str((moment.year - 1970) * 12 + moment.month - 1)
    return str(moment.year - 1970)
