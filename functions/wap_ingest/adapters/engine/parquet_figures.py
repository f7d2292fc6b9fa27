"""Figures measured on decoded Parquet values (pyarrow; in the isolation worker), in two forms:
- `Figures.low`/`high`: the column's logical values (a Decimal, a datetime, a str), for the table's metrics;
- `Figures.low_key`/`high_key`: the same bounds in the order of the column's physical type (an unscaled decimal, a
  timestamp in its file's unit, a string's UTF-8 bytes), compared with a claim's plain-encoded bytes (`claimed`).
Bounds leave out nulls and NaNs, as Parquet's and Iceberg's do; NaNs are counted apart.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_EXACT = Context(prec=100)


class UncheckableError(ValueError):
    """A claim the service cannot compare with the values (the file is rewritten, never registered)."""


@dataclass
class Figures:
    """What was measured over some entries of one leaf column."""

    values: int = 0  # entries, with and without a value
    nulls: int = 0  # entries without a value
    nans: int = 0
    low_key: Any = None
    high_key: Any = None
    low: Any = None
    high: Any = None
    distinct: int | None = None  # measured only when a claim states it
    rows: int = 0  # top-level rows that start in these entries
    pieces: int = 0  # parts it was measured in (a distinct count is only whole in one)

    def add(self, other: Figures) -> None:
        self.distinct = other.distinct if self.pieces == 0 else None  # distinct counts do not add up
        self.values += other.values
        self.nulls += other.nulls
        self.nans += other.nans
        self.rows += other.rows
        self.pieces += other.pieces
        if other.low_key is not None and (self.low_key is None or other.low_key < self.low_key):
            self.low_key, self.low = other.low_key, other.low
        if other.high_key is not None and (self.high_key is None or other.high_key > self.high_key):
            self.high_key, self.high = other.high_key, other.high

    @property
    def valued(self) -> int:
        """Entries with a value other than NaN (those bounds are over)."""
        return self.values - self.nulls - self.nans


@dataclass(frozen=True)
class KeyKind:
    """How a leaf's values are compared in its physical order: "int", "float", "bool", "utf8", "bytes", "decimal"
    (unscaled), "int-cast" (temporal values as their stored integers), "none" (only nulls), or "unsupported"."""

    name: str
    scale: int = 0
    storage: Any = None  # the integer type temporal values are stored as


def key_kind(kind: pa.DataType) -> KeyKind:
    if pa.types.is_dictionary(kind):
        return key_kind(kind.value_type)
    if pa.types.is_boolean(kind):
        return KeyKind("bool")
    if pa.types.is_signed_integer(kind):
        return KeyKind("int")
    if pa.types.is_floating(kind) and not pa.types.is_float16(kind):
        return KeyKind("float")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return KeyKind("utf8")
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return KeyKind("bytes")
    if pa.types.is_decimal(kind):
        return KeyKind("decimal", kind.scale)
    if pa.types.is_date32(kind) or pa.types.is_time32(kind):
        return KeyKind("int-cast", storage=pa.int32())
    if pa.types.is_timestamp(kind) or pa.types.is_time64(kind):
        return KeyKind("int-cast", storage=pa.int64())
    if pa.types.is_null(kind):
        return KeyKind("none")
    return KeyKind("unsupported")


def measure(entries: pa.Array, kind: KeyKind, *, distinct: bool = False) -> Figures:
    """The figures of `entries` (one leaf's entries: nulls where an entry has no value)."""
    found = Figures(values=len(entries), nulls=entries.null_count, pieces=1)
    if kind.name in ("none", "unsupported") or found.values == found.nulls:
        found.distinct = 0 if distinct and found.values == found.nulls else None
        return found
    if pa.types.is_dictionary(entries.type):  # the values its entries use: as exact, and far fewer to compare
        used = pc.unique(entries.indices).drop_null()
        entries = entries.dictionary.take(used)
        if distinct:
            found.distinct = len(entries)
        distinct = False
    if kind.name == "float":
        found.nans = int(pc.sum(pc.is_nan(entries)).as_py() or 0)
    if found.valued > 0:
        bounds = pc.min_max(entries).as_py()
        found.low, found.high = bounds["min"], bounds["max"]
        if kind.name == "int-cast":
            stored = pc.min_max(entries.cast(kind.storage)).as_py()
            found.low_key, found.high_key = stored["min"], stored["max"]
        else:
            found.low_key, found.high_key = key_of(found.low, kind), key_of(found.high, kind)
    if distinct:
        found.distinct = int(pc.count_distinct(entries, mode="only_valid").as_py())
    return found


def key_of(value: Any, kind: KeyKind) -> Any:
    """A measured (logical) value in its physical order."""
    if kind.name == "utf8":
        return str(value).encode("utf-8")
    if kind.name == "decimal":
        return int(Decimal(value).scaleb(kind.scale, context=_EXACT))
    if kind.name == "float":
        return float(value)
    return value


def claimed(data: bytes, physical: str, kind: KeyKind) -> Any:
    """A claim's plain-encoded bound as a key comparable with `key_of` (raises UncheckableError)."""
    if kind.name in ("unsupported", "none"):
        raise UncheckableError("its type's statistics are not checked")
    layouts = {"INT32": "<i", "INT64": "<q", "FLOAT": "<f", "DOUBLE": "<d"}
    if physical in layouts:
        if len(data) != struct.calcsize(layouts[physical]):
            raise UncheckableError(f"a {physical} bound of {len(data)} bytes")
        return struct.unpack(layouts[physical], data)[0]
    if physical == "BOOLEAN":
        if len(data) != 1:
            raise UncheckableError(f"a BOOLEAN bound of {len(data)} bytes")
        return data != b"\x00"
    if physical in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
        if kind.name == "decimal":
            return int.from_bytes(data, "big", signed=True)
        if kind.name in ("utf8", "bytes"):
            return bytes(data)
    raise UncheckableError(f"{physical} bounds of a {kind.name} column are not checked")


def bounds_problem(low: bytes | None, high: bytes | None, measured: Figures, physical: str,
                   kind: KeyKind) -> str:
    """Why the claimed bounds are false for the measured values, or ""; a missing bound claims nothing. Raises
    UncheckableError for bounds it cannot read."""
    problems = []
    for data, key, word in ((low, measured.low_key, "min"), (high, measured.high_key, "max")):
        if data is None:
            continue
        value = claimed(data, physical, kind)
        if isinstance(value, float) and math.isnan(value):
            problems.append(f"{word} NaN")
        elif key is not None and not (value <= key if word == "min" else value >= key):
            problems.append(f"{word} {_shown(value)}, measured {_shown(key)}")
    return ", ".join(problems)


def _shown(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return value[:24].hex() + ("..." if len(value) > 24 else "")
        return repr(text if len(text) <= 40 else text[:37] + "...")
    return repr(value)
