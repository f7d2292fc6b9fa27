"""ORC's compressed streams, as its tail's footer needs them read (adapters/formats/orc_tail.py).

A compressed ORC stream is a run of chunks, each behind a 3-byte little-endian header `length << 1 | original`
(original: the chunk is stored as it is), each decompressing to at most the postscript's compression block. zlib
(raw deflate) and uncompressed streams are read here with the standard library; snappy, LZ4 (raw blocks) and zstd by
pyarrow's codecs, in the isolation worker (adapters/formats/isolation.py): a native decoder that aborts on hostile bytes
ends the worker there, not this process. Every chunk is bounded by the block and the whole stream by `limit`, so a
footer that is itself a bomb costs at most `limit` bytes of work. LZO (pyarrow has no decoder: such a file is weighed
as stored) and brotli (ORC 2.0; the engine's ORC 1.9 reader cannot read it either: refused) are not read.
"""

from __future__ import annotations

import zlib

from wap_ingest.adapters.formats.isolation import ChildDiedError, ChildHungError, isolated

CODECS = {0: "none", 1: "zlib", 2: "snappy", 3: "lzo", 4: "lz4", 5: "zstd", 6: "brotli"}  # ORC's CompressionKind
NATIVE = frozenset({"snappy", "lz4", "zstd"})  # decoded by pyarrow, in the isolation worker
READABLE = NATIVE | {"none", "zlib"}
HEADER_BYTES = 3


class CodecError(ValueError):
    """The stream does not decompress within its bounds (the message says where and why)."""


def inflate(codec: str, data: bytes, block: int, limit: int) -> bytes:
    """The stream `data` decompressed (at most `limit` bytes); native codecs in the isolation worker. Raises
    CodecError."""
    if codec not in NATIVE:
        return inflated(codec, data, block, limit)
    try:
        return isolated(inflated, codec, data, block, limit)
    except (ChildDiedError, ChildHungError) as exc:
        raise CodecError(f"its {codec} bytes crash the decompressor (it {exc})") from exc


def inflated(codec: str, data: bytes, block: int, limit: int) -> bytes:
    """`inflate` in this process (module level: the worker calls it by name)."""
    if codec == "none":
        if len(data) > limit:
            raise CodecError(f"it is {len(data)} bytes long, more than the {limit} read here")
        return data
    if codec not in READABLE:
        raise CodecError(f"it is compressed with {codec.upper()}, which this service cannot decompress")
    out = bytearray()
    position = 0
    while position < len(data):
        if position + HEADER_BYTES > len(data):
            raise CodecError(f"its chunk header at byte {position} is cut short")
        header = int.from_bytes(data[position:position + HEADER_BYTES], "little")
        length, original = header >> 1, header & 1
        position += HEADER_BYTES
        chunk = data[position:position + length]
        if len(chunk) < length:
            raise CodecError(f"its chunk at byte {position - HEADER_BYTES} claims {length} bytes, "
                             f"{len(chunk)} are left")
        room = min(block, limit - len(out))
        piece = chunk if original else _decompressed(codec, chunk, room)
        if piece is None or len(piece) > room:
            raise CodecError(f"its chunk at byte {position - HEADER_BYTES} holds more than "
                             f"{'the compression block' if room == block else f'the {limit} bytes read here'}")
        out += piece
        position += length
    return bytes(out)


def _decompressed(codec: str, chunk: bytes, room: int) -> bytes | None:
    """One compressed chunk; None, or more than `room` bytes, when it holds more than `room`."""
    if codec == "zlib":
        decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            piece = decompressor.decompress(chunk, room + 1)
        except zlib.error as exc:
            raise CodecError(f"a zlib chunk does not decompress ({exc})") from exc
        if len(piece) <= room and not decompressor.eof:
            raise CodecError("a zlib chunk ends before its deflate stream does")
        return piece
    import pyarrow as pa

    try:
        if codec == "zstd":
            with pa.CompressedInputStream(pa.BufferReader(chunk), "zstd") as stream:
                return bytes(stream.read(room + 1))
        size = _snappy_length(chunk) if codec == "snappy" else _lz4_length(chunk, room)
        if size > room:
            return None  # nothing decompressed
        return bytes(pa.Codec("snappy" if codec == "snappy" else "lz4_raw").decompress(
            chunk, decompressed_size=size, asbytes=True))
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"a {codec} chunk does not decompress ({_first_line(exc)})") from exc


def _snappy_length(chunk: bytes) -> int:
    """A raw snappy block starts with its decompressed length (a varint)."""
    value = 0
    for position, byte in enumerate(chunk[:5]):
        value |= (byte & 0x7F) << (7 * position)
        if not byte & 0x80:
            return value
    raise CodecError("a snappy chunk does not start with its length")


def _lz4_length(chunk: bytes, room: int) -> int:
    """What a raw LZ4 block decompresses to, from its sequences (pyarrow's decoder needs the exact size): literals
    and match lengths, each a 4-bit count extended by bytes of 255; the last sequence is literals only. Stops past
    `room` (the caller refuses the chunk)."""
    position = size = 0
    while True:
        if position >= len(chunk):
            raise CodecError("an LZ4 chunk ends inside a sequence")
        token = chunk[position]
        literals, position = _lz4_count(chunk, position + 1, token >> 4)
        position += literals
        size += literals
        if size > room or position == len(chunk):
            return size
        if position + 2 > len(chunk):
            raise CodecError("an LZ4 chunk's literals run past its end")
        match, position = _lz4_count(chunk, position + 2, token & 0x0F)
        size += match + 4
        if size > room:
            return size


def _lz4_count(chunk: bytes, position: int, count: int) -> tuple[int, int]:
    if count != 15:
        return count, position
    while True:
        if position >= len(chunk):
            raise CodecError("an LZ4 chunk ends inside a length")
        byte = chunk[position]
        count += byte
        position += 1
        if byte != 255:
            return count, position


def _first_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text if len(text) <= 200 else text[:197] + "..."
