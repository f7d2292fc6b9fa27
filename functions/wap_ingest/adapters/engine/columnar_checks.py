"""Checks a local Parquet, ORC or Avro file gets before Spark reads it (issue 24, item 6): the damage that would
hang, exhaust or crash the engine instead of failing it cleanly is refused here, as the file's fault, naming the
object, the table and (for Parquet) the column.

- Parquet: every page decoded in the isolation worker (parquet_decode, which uses `damaged` and `first_line`).
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
from pathlib import Path
from typing import Any

from wap_ingest.adapters.formats import postscript_problem
from wap_ingest.core.errors import UnreadableSourceError

AVRO_MAGIC = b"Obj\x01"
FIX = ("write the file again from the original data and upload it again (its bytes are damaged, or it is not the "
       "format its name says)")


def damaged(what: str, table: str, problem: str) -> UnreadableSourceError:
    return UnreadableSourceError(f"{what}: cannot be ingested into {table}: {problem}. Fix: {FIX}.")


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


def first_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text if len(text) <= 200 else text[:197] + "..."
