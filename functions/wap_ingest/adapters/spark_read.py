"""Reading a source file with Spark, after the checks Spark cannot make (issue 13, items 4 and 6).

Spark reads Latin-1 or UTF-16 text without complaint (replacement characters, NUL-riddled names), keeps the rest of
a line after an unclosed quote as if it were closed, renames empty and duplicate CSV headers (`_c1`, `name1`), and
holds a whole line in memory before its CSV parser sees it. So a local CSV is checked first, in one streaming pass
of bounded memory: UTF-8 text, no NUL byte, every line shorter than `MAX_LINE_BYTES`, every opened quote closed on
its line (Spark reads CSV line by line), and a header (read with a bounded length) whose names Spark can address.
A local Parquet file's names come from its footer. Then Spark reads it with FAILFAST options and a bounded value
length, and schema inference is forced; any failure is classified by `spark_errors.engine_failure` (step READ).

Paths with a scheme (s3://, as an EMR job reads its input) are not opened here: only Spark's own bounds apply and
their CSV header is read by a one-row Spark job instead.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from wap_ingest.core.columns import column_problems
from wap_ingest.core.errors import EmptySourceError, InvalidColumnError, UnreadableSourceError
from wap_ingest.core.models import FileFormat

from .spark_errors import EngineStep, engine_failure

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MAX_CHARS_PER_COLUMN = 1_048_576  # one CSV value, in characters (univocity allocates this buffer per parser)
MAX_LINE_BYTES = 16 * 1024 * 1024  # one CSV line, checked before Spark (which would hold the whole line in memory)
MAX_HEADER_BYTES = 1024 * 1024  # how far the header line is looked for
CHUNK_BYTES = 1024 * 1024

CSV_OPTIONS: dict[str, str] = {
    "header": "true",
    "inferSchema": "true",  # parses every row while reading: a too-long value fails in the READ step
    "mode": "FAILFAST",  # a row with more or fewer fields than the header fails the job instead of becoming nulls
    "encoding": "UTF-8",
    "multiLine": "false",  # records are lines: the file splits across tasks, and `MAX_LINE_BYTES` bounds each one
    "maxCharsPerColumn": str(MAX_CHARS_PER_COLUMN),
    "unescapedQuoteHandling": "STOP_AT_DELIMITER",  # Spark's default, stated: `5'11"` is a value, not an error
}

# A field quoted and closed on its line (then anything to the comma, as Spark's STOP_AT_DELIMITER reads it), or plain;
# possessive and unrolled: one pass over the block, no backtracking.
_FIELD = rb'(?:"[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+"[^,\n]*+|[^,"\n][^,\n]*+|)'
_BALANCED_LINES = re.compile(rb"(?:" + _FIELD + rb"(?:," + _FIELD + rb")*+\n)*+")
_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def read_source(
    spark: Any,
    paths: Sequence[str],
    fmt: FileFormat,
    *,
    source_uri: str,
    table: str,
    names: Mapping[str, str] | None = None,
) -> DataFrame:
    """The files as one DataFrame, schema inferred. `names` maps a path to its object's URI (a batch): messages
    then name the file at fault; otherwise they name `source_uri`. Raises EmptySourceError, InvalidColumnError,
    UnreadableSourceError (the file's fault) or what `engine_failure` gives (EngineLostError, ...)."""
    if not paths:
        raise ValueError("read_source: no path given")
    for path in paths:
        what = (names or {}).get(path, source_uri)
        local = _local(path)
        if local is not None:
            _check_local(local, fmt, what, table)
        elif fmt is FileFormat.CSV:
            _refuse_columns(spark_csv_header(spark, path, what, table), what, table)
    frame: DataFrame
    try:
        if fmt is FileFormat.PARQUET:
            frame = spark.read.parquet(*paths)
        else:
            frame = spark.read.options(**CSV_OPTIONS).csv(list(paths))
        columns = list(frame.schema.fieldNames())  # inference is done by now; this forces it if it was not
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.READ, doing=f"reading {source_uri} as {fmt.value}",
                             source_uri=source_uri, table=table, spark=spark) from exc
    _refuse_columns(columns, source_uri, table)  # Spark's names: a Parquet schema, or a remote CSV's renames
    return frame


def header_of(path: Path | str, fmt: FileFormat) -> str | None:
    """A local file's shape for grouping a batch, read with bounded memory: the CSV header line as written, or the
    Parquet schema from the footer. None when it cannot be read (the file then runs alone, which names why)."""
    try:
        if fmt is FileFormat.PARQUET:
            import pyarrow.parquet as pq

            return str(pq.read_schema(path))
        line = _first_line(Path(path), "the file", MAX_HEADER_BYTES)
        return line.decode("utf-8-sig").strip() or None
    except Exception:
        return None


def csv_header(path: Path, what: str = "the file", *, max_bytes: int = MAX_HEADER_BYTES) -> list[str]:
    """The column names of a local CSV file's header (its first non-blank line, as Spark takes it)."""
    line = _first_line(path, what, max_bytes)
    text = _utf8(line, what, offset=0).removeprefix("\ufeff")
    return next(csv.reader([text], escapechar="\\"), [])


def check_csv_text(path: Path, what: str = "the file", *, max_line_bytes: int | None = None) -> None:
    """One streaming pass over a local CSV file, memory bounded by `max_line_bytes`: UTF-8, no NUL byte, no line
    longer than `max_line_bytes`, every quote opened on a line closed on it. Raises UnreadableSourceError naming the
    byte offset or the line. `max_line_bytes` defaults to MAX_LINE_BYTES."""
    limit = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset, line_no, carry = 0, 1, b""
    with path.open("rb") as handle:
        _refuse_bom(handle.read(4), what)
        handle.seek(0)
        while chunk := handle.read(CHUNK_BYTES):
            data = carry + chunk
            pending = len(decoder.getstate()[0])  # the previous chunk's incomplete last character (end of carry)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                at = len(carry) - pending + exc.start  # in data
                raise _not_utf8(what, offset - pending + exc.start, line_no + data.count(b"\n", 0, at),
                                data[at: at + 1]) from exc
            if (nul := chunk.find(b"\x00")) >= 0:
                raise _not_utf8(what, offset + nul, line_no + data.count(b"\n", 0, len(carry) + nul), b"\x00")
            offset += len(chunk)
            if b"\n" not in chunk:  # inside a long line: nothing to split, only its length to check
                carry = data
                if len(carry) > limit:
                    raise _long_line(what, line_no, limit)
                continue
            lines = data.split(b"\n")
            carry = lines.pop()
            _check_lines(lines, line_no, what, limit)
            if len(carry) > limit:
                raise _long_line(what, line_no + len(lines), limit)
            line_no += len(lines)
    pending = len(decoder.getstate()[0])
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _not_utf8(what, offset - pending + exc.start, line_no, carry[len(carry) - pending:][:1]) from exc
    _check_lines([carry], line_no, what, limit)


# --- internals --------------------------------------------------------------------------------------------------


def _local(path: str) -> Path | None:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else path)
    return None


def _check_local(path: Path, fmt: FileFormat, what: str, table: str) -> None:
    if path.is_file() and path.stat().st_size == 0:
        raise EmptySourceError(f"{what}: the file is empty (0 bytes); nothing to ingest into {table}. "
                               f"Fix: upload the file with its data.")
    if not path.is_file():
        return  # Spark reports the missing path (PATH_NOT_FOUND), classified like any read failure
    if fmt is FileFormat.PARQUET:
        import pyarrow.parquet as pq

        try:
            names = list(pq.read_schema(path).names)
        except Exception:
            return  # not a readable footer: Spark's read says what is wrong, classified by type
        _refuse_columns(names, what, table)
        return
    check_csv_text(path, what)  # the encoding first: a UTF-16 header would otherwise read as odd names
    _refuse_columns(csv_header(path, what), what, table)


def _refuse_columns(names: Sequence[str], what: str, table: str) -> None:
    problems = column_problems(names)
    if problems:
        raise InvalidColumnError(
            f"{what}: cannot be ingested into {table}: its header has column names Spark cannot address: "
            f"{'; '.join(problems)}. Then upload the file again."
        )


def spark_csv_header(spark: Any, path: str, what: str, table: str) -> list[str]:
    """The raw header of a CSV file Spark reaches itself (s3://): one row read without header handling, so the
    names are as written (Spark renames empty and duplicate ones when it takes them as a header)."""
    options = CSV_OPTIONS | {"header": "false", "inferSchema": "false"}
    try:
        rows = spark.read.options(**options).csv(path).limit(1).collect()
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.READ, doing=f"reading the header of {what}", source_uri=what,
                             table=table, spark=spark) from exc
    return ["" if value is None else str(value) for value in rows[0]] if rows else []


def _first_line(path: Path, what: str, max_bytes: int) -> bytes:
    with path.open("rb") as handle:
        head = handle.read(max_bytes + 1)
    _refuse_bom(head[:4], what)
    whole = len(head) <= max_bytes  # the whole file was read: its last line is complete
    for line in head.split(b"\n") if whole else head.split(b"\n")[:-1]:
        if line.strip():
            if len(line) > max_bytes:
                break
            return line.rstrip(b"\r")
    if not head.strip():
        raise EmptySourceError(f"{what}: the file has no header row (it is empty or blank). "
                               f"Fix: upload a CSV file whose first line names the columns.")
    raise UnreadableSourceError(
        f"{what}: no header line within its first {max_bytes} bytes (no line break). Fix: check that it is a CSV "
        f"file with one record per line, whose first line names the columns, and upload it again."
    )


def _utf8(data: bytes, what: str, *, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(what, offset + exc.start, 1, data[exc.start: exc.start + 1]) from exc


def _refuse_bom(head: bytes, what: str) -> None:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            raise UnreadableSourceError(
                f"{what}: the text is {encoding} (it starts with the byte order mark {bom.hex(' ').upper()}), "
                f"not UTF-8. Fix: re-save the file as UTF-8 and upload it again."
            )


def _not_utf8(what: str, offset: int, line: int, byte: bytes) -> UnreadableSourceError:
    shown = f"0x{byte.hex().upper()}" if byte else "an incomplete sequence"
    guess = ("a NUL byte: the text is probably UTF-16" if byte == b"\x00"
             else "not valid UTF-8: the text is probably Latin-1 or Windows-1252")
    return UnreadableSourceError(
        f"{what}: byte {shown} at offset {offset} (line {line}) is {guess}. Fix: re-save the file as UTF-8 and "
        f"upload it again."
    )


def _long_line(what: str, line: int, limit: int) -> UnreadableSourceError:
    return UnreadableSourceError(
        f"{what}: line {line} is longer than {limit} bytes (a missing line break?). Fix: check the line breaks "
        f"and the delimiter (one record per line, comma-separated), and upload it again."
    )


def _check_lines(lines: list[bytes], first: int, what: str, limit: int) -> None:
    if not lines:
        return
    if max(map(len, lines)) > limit:
        raise _long_line(what, first + next(i for i, x in enumerate(lines) if len(x) > limit), limit)
    block = b"\n".join(lines) + b"\n"
    if b'"' not in block:
        return
    balanced = _BALANCED_LINES.match(block)
    if balanced is not None and balanced.end() < len(block):
        line = first + block.count(b"\n", 0, balanced.end())
        raise UnreadableSourceError(
            f"{what}: line {line} opens a quoted value that is not closed on that line (Spark reads CSV one "
            f"line at a time, so a quoted value cannot span lines). Fix: close the quote, or remove the line "
            f"breaks inside quoted values, and upload it again."
        )
