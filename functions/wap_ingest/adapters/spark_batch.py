"""SparkBatchWriter: the BatchTableWriter port on the SparkIcebergWriter's session.

A batch of small files for one table costs one read, one measuring pass (grouped by input file), one write
and one Iceberg commit on the branch, instead of one of each per file. Files that cannot join the read (another
format, another header or Parquet schema than the batch's) are reported as unreadable and run alone.

`find_appends` is also the one-file path's exactly-once lookup: a file published in a batch is found by the
numbered identity properties of the batch snapshot (core.batch), a file published alone by the plain one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wap_ingest.adapters.spark import SparkIcebergWriter, table_identifier
from wap_ingest.adapters.spark import _engine_error as engine_error
from wap_ingest.adapters.spark_audit import measure_frame
from wap_ingest.core.batch import IDENTITY_KEY, ROWS_KEY
from wap_ingest.core.errors import BadInputError, WapError
from wap_ingest.core.models import (
    AppendResult,
    BatchAppend,
    FileFormat,
    MeasurementPlan,
    Measurements,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import BatchTableWriter

FILE_COLUMN = "__wap_input_file"


def find_appends(spark: Any, table: TableRef, ref: str, identities: Sequence[str]) -> dict[str, AppendResult]:
    """One read of the table's `snapshots` metadata table on `ref` for all the identities. The identities come
    from object keys: they are compared as literal values, never put into SQL."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    if not identities:
        return {}
    ident = table_identifier(table, ref)
    try:
        entry = F.explode(F.map_entries("summary")).alias("entry")
        rows = (
            spark.table(f"{ident}.snapshots")
            .select("snapshot_id", "parent_id", "summary", entry)
            .filter(F.col("entry.key").startswith(IDENTITY_KEY) & F.col("entry.value").isin(list(identities)))
            .collect()
        )
        if not rows:
            return {}
        columns = tuple(spark.table(ident).columns)
    except AnalysisException as exc:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "cannot be found" in str(exc):
            return {}
        raise engine_error(f"looking for {len(identities)} source(s) in {table} on {ref!r}", exc) from exc
    except Exception as exc:
        raise engine_error(f"looking for {len(identities)} source(s) in {table} on {ref!r}", exc) from exc
    found: dict[str, AppendResult] = {}
    for row in rows:
        key, identity, summary = row["entry"]["key"], row["entry"]["value"], row["summary"]
        if key == IDENTITY_KEY:  # a file appended alone: the snapshot's rows are the file's
            added = summary.get("added-records")
        elif key.startswith(f"{IDENTITY_KEY}."):  # a file of a batch: its own count
            added = summary.get(f"{ROWS_KEY}.{key.removeprefix(IDENTITY_KEY + '.')}")
        else:  # another property that merely starts like it
            continue
        parent = row["parent_id"]
        found.setdefault(identity, AppendResult(
            rows=int(added or 0), snapshot_id=int(row["snapshot_id"]),
            parent_snapshot_id=None if parent is None else int(parent), table_created=parent is None,
            columns=columns,
        ))
    return found


class SparkBatchWriter(BatchTableWriter):
    def __init__(self, writer: SparkIcebergWriter) -> None:
        """Shares the writer's session, staging and table handling: one engine, two ways to feed it."""
        self._writer = writer

    @property
    def _spark(self) -> Any:
        return self._writer._spark

    def find_appends(self, table: TableRef, ref: str, identities: Sequence[str]) -> dict[str, AppendResult]:
        return find_appends(self._spark, table, ref, identities)

    def append_batch(
        self,
        files: Sequence[tuple[SourceObject, FileFormat]],
        table: TableRef,
        branch: str,
        plan: MeasurementPlan,
        accept: Callable[[SourceObject, Measurements], bool],
        properties: Callable[[Sequence[SourceObject]], Mapping[str, str]],
    ) -> BatchAppend:
        staged: list[tuple[SourceObject, FileFormat, Path]] = []
        missing: dict[str, str] = {}
        try:
            for source, fmt in files:
                try:
                    staged.append((source, fmt, Path(self._writer._stage(source))))
                except BadInputError as exc:  # gone or changed since its head: that file alone says so
                    missing[source.identity] = str(exc)
            together, unreadable = _compatible(staged)
            unreadable |= missing
            if not together:
                return BatchAppend(None, (), {}, unreadable)
            return self._append_together(together, unreadable, table, branch, plan, accept, properties)
        finally:
            for _, _, path in staged:
                self._writer._cleanup(path)

    def _append_together(
        self,
        together: list[tuple[SourceObject, FileFormat, Path]],
        unreadable: dict[str, str],
        table: TableRef,
        branch: str,
        plan: MeasurementPlan,
        accept: Callable[[SourceObject, Measurements], bool],
        properties: Callable[[Sequence[SourceObject]], Mapping[str, str]],
    ) -> BatchAppend:
        from pyspark.sql import functions as F

        fmt = together[0][1]
        by_path = {_tag_of(path): source for source, _, path in together}
        try:
            frame = self._read([p for _, _, p in together], fmt).withColumn(FILE_COLUMN, F.input_file_name())
            frame = frame.persist()
        except Exception as exc:  # one of them is corrupt: every file runs alone, which names the bad one
            reason = f"the batch could not be read together ({str(exc).splitlines()[0][:200]})"
            return BatchAppend(None, (), {}, unreadable | {s.identity: reason for s, _, _ in together})
        try:
            columns = tuple(c for c in frame.columns if c != FILE_COLUMN)
            measured = self._measure(frame, columns, plan, by_path)
            accepted = [s for s, _, _ in together if accept(s, measured[s.identity])]
            if not accepted:
                return BatchAppend(None, (), measured, unreadable)
            keep = [_tag_of(p) for s, _, p in together if s in accepted]
            rows = frame.filter(_path_of(F.col(FILE_COLUMN)).isin(keep)).drop(FILE_COLUMN)
            first = accepted[0]
            try:
                created, _ = self._writer._write(rows, first, table, branch, properties(accepted))
            except BadInputError as exc:  # the batch's columns do not fit the table: each file alone says why
                return BatchAppend(None, (), measured, unreadable | {s.identity: str(exc) for s in accepted})
            appended = self._writer._last_append(table, branch, created, columns)
            return BatchAppend(appended, tuple(accepted), measured, unreadable)
        except WapError:
            raise
        except Exception as exc:
            raise engine_error(f"appending {len(together)} files to {table} on {branch!r}", exc) from exc
        finally:
            frame.unpersist()

    def _read(self, paths: list[Path], fmt: FileFormat) -> Any:
        reader = self._spark.read
        names = [str(p) for p in paths]
        if fmt is FileFormat.PARQUET:
            return reader.parquet(*names)
        return reader.option("header", "true").option("inferSchema", "true").option("mode", "FAILFAST").csv(names)

    def _measure(
        self, frame: Any, columns: tuple[str, ...], plan: MeasurementPlan, by_path: Mapping[str, SourceObject]
    ) -> dict[str, Measurements]:
        """Every file's row count and null counts in one grouped pass over the batch; a plan that needs more (row
        rules, keys, freshness, queries) is measured per file with the one-file path's `measure_frame`."""
        from pyspark.sql import functions as F

        wanted = [c for c in plan.null_count_columns if c.lower() in {x.lower() for x in columns}]
        actual = {c.lower(): c for c in columns}
        exprs = [F.count(F.lit(1)).alias("__rows")] + [
            F.sum(F.when(F.col(f"`{actual[c.lower()]}`").isNull(), 1).otherwise(0)).alias(f"__nulls_{i}")
            for i, c in enumerate(wanted)
        ]
        grouped = frame.groupBy(_path_of(F.col(FILE_COLUMN)).alias("__path")).agg(*exprs).collect()
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name != FILE_COLUMN}
        counted = {row["__path"]: row for row in grouped}
        measured: dict[str, Measurements] = {}
        richer = bool(plan.rules or plan.unique_keys or plan.existing_keys or plan.max_columns or plan.queries)
        for tag, source in by_path.items():
            row = counted.get(tag)
            rows = int(row["__rows"]) if row is not None else 0
            if richer and rows:
                own = frame.filter(_path_of(F.col(FILE_COLUMN)) == F.lit(tag)).drop(FILE_COLUMN)
                measured[source.identity] = measure_frame(self._spark, own, plan, row_count=rows)
                continue
            nulls = {actual[c.lower()]: int(row[f"__nulls_{i}"] or 0) for i, c in enumerate(wanted)} if row else {}
            measured[source.identity] = Measurements(row_count=rows, null_counts=nulls, columns=columns, types=types)
        return measured


_STAGED_NAME = re.compile(r"^([0-9a-f]{16}-[0-9a-f]{8})")  # S3ObjectStore.download: <digest>-<uuid><suffix>


def _tag_of(path: Path) -> str:
    """A staged file's unique name stem, or its whole name for a file staged another way."""
    found = _STAGED_NAME.match(path.name)
    return found.group(1) if found else path.name


def _path_of(column: Any) -> Any:
    """The staged file's tag from input_file_name() (a URI): plain SQL functions, no Python UDF."""
    from pyspark.sql import functions as F

    return F.regexp_extract(column, r"([0-9a-f]{16}-[0-9a-f]{8})[^/]*$", 1)


def _compatible(
    staged: list[tuple[SourceObject, FileFormat, Path]],
) -> tuple[list[tuple[SourceObject, FileFormat, Path]], dict[str, str]]:
    """The largest set of files that can be read as one: same format and same header (CSV) or schema (Parquet).
    The others are returned with the reason, and run alone."""
    shapes = {source.identity: (fmt, _shape(path, fmt)) for source, fmt, path in staged}
    counts = Counter(shape for shape in shapes.values() if shape[1] is not None)
    if not counts:
        return [], {s.identity: "its header or schema could not be read" for s, _, _ in staged}
    common = counts.most_common(1)[0][0]
    together = [item for item in staged if shapes[item[0].identity] == common]
    others = {s.identity: "its format or columns differ from the rest of the batch" for s, _, _ in staged
              if shapes[s.identity] != common}
    return together, others


def _shape(path: Path, fmt: FileFormat) -> str | None:
    try:
        if fmt is FileFormat.PARQUET:
            import pyarrow.parquet as pq

            return str(pq.read_schema(path))
        with path.open("rb") as handle:
            header = handle.readline().decode("utf-8-sig").strip()
        return header or None
    except Exception:
        return None
