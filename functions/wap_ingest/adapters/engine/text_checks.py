"""The checks Spark cannot make on a local text file (CSV, TSV, JSON lines), in one streaming pass of bounded memory.

Spark reads Latin-1 or UTF-16 text as UTF-8 without complaint (replacement characters, NUL-riddled names), keeps the
rest of a line after an unclosed quote as if it were closed, renames empty and duplicate CSV headers (`_c1`, `name1`),
and holds a whole line in memory before its parser sees it. So before Spark: the text decodes in the table's encoding
(UTF-8 unless `format_options` say otherwise), has no NUL byte, every line is shorter than `MAX_LINE_BYTES`, every
quote opened on a line is closed on it (CSV: Spark reads it line by line), and the header (read with a bounded length)
names columns Spark can address. A `.gz` or `.bz2` file is checked through its decompressed stream.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import functools
import gzip
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from wap_ingest.core.errors import EmptySourceError, UnreadableSourceError
from wap_ingest.core.formats import compression_of

MAX_LINE_BYTES = 16 * 1024 * 1024  # one line, checked before Spark (which would hold the whole line in memory)
MAX_HEADER_BYTES = 1024 * 1024  # how far the header line is looked for
CHUNK_BYTES = 1024 * 1024
_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


@dataclass(frozen=True)
class Dialect:
    """How a text file is split: the CSV delimiter, quote and escape (one byte each), and its encoding."""

    delimiter: str = ","
    quote: str = '"'
    escape: str = "\\"
    encoding: str = "utf-8"

    @property
    def utf8(self) -> bool:
        return codecs.lookup(self.encoding).name == "utf-8"

    @property
    def line_based(self) -> bool:
        """An encoding in which b"\\n" is a line break and NUL is never text (not UTF-16 or UTF-32)."""
        return "\n".encode(self.encoding) == b"\n"


CSV_DIALECT = Dialect()


@functools.lru_cache(maxsize=16)
def _balanced_lines(delimiter: str, quote: str, escape: str) -> re.Pattern[bytes]:
    """Lines whose every field is quoted and closed on the line (then anything to the delimiter, as Spark's
    STOP_AT_DELIMITER reads it) or plain. Possessive and unrolled: one pass over the block, no backtracking."""
    s, q, e = (re.escape(c.encode("latin-1")) for c in (delimiter, quote, escape))
    if escape == quote:  # "" inside a quoted value: the plain quoted form reads it, as Spark does
        quoted = rb"%s[^%s\n]*+%s" % (q, q, q)
    else:
        quoted = rb"%s[^%s%s\n]*+(?:%s[^\n][^%s%s\n]*+)*+%s" % (q, q, e, e, q, e, q)
    field = rb"(?:%s[^%s\n]*+|[^%s%s\n][^%s\n]*+|)" % (quoted, s, s, q, s)
    return re.compile(rb"(?:" + field + rb"(?:" + s + field + rb")*+\n)*+")


@contextmanager
def opened(path: Path, what: str) -> Iterator[BinaryIO]:
    """The file's bytes, decompressed by its suffix; a broken archive is the file's fault."""
    codec = compression_of(path.name)
    try:
        if codec == "gzip":
            with gzip.open(path, "rb") as handle:
                yield handle  # type: ignore[misc]
        elif codec == "bzip2":
            with bz2.open(path, "rb") as handle:
                yield handle  # type: ignore[misc]
        else:
            with path.open("rb") as handle:
                yield handle
    except (gzip.BadGzipFile, EOFError, OSError, ValueError) as exc:
        if codec is None or isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise UnreadableSourceError(
            f"{what}: is not a complete {codec} file ({type(exc).__name__}: {exc}). Fix: compress it again (or upload "
            f"it uncompressed, without the {path.suffix} suffix) and upload it again."
        ) from exc


def first_line(path: Path, what: str, max_bytes: int = MAX_HEADER_BYTES, *, dialect: Dialect = CSV_DIALECT,
               kind: str = "CSV file whose first line names the columns", line: str = "header") -> bytes:
    with opened(path, what) as handle:
        head = handle.read(max_bytes + 1)
    if dialect.utf8:
        _refuse_bom(head[:4], what)
    whole = len(head) <= max_bytes  # the whole file was read: its last line is complete
    for found in head.split(b"\n") if whole else head.split(b"\n")[:-1]:
        if found.strip():
            if len(found) > max_bytes:
                break
            return found.rstrip(b"\r")
    if not head.strip():
        raise EmptySourceError(f"{what}: the file has no {line} row (it is empty or blank). Fix: upload a {kind}.")
    raise UnreadableSourceError(
        f"{what}: no {line} line within its first {max_bytes} bytes (no line break). Fix: check that it is a {kind}, "
        f"one record per line, and upload it again."
    )


def csv_header(path: Path, what: str = "the file", *, max_bytes: int = MAX_HEADER_BYTES,
               dialect: Dialect = CSV_DIALECT) -> list[str]:
    """The column names of a local CSV file's header (its first non-blank line, as Spark takes it)."""
    line = first_line(path, what, max_bytes, dialect=dialect)
    text = _decoded(line, what, dialect).removeprefix("\ufeff")
    return next(csv.reader([text], delimiter=dialect.delimiter, quotechar=dialect.quote,
                           escapechar=None if dialect.escape == dialect.quote else dialect.escape,
                           doublequote=dialect.escape == dialect.quote), [])


def check_json_lines(path: Path, what: str, table: str) -> None:
    """The first line of a JSON lines file is one JSON object (else it is one document, or not JSON)."""
    line = first_line(path, what, MAX_LINE_BYTES, kind="JSON lines file (one object per line)", line="first")
    try:
        value = json.loads(line)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UnreadableSourceError(
            f"{what}: its first line is not a JSON object, so it cannot be read as JSON lines into {table}. Fix: "
            f"write one JSON object per line, or, for one JSON document (an array or a pretty-printed object), set "
            f"`format_options: {{multiline: true}}` for {table} in the audits file; then upload it again."
        )


def check_text(path: Path, what: str = "the file", *, max_line_bytes: int | None = None,
               dialect: Dialect = CSV_DIALECT, quotes: bool = True) -> None:
    """One streaming pass, memory bounded by `max_line_bytes`: the encoding, no NUL byte, no line longer than
    `max_line_bytes`, and (`quotes`) every quote opened on a line closed on it. Raises UnreadableSourceError naming
    the byte offset or the line."""
    if not dialect.line_based:
        return  # UTF-16/32: no byte-level line split; Spark's read decodes it
    limit = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    decoder = codecs.getincrementaldecoder(dialect.encoding)("strict")
    offset, line_no, carry = 0, 1, b""
    with opened(path, what) as handle:
        if dialect.utf8:
            _refuse_bom(handle.read(4), what)
            handle.seek(0)
        while chunk := handle.read(CHUNK_BYTES):
            data = carry + chunk
            pending = len(decoder.getstate()[0])  # the previous chunk's incomplete last character (end of carry)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                at = len(carry) - pending + exc.start  # in data
                raise _not_decodable(what, offset - pending + exc.start, line_no + data.count(b"\n", 0, at),
                                     data[at: at + 1], dialect) from exc
            if (nul := chunk.find(b"\x00")) >= 0:
                raise _not_decodable(what, offset + nul, line_no + data.count(b"\n", 0, len(carry) + nul), b"\x00",
                                     dialect)
            offset += len(chunk)
            if b"\n" not in chunk:  # inside a long line: nothing to split, only its length to check
                carry = data
                if len(carry) > limit:
                    raise _long_line(what, line_no, limit)
                continue
            lines = data.split(b"\n")
            carry = lines.pop()
            _check_lines(lines, line_no, what, limit, dialect if quotes else None)
            if len(carry) > limit:
                raise _long_line(what, line_no + len(lines), limit)
            line_no += len(lines)
    pending = len(decoder.getstate()[0])
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _not_decodable(what, offset - pending + exc.start, line_no, carry[len(carry) - pending:][:1],
                             dialect) from exc
    _check_lines([carry], line_no, what, limit, dialect if quotes else None)


def _decoded(data: bytes, what: str, dialect: Dialect) -> str:
    try:
        return data.decode(dialect.encoding)
    except UnicodeDecodeError as exc:
        raise _not_decodable(what, exc.start, 1, data[exc.start: exc.start + 1], dialect) from exc


def _refuse_bom(head: bytes, what: str) -> None:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            raise UnreadableSourceError(
                f"{what}: the text is {encoding} (it starts with the byte order mark {bom.hex(' ').upper()}), "
                f"not UTF-8. Fix: re-save the file as UTF-8 and upload it again."
            )


def _not_decodable(what: str, offset: int, line: int, byte: bytes, dialect: Dialect) -> UnreadableSourceError:
    shown = f"0x{byte.hex().upper()}" if byte else "an incomplete sequence"
    if byte == b"\x00":
        guess = "a NUL byte: the text is probably UTF-16"
    elif dialect.utf8:
        guess = "not valid UTF-8: the text is probably Latin-1 or Windows-1252"
    else:
        guess = f"not valid {dialect.encoding}"
    return UnreadableSourceError(
        f"{what}: byte {shown} at offset {offset} (line {line}) is {guess}. Fix: re-save the file as UTF-8 and "
        f"upload it again (or set the table's `format_options: {{encoding: ...}}` in the audits file)."
    )


def _long_line(what: str, line: int, limit: int) -> UnreadableSourceError:
    return UnreadableSourceError(
        f"{what}: line {line} is longer than {limit} bytes (a missing line break?). Fix: check the line breaks "
        f"and the delimiter (one record per line), and upload it again."
    )


def _check_lines(lines: list[bytes], first: int, what: str, limit: int, dialect: Dialect | None) -> None:
    if not lines:
        return
    if max(map(len, lines)) > limit:
        raise _long_line(what, first + next(i for i, x in enumerate(lines) if len(x) > limit), limit)
    if dialect is None:
        return
    block = b"\n".join(lines) + b"\n"
    if dialect.quote.encode("latin-1") not in block:
        return
    balanced = _balanced_lines(dialect.delimiter, dialect.quote, dialect.escape).match(block)
    if balanced is not None and balanced.end() < len(block):
        line = first + block.count(b"\n", 0, balanced.end())
        raise UnreadableSourceError(
            f"{what}: line {line} opens a quoted value that is not closed on that line (Spark reads CSV one "
            f"line at a time, so a quoted value cannot span lines). Fix: close the quote, or remove the line "
            f"breaks inside quoted values, and upload it again."
        )
