"""Bad source files, built for real (issue 13, item 6): pure functions returning the bytes of one file each.

Shared by the engine's failure tests (tests/integration/adapters/engine/test_spark_failures.py) and the end-to-end
matrix. Every builder documents what is wrong with its file and where, so a test can assert the message names it.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

GOOD_CSV = b"id,name\n1,alpha\n2,beta\n"


def good_parquet(rows: int = 1_000, *, compression: str = "gzip") -> bytes:
    """A valid Parquet file: an int column and a string column, one row group, no dictionary pages (so each
    column chunk is one large data page whose compressed bytes can be damaged)."""
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "name": pa.array([f"name-{i:08d}-" + "x" * 40 for i in range(rows)], pa.string()),
    })
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression, use_dictionary=False, write_statistics=False)
    return sink.getvalue()


def parquet_corrupt_page(rows: int = 1_000, *, compression: str = "gzip") -> bytes:
    """A Parquet file whose footer is valid but whose `name` data page is damaged: the middle half of the page's
    compressed bytes is overwritten. Schema inference (the footer) succeeds; decoding the rows fails."""
    data = bytearray(good_parquet(rows, compression=compression))
    chunk = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(0).column(1)  # the `name` column
    start = chunk.data_page_offset + chunk.total_compressed_size // 4  # past the page header (a few dozen bytes)
    end = chunk.data_page_offset + 3 * chunk.total_compressed_size // 4
    data[start:end] = bytes((i * 151 + 17) % 256 for i in range(end - start))  # noise, not zeros (zeros may inflate)
    return bytes(data)


def parquet_checksum_mismatch(rows: int = 100) -> bytes:
    """A Parquet file written with page checksums, one bit of a plain (uncompressed, not dictionary-encoded) `d`
    page flipped near its end: every value still decodes (one is wrong), only the page's CRC tells."""
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "d": pa.array([i / 3 for i in range(rows)])})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="none", use_dictionary=False, write_page_checksum=True)
    data = bytearray(sink.getvalue())
    chunk = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(0).column(1)
    data[chunk.data_page_offset + chunk.total_compressed_size - 100] ^= 0x01  # inside the last values' bytes
    return bytes(data)


def parquet_truncated(rows: int = 1_000) -> bytes:
    """The first half of a valid Parquet file: no footer, no trailing magic number."""
    data = good_parquet(rows)
    return data[: len(data) // 2]


def csv_unbalanced_quote() -> bytes:
    """Row 2 (line 3) opens a quoted field that is never closed."""
    return b'id,name\n1,alpha\n2,"beta\n3,gamma\n'


def csv_extra_fields() -> bytes:
    """Row 2 (line 3) has three fields under a two-column header."""
    return b"id,name\n1,alpha\n2,beta,surplus\n3,gamma\n"


LATIN1_OFFSET = len(b"id,name\n1,Jos")


def csv_latin1() -> bytes:
    """Latin-1 text: the byte 0xE9 (e acute) at LATIN1_OFFSET is not UTF-8."""
    return "id,name\n1,José\n2,Zoë\n".encode("latin-1")


def csv_utf16(*, bom: bool = True) -> bytes:
    """UTF-16 little-endian text, with its byte order mark (FF FE) or without it (NUL-interleaved ASCII)."""
    text = "id,name\n1,alpha\n2,beta\n".encode("utf-16-le")
    return (b"\xff\xfe" if bom else b"") + text


def csv_long_line(size: int, *, header: bool = True) -> bytes:
    """One line of `size` bytes without a newline: after a valid header (a long data row) or alone (a long
    header). The real case is 1 GiB; tests use tens of MiB."""
    return (b"id,name\n" if header else b"") + b"1," + b"x" * max(size - 2, 0)


def csv_header(names: list[str]) -> bytes:
    """A CSV file with the given header (names written as they are, comma-separated) and one data row."""
    return (",".join(names) + "\n" + ",".join(str(i) for i in range(len(names))) + "\n").encode()


BAD_HEADERS: dict[str, list[str]] = {
    "dot": ["id", "a.b"],
    "backtick": ["id", "a`b"],
    "empty": ["id", "", "name"],
    "duplicate": ["id", "name", "name"],
    "case": ["id", "Name", "name"],
}
"""Headers the engine cannot address, by case: the offending column is always the second or third."""


def empty_file() -> bytes:
    """A zero-byte object (for either format)."""
    return b""
