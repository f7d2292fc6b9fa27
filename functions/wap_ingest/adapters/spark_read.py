"""Reading source files with Spark (interim version; replaced by the full reader with its pre-checks)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import EngineLostError, UnreadableSourceError
from wap_ingest.core.models import FileFormat

from .spark_errors import EngineStep, engine_failure, first_line


def read_source(spark: Any, paths: Sequence[str], fmt: FileFormat, *, source_uri: str, table: str) -> Any:
    try:
        if fmt is FileFormat.PARQUET:
            frame = spark.read.parquet(*paths)
        else:
            frame = (spark.read.option("header", "true").option("inferSchema", "true").option("mode", "FAILFAST")
                     .csv(list(paths)))
        _ = frame.schema
        return frame
    except Exception as exc:
        failure = engine_failure(exc, step=EngineStep.READ, doing=f"reading {source_uri}", source_uri=source_uri,
                                 table=table)
        if isinstance(failure, EngineLostError):
            raise failure from exc
        raise UnreadableSourceError(f"{source_uri}: cannot be read as {fmt.value} ({first_line(exc)}). Fix: check the "
                                    f"file is a valid {fmt.value} file (CSV needs a header row) and upload it again."
                                    ) from exc


def header_of(path: Path, fmt: FileFormat) -> str | None:
    try:
        if fmt is FileFormat.PARQUET:
            import pyarrow.parquet as pq

            return str(pq.read_schema(path))
        with path.open("rb") as handle:
            header = handle.readline(1 << 20).decode("utf-8-sig").strip()
        return header or None
    except Exception:
        return None
