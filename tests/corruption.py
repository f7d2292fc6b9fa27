"""Damaged columnar files made from real ones (issue 24, item 6): good Parquet, ORC and Avro files written with each
codec, a map of each file's regions (magic numbers, page and block headers, page and block bodies, footers), seeded
damage at many offsets in every region, and a few exact lies (a page header that promises more bytes than its page
holds; a footer, postscript or block that claims more bytes than the file has).

Pure functions of bytes, except `avro_file`, which needs a Spark session (Spark's own Avro writer, the only one at
hand for every Avro codec). The structure is read with small readers of Thrift's compact protocol (Parquet's page
headers and footer), protobuf (ORC's postscript and footer) and Avro's container header, enough to find and rewrite a
field; nothing here trusts pyarrow or Spark to find what they are being tested on.
"""

from __future__ import annotations

import io
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import orc

CODECS: dict[str, tuple[str, ...]] = {
    "parquet": ("none", "snappy", "gzip", "zstd", "lz4", "brotli"),  # pyarrow's lz4 is Parquet's LZ4_RAW
    "orc": ("uncompressed", "zlib", "snappy", "zstd", "lz4"),
    "avro": ("uncompressed", "snappy", "deflate", "bzip2", "xz", "zstandard"),
}
DAMAGE_LENGTHS = (1, 4, 16, 64)


def rows(count: int = 200) -> pa.Table:
    """A dictionary-friendly int64 column `x`, a string column `s` and a plain double column `d`."""
    return pa.table({
        "x": pa.array([i % 17 for i in range(count)], pa.int64()),
        "s": pa.array([f"v{i % 23}-" + "y" * (i % 7) for i in range(count)], pa.string()),
        "d": pa.array([i / 3 for i in range(count)], pa.float64()),
    })


def parquet_file(codec: str, count: int = 200, *, checksums: bool = True) -> bytes:
    sink = io.BytesIO()
    pq.write_table(rows(count), sink, compression=codec, write_page_checksum=checksums)
    return sink.getvalue()


def orc_file(codec: str, count: int = 200) -> bytes:
    sink = io.BytesIO()
    orc.write_table(rows(count), sink, compression=codec)
    return sink.getvalue()


def avro_file(spark: Any, codec: str, folder: Path, count: int = 200) -> bytes:
    """One Avro container file written by Spark's Avro writer with `codec` (one block per few thousand rows)."""
    out = folder / f"avro-{codec}"
    frame = spark.createDataFrame([(i % 17, f"v{i % 23}-" + "y" * (i % 7), i / 3) for i in range(count)],
                                  "x bigint, s string, d double")
    frame.coalesce(1).write.format("avro").option("compression", codec).mode("overwrite").save(str(out))
    [part] = list(out.glob("part-*.avro"))
    return part.read_bytes()


AVRO_SCHEMA = ('{"type": "record", "name": "row", "fields": [{"name": "x", "type": "long"}, '
               '{"name": "s", "type": "string"}, {"name": "d", "type": "double"}]}')


def avro_container(count: int = 200, *, per_block: int = 50, sync: bytes = bytes(range(16))) -> bytes:
    """An Avro container file without Spark (null codec, blocks of `per_block` rows): for tests with no engine."""
    header = _avro_map({"avro.schema": AVRO_SCHEMA.encode(), "avro.codec": b"null"})
    out = bytearray(b"Obj\x01" + header + sync)
    for first in range(0, count, per_block):
        block = bytearray()
        for i in range(first, min(count, first + per_block)):
            text = (f"v{i % 23}-" + "y" * (i % 7)).encode()
            block += _varint(_zigzag(i % 17)) + _varint(_zigzag(len(text))) + text + struct.pack("<d", i / 3)
        out += _varint(_zigzag(min(per_block, count - first))) + _varint(_zigzag(len(block))) + block + sync
    return bytes(out)


def _avro_map(entries: dict[str, bytes]) -> bytes:
    out = bytearray(_varint(_zigzag(len(entries))))
    for key, value in entries.items():
        out += _varint(_zigzag(len(key))) + key.encode() + _varint(_zigzag(len(value))) + value
    return bytes(out + b"\x00")


# --- where things are ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    kind: str  # magic, page_header, page_body, footer, header, block_header, block_body, sync, postscript, stripes
    start: int
    end: int


def regions(fmt: str, data: bytes) -> list[Region]:
    return {"parquet": parquet_regions, "orc": orc_regions, "avro": avro_regions}[fmt](data)


def parquet_regions(data: bytes) -> list[Region]:
    footer_length = struct.unpack("<I", data[-8:-4])[0]
    found = [Region("magic", 0, 4), Region("footer", len(data) - 8 - footer_length, len(data) - 8),
             Region("magic", len(data) - 4, len(data))]
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(column)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            position, end = start, start + chunk.total_compressed_size
            while position < end:
                header = thrift_fields(data, position)
                compressed = header.value((3,))
                found += [Region("page_header", position, header.end),
                          Region("page_body", header.end, header.end + compressed)]
                position = header.end + compressed
    return found


def orc_regions(data: bytes) -> list[Region]:
    ps_length = data[-1]
    postscript = protobuf_fields(data[-1 - ps_length:-1])
    tail = postscript.get(1, 0) + postscript.get(5, 0)  # footer and metadata lengths
    return [Region("magic", 0, 3), Region("stripes", 3, len(data) - 1 - ps_length - tail),
            Region("footer", len(data) - 1 - ps_length - tail, len(data) - 1 - ps_length),
            Region("postscript", len(data) - 1 - ps_length, len(data))]


def avro_regions(data: bytes) -> list[Region]:
    position = 4
    found = [Region("magic", 0, 4)]
    while True:  # the metadata map: blocks of (key, value) byte strings, ended by a zero count
        count, position = _avro_long(data, position)
        if count == 0:
            break
        if count < 0:
            _, position = _avro_long(data, position)  # the block's byte size follows a negative count
        for _ in range(abs(count) * 2):
            size, position = _avro_long(data, position)
            position += size
    found.append(Region("header", 4, position))  # the schema and the codec (Avro has no footer)
    sync = data[position:position + 16]
    found.append(Region("sync", position, position + 16))
    position += 16
    while position < len(data):
        start = position
        _, position = _avro_long(data, position)
        size, position = _avro_long(data, position)
        found += [Region("block_header", start, position), Region("block_body", position, position + size),
                  Region("sync", position + size, position + size + 16)]
        assert data[position + size:position + size + 16] == sync
        position += size + 16
    return found


# --- damage -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Damage:
    case: str  # a readable id: format-codec-region-offset-length
    data: bytes


def damaged(fmt: str, codec: str, data: bytes, seed: int, per_region: int) -> Iterator[Damage]:
    """`per_region` damaged copies of `data` per kind of region: each flips 1, 4, 16 or 64 bytes (within the region)
    at a random offset of a random region of that kind, every choice from `seed`."""
    rng = random.Random(f"{seed}-{fmt}-{codec}")
    by_kind: dict[str, list[Region]] = {}
    for region in regions(fmt, data):
        if region.end > region.start:
            by_kind.setdefault(region.kind, []).append(region)
    for kind in sorted(by_kind):
        for _ in range(per_region):
            region = rng.choice(by_kind[kind])
            offset = rng.randrange(region.start, region.end)
            length = min(rng.choice(DAMAGE_LENGTHS), region.end - offset)
            copy = bytearray(data)
            for i in range(offset, offset + length):
                copy[i] ^= rng.randrange(1, 256)
            yield Damage(f"{fmt}-{codec}-{kind}-{offset}+{length}", bytes(copy))


# --- exact lies ---------------------------------------------------------------------------------------------------


def parquet_page_longer_than_its_data(codec: str = "snappy", column: int = 0) -> bytes:
    """The first page of `column` says it decompresses to more bytes than it does (its header's
    uncompressed_page_size raised, its varint length kept). Spark 3.5's Parquet reader (parquet-mr 1.13) reads
    such a snappy or LZ4 page forever (PARQUET-2060: the decompressor returns 0 bytes and readFully loops)."""
    data = bytearray(parquet_file(codec, checksums=False))
    chunk = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(0).column(column)
    header = thrift_fields(bytes(data), chunk.dictionary_page_offset or chunk.data_page_offset)
    start, end = header.span((2,))
    size = header.value((2,))
    room = (1 << (7 * (end - start) - 1)) - 1  # the largest size a zigzag varint of this length holds
    assert room > size, "no room to raise the size without changing the varint's length"
    data[start:end] = _varint(_zigzag(min(size + 64, room)))
    return bytes(data)


def parquet_footer_past_the_end(field: int = 7) -> bytes:
    """The footer says the first column chunk is far longer than the file (ColumnMetaData field 7,
    total_compressed_size; 9 is data_page_offset): a reader that trusts it allocates or seeks past the end."""
    data = parquet_file("none", checksums=False)
    footer_length = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - footer_length
    footer = thrift_fields(data, start)
    at, end = footer.span((4, 0, 1, 0, 3, field))  # row_groups[0].columns[0].meta_data.<field>
    new = data[:at] + _varint(_zigzag(1_900_000_000)) + data[end:]
    length = footer_length + len(new) - len(data)
    return new[:-8] + struct.pack("<I", length) + new[-4:]


def orc_damaged_stripe() -> bytes:
    """A zstd ORC file whose first stripe's footer no longer decompresses (4 bytes flipped; found by the fuzz, seed
    2): its postscript and footer are intact, so only the engine's reader, inside Spark's job, finds it."""
    good = orc_file("zstd")
    return next(d.data for d in damaged("orc", "zstd", good, 2, 8) if d.case == "orc-zstd-stripes-989+4")


def orc_postscript_lie(field: int, value: int, codec: str = "zlib") -> bytes:
    """An ORC file whose postscript's `field` says `value` (3: the compression block size, 1: the footer length)."""
    data = orc_file(codec)
    ps_length = data[-1]
    postscript = _protobuf_set(data[-1 - ps_length:-1], field, value)
    assert len(postscript) < 256
    return data[:-1 - ps_length] + postscript + bytes([len(postscript)])


def avro_block_larger_than_the_file(data: bytes, size: int = 1_900_000_000) -> bytes:
    """The first data block of an Avro container says it holds `size` bytes (about 1.8 GiB by default)."""
    block = next(r for r in avro_regions(data) if r.kind == "block_header")
    count, position = _avro_long(data, block.start)
    _, end = _avro_long(data, position)
    return data[:block.start] + _varint(_zigzag(count)) + _varint(_zigzag(size)) + data[end:]


# --- Thrift compact protocol, protobuf and Avro longs: just enough to find a field -----------------------------


@dataclass(frozen=True)
class ThriftStruct:
    """A compact-protocol struct read at some offset: the spans and values of its integer fields by field-id path
    (a list's elements count as ids 0, 1, ...), and where it ends."""

    fields: dict[tuple[int, ...], tuple[int, int, int]]  # path -> (start, end, value)
    end: int

    def value(self, path: tuple[int, ...]) -> int:
        return self.fields[path][2]

    def span(self, path: tuple[int, ...]) -> tuple[int, int]:
        return self.fields[path][0], self.fields[path][1]


def thrift_fields(data: bytes, offset: int) -> ThriftStruct:
    fields: dict[tuple[int, ...], tuple[int, int, int]] = {}
    end = _thrift_struct(data, offset, (), fields)
    return ThriftStruct(fields, end)


def _thrift_struct(data: bytes, position: int, path: tuple[int, ...],
                   fields: dict[tuple[int, ...], tuple[int, int, int]]) -> int:
    field = 0
    while True:
        byte = data[position]
        position += 1
        if byte == 0:  # stop
            return position
        kind, delta = byte & 0x0F, byte >> 4
        if delta:
            field += delta
        else:
            raw, position = _read_varint(data, position)
            field = _unzigzag(raw)
        position = _thrift_value(data, position, kind, (*path, field), fields)


def _thrift_value(data: bytes, position: int, kind: int, path: tuple[int, ...],
                  fields: dict[tuple[int, ...], tuple[int, int, int]]) -> int:
    if kind in (1, 2):  # booleans live in the type nibble
        return position
    if kind == 3:  # byte
        return position + 1
    if kind in (4, 5, 6):  # i16, i32, i64: zigzag varints
        raw, end = _read_varint(data, position)
        fields[path] = (position, end, _unzigzag(raw))
        return end
    if kind == 7:  # double
        return position + 8
    if kind == 8:  # binary
        size, position = _read_varint(data, position)
        return position + size
    if kind in (9, 10):  # list, set
        header = data[position]
        position += 1
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size, position = _read_varint(data, position)
        for index in range(size):
            position = _thrift_value(data, position, element, (*path, index), fields)
        return position
    if kind == 12:  # struct
        return _thrift_struct(data, position, path, fields)
    raise ValueError(f"thrift type {kind} at {position} is not handled here")


def protobuf_fields(data: bytes) -> dict[int, int]:
    """A protobuf message's varint fields (the last value of each)."""
    found: dict[int, int] = {}
    for field, wire, value, _, _ in _protobuf(data):
        if wire == 0:
            found[field] = value
    return found


def _protobuf(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    position = 0
    while position < len(data):
        start = position
        key, position = _read_varint(data, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _read_varint(data, position)
        elif wire == 2:
            value, position = _read_varint(data, position)
            position += value
        elif wire == 1:
            value, position = 0, position + 8
        elif wire == 5:
            value, position = 0, position + 4
        else:
            raise ValueError(f"protobuf wire type {wire} at {start}")
        yield field, wire, value, start, position


def _protobuf_set(data: bytes, field: int, value: int) -> bytes:
    out = bytearray()
    for number, wire, _, start, end in _protobuf(data):
        out += _varint(number << 3) + _varint(value) if number == field and wire == 0 else data[start:end]
    return bytes(out)


def _avro_long(data: bytes, position: int) -> tuple[int, int]:
    raw, position = _read_varint(data, position)
    return _unzigzag(raw), position


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _unzigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)
