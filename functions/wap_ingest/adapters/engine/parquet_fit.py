"""Whether a Parquet file can become a data file of an Iceberg table as it is (registered), judged from its footer.

The footer (the file's last bytes, one ranged GET) is parsed with pyarrow into `FileColumn`s: each column's name,
the Iceberg type Iceberg's readers give it, whether it may be null, its Parquet field id, and, when it has one, the
reason it cannot be read as that type without conversion. `fit` then compares them with the table's Iceberg schema
(SchemaParser's JSON): the same column names, each type the table's (or one Iceberg's readers promote: int to long,
float to double, a wider decimal of the same scale), no nullable column where the table requires a value, and field
ids, when the file has any, that are the table's (readers trust a file's ids before the table's name mapping).

What is registered is only what every reader of the table reads as the rewrite path would have written it:
- plain booleans, 32/64-bit signed integers, floats, doubles, UTF-8 strings, binary, dates, decimals (int32, int64
  or fixed-length storage), structs, lists and maps of them;
- timestamps in microseconds or milliseconds (Iceberg's readers, Spark's and PyIceberg's, widen milliseconds), with
  or without time zone; an Arrow-written zone other than UTC is rewritten (PyIceberg refuses to read it as UTC).
Rewritten (the reason names the column): INT96 timestamps (Spark's and Hive's legacy encoding: not an Iceberg
type), nanosecond timestamps (Iceberg stores them from format version 3 only), unsigned integers (the table would
need a wider type), 8- and 16-bit integers (the table holds int; PyIceberg reads them back as int8/int16), fixed-length
binary without annotation (Spark reads binary, Iceberg fixed), UUID, float16, time, interval, JSON, BSON, enum and
binary-stored decimals (readers disagree on their type), and a footer that is encrypted or does not match the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wap_ingest.adapters.formats import ChildDiedError, ChildHungError, isolated

PARQUET_MAGIC = b"PAR1"
TAIL_BYTES = 64 * 1024  # the first read of a file's tail: most footers fit; a larger one costs a second read
UTC_ZONES = {"UTC", "Etc/UTC", "+00:00", "Z"}  # the zones PyIceberg reads as UTC (pyiceberg.io.pyarrow)
_PROMOTIONS = {("int", "long"), ("float", "double")}


@dataclass(frozen=True)
class FileColumn:
    """A column of the file as Iceberg sees it (a struct's field, a list's element, a map's key or value too)."""

    name: str
    kind: str  # Iceberg's type: a primitive ("long", "decimal(9,2)", "timestamptz"), or struct, list, map
    nullable: bool
    children: tuple[FileColumn, ...] = ()  # a struct's fields; a list's element; a map's key and value
    problem: str = ""  # why it cannot be read as `kind` as it is stored (then the file is rewritten)
    field_id: int | None = None


@dataclass(frozen=True)
class Footer:
    """A Parquet file's footer: its serialized metadata (for the engine's metrics), its columns and rows."""

    raw: bytes  # the Thrift FileMetaData
    columns: tuple[FileColumn, ...]
    rows: int
    problem: str = ""  # why the footer cannot be trusted for a registration (then the file is rewritten)


class FooterError(ValueError):
    """The bytes are not a Parquet footer (the rewrite path reads the file and says what is wrong)."""


def footer_length(tail: bytes) -> int:
    """The bytes of the tail the footer needs (its metadata, its length and the magic number)."""
    if len(tail) < 12 or tail[-4:] != PARQUET_MAGIC:
        if tail[-4:] == b"PARE":
            raise FooterError("its footer is encrypted")
        raise FooterError("it does not end with Parquet's magic number")
    return int.from_bytes(tail[-8:-4], "little") + 8


def footer_from(tail: bytes, size: int) -> Footer:
    """The footer in `tail` (the last bytes of a file of `size` bytes; at least `footer_length(tail)` of them),
    parsed in the isolation worker (adapters/formats/isolation.py): pyarrow aborts the process on some damaged
    footers."""
    try:
        return isolated(_parsed, tail, size)
    except (ChildDiedError, ChildHungError) as exc:
        raise FooterError(f"its footer cannot be read (the Parquet reader {exc} on it)") from exc


def _parsed(tail: bytes, size: int) -> Footer:
    import pyarrow as pa
    import pyarrow.parquet as pq

    needed = footer_length(tail)
    if needed > len(tail) or needed + 4 > size:
        raise FooterError(f"its footer length ({needed - 8} bytes) does not fit the file ({size} bytes)")
    raw = tail[-needed:-8]
    try:
        metadata = pq.ParquetFile(pa.BufferReader(PARQUET_MAGIC + raw + tail[-8:])).metadata
        arrow = metadata.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow's errors (ArrowInvalid, OSError...): not a footer it can read
        raise FooterError(f"its footer cannot be read ({exc})") from exc
    leaves = iter(metadata.schema.column(i) for i in range(len(metadata.schema)))
    columns = tuple(_column(field, leaves) for field in arrow)
    return Footer(raw, columns, int(metadata.num_rows), _chunks_problem(metadata, size - needed))


def _chunks_problem(metadata: Any, data_end: int) -> str:
    """A column chunk outside the file's data (bytes 4 to the footer) makes the footer untrustworthy."""
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            if start is None or start < 4 or start + chunk.total_compressed_size > data_end:
                return (f"its footer places column {chunk.path_in_schema} of row group {g} outside the file's data "
                        f"(the file is truncated or damaged)")
    return ""


def _field_id(field: Any) -> int | None:
    value = (field.metadata or {}).get(b"PARQUET:field_id")
    return int(value) if value is not None else None


def _column(field: Any, leaves: Any) -> FileColumn:
    """One Arrow field of the footer's schema, its Parquet leaves taken in order from `leaves` (depth first)."""
    import pyarrow as pa

    kind, fid, nullable = field.type, _field_id(field), field.nullable
    if pa.types.is_struct(kind):
        children = tuple(_column(kind.field(i), leaves) for i in range(kind.num_fields))
        return FileColumn(field.name, "struct", nullable, children, field_id=fid)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return FileColumn(field.name, "list", nullable, (_column(kind.value_field, leaves),), field_id=fid)
    if pa.types.is_map(kind):
        key, value = _column(kind.key_field, leaves), _column(kind.item_field, leaves)
        return FileColumn(field.name, "map", nullable, (key, value), field_id=fid)
    leaf = next(leaves)
    primitive, problem = leaf_type(leaf.physical_type, json.loads(leaf.logical_type.to_json()), leaf.converted_type,
                                   leaf.length)
    if not problem and primitive.startswith("timestamptz") and pa.types.is_timestamp(kind) and \
            kind.tz not in (None, *UTC_ZONES):
        problem = f"timestamps in time zone {kind.tz} as Arrow wrote them (PyIceberg does not read them as UTC)"
    return FileColumn(field.name, primitive, nullable, problem=problem, field_id=fid)


def leaf_type(physical: str, logical: Mapping[str, Any], converted: str, length: int | None) -> tuple[str, str]:
    """(Iceberg's type, the problem or "") of a Parquet primitive column: its physical type, its logical type as
    pyarrow's JSON ({"Type": "Timestamp", "timeUnit": ..., "isAdjustedToUTC": ...}), its converted type."""
    logical_type = logical.get("Type", "None")
    if logical_type == "None" and converted in ("INTERVAL", "TIME_MILLIS", "TIME_MICROS"):
        return "", f"a Parquet {converted} column has no Iceberg type it reads as"
    if physical == "INT96":
        return "timestamptz", "INT96 timestamps (Spark's and Hive's legacy encoding) are not an Iceberg type"
    if logical_type == "Decimal":
        precision, scale = logical.get("precision"), logical.get("scale")
        if physical in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY"):
            return f"decimal({precision},{scale})", ""
        return f"decimal({precision},{scale})", "decimals stored as variable-length binary"
    if logical_type == "Int":
        width, signed = logical.get("bitWidth"), logical.get("isSigned")
        if not signed:
            return "long", f"unsigned {width}-bit integers (the table would need a wider signed type)"
        if width in (8, 16):
            return "int", f"{width}-bit integers (the table holds int; PyIceberg reads them back as int{width})"
        return ("int" if physical == "INT32" else "long"), ""
    if logical_type == "Timestamp":
        zone = "timestamptz" if logical.get("isAdjustedToUTC") else "timestamp"
        unit = logical.get("timeUnit")
        if unit == "nanoseconds":
            return f"{zone}_ns", ""  # `fit` decides: Iceberg stores nanoseconds from format version 3
        return zone, "" if unit in ("milliseconds", "microseconds") else f"timestamps in {unit}"
    if logical_type == "Date":
        return "date", ""
    if logical_type == "String":
        return "string", "" if physical == "BYTE_ARRAY" else f"strings stored as {physical}"
    if logical_type != "None":
        return "", f"a Parquet {logical_type} column (readers do not agree on its type)"
    simple = {"BOOLEAN": "boolean", "INT32": "int", "INT64": "long", "FLOAT": "float", "DOUBLE": "double",
              "BYTE_ARRAY": "binary"}
    if physical in simple:
        return simple[physical], ""
    return f"fixed[{length}]", "fixed-length binary (Spark reads it as binary, Iceberg as fixed)"


def first_problem(columns: Sequence[FileColumn], path: str = "") -> str:
    """The first column that cannot be read as its type as it is stored, as `column <path>: <problem>`; ""."""
    for column in columns:
        where = f"{path}{column.name}"
        if column.problem:
            return f"column {where}: {column.problem}"
        found = first_problem(column.children, f"{where}.")
        if found:
            return found
    return ""


def nanosecond_problem(columns: Sequence[FileColumn], format_version: int, path: str = "") -> str:
    """A nanosecond timestamp column for a table of `format_version` below 3 (a new table is made at 2)."""
    for column in columns:
        where = f"{path}{column.name}"
        if column.kind.endswith("_ns") and format_version < 3:
            return (f"column {where}: nanosecond timestamps (Iceberg stores them from format version 3; the table "
                    f"is format version {format_version})")
        found = nanosecond_problem(column.children, format_version, f"{where}.")
        if found:
            return found
    return ""


def fit(columns: Sequence[FileColumn], schema: Mapping[str, Any], format_version: int) -> str:
    """Why the file does not fit the table (its Iceberg schema as SchemaParser's JSON), or "" when it does."""
    return first_problem(columns) or _fields(columns, schema.get("fields", []), "", format_version)


def _fields(columns: Sequence[FileColumn], fields: Sequence[Mapping[str, Any]], path: str, version: int) -> str:
    mine = {c.name: c for c in columns}
    theirs = {str(f["name"]): f for f in fields}
    missing = [n for n in theirs if n not in mine]
    new = [n for n in mine if n not in theirs]
    if missing or new:
        parts = ([f"missing {', '.join(path + n for n in missing)}"] if missing else []) + (
            [f"new {', '.join(path + n for n in new)}"] if new else [])
        return f"its columns are not the table's ({'; '.join(parts)})"
    for name, field in theirs.items():
        found = _field(mine[name], field["type"], int(field["id"]), bool(field.get("required")), f"{path}{name}",
                       version)
        if found:
            return found
    return ""


def _field(column: FileColumn, kind: Any, field_id: int, required: bool, path: str, version: int) -> str:
    if column.field_id is not None and column.field_id != field_id:
        return (f"column {path}: the file carries Parquet field id {column.field_id}, the table's is {field_id} "
                f"(readers trust a file's ids)")
    if required and column.nullable:
        return f"column {path}: may be null in the file, required in the table"
    if isinstance(kind, str):
        return _primitive(column, kind, path, version)
    nested = str(kind.get("type"))
    if column.kind != nested:
        return f"column {path}: {column.kind} in the file, {nested} in the table (needs conversion)"
    if nested == "struct":
        return _fields(column.children, kind.get("fields", []), f"{path}.", version)
    if nested == "list":
        (element,) = column.children
        return _field(element, kind["element"], int(kind["element-id"]), bool(kind.get("element-required")),
                      f"{path}.element", version)
    key, value = column.children
    return _field(key, kind["key"], int(kind["key-id"]), True, f"{path}.key", version) or _field(
        value, kind["value"], int(kind["value-id"]), bool(kind.get("value-required")), f"{path}.value", version)


def _primitive(column: FileColumn, kind: str, path: str, version: int) -> str:
    found = nanosecond_problem([column], version, path.rpartition(".")[0] + "." if "." in path else "")
    if found:
        return found
    if column.kind == kind or (column.kind, kind) in _PROMOTIONS or _wider_decimal(column.kind, kind):
        return ""
    return f"column {path}: {column.kind} in the file, {kind} in the table (needs conversion)"


def _wider_decimal(file: str, table: str) -> bool:
    """decimal(P,S) to decimal(P',S) with P' >= P: a promotion Iceberg's readers make."""
    if not (file.startswith("decimal(") and table.startswith("decimal(")):
        return False
    (p1, s1), (p2, s2) = (tuple(int(x) for x in t[8:-1].split(",")) for t in (file, table))
    return s1 == s2 and p2 >= p1


def mapping_gap(mapping: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> str:
    """A column of the table (its Iceberg schema as SchemaParser's JSON) that the table's name mapping (NameMapping's
    JSON) does not map by its current name, or "": readers would read that column of a registered file as null."""
    def names(fields: Sequence[Mapping[str, Any]]) -> dict[int, tuple[set[str], Any]]:
        return {int(f["field-id"]): (set(f.get("names", [])), f.get("fields") or []) for f in fields
                if "field-id" in f}

    def walk(kind: Any, mapped: Sequence[Mapping[str, Any]], path: str) -> str:
        known = names(mapped)
        children: list[tuple[int, str, Any]] = []
        if isinstance(kind, dict) and kind.get("type") == "struct":
            children = [(int(f["id"]), str(f["name"]), f["type"]) for f in kind.get("fields", [])]
        elif isinstance(kind, dict) and kind.get("type") == "list":
            children = [(int(kind["element-id"]), "element", kind["element"])]
        elif isinstance(kind, dict) and kind.get("type") == "map":
            children = [(int(kind["key-id"]), "key", kind["key"]), (int(kind["value-id"]), "value", kind["value"])]
        for fid, name, inner in children:
            if fid not in known or name not in known[fid][0]:
                return f"{path}{name}"
            found = walk(inner, known[fid][1], f"{path}{name}.")
            if found:
                return found
        return ""

    gap = walk(dict(schema) | {"type": "struct"}, mapping, "")
    return f"the table's name mapping (schema.name-mapping.default) does not map column {gap}" if gap else ""
