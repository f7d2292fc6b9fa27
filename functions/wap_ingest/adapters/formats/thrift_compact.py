"""A reader of Thrift's compact protocol, for Parquet's own structures (its footer, page headers, page indexes).

pyarrow shows a Parquet footer only in part: not a column chunk's bloom filter, page index or encoding statistics,
nor a page header. The register path must see every claim a file makes about its data (readers of the table skip
data by them), so it reads the structures itself: `read_struct` turns the compact-protocol struct at an offset into a
`Struct` (field id -> value: an int, float, bool, bytes, a list, or a nested Struct), with the offset just past it.
The bytes are hostile: every length is checked against the bytes left, nesting is bounded, and any malformed input
raises ThriftError (never an IndexError, never a loop without end, never an allocation the input alone sizes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 24
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTEGERS = (BYTE, I16, I32, I64)


class ThriftError(ValueError):
    """The bytes are not a well-formed compact-protocol struct."""


@dataclass
class Struct:
    """One struct's fields by id (a field absent from the bytes is absent here)."""

    fields: dict[int, Any] = field(default_factory=dict)

    def get(self, field_id: int, default: Any = None) -> Any:
        return self.fields.get(field_id, default)

    def __contains__(self, field_id: int) -> bool:
        return field_id in self.fields


def read_struct(data: bytes | memoryview, offset: int = 0) -> tuple[Struct, int]:
    """The struct at `offset` of `data`, and the offset of the first byte after it."""
    reader = _Reader(bytes(data) if isinstance(data, memoryview) else data, offset)
    found = reader.struct(0)
    return found, reader.position


def _past_end(position: int) -> ThriftError:
    return ThriftError(f"the struct runs past the end of the bytes (at byte {position})")


class _Reader:
    """The hot paths (a byte, a varint, a struct's field header) index the bytes in place: a Parquet file's page
    headers are thousands of small structs, read on the register path while its pages are decoded."""

    def __init__(self, data: bytes, position: int) -> None:
        if not 0 <= position <= len(data):
            raise ThriftError(f"offset {position} is outside the {len(data)} bytes")
        self.data, self.position, self.end = data, position, len(data)

    def byte(self) -> int:
        position = self.position
        if position >= self.end:
            raise _past_end(position)
        self.position = position + 1
        return self.data[position]

    def take(self, count: int) -> bytes:
        if count < 0 or count > self.end - self.position:
            raise ThriftError(f"{count} bytes wanted at byte {self.position}, {self.end - self.position} left")
        start, self.position = self.position, self.position + count
        return self.data[start:self.position]

    def varint(self) -> int:
        data, position, end = self.data, self.position, self.end
        value = shift = 0
        while True:
            if position >= end:
                raise _past_end(position)
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.position = position
                return value
            shift += 7
            if shift > 63:
                raise ThriftError(f"a varint longer than 10 bytes at byte {position}")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def value(self, kind: int, depth: int) -> Any:
        if kind in (TRUE, FALSE):  # a bool inside a list: one byte of its own
            return self.byte() == TRUE
        if kind in _INTEGERS:
            return self.zigzag() if kind != BYTE else struct.unpack("b", self.take(1))[0]
        if kind == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            return self.sequence(depth + 1)
        if kind == MAP:
            return self.mapping(depth + 1)
        if kind == STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown compact type {kind} at byte {self.position}")

    def sequence(self, depth: int) -> list[Any]:
        self.deeper(depth)
        header = self.byte()
        size, kind = header >> 4, header & 0x0F
        if size == 15:
            size = self.varint()
        if size > self.end - self.position:  # every element takes a byte at least
            raise ThriftError(f"a list of {size} elements at byte {self.position} is longer than the bytes left")
        return [self.value(kind, depth) for _ in range(size)]

    def mapping(self, depth: int) -> dict[Any, Any]:
        self.deeper(depth)
        size = self.varint()
        if size == 0:
            return {}
        if 2 * size > self.end - self.position:
            raise ThriftError(f"a map of {size} entries at byte {self.position} is longer than the bytes left")
        kinds = self.byte()
        found: dict[Any, Any] = {}
        for _ in range(size):
            key = self.value(kinds >> 4, depth)
            found[key if not isinstance(key, list | dict | Struct) else repr(key)] = self.value(kinds & 0x0F, depth)
        return found

    def struct(self, depth: int) -> Struct:
        self.deeper(depth)
        fields: dict[int, Any] = {}
        data, end, last = self.data, self.end, 0
        while True:
            position = self.position
            if position >= end:
                raise _past_end(position)
            header = data[position]
            self.position = position + 1
            kind = header & 0x0F
            if kind == STOP:
                return Struct(fields)
            delta = header >> 4
            last = last + delta if delta else self.zigzag()
            if kind in (TRUE, FALSE):
                fields[last] = kind == TRUE
            elif kind in (I32, I64, I16):
                fields[last] = self.zigzag()
            else:
                fields[last] = self.value(kind, depth)

    @staticmethod
    def deeper(depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ThriftError(f"structures nested more than {MAX_DEPTH} deep")
