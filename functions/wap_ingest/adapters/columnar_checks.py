"""Checks a local Parquet, ORC or Avro file gets before Spark reads it (issue 24, item 6): the damage that would
hang, exhaust or crash the engine instead of failing it cleanly is refused here, as the file's fault, naming the
object, the table and (for Parquet) the column.

- Parquet: decoded in full by pyarrow, batch by batch (bounded memory), its page checksums verified. This catches
  what Spark 3.5's reader (parquet-mr 1.13) cannot survive: a snappy or LZ4 page that decompresses to fewer bytes
  than its header says makes it loop for ever (PARQUET-2060), and a footer that claims a column chunk larger than
  the file makes it allocate that much (an OutOfMemoryError kills the JVM). pyarrow's Parquet reader is fuzzed
  upstream; a checksum written by the producer is checked, which Spark never does.
- ORC: the postscript (plain protobuf, read in Python by orc_tail) must fit the file and name a sane compression block;
  the footer is then read by the engine's own (Java) ORC reader, never pyarrow's, which crashes the process on some
  damaged footers; every stripe must lie inside the file. A postscript that lies makes the Java reader allocate
  what it claims.
- Avro: the container walked in Python, block by block: magic, header, and each block's size against the bytes
  left and the sync marker after it (Spark allocates a block's claimed size at once).
What a file passes here and still cannot decode fails inside Spark, classified by spark_errors (raised_decoding).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import UnreadableSourceError

from .isolated import ChildDiedError, ChildHungError, isolated
from .orc_tail import postscript_problem

PARQUET_BATCH_ROWS = 65_536
WHOLE_CHUNK_BYTES = 64 * 1024 * 1024  # a column chunk decoded at once up to this size, else batch by batch
DECODERS = 2  # column chunks decoded at once (the function's cores)
DECODE_SECONDS = 60.0  # a decode of a Parquet file that takes longer than this plus its size at the rate below hangs
DECODE_BYTES_PER_SECOND = 5 * 1024 * 1024
AVRO_MAGIC = b"Obj\x01"
FIX = ("write the file again from the original data and upload it again (its bytes are damaged, or it is not the "
       "format its name says)")


def damaged(what: str, table: str, problem: str) -> UnreadableSourceError:
    return UnreadableSourceError(f"{what}: cannot be ingested into {table}: {problem}. Fix: {FIX}.")


def check_parquet(path: Path, what: str, table: str) -> list[str]:
    """Decode every page of a Parquet file (checksums verified); its column names. Raises UnreadableSourceError
    naming the column and row group at fault. What pyarrow does not implement (a valid file it cannot read) and
    the machine's own read errors are left to Spark. The decoding runs in the isolation worker (adapters/isolated.py):
    pyarrow can abort the process on some damaged files, which here only ends the worker."""
    timeout = DECODE_SECONDS + path.stat().st_size / DECODE_BYTES_PER_SECOND
    try:
        return isolated(_decoded_parquet, path, what, table, timeout=timeout)
    except ChildDiedError as exc:
        raise damaged(what, table, f"its bytes crash the Parquet decoder (it {exc})") from exc
    except ChildHungError as exc:
        raise damaged(what, table, f"its pages do not finish decoding (the decoder gave {exc})") from exc


def _decoded_parquet(path: Path, what: str, table: str) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path, page_checksum_verification=True, buffer_size=1 << 20)
    except (pa.ArrowNotImplementedError, MemoryError):
        return []  # not the file's fault as far as we can tell: Spark reads it, or says why
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # the disk's (errno set), not the bytes'
        raise damaged(what, table, f"it is not a complete Parquet file: its footer does not parse "
                                   f"({_first_line(exc)})") from exc
    names: list[str] = []
    try:
        names = list(parquet.schema_arrow.names)
        _decode_columns(path, parquet.metadata, names)
    except _ColumnFailedError as failed:
        cause = failed.__cause__
        if isinstance(cause, pa.ArrowNotImplementedError | MemoryError):
            return names  # not the file's fault as far as we can tell
        if isinstance(cause, OSError) and cause.errno is not None:
            raise cause from None  # the disk's
        raise damaged(what, table, f"its bytes do not decode (column {failed.name!r} in row group {failed.group}: "
                                   f"{_first_line(cause or failed)})") from cause
    finally:
        parquet.close()
        pa.default_memory_pool().release_unused()  # the worker lives on: give the decoded pages' memory back
    return names


# In the isolation worker, two column chunks at a time (each by its own reader): pyarrow 20 can abort the process
# ("terminate called without an active exception") after a decoding error in a threaded read, which there ends only
# the worker and is the file's fault (check_parquet). Measured on 100 MB, 5M rows, 19 columns, 5 row groups: one
# thread, batch by batch 0.94 s and 157 MiB; whole row groups with pyarrow's threads 0.50-0.62 s and 310 MiB; column
# chunks two at a time 0.51-0.54 s and 126 MiB. A chunk larger than WHOLE_CHUNK_BYTES is decoded batch by batch, so the
# worker's memory stays bounded whatever the file's layout.


class _ColumnFailedError(Exception):
    def __init__(self, group: int, name: str) -> None:
        super().__init__(f"column {name!r} in row group {group}")
        self.group, self.name = group, name


def _decode_columns(path: Path, metadata: Any, names: list[str]) -> None:
    """Decode every column chunk of the file (raises _ColumnFailedError, the decoder's error as its cause, for the first
    one in file order that does not decode)."""
    import pyarrow.parquet as pq

    jobs: list[tuple[int, str, int]] = []
    for group in range(metadata.num_row_groups):
        sizes: dict[str, int] = {}
        for index in range(metadata.row_group(group).num_columns):
            chunk = metadata.row_group(group).column(index)
            top = str(chunk.path_in_schema).split(".")[0]
            sizes[top] = sizes.get(top, 0) + int(chunk.total_uncompressed_size)
        jobs += [(group, name, sizes.get(name, 0)) for name in names]
    readers: dict[int, Any] = {}

    def decode(job: tuple[int, str, int]) -> None:
        group, name, size = job
        try:
            reader = readers.get(threading.get_ident())
            if reader is None:
                reader = readers[threading.get_ident()] = pq.ParquetFile(
                    path, page_checksum_verification=True, buffer_size=1 << 20)
            if size <= WHOLE_CHUNK_BYTES:
                reader.read_row_group(group, columns=[name], use_threads=False)
            else:
                for _ in reader.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=[group], columns=[name],
                                             use_threads=False):
                    pass
        except Exception as exc:
            raise _ColumnFailedError(group, name) from exc

    try:
        with ThreadPoolExecutor(max_workers=DECODERS, thread_name_prefix="decode") as pool:
            for _ in pool.map(decode, jobs):
                pass
    finally:
        for reader in readers.values():
            reader.close()


def orc_columns(jvm: Any, conf: Any, path: Path, what: str, table: str) -> tuple[list[str], str]:
    """An ORC file's column names and schema (`struct<...>`), its postscript checked here first and its footer read
    by the engine's ORC reader (`jvm`: Spark's JVM view; `conf`: a Hadoop Configuration), every stripe checked to
    lie inside the file. Raises UnreadableSourceError; the reader's own exceptions propagate (classify them)."""
    size = path.stat().st_size
    problem = orc_postscript_problem(path, size)
    if problem:
        raise damaged(what, table, problem)
    reader = jvm.org.apache.orc.OrcFile.createReader(jvm.org.apache.hadoop.fs.Path(str(path)),
                                                     jvm.org.apache.orc.OrcFile.readerOptions(conf))
    try:
        stripes = reader.getStripes()
        for index in range(stripes.size()):
            stripe = stripes.get(index)
            offset, length = int(stripe.getOffset()), int(stripe.getLength())
            if offset < 3 or length < 0 or offset + length > size:
                raise damaged(what, table, f"its footer places stripe {index} at bytes {offset} to {offset + length}"
                                           f", outside the file's {size} bytes")
        schema = reader.getSchema()
        return [str(name) for name in schema.getFieldNames()], str(schema.toString())
    finally:
        reader.close()


def orc_postscript_problem(path: Path, size: int) -> str | None:
    """What is wrong with an ORC file's magic and postscript (the last 1 + length bytes), or None."""
    if size < 4:
        return f"it is {size} bytes long, too short for an ORC file"
    with path.open("rb") as file:
        if file.read(3) != b"ORC":
            return "it does not start with ORC's magic number ('ORC'): it is not an ORC file"
        file.seek(max(0, size - 256))
        return postscript_problem(file.read(), size)


def check_avro(path: Path, what: str, table: str) -> None:
    """Walk an Avro container file: magic, header (a JSON schema, a codec), then every block's object count and
    size against the bytes left, and the sync marker after it. Reads the header and 2 varints per block."""
    size = path.stat().st_size
    with path.open("rb") as file:
        reader = _Bytes(file, size)
        if reader.take(4) != AVRO_MAGIC:
            raise damaged(what, table, "it does not start with Avro's magic number ('Obj' 1): it is not an Avro "
                                       "container file")
        try:
            header = reader.metadata()
            json.loads(header.get("avro.schema", b"").decode("utf-8"))
        except (ValueError, EOFError) as exc:
            raise damaged(what, table, f"its header does not parse ({exc})") from exc
        sync = reader.take(16)
        block = 0
        while reader.position < size:
            start = reader.position
            try:
                count, length = reader.long(), reader.long()
            except (ValueError, EOFError) as exc:
                raise damaged(what, table, f"block {block} at byte {start}: its header does not parse") from exc
            if count < 0 or length < 0 or length + 16 > size - reader.position:
                raise damaged(what, table, f"block {block} at byte {start} claims {count} objects in {length} bytes, "
                                           f"but {size - reader.position} bytes are left in the file")
            reader.skip(length)
            if reader.take(16) != sync:
                raise damaged(what, table, f"block {block} at byte {start} is not followed by the file's sync marker")
            block += 1


class _Bytes:
    """Sequential reads of Avro's binary encoding from a file, never more than the file holds."""

    def __init__(self, file: Any, size: int) -> None:
        self.file, self.size, self.position = file, size, 0

    def take(self, count: int) -> bytes:
        if count < 0 or count > self.size - self.position:
            raise EOFError(f"{count} bytes wanted at byte {self.position}, {self.size - self.position} left")
        self.position += count
        data: bytes = self.file.read(count)
        return data

    def skip(self, count: int) -> None:
        self.position += count
        self.file.seek(self.position)

    def long(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)
            if shift > 63:
                raise ValueError(f"a varint longer than 10 bytes at byte {self.position}")

    def metadata(self) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        while (count := self.long()) != 0:
            if count < 0:
                count = -count
                self.long()  # a negative count is followed by the block's size in bytes
            for _ in range(count):
                key = self.take(self.long()).decode("utf-8")
                found[key] = self.take(self.long())
        return found


def _first_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text if len(text) <= 200 else text[:197] + "..."
