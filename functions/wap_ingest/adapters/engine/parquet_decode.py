"""A Parquet file's every page decoded before the engine reads it or the lake takes it (issue 24, item 6; issue 33).

- `check_parquet` (before Spark reads a file to rewrite it): decoded in full by pyarrow, batch by batch (bounded
  memory), its page checksums verified. This catches what Spark 3.5's reader (parquet-mr 1.13) cannot survive: a
  snappy or LZ4 page that decompresses to fewer bytes than its header says makes it loop for ever (PARQUET-2060), and
  a footer that claims a column chunk larger than the file makes it allocate that much (an OutOfMemoryError kills the
  JVM). pyarrow's Parquet reader is fuzzed upstream; a checksum written by the producer is checked, which Spark never
  does.
- `measure_parquet` (before a file is registered as it is, no engine reading it): the same decoding, measuring every
  leaf column from the decoded values and checking every claim the file makes (parquet_measuring): the figures the
  audit judges and the table's metrics are the service's, never the file's own.
Both raise UnreadableSourceError (INVALID, naming the object, the table, the column and the row group) for damage.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wap_ingest.adapters.engine.columnar_checks import damaged, first_line
from wap_ingest.adapters.engine.parquet_measured import Measured
from wap_ingest.adapters.formats import ChildDiedError, ChildHungError, ThriftError, isolated

if TYPE_CHECKING:
    from wap_ingest.adapters.engine.parquet_measuring import Measuring

PARQUET_BATCH_ROWS = 65_536
WHOLE_CHUNK_BYTES = 64 * 1024 * 1024  # a column chunk decoded at once up to this size, else batch by batch
DECODERS = 2  # column chunks decoded at once (the function's cores)
DECODE_SECONDS = 60.0  # a decode of a Parquet file that takes longer than this plus its size at the rate below hangs
DECODE_BYTES_PER_SECOND = 5 * 1024 * 1024


def check_parquet(path: Path, what: str, table: str) -> list[str]:
    """Decode every page of a Parquet file (checksums verified); its column names. Raises UnreadableSourceError
    naming the column and row group at fault. What pyarrow does not implement (a valid file it cannot read) and
    the machine's own read errors are left to Spark. The decoding runs in the isolation worker
    (adapters/formats/isolation.py): pyarrow can abort the process on some damaged files, which here only ends the
    worker."""
    return _in_worker(path, what, table, measure=False)[0]


def measure_parquet(path: Path, what: str, table: str) -> Measured | str:
    """`check_parquet`, measuring every leaf column as its pages are decoded and checking every claim the file makes
    (parquet_measured): the file's figures, or why they cannot be had (pyarrow cannot decode it: the engine reads it
    then). Raises UnreadableSourceError as check_parquet does."""
    names, measured = _in_worker(path, what, table, measure=True)
    if measured is None:
        return "the service's Parquet reader cannot decode it (the engine reads it and says why)"
    return measured if names else "it has no columns"


def _in_worker(path: Path, what: str, table: str, *, measure: bool) -> tuple[list[str], Measured | None]:
    timeout = DECODE_SECONDS + path.stat().st_size / DECODE_BYTES_PER_SECOND
    try:
        return isolated(_decoded_parquet, path, what, table, measure, timeout=timeout)
    except ChildDiedError as exc:
        raise damaged(what, table, f"its bytes crash the Parquet decoder (it {exc})") from exc
    except ChildHungError as exc:
        raise damaged(what, table, f"its pages do not finish decoding (the decoder gave {exc})") from exc


def _decoded_parquet(path: Path, what: str, table: str, measure: bool = False) -> tuple[list[str], Measured | None]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path, page_checksum_verification=True, buffer_size=1 << 20)
    except (pa.ArrowNotImplementedError, MemoryError):
        return [], None  # not the file's fault as far as we can tell: Spark reads it, or says why
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # the disk's (errno set), not the bytes'
        raise damaged(what, table, f"it is not a complete Parquet file: its footer does not parse "
                                   f"({first_line(exc)})") from exc
    names: list[str] = []
    measuring: Measuring | str | None = None
    try:
        names = list(parquet.schema_arrow.names)
        if measure:
            measuring = _measuring(path, parquet.schema_arrow)
        _decode_columns(path, parquet.metadata, names, None if isinstance(measuring, str) else measuring)
    except _ColumnFailedError as failed:
        cause = failed.__cause__
        if isinstance(cause, pa.ArrowNotImplementedError | MemoryError):
            return names, None  # not the file's fault as far as we can tell
        if isinstance(cause, OSError) and cause.errno is not None:
            raise cause from None  # the disk's
        raise damaged(what, table, f"its bytes do not decode (column {failed.name!r} in row group {failed.group}: "
                                   f"{first_line(cause or failed)})") from cause
    finally:
        parquet.close()
        pa.default_memory_pool().release_unused()  # the worker lives on: give the decoded pages' memory back
    if isinstance(measuring, str):
        return names, Measured(0, (), (), "", measuring)
    return names, measuring.finish() if measuring is not None else None


def _measuring(path: Path, schema: Any) -> Measuring | str:
    """The measuring of the file, or why its claims cannot be checked (a structure of its own that does not parse:
    it is rewritten, and the decoding still says whether its pages are damaged)."""
    from wap_ingest.adapters.engine.parquet_measuring import Measuring

    try:
        return Measuring(path, schema)
    except ThriftError as exc:
        return f"its footer or page headers cannot be checked ({exc})"


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


def _decode_columns(path: Path, metadata: Any, names: list[str], measuring: Measuring | None = None) -> None:
    """Decode every column chunk of the file (raises _ColumnFailedError, the decoder's error as its cause, for the first
    one in file order that does not decode), each handed to `measuring` as it is decoded."""
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
    dictionaries = [f.name for f in measuring.schema if _text(f.type)] if measuring is not None else None

    def decode(job: tuple[int, str, int]) -> None:
        group, name, size = job
        try:
            reader = readers.get(threading.get_ident())
            if reader is None:  # measured, a string column is read as a dictionary (only its values are compared)
                reader = readers[threading.get_ident()] = pq.ParquetFile(
                    path, page_checksum_verification=True, buffer_size=1 << 20,
                    read_dictionary=dictionaries if measuring is not None else None)
            pieces: Iterator[Any]
            if size <= WHOLE_CHUNK_BYTES:
                pieces = iter(reader.read_row_group(group, columns=[name], use_threads=False).column(0).chunks)
            else:
                pieces = (batch.column(0) for batch in reader.iter_batches(
                    batch_size=PARQUET_BATCH_ROWS, row_groups=[group], columns=[name], use_threads=False))
            if measuring is not None:
                measuring.chunk(group, name, pieces)
            else:
                for _ in pieces:
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


def _text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or
                pa.types.is_large_binary(kind))
