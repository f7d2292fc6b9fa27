"""Reading a source file with Spark, after the checks Spark cannot make (issue 13, items 4 and 6; issue 16, item 4;
issue 24, item 6).

A local text file (CSV, TSV, JSON lines; `.gz`/`.bz2` too) is checked first by text_checks, in one streaming pass
of bounded memory; a CSV header (read with a bounded length) must name columns Spark can address. A local Parquet,
ORC or Avro file is checked by columnar_checks (Parquet decoded in full, ORC's postscript and stripes, Avro's
blocks), and the names in its footer must be addressable too. Then Spark reads with FAILFAST options and a bounded
value length, schema inference forced, and the table's `format_options` (core.formats); any failure is classified by
`spark_errors.engine_failure` (step READ).

Paths with a scheme (s3://, as an EMR job reads its input) are not opened here: only Spark's own bounds apply and
their CSV header is read by a one-row Spark job instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from wap_ingest.adapters.engine.columnar_checks import check_avro, orc_columns
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure
from wap_ingest.adapters.engine.parquet_decode import check_parquet
from wap_ingest.adapters.engine.py4j_lookup import static
from wap_ingest.adapters.engine.text_checks import (
    CHUNK_BYTES,
    MAX_HEADER_BYTES,
    MAX_LINE_BYTES,
    Dialect,
    check_json_lines,
    check_text,
    csv_header,
    first_line,
)
from wap_ingest.core.columns import column_problems
from wap_ingest.core.errors import EmptySourceError, InvalidColumnError, WapError
from wap_ingest.core.formats import FormatOptions, option, spark_options
from wap_ingest.core.models import FileFormat

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CHUNK_BYTES", "MAX_CHARS_PER_COLUMN", "MAX_LINE_BYTES", "check_csv_text", "csv_header", "header_of",
           "read_source", "spark_csv_header"]

MAX_CHARS_PER_COLUMN = 1_048_576  # one CSV value, in characters (univocity allocates this buffer per parser)

CSV_OPTIONS: dict[str, str] = {
    "header": "true",
    "inferSchema": "true",  # parses every row while reading: a too-long value fails in the READ step
    "mode": "FAILFAST",  # a row with more or fewer fields than the header fails the job instead of becoming nulls
    "encoding": "UTF-8",
    "multiLine": "false",  # records are lines: the file splits across tasks, and `MAX_LINE_BYTES` bounds each one
    "maxCharsPerColumn": str(MAX_CHARS_PER_COLUMN),
    "unescapedQuoteHandling": "STOP_AT_DELIMITER",  # Spark's default, stated: `5'11"` is a value, not an error
}

JSON_OPTIONS: dict[str, str] = {"mode": "FAILFAST", "multiLine": "false"}


def dialect_of(fmt: FileFormat, options: FormatOptions) -> Dialect:
    default = "\t" if fmt is FileFormat.TSV else ","
    return Dialect(delimiter=option(options, "delimiter", default), quote=option(options, "quote", '"'),
                   escape=option(options, "escape", "\\"), encoding=option(options, "encoding", "utf-8"))


def reader_options(fmt: FileFormat, options: FormatOptions) -> dict[str, str]:
    """Spark's options for `fmt`: the bounds above, then the table's format options."""
    if fmt in (FileFormat.CSV, FileFormat.TSV):
        base = CSV_OPTIONS | ({"sep": "\t"} if fmt is FileFormat.TSV else {})
        return base | spark_options(fmt, options)
    if fmt is FileFormat.JSON:
        return JSON_OPTIONS | spark_options(fmt, options)
    return {}


def read_source(
    spark: Any,
    paths: Sequence[str],
    fmt: FileFormat,
    *,
    source_uri: str,
    table: str,
    names: Mapping[str, str] | None = None,
    options: FormatOptions = (),
) -> DataFrame:
    """The files as one DataFrame, schema inferred. `names` maps a path to its object's URI (a batch): messages
    then name the file at fault; otherwise they name `source_uri`. `options`: the table's format options. Raises
    EmptySourceError, InvalidColumnError, UnreadableSourceError (the file's fault) or what `engine_failure` gives
    (EngineLostError, ...)."""
    if not paths:
        raise ValueError("read_source: no path given")
    csv_like = fmt in (FileFormat.CSV, FileFormat.TSV)
    with_header = option(options, "header", "true") == "true"
    for path in paths:
        what = (names or {}).get(path, source_uri)
        local = _local(path)
        if local is not None:
            _check_local(spark, local, fmt, what, table, options)
        elif csv_like and with_header:
            _refuse_columns(spark_csv_header(spark, path, what, table, fmt, options), what, table)
    frame: DataFrame
    try:
        if fmt is FileFormat.PARQUET:
            known = footer_schema(spark, paths[0]) if all(_local(p) for p in paths) else None
            frame = (spark.read if known is None else spark.read.schema(known)).parquet(*paths)
        elif fmt is FileFormat.ORC:
            frame = spark.read.orc(*paths)
        elif fmt is FileFormat.AVRO:
            frame = spark.read.format("avro").load(list(paths))
        elif fmt is FileFormat.JSON:
            frame = spark.read.options(**reader_options(fmt, options)).json(list(paths))
        else:
            frame = spark.read.options(**reader_options(fmt, options)).csv(list(paths))
        columns = list(frame.schema.fieldNames())  # inference is done by now; this forces it if it was not
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.READ, doing=f"reading {source_uri} as {fmt.value}",
                             source_uri=source_uri, table=table, spark=spark) from exc
    _refuse_columns(columns, source_uri, table)  # Spark's names: a file's schema, or a remote CSV's renames
    return frame


def footer_schema(spark: Any, path: str) -> Any | None:
    """The Spark schema of a local Parquet file as Spark's own inference makes it (the footer read with
    Spark's converter and its session settings), read in the driver: inference runs the same code as a one-task
    Spark job, which a small file pays for on every read. With several files of one batch (grouped by identical
    footers), Spark's inference reads one footer too. None if the footer cannot be read: Spark's read then
    infers the schema itself and its error is classified as before."""
    try:
        jvm, state = spark.sparkContext._jvm, spark._jsparkSession.sessionState()
        parquet = "org.apache.spark.sql.execution.datasources.parquet"
        hadoop_path = static(jvm, "org.apache.hadoop.fs.Path")(str(_local(path)))
        footer = static(jvm, "org.apache.parquet.hadoop.ParquetFileReader", "readFooter")(
            state.newHadoopConf(), hadoop_path,
            static(jvm, "org.apache.parquet.format.converter.ParquetMetadataConverter", "SKIP_ROW_GROUPS"))
        converter = static(jvm, f"{parquet}.ParquetToSparkSchemaConverter")(state.conf())
        schema = static(jvm, f"{parquet}.ParquetFileFormat", "readSchemaFromFooter")(
            static(jvm, "org.apache.parquet.hadoop.Footer")(hadoop_path, footer), converter)
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(schema.json()))
    except Exception:
        return None


def header_of(path: Path | str, fmt: FileFormat, spark: Any = None) -> str | None:
    """A local file's shape for grouping a batch, read with bounded memory: the CSV header line as written, or the
    Parquet/ORC schema from the footer (ORC's through the engine's reader: `spark`, by default PySpark's active
    session). None when it cannot be read or has no header (JSON, Avro: the file then runs alone)."""
    try:
        if fmt is FileFormat.PARQUET:
            import pyarrow.parquet as pq

            return str(pq.read_schema(path))
        if fmt is FileFormat.ORC:
            return _orc_columns(spark or _active_session(), Path(path), "the file", "the table")[1]
        if fmt not in (FileFormat.CSV, FileFormat.TSV):
            return None
        line = first_line(Path(path), "the file", MAX_HEADER_BYTES)
        return line.decode('utf-8-sig').strip() or None
    except Exception:
        return None


def check_csv_text(path: Path, what: str = "the file", *, max_line_bytes: int | None = None) -> None:
    """A UTF-8, comma-separated file's text checks (text_checks.check_text with the default dialect)."""
    check_text(path, what, max_line_bytes=max_line_bytes)


# --- internals --------------------------------------------------------------------------------------------------


def _local(path: str) -> Path | None:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else path)
    return None


def _orc_columns(spark: Any, path: Path, what: str, table: str) -> tuple[list[str], str]:
    """An ORC file's names and schema through the engine's (Java) ORC reader: pyarrow's crashes the process on some
    damaged footers. Raises UnreadableSourceError, or what `engine_failure` makes of the reader's exceptions."""
    if spark is None:
        raise ValueError("no Spark session to read an ORC footer with")
    try:
        return orc_columns(spark.sparkContext._jvm, spark._jsparkSession.sessionState().newHadoopConf(), path, what,
                           table)
    except WapError:
        raise
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.READ, doing=f"reading the footer of {what}", source_uri=what,
                             table=table, spark=spark) from exc


def _active_session() -> Any:
    """The process's session, if one was started (never starts one)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession._instantiatedSession


def _check_local(spark: Any, path: Path, fmt: FileFormat, what: str, table: str, options: FormatOptions) -> None:
    if path.is_file() and path.stat().st_size == 0:
        raise EmptySourceError(f"{what}: the file is empty (0 bytes); nothing to ingest into {table}. "
                               f"Fix: upload the file with its data.")
    if not path.is_file():
        return  # Spark reports the missing path (PATH_NOT_FOUND), classified like any read failure
    if fmt is FileFormat.PARQUET:
        _refuse_columns(check_parquet(path, what, table), what, table)  # no names: pyarrow could not tell
        return
    if fmt is FileFormat.ORC:
        _refuse_columns(_orc_columns(spark, path, what, table)[0], what, table)
        return
    if fmt is FileFormat.AVRO:
        check_avro(path, what, table)  # the container; Spark's read decodes it, and the names are checked after it
        return
    dialect, named = dialect_of(fmt, options), f"{what} (for {table})"
    if fmt is FileFormat.JSON:
        check_text(path, named, dialect=dialect, quotes=False)
        if option(options, "multiline", "false") != "true":
            check_json_lines(path, what, table)
        return
    check_text(path, named, dialect=dialect)  # the encoding first: a UTF-16 header would otherwise read as odd names
    if option(options, "header", "true") == "true":
        _refuse_columns(csv_header(path, named, dialect=dialect), what, table)


def _refuse_columns(names: Sequence[str], what: str, table: str) -> None:
    problems = column_problems(names)
    if problems:
        raise InvalidColumnError(
            f"{what}: cannot be ingested into {table}: its header has column names Spark cannot address: "
            f"{'; '.join(problems)}. Then upload the file again."
        )


def spark_csv_header(spark: Any, path: str, what: str, table: str, fmt: FileFormat = FileFormat.CSV,
                     options: FormatOptions = ()) -> list[str]:
    """The raw header of a CSV file Spark reaches itself (s3://): one row read without header handling, so the
    names are as written (Spark renames empty and duplicate ones when it takes them as a header)."""
    raw = reader_options(fmt, options) | {"header": "false", "inferSchema": "false"}
    try:
        rows = spark.read.options(**raw).csv(path).limit(1).collect()
    except Exception as exc:
        raise engine_failure(exc, step=EngineStep.READ, doing=f"reading the header of {what}", source_uri=what,
                             table=table, spark=spark) from exc
    return ["" if value is None else str(value) for value in rows[0]] if rows else []
