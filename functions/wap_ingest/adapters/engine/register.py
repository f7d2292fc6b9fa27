"""Registering a Parquet file into an Iceberg table on a branch, without rewriting it (issue 27).

The file's footer is read from the source object (one ranged GET of exactly the announced version) and judged by
parquet_fit against the table's schema as the branch has it (a new table: the schema the rewrite path would create
from Spark's reading of the same footer). When it fits, the object is copied server-side into the table's data
location, and appended on the branch in one commit made from Python (PyIceberg, committed to Nessie by
catalog.tables.BranchTables, the table's history kept): a DataFile whose metrics are what the service measured of the
file's pages (`measured`: parquet_decode.measure_parquet decodes every page of a local copy meanwhile, and checks
every claim the file makes; register_metrics turns the figures into Iceberg's metrics with the table's metrics
config), never the footer's own figures: a file whose footer disagrees with its pages, or makes a claim the service
does not check, is rewritten instead (its every stored figure is then the engine's), the reason saying which.
The DataFile is stamped with the run's snapshot properties, and, when the table has none yet, the table's name mapping
(`schema.name-mapping.default`), so readers find the columns of files written without Iceberg field ids by name.
No Spark job runs, and no JVM unless the table is to be made (from Spark's reading of the footer, as a rewrite
would make it) or its layout applied: those go through the engine (spark_tables), before the commit.

A partitioned table takes a file whose rows all fall in one partition: each partition field's value is derived from
the file's measured metrics (its null count and bounds, through the field's transform: identity of an integer,
string, date or boolean; year, month, day, hour of a date or timestamp; truncate of an integer, or of a string whose
bounds are equal). Anything else (a file spanning partitions, a bucket) is rewritten.

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
from typing import Any, Protocol, cast

from wap_ingest.adapters.catalog import BranchTables
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure
from wap_ingest.adapters.engine.parquet_fit import (
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
from wap_ingest.adapters.engine.parquet_measured import Measured, footer_digest
from wap_ingest.adapters.engine.py4j_lookup import static
from wap_ingest.adapters.engine.register_metrics import measured_statistics
from wap_ingest.adapters.engine.tables import FORMAT_VERSION, IcebergTables
from wap_ingest.core import lineage
from wap_ingest.core.errors import CatalogError, ObjectStoreUnavailableError, UnexpectedError, WapError
from wap_ingest.core.layout import Layout
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.write_paths import REGISTERED, WritePath

log = logging.getLogger(__name__)

NAME_MAPPING = "schema.name-mapping.default"
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
    data_file: Any = None  # the (PyIceberg) DataFile appended: its metrics, without reading the manifest back
    table: Any = None  # the (PyIceberg) table as the commit left it: the new snapshot is its current one


def read_footer(store: LakeCopies, source: SourceObject) -> tuple[Footer, int]:
    """The file's footer and its size, from its tail (a second, exact read when the footer is larger than the first
    one). Raises FooterError when the tail is not a Parquet footer."""
    tail, size = store.read_tail(source, TAIL_BYTES)
    needed = footer_length(tail)
    if needed > len(tail) and needed <= size:
        tail, size = store.read_tail(source, needed)
    return footer_from(tail, size), size


Measure = Callable[[], "Measured | str"]  # the file's measured figures, or why it has none (waits for them)


BeforeCommit = Callable[[Any, Any], None]  # (the DataFile, the table it is appended to) right before the commit


def register(lake: BranchTables, engine: Callable[[], IcebergTables], store: LakeCopies, source: SourceObject,
             table: TableRef, branch: str, properties: Mapping[str, str], layout: Layout | None,
             measured: Measure, before_commit: BeforeCommit | None = None) -> Registration | str:
    """Register `source` into `table` on `branch` in one snapshot carrying `properties`, or return why it is to be
    rewritten instead. Raises a WapError (SourceNotFoundError for a source gone since its head). `measured` is
    asked for before anything is written (the table made or evolved, or the append committed: its exception stops
    the registration and leaves nothing behind), so the file's pages are decoded and measured meanwhile; the file
    is registered only with figures whose every claim checked out. `engine` is asked for only when the table is to
    be made or its layout applied: an existing table without a layout takes the file with no JVM (the commit is
    PyIceberg's, through `lake`). `before_commit` is given the data file and the table right before the commit (its
    exception stops the registration: the copy is removed, nothing is committed)."""
    try:
        footer, size = read_footer(store, source)
    except FooterError as exc:
        return f"{exc} (the rewrite path reads it and says what is wrong)"
    problem = footer.problem or first_problem(footer.columns) or ("it has no rows" if footer.rows == 0 else "")
    if problem:
        return problem
    doing = f"registering {source.uri} into {table} on {branch!r}"
    asked: list[IcebergTables] = []

    def tables_of_engine() -> IcebergTables:
        asked.append(engine())
        return asked[-1]

    try:
        current = lake.load(table, branch)
        if current is not None and not current.sort_order().is_unsorted:
            return "the table has a sort order (its rows are written sorted)"
        if current is None:
            tables = tables_of_engine()
            jvm = tables.spark.sparkContext._jvm
            spark_schema = nanosecond_problem(footer.columns, int(FORMAT_VERSION)) or _spark_schema(tables.spark,
                                                                                                   footer.raw)
            if isinstance(spark_schema, str):
                return spark_schema
            schema = static(jvm, "org.apache.iceberg.SchemaParser", "toJson")(
                static(jvm, "org.apache.iceberg.spark.SparkSchemaUtil", "convert")(spark_schema))
            reason = fit(footer.columns, json.loads(str(schema)), int(FORMAT_VERSION))
        else:
            reason = fit(footer.columns, json.loads(current.schema().model_dump_json()), current.format_version)
        if reason:
            return reason
        created = current is None
        if created or layout:
            checked = _checked(measured, footer, source)
            if isinstance(checked, str):
                return checked
            tables = tables_of_engine()
            if created:
                _create(tables, table, branch, spark_schema)
            if layout:  # as the rewrite path does: a new table gets it before its first rows, an existing one evolves
                tables.apply_layout(table, branch, layout, source.uri)
            tables.forget()  # the engine's view of the table is not kept: the commit below is made without it
            current = lake.load(table, branch)
            if current is None:
                raise CatalogError(f"{doing}: the table made on the branch is not there")
        return _append(lake, store, source, table, current, footer, size, properties, created, measured,
                       before_commit)
    except WapError:
        raise
    except OSError as exc:  # PyArrow's S3 while PyIceberg wrote the manifests: retried, as any S3 outage
        raise ObjectStoreUnavailableError(f"{doing}: S3 failed while the commit's files were written: {exc}") from exc
    except Exception as exc:
        if not asked:  # no engine was used: PyIceberg's or this code's, retried and then dead-lettered
            raise UnexpectedError(f"{doing}: unexpected {type(exc).__name__}: {exc}. The file will be retried; if "
                                  f"it keeps failing, it reaches the dead-letter queue.") from exc
        raise engine_failure(exc, step=EngineStep.CATALOG, doing=doing, source_uri=source.uri,
                             table=table.qualified) from exc


def _spark_schema(spark: Any, raw: bytes) -> Any:
    """The (Java) Spark schema a read of this footer gives, made nullable as Spark's file sources make it: the
    schema the rewrite path creates a new table from (spark_read.footer_schema, from the footer's bytes); or why
    Spark cannot make one (the rewrite path's read then says so, classified)."""
    from py4j.protocol import Py4JJavaError

    jvm, session = spark.sparkContext._jvm, spark._jsparkSession
    parquet = "org.apache.spark.sql.execution.datasources.parquet"
    # default read options: the converter's own default has no message size limit set, which newer Parquet refuses
    converter = "org.apache.parquet.format.converter.ParquetMetadataConverter"
    options = static(jvm, "org.apache.parquet.ParquetReadOptions", "builder")().build()
    metadata = static(jvm, converter)(options).readParquetMetadata(static(jvm, "java.io.ByteArrayInputStream")(raw),
                                                                  static(jvm, converter, "NO_FILTER"))
    footer = static(jvm, "org.apache.parquet.hadoop.Footer")(static(jvm, "org.apache.hadoop.fs.Path")(
        "file:/footer.parquet"), metadata)
    try:
        schema = static(jvm, f"{parquet}.ParquetFileFormat", "readSchemaFromFooter")(
            footer, static(jvm, f"{parquet}.ParquetToSparkSchemaConverter")(session.sessionState().conf()))
    except Py4JJavaError as exc:  # Spark refuses a type of the file (the JVM answered: it is alive)
        return f"Spark cannot read its schema ({exc.java_exception.getMessage()!s})"
    nullable = _nullable(json.loads(str(schema.json())))
    return static(jvm, "org.apache.spark.sql.types.DataType", "fromJson")(json.dumps(nullable))


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


def _checked(measured: Measure, footer: Footer, source: SourceObject) -> Measured | str:
    """The file's measured figures, or why it is rewritten: they could not be had, or a claim of the file is false or
    not one the service checks. The pages measured must be those of the footer judged (the same object version)."""
    found = measured()
    if isinstance(found, str):
        return found
    if found.footer_digest != footer_digest(footer.raw):
        raise ObjectStoreUnavailableError(f"{source.uri}: the bytes read for its footer and for its pages differ (the "
                                          f"object changed while it was read); it will be read again.")
    return found.problem or found


def _append(lake: BranchTables, store: LakeCopies, source: SourceObject, table: TableRef, iceberg: Any,
            footer: Footer, size: int, properties: Mapping[str, str], created: bool,
            measured: Measure, before_commit: BeforeCommit | None = None) -> Registration | str:
    """The file copied into the table's location (while its pages are still being measured) and appended as a data
    file with the metrics the service measured, in one commit on the branch."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.table.locations import load_location_provider
    from pyiceberg.table.name_mapping import create_mapping_from_schema
    from pyiceberg.typedef import Record

    schema, spec = iceberg.schema(), iceberg.spec()
    mapping_json = iceberg.properties.get(NAME_MAPPING)
    if mapping_json is not None:  # kept current by Iceberg's schema updates; one set by hand may lag behind
        gap = mapping_gap(json.loads(str(mapping_json)), json.loads(schema.model_dump_json()))
        if gap:
            return gap
    name = f"wap-{hashlib.sha256(source.identity.encode()).hexdigest()[:16]}-{uuid.uuid4().hex}.parquet"
    locations = load_location_provider(iceberg.location(), iceberg.properties)
    copies: list[str] = []  # the copies made in the table's location, removed unless the commit took one

    def copy(location: str) -> str:
        store.copy_into(replace(source, size=size), location)  # its size as read: one CopyObject, or parts >5 GiB
        copies.append(location)
        return location

    committed = False
    try:
        if not spec.fields:  # copied while the pages are measured; a partition's path waits for the measured bounds
            copy(locations.new_data_location(name))
        checked = _checked(measured, footer, source)
        if isinstance(checked, str):
            return checked
        try:
            fields = measured_statistics(schema, iceberg.properties, checked).to_serialized_dict()
        except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
            return f"its measured figures cannot be taken as the table's metrics ({type(exc).__name__}: {exc})"
        partition: Any = Record()
        if spec.fields:
            values = partition_values(schema, spec, checked.rows, fields["null_value_counts"], fields["lower_bounds"],
                                      fields["upper_bounds"])
            if isinstance(values, str):
                return values
            partition = Record(*values)
            copy(locations.new_data_location(name, cast(Any, _Placed(spec.partition_to_path(partition, schema)))))
        data_file = DataFile.from_args(
            content=DataFileContent.DATA, file_path=copies[-1], file_format=FileFormat.PARQUET, partition=partition,
            file_size_in_bytes=size, sort_order_id=None, spec_id=spec.spec_id, equality_ids=None, key_metadata=None,
            **fields)
        reason = "a new table made from the file's schema" if created else "the file's schema fits the table"
        if before_commit is not None:
            before_commit(data_file, iceberg)
        # A fast append: one new manifest, the others kept as they are; `wap maintain` rewrites the manifests once
        # they are too many. The table's first registered file also sets its name mapping, in the same commit.
        with iceberg.transaction() as transaction:
            if mapping_json is None:
                transaction.set_properties({NAME_MAPPING: create_mapping_from_schema(schema).model_dump_json()})
            stamped = dict(properties) | lineage.write_properties([WritePath(REGISTERED, reason)])
            with transaction.update_snapshot(snapshot_properties=stamped).fast_append() as append:
                append.append_data_file(data_file)
        committed = True
    finally:
        for location in copies if not committed else copies[:-1]:
            store.remove(location)  # nothing refers to it: the branch did not take the commit
    return Registration(created, tuple(c.name for c in footer.columns), copies[-1], reason, data_file, iceberg)


def partition_values(schema: Any, spec: Any, rows: int, nulls: Mapping[int, int], lower: Mapping[int, bytes],
                     upper: Mapping[int, bytes]) -> list[Any] | str:
    """Each partition field's value for every row of the file (PyIceberg's partition record values), from the
    file's metrics; or why they cannot be derived (the file spans partitions, a bound is missing, a bucket)."""
    values: list[Any] = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        name, kind, transform = source.name, str(source.field_type), str(field.transform)
        if transform == "void":
            values.append(None)
            continue
        count = nulls.get(field.source_id)
        if count is not None and int(count) == rows:
            values.append(None)
            continue
        low, high = (_bound(bounds.get(field.source_id), kind) for bounds in (lower, upper))
        where = f"the table is partitioned by {transform}({name}) and"
        if count is None or int(count) > 0 or low is None or high is None:
            return f"{where} the file's metrics do not give one value of it (nulls, or no bounds)"
        value = derive(transform, kind, low, high)
        if value is None:
            return f"{where} the file's rows span several partitions (or the value cannot be derived)"
        values.append(_typed(value, str(field.transform.result_type(source.field_type))))
    return values


class _Placed:
    """The partition's path, where a location provider asks a partition key for it."""

    def __init__(self, path: str) -> None:
        self._path = path

    def to_path(self) -> str:
        return self._path


def _typed(value: str, result_type: str) -> Any:
    """A partition string as the partition record holds it (a date as days since the epoch)."""
    if result_type == "date":
        return (date.fromisoformat(value) - _EPOCH).days
    if result_type == "boolean":
        return value == "true"
    return value if result_type == "string" else int(value)


def _bound(data: bytes | None, kind: Any) -> int | str | bool | None:
    """A bound in Iceberg's single-value serialization, decoded for the types a partition value is derived from."""
    if data is None or not isinstance(kind, str):
        return None
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
