"""Parquet files whose own claims lie about their pages (issue 33): a real file written by pyarrow, its footer (the
Thrift FileMetaData) decoded, one claim changed, and encoded again, so the pages are untouched and only what the
file says about them is false. Nothing here uses the service's reader of the same structures
(adapters/formats/thrift_compact.py): a typed codec of Thrift's compact protocol of its own, enough to rewrite a footer.

`lie(data, edit)` returns the file with `edit(footer)` applied to its decoded footer; the helpers below name the
fields of Parquet's structures (parquet.thrift) that the tests change.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


@dataclass
class TStruct:
    """Fields by id: (compact type, value); a value of a list is (element type, [values])."""

    fields: dict[int, tuple[int, Any]] = field(default_factory=dict)

    def __getitem__(self, field_id: int) -> Any:
        return self.fields[field_id][1]

    def set(self, field_id: int, kind: int, value: Any) -> None:
        self.fields[field_id] = (kind, value)

    def drop(self, field_id: int) -> None:
        self.fields.pop(field_id, None)


# --- decoding ----------------------------------------------------------------------------------------------------

def decode(data: bytes) -> TStruct:
    found, _ = _struct(data, 0)
    return found


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    value, pos = _varint(data, pos)
    return (value >> 1) ^ -(value & 1), pos


def _value(data: bytes, pos: int, kind: int) -> tuple[Any, int]:
    if kind in (TRUE, FALSE):
        return data[pos] == TRUE, pos + 1
    if kind == BYTE:
        return struct.unpack("b", data[pos:pos + 1])[0], pos + 1
    if kind in (I16, I32, I64):
        return _zigzag(data, pos)
    if kind == DOUBLE:
        return struct.unpack("<d", data[pos:pos + 8])[0], pos + 8
    if kind == BINARY:
        length, pos = _varint(data, pos)
        return data[pos:pos + length], pos + length
    if kind in (LIST, SET):
        header = data[pos]
        pos += 1
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        items = []
        for _ in range(size):
            item, pos = _value(data, pos, element)
            items.append(item)
        return (element, items), pos
    if kind == STRUCT:
        return _struct(data, pos)
    raise ValueError(f"compact type {kind} is not supported here")


def _struct(data: bytes, pos: int) -> tuple[TStruct, int]:
    found, last = TStruct(), 0
    while True:
        header = data[pos]
        pos += 1
        kind = header & 0x0F
        if kind == STOP:
            return found, pos
        if header >> 4:
            last += header >> 4
        else:
            last, pos = _zigzag(data, pos)
        if kind in (TRUE, FALSE):
            found.set(last, TRUE, kind == TRUE)
        else:
            value, pos = _value(data, pos, kind)
            found.set(last, kind, value)


# --- encoding ----------------------------------------------------------------------------------------------------

def encode(value: TStruct) -> bytes:
    out = io.BytesIO()
    _write_struct(out, value)
    return out.getvalue()


def _write_varint(out: io.BytesIO, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.write(bytes([byte | 0x80]))
        else:
            out.write(bytes([byte]))
            return


def _write_zigzag(out: io.BytesIO, value: int) -> None:
    _write_varint(out, (value << 1) ^ (value >> 63))


def _write_value(out: io.BytesIO, kind: int, value: Any) -> None:
    if kind in (TRUE, FALSE):
        out.write(bytes([TRUE if value else FALSE]))
    elif kind == BYTE:
        out.write(struct.pack("b", value))
    elif kind in (I16, I32, I64):
        _write_zigzag(out, value)
    elif kind == DOUBLE:
        out.write(struct.pack("<d", value))
    elif kind == BINARY:
        _write_varint(out, len(value))
        out.write(value)
    elif kind in (LIST, SET):
        element, items = value
        if len(items) < 15:
            out.write(bytes([(len(items) << 4) | element]))
        else:
            out.write(bytes([0xF0 | element]))
            _write_varint(out, len(items))
        for item in items:
            _write_value(out, element, item)
    elif kind == STRUCT:
        _write_struct(out, value)
    else:
        raise ValueError(f"compact type {kind} is not supported here")


def _write_struct(out: io.BytesIO, value: TStruct) -> None:
    last = 0
    for field_id in sorted(value.fields):
        kind, item = value.fields[field_id]
        wire = (TRUE if item else FALSE) if kind in (TRUE, FALSE) else kind
        delta = field_id - last
        if 0 < delta <= 15:
            out.write(bytes([(delta << 4) | wire]))
        else:
            out.write(bytes([wire]))
            _write_zigzag(out, field_id)
        if kind not in (TRUE, FALSE):
            _write_value(out, kind, item)
        last = field_id
    out.write(bytes([STOP]))


# --- Parquet files and their footers -----------------------------------------------------------------------------

def parquet_bytes(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def footer_of(data: bytes) -> TStruct:
    length = int.from_bytes(data[-8:-4], "little")
    return decode(data[-8 - length:-8])


def lie(data: bytes, edit: Callable[[TStruct], None]) -> bytes:
    """The file with its footer decoded, `edit`ed and encoded again (its pages untouched)."""
    length = int.from_bytes(data[-8:-4], "little")
    footer = decode(data[-8 - length:-8])
    edit(footer)
    raw = encode(footer)
    return data[:-8 - length] + raw + len(raw).to_bytes(4, "little") + b"PAR1"


def row_groups(footer: TStruct) -> list[TStruct]:
    return list(footer[4][1])


def chunk_metadata(footer: TStruct, group: int, column: str) -> TStruct:
    """The ColumnMetaData of the leaf `column` (its path, dotted) in row group `group`."""
    for chunk in row_groups(footer)[group][1][1]:
        meta = chunk[3]
        if ".".join(p.decode() for p in meta[3][1]) == column:
            return meta
    raise KeyError(column)


def statistics(footer: TStruct, group: int, column: str) -> TStruct:
    return chunk_metadata(footer, group, column)[12]


def set_null_count(group: int, column: str, count: int) -> Callable[[TStruct], None]:
    return lambda footer: statistics(footer, group, column).set(3, I64, count)


def set_bounds(group: int, column: str, low: bytes | None = None, high: bytes | None = None,
               deprecated: bool = False, exact: bool | None = None) -> Callable[[TStruct], None]:
    """min_value/max_value (or the deprecated min/max) of a chunk, as plain-encoded bytes; with `exact`, the bound's
    is_min_value_exact/is_max_value_exact too (pyarrow 21+ writes them, true for every bound it does not cut)."""
    def edit(footer: TStruct) -> None:
        stats = statistics(footer, group, column)
        if low is not None:
            stats.set(2 if deprecated else 6, BINARY, low)
            if exact is not None:
                stats.set(8, TRUE, exact)
        if high is not None:
            stats.set(1 if deprecated else 5, BINARY, high)
            if exact is not None:
                stats.set(7, TRUE, exact)
    return edit


def drop_statistics(group: int, column: str) -> Callable[[TStruct], None]:
    return lambda footer: chunk_metadata(footer, group, column).drop(12)


def set_file_rows(rows: int) -> Callable[[TStruct], None]:
    return lambda footer: footer.set(3, I64, rows)


def set_group_rows(group: int, rows: int) -> Callable[[TStruct], None]:
    return lambda footer: row_groups(footer)[group].set(3, I64, rows)


def set_num_values(group: int, column: str, values: int) -> Callable[[TStruct], None]:
    return lambda footer: chunk_metadata(footer, group, column).set(5, I64, values)


def set_encodings(group: int, column: str, encodings: list[int]) -> Callable[[TStruct], None]:
    return lambda footer: chunk_metadata(footer, group, column).set(2, LIST, (I32, encodings))


def add_bloom_filter(group: int, column: str) -> Callable[[TStruct], None]:
    """A bloom filter offset (field 14) pointing at the file's first bytes: a claim the service does not check."""
    return lambda footer: chunk_metadata(footer, group, column).set(14, I64, 4)


def int64(value: int) -> bytes:
    return struct.pack("<q", value)


def double(value: float) -> bytes:
    return struct.pack("<d", value)


# --- structures inside the file (page headers, page indexes): rewritten in place, at the same length -------------

def edit_struct_at(data: bytes, offset: int, edit: Callable[[TStruct], None]) -> bytes:
    """The file with the Thrift struct at `offset` decoded, `edit`ed and encoded again; its encoded length must not
    change (nothing after it moves), which the tests choose their lies for."""
    found, end = _struct(data, offset)
    edit(found)
    raw = encode(found)
    if len(raw) != end - offset:
        raise ValueError(f"the edited struct is {len(raw)} bytes, it was {end - offset}: choose another lie")
    return data[:offset] + raw + data[end:]


def column_chunk(footer: TStruct, group: int, column: str) -> TStruct:
    for chunk in row_groups(footer)[group][1][1]:
        if ".".join(p.decode() for p in chunk[3][3][1]) == column:
            return chunk
    raise KeyError(column)


def edit_column_index(data: bytes, group: int, column: str, edit: Callable[[TStruct], None]) -> bytes:
    """ColumnIndex fields: 1 null_pages (list<bool>), 2 min_values, 3 max_values (list<binary>), 4 boundary_order,
    5 null_counts (list<i64>)."""
    return edit_struct_at(data, column_chunk(footer_of(data), group, column)[6], edit)


def edit_offset_index(data: bytes, group: int, column: str, edit: Callable[[TStruct], None]) -> bytes:
    """OffsetIndex field 1: page_locations, each {1 offset, 2 compressed_page_size, 3 first_row_index}."""
    return edit_struct_at(data, column_chunk(footer_of(data), group, column)[4], edit)


def edit_first_data_page(data: bytes, group: int, column: str, edit: Callable[[TStruct], None]) -> bytes:
    """PageHeader: 1 type, 2 uncompressed size, 3 compressed size, 5 DataPageHeader {1 num_values, 2 encoding, 5
    statistics}, 8 DataPageHeaderV2 {1 num_values, 2 num_nulls, 3 num_rows, 4 encoding, 8 statistics}."""
    return edit_struct_at(data, chunk_metadata(footer_of(data), group, column)[9], edit)
