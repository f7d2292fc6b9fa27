"""Source formats: which object suffix is read how, and a table's `format_options` from the audits file.

Compression comes from the suffix (`.gz`, `.bz2`): Spark's readers decompress by the staged file's extension, which
keeps the key's last two suffixes. `format_options` are given in the audits file's words (delimiter, null_value,
...) and validated when the file is loaded, so a typo fails at start-up naming the table, not mid-ingest;
`spark_options` turns them into the reader's options.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping

from .errors import AuditSuiteError, UnsupportedFormatError
from .models import FileFormat, TableRef

SUFFIXES: tuple[tuple[str, FileFormat], ...] = tuple(
    (f"{base}{compressed}", fmt)
    for base, fmt, compressions in (
        (".csv", FileFormat.CSV, (".gz", ".bz2", "")),
        (".tsv", FileFormat.TSV, (".gz", ".bz2", "")),
        (".jsonl", FileFormat.JSON, (".gz", ".bz2", "")),
        (".ndjson", FileFormat.JSON, (".gz", ".bz2", "")),
        (".json", FileFormat.JSON, (".gz", ".bz2", "")),
        (".parquet", FileFormat.PARQUET, ("",)),
        (".pq", FileFormat.PARQUET, ("",)),
        (".orc", FileFormat.ORC, ("",)),
        (".avro", FileFormat.AVRO, ("",)),
    )
    for compressed in compressions
)
COMPRESSIONS = {".gz": "gzip", ".bz2": "bzip2"}
TEXT_FORMATS = (FileFormat.CSV, FileFormat.TSV, FileFormat.JSON)

# The audits file's words -> Spark's reader options, and the formats each applies to.
_CSV = (FileFormat.CSV, FileFormat.TSV)
OPTIONS: dict[str, tuple[str, tuple[FileFormat, ...]]] = {
    "delimiter": ("sep", _CSV),
    "quote": ("quote", _CSV),
    "escape": ("escape", _CSV),
    "header": ("header", _CSV),
    "null_value": ("nullValue", _CSV),
    "encoding": ("encoding", TEXT_FORMATS),
    "date_format": ("dateFormat", TEXT_FORMATS),
    "timestamp_format": ("timestampFormat", TEXT_FORMATS),
    "multiline": ("multiLine", (FileFormat.JSON,)),
}
_ONE_CHARACTER = ("delimiter", "quote", "escape")
_BOOLEAN = ("header", "multiline")
FormatOptions = tuple[tuple[str, str], ...]  # (audits file word, value as a string), sorted


def supported_suffixes() -> str:
    return ", ".join(suffix for suffix, _ in SUFFIXES)


def format_for_key(key: str, *, bucket: str = "", table: TableRef | None = None) -> FileFormat:
    lowered = key.lower()
    for suffix, fmt in SUFFIXES:
        if lowered.endswith(suffix):
            return fmt
    source = f"s3://{bucket}/{key}" if bucket else key
    into = f" for table {table}" if table is not None else ""
    raise UnsupportedFormatError(
        f"{source}{into}: unsupported file type; wap-lake reads {supported_suffixes()}. Fix: convert the file to one "
        f"of these and upload it with that suffix."
    )


def compression_of(name: str) -> str | None:
    lowered = name.lower()
    return next((codec for suffix, codec in COMPRESSIONS.items() if lowered.endswith(suffix)), None)


def format_options_from(raw: object, table: str) -> FormatOptions:
    """Validate a table's `format_options` mapping (audits file)."""
    where = f"audits file: table {table!r}: format_options"
    if not isinstance(raw, Mapping):
        raise AuditSuiteError(f"{where} must be a mapping such as {{delimiter: ';', null_value: 'NA'}}, got {raw!r}.")
    unknown = sorted(str(k) for k in raw if k not in OPTIONS)
    if unknown:
        raise AuditSuiteError(f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(OPTIONS)}.")
    options: dict[str, str] = {}
    for key, value in raw.items():
        if key in _BOOLEAN:
            if not isinstance(value, bool):
                raise AuditSuiteError(f"{where}: {key} must be true or false, got {value!r}.")
            options[key] = "true" if value else "false"
            continue
        if not isinstance(value, str):
            raise AuditSuiteError(f"{where}: {key} must be a string (quote it in YAML), got {value!r}.")
        if key in _ONE_CHARACTER and (len(value) != 1 or not value.isascii() or value == "\n"):
            raise AuditSuiteError(f"{where}: {key} must be one ASCII character other than a line break (a tab: "
                                  f"\"\\t\"), got {value!r}.")
        if key == "encoding":
            try:
                codecs.lookup(value)
            except LookupError:
                raise AuditSuiteError(f"{where}: encoding {value!r} is not a known text encoding (e.g. utf-8, "
                                      f"latin-1, windows-1252).") from None
        options[key] = value
    return tuple(sorted(options.items()))


def spark_options(fmt: FileFormat, options: FormatOptions) -> dict[str, str]:
    """The reader options of `fmt` from a table's format options (those of other formats do not apply)."""
    return {OPTIONS[key][0]: value for key, value in options if fmt in OPTIONS[key][1]}


def option(options: FormatOptions, key: str, default: str) -> str:
    return dict(options).get(key, default)


def is_utf8(options: FormatOptions) -> bool:
    return codecs.lookup(option(options, "encoding", "utf-8")).name == "utf-8"
