"""Whether a Parquet file can be registered as it is (adapters/engine/parquet_fit.py, spark_register's partition
values): its footer read into columns with their Iceberg types and problems, then judged against a table's schema."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import signal
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import bad_inputs, corruption
from wap_ingest.adapters.engine.parquet_fit import (
    FileColumn,
    FooterError,
    first_problem,
    fit,
    footer_from,
    footer_length,
    nanosecond_problem,
)
from wap_ingest.adapters.engine.register import derive, read_footer
from wap_ingest.core.models import SourceObject


def footer_of(table: pa.Table, **options: Any) -> Any:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    data = sink.getvalue()
    return footer_from(data, len(data))


def column(table: pa.Table, **options: Any) -> FileColumn:
    (found,) = footer_of(table, **options).columns
    return found


STAMPS = [dt.datetime(2026, 1, 1, 12)]


@pytest.mark.parametrize(("values", "options", "kind", "problem"), [
    (pa.array([1], pa.int32()), {}, "int", ""),
    (pa.array([1], pa.int64()), {}, "long", ""),
    (pa.array([1.5], pa.float32()), {}, "float", ""),
    (pa.array(["a"]), {}, "string", ""),
    (pa.array(["a"], pa.large_string()), {}, "string", ""),
    (pa.array(["a"]).dictionary_encode(), {}, "string", ""),
    (pa.array([b"a"]), {}, "binary", ""),
    (pa.array([True]), {}, "boolean", ""),
    (pa.array([dt.date(2026, 1, 1)]), {}, "date", ""),
    (pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 2)), {}, "decimal(10,2)", ""),
    (pa.array(STAMPS, pa.timestamp("us", tz="UTC")), {}, "timestamptz", ""),
    (pa.array(STAMPS, pa.timestamp("us")), {}, "timestamp", ""),
    (pa.array(STAMPS, pa.timestamp("ms", tz="UTC")), {}, "timestamptz", ""),
    (pa.array(STAMPS, pa.timestamp("s")), {}, "timestamp", ""),  # stored as milliseconds
    (pa.array(STAMPS, pa.timestamp("ns")), {}, "timestamp_ns", ""),  # `fit` decides by the table's format version
    (pa.array(STAMPS, pa.timestamp("us", tz="Europe/Paris")), {}, "timestamptz", "time zone Europe/Paris"),
    (pa.array(STAMPS, pa.timestamp("us")), {"use_deprecated_int96_timestamps": True}, "timestamptz", "INT96"),
    (pa.array([1], pa.int8()), {}, "int", "8-bit integers"),
    (pa.array([1], pa.int16()), {}, "int", "16-bit integers"),
    (pa.array([1], pa.uint32()), {}, "long", "unsigned 32-bit"),
    (pa.array([1], pa.uint64()), {}, "long", "unsigned 64-bit"),
    (pa.array([b"ab"], pa.binary(2)), {}, "fixed[2]", "fixed-length binary"),
    (pa.array([dt.time(1, 2)], pa.time64("us")), {}, "", "Time"),
    (pa.array([1.5], pa.float32()).cast(pa.float16()), {}, "", "Float16"),
])
def test_each_parquet_type_reads_as_its_iceberg_type_or_names_its_problem(values: pa.Array, options: dict[str, Any],
                                                                          kind: str, problem: str) -> None:
    found = column(pa.table({"c": values}), **options)
    assert found.kind == kind
    assert problem in found.problem if problem else found.problem == ""


def test_nested_columns_keep_their_structure_nullability_and_problems() -> None:
    table = pa.table({
        "point": pa.array([{"x": 1, "y": 2}], pa.struct([("x", pa.int64()), pa.field("y", pa.uint8())])),
        "tags": pa.array([["a"]], pa.list_(pa.string())),
        "attrs": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
    })
    point, tags, attrs = footer_of(table).columns
    assert (point.kind, [c.kind for c in point.children]) == ("struct", ["long", "long"])
    assert (tags.kind, tags.children[0].kind) == ("list", "string")
    assert (attrs.kind, [(c.kind, c.nullable) for c in attrs.children]) == ("map", [("string", False), ("long", True)])
    assert first_problem(footer_of(table).columns) == \
        "column point.y: unsigned 8-bit integers (the table would need a wider signed type)"


def schema(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "schema-id": 0, "fields": list(fields)}


def field(fid: int, name: str, kind: Any, required: bool = False) -> dict[str, Any]:
    return {"id": fid, "name": name, "required": required, "type": kind}


TABLE = schema(field(1, "id", "long"), field(2, "name", "string"), field(3, "price", "decimal(10,2)"))


def file_of(**columns: pa.Array) -> list[FileColumn]:
    return list(footer_of(pa.table(columns)).columns)


IDS = pa.array([1], pa.int64())
NAMES = pa.array(["a"])
PRICES = pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 2))


@pytest.mark.parametrize(("columns", "reason"), [
    (file_of(id=IDS, name=NAMES, price=PRICES), ""),
    (file_of(name=NAMES, price=PRICES, id=IDS), ""),  # the order does not matter: columns are mapped by name
    (file_of(id=pa.array([1], pa.int32()), name=NAMES, price=PRICES), ""),  # int -> long: readers promote
    (file_of(id=IDS, name=NAMES, price=pa.array([decimal.Decimal("1.5")], pa.decimal128(8, 2))), ""),
    (file_of(id=IDS, name=NAMES), "its columns are not the table's (missing price)"),
    (file_of(id=IDS, name=NAMES, price=PRICES, x=IDS), "its columns are not the table's (new x)"),
    (file_of(ID=IDS, name=NAMES, price=PRICES), "its columns are not the table's (missing id; new ID)"),
    (file_of(id=NAMES, name=NAMES, price=PRICES), "column id: string in the file, long in the table"),
    (file_of(id=IDS, name=NAMES, price=pa.array([decimal.Decimal("1.5")], pa.decimal128(12, 2))),
     "column price: decimal(12,2) in the file, decimal(10,2) in the table"),
    (file_of(id=IDS, name=NAMES, price=pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 3))),
     "column price: decimal(10,3) in the file, decimal(10,2) in the table"),
    (file_of(id=pa.array([1.0]), name=NAMES, price=PRICES), "column id: double in the file, long in the table"),
])
def test_a_file_fits_a_table_with_its_column_names_and_types_or_a_promotion(columns: list[FileColumn],
                                                                             reason: str) -> None:
    assert fit(columns, TABLE, 2) == (reason and f"{reason} (needs conversion)" if "column " in reason else reason)


def test_a_nullable_column_does_not_fit_a_required_one() -> None:
    table = schema(field(1, "id", "long", required=True))
    assert fit(file_of(id=IDS), table, 2) == "column id: may be null in the file, required in the table"
    required = footer_of(pa.table({"id": IDS}, schema=pa.schema([pa.field("id", pa.int64(), nullable=False)])))
    assert fit(required.columns, table, 2) == ""


def test_field_ids_in_the_file_must_be_the_tables() -> None:
    def with_id(fid: int) -> list[FileColumn]:
        return list(footer_of(pa.table({"id": IDS}, schema=pa.schema(
            [pa.field("id", pa.int64(), metadata={"PARQUET:field_id": str(fid)})]))).columns)

    table = schema(field(1, "id", "long"))
    assert fit(with_id(1), table, 2) == ""
    assert fit(with_id(7), table, 2) == ("column id: the file carries Parquet field id 7, the table's is 1 (readers "
                                         "trust a file's ids)")


def test_nested_types_are_compared_element_by_element() -> None:
    table = schema(field(1, "point", {"type": "struct", "fields": [field(4, "x", "long")]}),
                   field(2, "tags", {"type": "list", "element-id": 5, "element": "string", "element-required": False}),
                   field(3, "attrs", {"type": "map", "key-id": 6, "key": "string", "value-id": 7, "value": "long",
                                      "value-required": False}))
    good = file_of(point=pa.array([{"x": 1}]), tags=pa.array([["a"]]),
                   attrs=pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())))
    assert fit(good, table, 2) == ""
    bad = file_of(point=pa.array([{"x": "a"}]), tags=pa.array([["a"]]),
                  attrs=pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())))
    assert fit(bad, table, 2) == "column point.x: string in the file, long in the table (needs conversion)"
    keys = file_of(point=pa.array([{"x": 1}]), tags=pa.array([["a"]]),
                   attrs=pa.array([[(1, 1)]], pa.map_(pa.int32(), pa.int64())))
    assert fit(keys, table, 2) == "column attrs.key: int in the file, string in the table (needs conversion)"
    lists = file_of(point=pa.array([{"x": 1}]), tags=pa.array([[1]]),
                    attrs=pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())))
    assert fit(lists, table, 2) == "column tags.element: long in the file, string in the table (needs conversion)"


def test_nanosecond_timestamps_need_format_version_3() -> None:
    columns = file_of(ts=pa.array(STAMPS, pa.timestamp("ns")))
    assert fit(columns, schema(field(1, "ts", "timestamp_ns")), 3) == ""
    assert fit(columns, schema(field(1, "ts", "timestamp")), 2).startswith("column ts: nanosecond timestamps")
    assert nanosecond_problem(columns, 2).startswith("column ts: nanosecond timestamps (Iceberg stores them from")
    assert nanosecond_problem(columns, 3) == ""


def test_a_footer_that_cannot_be_trusted_is_named() -> None:
    good = bad_inputs.good_parquet(50)
    with pytest.raises(FooterError, match="magic number"):
        footer_length(bad_inputs.parquet_truncated())
    with pytest.raises(FooterError, match="encrypted"):
        footer_length(good[:-4] + b"PARE")
    cut = good[:20] + good[120:]  # a hundred bytes of data gone: the footer's chunks point past the data
    assert "outside the file's data" in footer_from(cut, len(cut)).problem
    assert footer_from(good, len(good)).problem == "" and footer_from(good, len(good)).rows == 50


def test_a_footer_the_parquet_reader_aborts_on_is_a_footer_error_not_a_dead_process() -> None:
    """pyarrow calls std::terminate on this damaged footer (tests/corruption.py, seed 24: "Definition level histogram
    size mismatch"); parsed in the isolation worker, it is a FooterError (the file is then rewritten, and the rewrite
    path names the damage) and this process lives on."""
    good = corruption.parquet_file("none")
    footers = [d for d in corruption.damaged("parquet", "none", good, 24, 3) if "-footer-" in d.case]
    # which of the seed's footer damages kills the reader, tried in a child process of its own (the offsets follow
    # the footer pyarrow writes: 4275 with pyarrow 20, 4281 with 26)
    [aborting] = [d for d in footers if _reader_exit(d.data) == -signal.SIGABRT]
    with pytest.raises(FooterError, match="SIGABRT"):
        footer_from(aborting.data, len(aborting.data))
    assert footer_from(good, len(good)).rows == 200  # and the next footer reads as before


def _reader_exit(data: bytes) -> int:
    """How a child process that reads the file's footer, every chunk's metadata too, ends."""
    code = ("import io, sys, pyarrow.parquet as pq; m = pq.ParquetFile(io.BytesIO(sys.stdin.buffer.read())).metadata; "
            "[m.row_group(g).column(c).to_dict() for g in range(m.num_row_groups) for c in range(m.num_columns)]")
    return subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=False).returncode


class Tails:
    """An object store that serves the tails of one object, recording each read."""

    def __init__(self, data: bytes) -> None:
        self.data, self.reads = data, []  # type: list[int]

    def read_tail(self, source: SourceObject, max_bytes: int) -> tuple[bytes, int]:
        self.reads.append(max_bytes)
        return self.data[-max_bytes:], len(self.data)


def test_a_footer_larger_than_the_first_read_is_read_again_exactly() -> None:
    wide = pa.table({f"column_{i:04}": pa.array([i], pa.int64()) for i in range(1500)})
    sink = io.BytesIO()
    pq.write_table(wide, sink)
    store = Tails(sink.getvalue())
    footer, size = read_footer(store, SourceObject("b", "k.parquet"))
    assert len(footer.columns) == 1500 and size == len(store.data)
    assert store.reads[0] == 64 * 1024 and store.reads[1] == footer_length(store.data) > store.reads[0]


DAY = 86_400_000_000


@pytest.mark.parametrize(("transform", "kind", "low", "high", "value"), [
    ("identity", "long", 7, 7, "7"),
    ("identity", "long", 7, 8, None),
    ("identity", "string", "eu", "eu", "eu"),
    ("identity", "boolean", True, True, "true"),
    ("identity", "date", 20_000, 20_000, "2024-10-04"),
    ("identity", "timestamp", 5, 5, None),  # not derived: rewritten
    ("day", "timestamp", 20_000 * DAY + 1, 20_000 * DAY + DAY - 1, "2024-10-04"),
    ("day", "timestamptz", 20_000 * DAY - 1, 20_000 * DAY, None),
    ("day", "timestamp", -1, -1, "1969-12-31"),
    ("hour", "timestamp", 3_600_000_000 * 5, 3_600_000_000 * 6 - 1, "5"),
    ("hour", "timestamp", -1, -1, "-1"),
    ("month", "date", 0, 30, "0"),
    ("month", "date", 0, 31, None),
    ("year", "timestamp", 0, 364 * DAY, "0"),
    ("year", "date", -1, -1, "-1"),
    ("hour", "date", 0, 0, None),
    ("truncate[10]", "long", 20, 29, "20"),
    ("truncate[10]", "int", -3, -1, "-10"),
    ("truncate[10]", "int", 9, 10, None),
    ("truncate[2]", "string", "abc", "abc", "ab"),
    ("truncate[2]", "string", "abc", "abd", None),
    ("bucket[4]", "long", 1, 1, None),
])
def test_a_partition_value_is_derived_only_when_the_bounds_lie_in_one_partition(
        transform: str, kind: str, low: Any, high: Any, value: str | None) -> None:
    assert derive(transform, kind, low, high) == value


def test_a_name_mapping_that_misses_a_column_or_its_name_is_found() -> None:
    from wap_ingest.adapters.engine.parquet_fit import mapping_gap

    table = schema(field(1, "id", "long"), field(2, "point", {"type": "struct", "fields": [field(4, "x", "long")]}),
                   field(3, "tags", {"type": "list", "element-id": 5, "element": "string", "element-required": False}))
    full = [{"field-id": 1, "names": ["id"]},
            {"field-id": 2, "names": ["point"], "fields": [{"field-id": 4, "names": ["x", "old_x"]}]},
            {"field-id": 3, "names": ["tags"], "fields": [{"field-id": 5, "names": ["element"]}]}]
    assert mapping_gap(full, table) == ""
    assert mapping_gap(full[:2], table).endswith("does not map column tags")
    renamed = [full[0] | {"names": ["identifier"]}, *full[1:]]
    assert mapping_gap(renamed, table).endswith("does not map column id")
    inner = [full[0], full[1] | {"fields": []}, full[2]]
    assert mapping_gap(inner, table).endswith("does not map column point.x")
