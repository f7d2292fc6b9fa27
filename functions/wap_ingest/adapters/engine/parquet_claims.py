"""Every claim a Parquet file makes about its own data, read from its bytes (the footer, each page header, the page
indexes), so the register path can check each one against the values it decodes (parquet_figures).

Readers of a table skip data by these claims: a row group by its chunks' statistics and dictionary encodings, a page
by the page index. A claim that is false hides rows from a query, so a file is registered as it is only when every
claim it makes is one the service checks and finds true. Which claims are checked (the allow list):
- the file's and each row group's row count; each chunk's value count, statistics (null and distinct counts, min and
  max in both the current and the deprecated fields, their exactness flags), encodings and encoding statistics;
- each page: its header (values, and a v2 page's nulls and rows; its statistics), and the pages exactly filling the
  chunk's bytes;
- the page index: the column index (null pages, min and max, null counts, boundary order, level histograms) and the
  offset index (each page's offset, size and first row);
- the size statistics' level histograms (their byte counts size a read and skip nothing: not checked).
Anything else a file may carry is refused with its name (`unchecked`): bloom filters, sort claims (a row group's
sorting columns, a sorted dictionary), index pages, column chunks in other files, encryption, unknown fields.
`read_claims` raises ThriftError when a structure is malformed (the file is then rewritten, never registered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, BinaryIO

from wap_ingest.adapters.formats import Struct, ThriftError, read_struct

DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3
PHYSICAL = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
HEADER_WINDOW = 4 * 1024  # the first read of a page header; a larger header (long statistics) is read again whole
MAX_HEADER_BYTES = 16 * 1024 * 1024

# The fields of each structure the service knows the meaning of; any other one is a claim it does not check.
_KNOWN = {
    "file": {1, 2, 3, 4, 5, 6, 7},
    "row group": {1, 2, 3, 5, 6, 7},
    "column chunk": {2, 3, 4, 5, 6, 7},
    "column metadata": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16},
    "statistics": {1, 2, 3, 4, 5, 6, 7, 8},
    "page header": {1, 2, 3, 4, 5, 7, 8},
    "data page header": {1, 2, 3, 4, 5},
    "data page v2 header": {1, 2, 3, 4, 5, 6, 7, 8},
    "dictionary page header": {1, 2, 3},
    "column index": {1, 2, 3, 4, 5, 6, 7},
    "offset index": {1, 2},
    "size statistics": {1, 2, 3},
}
_NAMED = {("row group", 4): "sorting columns (a claim that its rows are sorted)",
          ("column chunk", 1): "a column chunk stored in another file", ("column chunk", 8): "encryption",
          ("column chunk", 9): "encryption", ("column metadata", 14): "a bloom filter",
          ("column metadata", 15): "a bloom filter", ("column metadata", 17): "geospatial statistics",
          ("file", 8): "encryption", ("file", 9): "encryption", ("page header", 6): "an index page"}


@dataclass(frozen=True)
class StatsClaim:
    """A Statistics structure: counts, and bounds as the plain-encoded bytes of the column's physical type."""

    nulls: int | None = None
    distinct: int | None = None
    low: bytes | None = None  # min_value
    high: bytes | None = None  # max_value
    old_low: bytes | None = None  # the deprecated min and max (signed comparison in old writers)
    old_high: bytes | None = None
    low_exact: bool | None = None
    high_exact: bool | None = None


@dataclass(frozen=True)
class PageClaim:
    offset: int  # of its header
    length: int  # header and body
    kind: int
    encoding: int | None = None
    values: int = 0  # level entries (data pages), dictionary entries (a dictionary page)
    nulls: int | None = None  # a v2 page's
    rows: int | None = None  # a v2 page's
    stats: StatsClaim | None = None


@dataclass(frozen=True)
class ColumnIndexClaim:
    null_pages: list[bool]
    lows: list[bytes]
    highs: list[bytes]
    order: int  # 0 unordered, 1 ascending, 2 descending
    nulls: list[int] | None
    repetition_histograms: list[int] | None
    definition_histograms: list[int] | None


@dataclass(frozen=True)
class ChunkClaims:
    path: str
    physical: str
    values: int
    encodings: frozenset[int]
    encoding_stats: tuple[tuple[int, int, int], ...] | None  # (page type, encoding, count)
    stats: StatsClaim | None
    pages: tuple[PageClaim, ...]
    start: int  # the chunk's first byte (its dictionary page, else its first data page)
    compressed: int
    repetition_histogram: list[int] | None = None
    definition_histogram: list[int] | None = None
    column_index: ColumnIndexClaim | None = None
    offset_index: tuple[tuple[int, int, int], ...] | None = None  # (offset, compressed size, first row)

    @property
    def data_pages(self) -> tuple[PageClaim, ...]:
        return tuple(p for p in self.pages if p.kind in (DATA_PAGE, DATA_PAGE_V2))


@dataclass(frozen=True)
class GroupClaims:
    rows: int
    chunks: tuple[ChunkClaims, ...]


@dataclass(frozen=True)
class FileClaims:
    rows: int
    groups: tuple[GroupClaims, ...]
    unchecked: tuple[str, ...] = field(default=())  # claims the service does not check (the file is rewritten)


def read_claims(file: BinaryIO, size: int, footer: bytes) -> FileClaims:
    """The claims of the Parquet file open as `file` (`size` bytes), whose footer (its Thrift FileMetaData) is
    `footer`. Raises ThriftError for a malformed structure, and for pages that do not exactly fill their chunk."""
    metadata, _ = read_struct(footer)
    unchecked: list[str] = []
    _allow(metadata, "file", "", unchecked)
    groups = []
    for number, group in enumerate(_structs(metadata, 4)):
        _allow(group, "row group", f"row group {number}", unchecked)
        chunks = tuple(_chunk(file, size, chunk, f"row group {number}", unchecked) for chunk in _structs(group, 1))
        groups.append(GroupClaims(_int(group, 3), chunks))
    return FileClaims(_int(metadata, 3), tuple(groups), tuple(dict.fromkeys(unchecked)))


def _chunk(file: BinaryIO, size: int, chunk: Struct, where: str, unchecked: list[str]) -> ChunkClaims:
    meta = chunk.get(3)
    if not isinstance(meta, Struct):
        raise ThriftError(f"a column chunk of {where} has no metadata")
    path = ".".join(p.decode("utf-8", "replace") if isinstance(p, bytes) else str(p) for p in _list(meta, 3))
    _allow(chunk, "column chunk", f"column {path}", unchecked)
    _allow(meta, "column metadata", f"column {path}", unchecked)
    physical = _int(meta, 1)
    if not 0 <= physical < len(PHYSICAL):
        raise ThriftError(f"column {path}: unknown physical type {physical}")
    data, dictionary = _int(meta, 9), meta.get(11)
    start = dictionary if isinstance(dictionary, int) and 0 < dictionary < data else data
    compressed = _int(meta, 7)
    if start < 4 or compressed < 0 or start + compressed > size:
        raise ThriftError(f"column {path} of {where}: its bytes lie outside the file")
    sizes = meta.get(16)
    if isinstance(sizes, Struct):
        _allow(sizes, "size statistics", f"column {path}", unchecked)
    encoding_stats = meta.get(13)
    stats = meta.get(12)
    return ChunkClaims(
        path=path, physical=PHYSICAL[physical], values=_int(meta, 5),
        encodings=frozenset(int(e) for e in _list(meta, 2)),
        encoding_stats=None if encoding_stats is None else tuple(
            (_int(s, 1), _int(s, 2), _int(s, 3)) for s in _structs(meta, 13)),
        stats=_stats(stats, f"column {path}", unchecked) if isinstance(stats, Struct) else None,
        pages=_pages(file, start, compressed, f"column {path} of {where}", unchecked), start=start,
        compressed=compressed,
        repetition_histogram=_ints(sizes.get(2)) if isinstance(sizes, Struct) else None,
        definition_histogram=_ints(sizes.get(3)) if isinstance(sizes, Struct) else None,
        column_index=_column_index(file, size, chunk, path, unchecked),
        offset_index=_offset_index(file, size, chunk, path, unchecked))


def _pages(file: BinaryIO, start: int, length: int, where: str, unchecked: list[str]) -> tuple[PageClaim, ...]:
    """The pages of a chunk, walked header by header: they must fill its bytes exactly."""
    pages, position, end = [], start, start + length
    while position < end:
        header, header_length = _header(file, position, end, where)
        body = _int(header, 3)
        if body < 0 or position + header_length + body > end:
            raise ThriftError(f"{where}: the page at byte {position} runs past the chunk's end")
        _allow(header, "page header", where, unchecked)
        kind = _int(header, 1)
        page = PageClaim(position, header_length + body, kind)
        if kind == DATA_PAGE:
            data = _struct(header, 5, where)
            _allow(data, "data page header", where, unchecked)
            page = PageClaim(position, page.length, kind, _int(data, 2), _int(data, 1),
                             stats=_stats(data.get(5), where, unchecked))
        elif kind == DATA_PAGE_V2:
            data = _struct(header, 8, where)
            _allow(data, "data page v2 header", where, unchecked)
            page = PageClaim(position, page.length, kind, _int(data, 4), _int(data, 1), _int(data, 2),
                             _int(data, 3), _stats(data.get(8), where, unchecked))
        elif kind == DICTIONARY_PAGE:
            data = _struct(header, 7, where)
            _allow(data, "dictionary page header", where, unchecked)
            if data.get(3):
                unchecked.append(f"a sorted dictionary ({where})")
            page = PageClaim(position, page.length, kind, _int(data, 2), _int(data, 1))
        else:
            unchecked.append(f"a page of type {kind} ({where})")
        pages.append(page)
        position += page.length
    return tuple(pages)


def _header(file: BinaryIO, position: int, end: int, where: str) -> tuple[Struct, int]:
    window = HEADER_WINDOW
    while True:
        file.seek(position)
        data = file.read(min(window, end - position))
        try:
            header, length = read_struct(data)
            return header, length
        except ThriftError:
            if len(data) < min(window, end - position) or window >= min(MAX_HEADER_BYTES, end - position):
                raise
            window *= 4


def _stats(stats: object, where: str, unchecked: list[str]) -> StatsClaim | None:
    if not isinstance(stats, Struct):
        return None
    _allow(stats, "statistics", where, unchecked)
    return StatsClaim(nulls=_opt_int(stats, 3), distinct=_opt_int(stats, 4), low=_bytes(stats, 6),
                      high=_bytes(stats, 5), old_low=_bytes(stats, 2), old_high=_bytes(stats, 1),
                      low_exact=_opt_bool(stats, 8), high_exact=_opt_bool(stats, 7))


def _column_index(file: BinaryIO, size: int, chunk: Struct, path: str,
                  unchecked: list[str]) -> ColumnIndexClaim | None:
    found = _indexed(file, size, chunk, 6, 7, path)
    if found is None:
        return None
    _allow(found, "column index", f"the column index of {path}", unchecked)
    return ColumnIndexClaim(null_pages=[bool(v) for v in _list(found, 1)],
                            lows=[bytes(v) for v in _list(found, 2)], highs=[bytes(v) for v in _list(found, 3)],
                            order=_int(found, 4), nulls=_ints(found.get(5)),
                            repetition_histograms=_ints(found.get(6)), definition_histograms=_ints(found.get(7)))


def _offset_index(file: BinaryIO, size: int, chunk: Struct, path: str,
                  unchecked: list[str]) -> tuple[tuple[int, int, int], ...] | None:
    found = _indexed(file, size, chunk, 4, 5, path)
    if found is None:
        return None
    _allow(found, "offset index", f"the offset index of {path}", unchecked)
    return tuple((_int(p, 1), _int(p, 2), _int(p, 3)) for p in _structs(found, 1))


def _indexed(file: BinaryIO, size: int, chunk: Struct, at: int, length_at: int, path: str) -> Struct | None:
    offset, length = chunk.get(at), chunk.get(length_at)
    if offset is None:
        return None
    if not isinstance(offset, int) or not isinstance(length, int) or offset < 4 or length < 0 or \
            offset + length > size:
        raise ThriftError(f"column {path}: its page index lies outside the file")
    file.seek(offset)
    found, used = read_struct(file.read(length))
    if used != length:
        raise ThriftError(f"column {path}: its page index is {used} bytes, the footer says {length}")
    return found


def _allow(found: Struct, kind: str, where: str, unchecked: list[str]) -> None:
    for field_id in found.fields:
        if field_id not in _KNOWN[kind]:
            what = _NAMED.get((kind, field_id), f"field {field_id} of a {kind}")
            unchecked.append(f"{what} ({where})" if where else what)


def _struct(found: Struct, field_id: int, where: str) -> Struct:
    value = found.get(field_id)
    if not isinstance(value, Struct):
        raise ThriftError(f"{where}: a page header lacks its {field_id}th field")
    return value


def _list(found: Struct, field_id: int) -> list[Any]:
    value = found.get(field_id, [])
    if not isinstance(value, list):
        raise ThriftError(f"field {field_id} is not a list")
    return value


def _structs(found: Struct, field_id: int) -> list[Struct]:
    items = _list(found, field_id)
    if not all(isinstance(item, Struct) for item in items):
        raise ThriftError(f"field {field_id} is not a list of structures")
    return items


def _int(found: Struct, field_id: int) -> int:
    value = found.get(field_id)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ThriftError(f"field {field_id} is missing or not an integer")
    return value


def _opt_int(found: Struct, field_id: int) -> int | None:
    return None if field_id not in found else _int(found, field_id)


def _opt_bool(found: Struct, field_id: int) -> bool | None:
    value = found.get(field_id)
    return None if value is None else bool(value)


def _bytes(found: Struct, field_id: int) -> bytes | None:
    value = found.get(field_id)
    if value is None or isinstance(value, bytes):
        return value
    raise ThriftError(f"field {field_id} is not binary")


def _ints(value: object) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ThriftError("a list of integers holds something else")
    return [int(v) for v in value]
