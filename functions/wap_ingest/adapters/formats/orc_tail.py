"""An ORC file's tail, read in Python: what weighing it (adapters/formats/weights.py) and checking it before the engine
reads it (adapters/engine/columnar_checks.py) need.

The tail is `[metadata][footer][postscript][1 byte: the postscript's length]`. The postscript is plain protobuf: the
footer's and metadata's lengths, the codec and its compression block. The footer is protobuf compressed with that
codec in ORC's chunks (adapters/formats/orc_codecs.py): the types of the columns (column 0 is the root struct), the
number of rows, the stripes (offset, index, data and footer lengths, rows) and per-column statistics (how many values;
for strings and binary, their total length). `Footer.decoded_bytes` estimates what the rows decode to from them,
conservatively: each value at its type's fixed width (an 8-byte long, a 12-byte timestamp, a 16-byte decimal...),
each string or binary value as its bytes (the statistics' sum) plus a 4-byte length, a list or map value as a 4-byte
length. They are the writer's claims, as a Parquet footer's sizes are: a file that claims too little is read, and
stopped by the invocation's deadline and the engine's limits, not by its weight.
Anything that does not parse, or places a stripe outside the file, is a TailError (the caller names the object).
"""

from __future__ import annotations

from dataclasses import dataclass

from wap_ingest.adapters.formats.orc_codecs import CODECS, CodecError, inflate

MAX_BLOCK_BYTES = 64 * 1024 * 1024  # a compression block; ORC writers default to 256 KiB
MAX_FOOTER_BYTES = 16 * 1024 * 1024  # a footer, stored or decompressed (a few kB for most files)
MAGIC_BYTES = 3  # "ORC" at the start of the file
# bytes a decoded value takes, by ORC's Type.Kind: boolean, byte, short, int, long, float, double, (string, binary),
# timestamp, list, map, struct, union, decimal, date, (varchar, char), timestamp with local time zone
WIDTHS = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 4, 6: 8, 9: 12, 10: 4, 11: 4, 12: 0, 13: 1, 14: 16, 15: 4, 18: 12}
SIZED = frozenset({7, 8, 16, 17})  # string, binary, varchar, char: their bytes, from the statistics' sum
LENGTH_BYTES = 4  # a string's, binary's, list's or map's length, decoded


class TailError(ValueError):
    """The tail does not parse, or says what cannot be (its message says what)."""


@dataclass(frozen=True)
class Postscript:
    footer: int  # bytes of the footer, as stored
    metadata: int  # bytes of the stripe statistics before it
    length: int  # bytes of the postscript itself
    codec: str  # orc_codecs.CODECS's name
    block: int  # the compression block

    @property
    def footer_tail(self) -> int:
        """The bytes at the file's end that hold the footer and the postscript."""
        return self.footer + self.length + 1


@dataclass(frozen=True)
class Column:
    kind: int  # ORC's Type.Kind
    values: int | None  # values in the file (its statistics), None when not recorded
    total: int | None  # a string or binary column's bytes (its statistics' sum), None when not recorded


@dataclass(frozen=True)
class Footer:
    rows: int
    columns: tuple[Column, ...]
    stripes: int

    @property
    def decoded_bytes(self) -> int:
        total = 0
        for column in self.columns:
            values = column.values if column.values is not None else self.rows
            if column.kind in SIZED:
                total += LENGTH_BYTES * values + max(0, column.total or 0)
            else:
                total += WIDTHS.get(column.kind, 8) * values
        return total

    @property
    def how(self) -> str:
        unsized = any(c.kind in SIZED and c.total is None for c in self.columns)
        return "ORC footer (without string sizes)" if unsized else "ORC footer"


def postscript_of(tail: bytes, size: int) -> Postscript:
    """The postscript at the end of `tail` (the last bytes of a file of `size` bytes), checked to fit the file and to
    name a sane compression block. Raises TailError."""
    length = tail[-1] if tail else 0
    if length == 0 or length + 1 > min(size - MAGIC_BYTES, len(tail)):
        raise TailError(f"its postscript length ({length} bytes) does not fit the file")
    try:
        fields = {number: value for number, value in _message(tail[-1 - length:-1]) if isinstance(value, int)}
    except TailError:
        raise TailError("its postscript does not parse") from None
    footer, metadata = fields.get(1, 0), fields.get(5, 0)
    if footer + metadata + length + 1 > size - MAGIC_BYTES:
        raise TailError(f"its postscript claims a {footer}-byte footer and {metadata} bytes of metadata, more than "
                        f"the file's {size} bytes")
    kind, block = fields.get(2, 0), fields.get(3, 0)
    if kind != 0 and not 0 < block <= MAX_BLOCK_BYTES:
        raise TailError(f"its postscript claims a compression block of {block} bytes (at most {MAX_BLOCK_BYTES} "
                        f"expected)")
    return Postscript(footer, metadata, length, CODECS.get(kind, f"an unknown codec ({kind})"), block)


def postscript_problem(tail: bytes, size: int) -> str | None:
    try:
        postscript_of(tail, size)
    except TailError as exc:
        return str(exc)
    return None


def footer_of(tail: bytes, size: int, postscript: Postscript) -> Footer:
    """The footer in `tail` (at least `postscript.footer_tail` bytes), decompressed (bounded; natively in the
    isolation worker) and parsed; its stripes checked to lie in the file's data. Raises TailError."""
    if postscript.footer > MAX_FOOTER_BYTES:
        raise TailError(f"its postscript claims a {postscript.footer}-byte footer, more than the {MAX_FOOTER_BYTES} "
                        f"bytes read here")
    if len(tail) < postscript.footer_tail:
        raise TailError(f"its footer needs the last {postscript.footer_tail} bytes, {len(tail)} were read")
    stored = tail[len(tail) - postscript.footer_tail:-1 - postscript.length]
    try:
        raw = inflate(postscript.codec, stored, postscript.block, MAX_FOOTER_BYTES)
    except CodecError as exc:
        raise TailError(f"its footer does not decompress: {exc}") from exc
    try:
        fields = _message(raw)
        stripes = [_numbers(stripe) for stripe in _messages(fields, 3)]
        kinds = [_numbers(kind).get(1, 0) for kind in _messages(fields, 4)]
        statistics = [_statistics(message) for message in _messages(fields, 7)]
    except TailError as exc:
        raise TailError(f"its footer does not parse ({exc})") from exc
    data_end = size - postscript.footer_tail - postscript.metadata
    for index, stripe in enumerate(stripes):
        start, end = stripe.get(1, 0), stripe.get(1, 0) + sum(stripe.get(f, 0) for f in (2, 3, 4))
        if start < MAGIC_BYTES or end > data_end:
            raise TailError(f"its footer places stripe {index} at bytes {start} to {end}, outside the file's data "
                            f"(bytes {MAGIC_BYTES} to {data_end})")
    statistics += [(None, None)] * (len(kinds) - len(statistics))
    rows = max(_numbers(fields).get(6, 0), sum(stripe.get(5, 0) for stripe in stripes))
    columns = tuple(Column(kind, *statistics[index]) for index, kind in enumerate(kinds))
    return Footer(rows, columns, len(stripes))


def _statistics(fields: list[tuple[int, int | bytes]]) -> tuple[int | None, int | None]:
    """(numberOfValues, the string or binary sum) of a ColumnStatistics message."""
    numbers = _numbers(fields)
    total = None
    for number, sum_field in ((4, 3), (8, 1)):  # stringStatistics.sum, binaryStatistics.sum: sint64
        for nested in _messages(fields, number):
            raw = _numbers(nested).get(sum_field)
            if raw is not None:
                total = (raw >> 1) ^ -(raw & 1)
    return numbers.get(1), total


def _numbers(fields: list[tuple[int, int | bytes]]) -> dict[int, int]:
    return {number: value for number, value in fields if isinstance(value, int)}


def _messages(fields: list[tuple[int, int | bytes]], number: int) -> list[list[tuple[int, int | bytes]]]:
    """The embedded messages of field `number` (a repeated message: each occurrence)."""
    return [_message(value) for field, value in fields if field == number and isinstance(value, bytes)]


def _message(data: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's fields in order: varints as int, length-delimited ones as bytes; fixed-width ones
    skipped. Raises TailError."""
    fields: list[tuple[int, int | bytes]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
            fields.append((number, value))
        elif wire == 2:
            length, position = _varint(data, position)
            if position + length > len(data):
                raise TailError(f"field {number} at byte {position} claims {length} bytes, "
                                f"{len(data) - position} are left")
            fields.append((number, data[position:position + length]))
            position += length
        elif wire in (1, 5):
            position += 8 if wire == 1 else 4
        else:
            raise TailError(f"wire type {wire} of field {number} at byte {position}")
    if position != len(data):
        raise TailError("its last field runs past its end")
    return fields


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data) and shift < 70:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position
    raise TailError(f"a varint at byte {position} is cut short or too long")
