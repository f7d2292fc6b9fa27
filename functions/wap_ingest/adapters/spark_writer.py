"""SparkIcebergWriter: the TableWriter port on PySpark + Iceberg, with Nessie as the Iceberg catalog.

One file: stage it, read it, append it in one snapshot, then measure the new rows from that snapshot (its files'
metrics answer what they can without reading rows). Several files of one table: stage them, read together those
that share a format and header/schema, measure each file in one grouped pass, leave out the files `keep`
refuses, and append the rest in one snapshot carrying each file's identity and rows (core.lineage).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from wap_ingest.core import lineage
from wap_ingest.core.errors import BadInputError, EngineLostError, WapError
from wap_ingest.core.formats import FormatOptions
from wap_ingest.core.layout import Layout
from wap_ingest.core.models import (
    Appended,
    AppendResult,
    FileFormat,
    MeasurementPlan,
    Measurements,
    QuarantinePlan,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import TableWriter

from .spark_audit import added_file_metrics, measure_frame
from .spark_batch import FILE_COLUMN, compatible, measure_grouped, path_of, tag_of
from .spark_errors import EngineStep, engine_failure, first_line, gateway_alive
from .spark_quarantine import Split, split_rows
from .spark_read import read_source
from .spark_session import SparkEngine
from .spark_tables import IcebergTables, table_identifier

Stage = Callable[[SourceObject], Path | str]


class SparkIcebergWriter(TableWriter):
    def __init__(self, engine: SparkEngine, stage: Stage, *, cleanup: Callable[[Path | str], None] | None = None
                 ) -> None:
        """`stage` makes a source object readable by Spark (a local copy, or its s3:// URI on EMR)."""
        self._engine = engine
        self._stage = stage
        self._cleanup = cleanup or remove_local

    @property
    def spark(self) -> Any:
        """The live session (a fresh one if the last one died)."""
        return self._engine.session()

    def append(
        self,
        files: Sequence[tuple[SourceObject, FileFormat]],
        table: TableRef,
        branch: str,
        plan: MeasurementPlan,
        *,
        keep: Callable[[SourceObject, Measurements], bool] | None = None,
        allow_new_columns: bool = False,
        read_options: FormatOptions = (),
        quarantine: QuarantinePlan | None = None,
        layout: Layout | None = None,
        keep_snapshots: int | None = None,
    ) -> Appended:
        with IcebergTables(self.spark, keep_snapshots) as tables, \
                _engine_lost_is_infrastructure(tables.spark, f"appending {len(files)} file(s) to {table}"):
            if len(files) == 1:
                source, fmt = files[0]
                return self._append_one(tables, source, fmt, table, branch, plan, allow_new_columns, read_options,
                                        quarantine, layout)
            return self._append_many(tables, files, table, branch, plan, keep, allow_new_columns, read_options,
                                     layout)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        with IcebergTables(self.spark) as tables, \
                _engine_lost_is_infrastructure(tables.spark, f"looking for a source in {table}"):
            return tables.find_append(table, ref, identity)

    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        with IcebergTables(self.spark) as tables, \
                _engine_lost_is_infrastructure(tables.spark, f"auditing the new rows of {table}"):
            return self._measure(tables, table, branch, appended, plan)

    def _append_one(
        self, tables: IcebergTables, source: SourceObject, fmt: FileFormat, table: TableRef, branch: str,
        plan: MeasurementPlan, allow_new_columns: bool, read_options: FormatOptions,
        quarantine: QuarantinePlan | None = None, layout: Layout | None = None,
    ) -> Appended:
        staged, split = self._stage(source), None
        properties = lineage.snapshot_properties([(source, 0)])
        try:
            frame = read_source(tables.spark, [str(staged)], fmt, source_uri=source.uri, table=table.qualified,
                                options=read_options)
            if quarantine is not None:
                split = self._split(tables, frame, quarantine, source.uri, table)
            created, added = tables.write(frame if split is None else split.good, source.uri, table, branch,
                                          properties, allow_new_columns=allow_new_columns, layout=layout)
            appended = tables.last_append(table, branch, created, tuple(frame.columns), added)
            if split is not None and quarantine is not None:  # the same lineage: exactly once for both tables
                tables.write(split.bad, source.uri, quarantine.table, branch, properties, allow_new_columns=True)
        finally:
            if split is not None:
                split.release()
            self._cleanup(staged)
        if appended is None or appended.rows == 0:  # the caller says the file is empty
            return Appended(appended, (), {source.identity: Measurements(row_count=0)})
        measured = self._measure(tables, table, branch, appended, plan)
        moved = {source.identity: split.quarantined} if split is not None else {}
        return Appended(appended, (source,), {source.identity: measured}, quarantined=moved)

    @staticmethod
    def _split(tables: IcebergTables, frame: Any, quarantine: QuarantinePlan, uri: str,
               table: TableRef) -> Split | None:
        try:
            return split_rows(tables.spark, frame, quarantine, uri)
        except WapError:
            raise
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.MEASURE, doing=f"finding the rows of {uri} to quarantine",
                                 source_uri=uri, table=table.qualified) from exc

    def _measure(
        self, tables: IcebergTables, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        """The new rows are the incremental scan of the append's snapshot (only the data files it added); the
        files' metrics from its manifests answer what they can before any row is read."""
        spark = tables.spark
        ident = table_identifier(table, branch)
        reader = spark.read.format("iceberg")
        if appended.parent_snapshot_id is None:
            reader = reader.option("snapshot-id", str(appended.snapshot_id))
        else:  # an incremental scan: only the data files this snapshot added
            reader = reader.option("start-snapshot-id", str(appended.parent_snapshot_id)).option(
                "end-snapshot-id", str(appended.snapshot_id))
        try:
            bounds_for = [r.column for r in plan.rules if r.kind == "range"] + list(plan.max_columns)
            metrics = added_file_metrics(spark, tables.iceberg_table(table, branch), appended.snapshot_id, bounds_for)
            base = None
            if plan.existing_keys and appended.parent_snapshot_id is not None:  # the table as it was on main
                base = spark.read.format("iceberg").option("snapshot-id", str(appended.parent_snapshot_id)).load(ident)
            measured = measure_frame(spark, reader.load(ident), plan, row_count=appended.rows, metrics=metrics,
                                     base=base)
        except WapError:
            raise
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.MEASURE, doing=f"auditing the new rows of {table} on "
                                 f"{branch!r}", table=table.qualified) from exc
        return replace(measured, added_columns=appended.added_columns)

    def _append_many(
        self, tables: IcebergTables, files: Sequence[tuple[SourceObject, FileFormat]], table: TableRef, branch: str,
        plan: MeasurementPlan, keep: Callable[[SourceObject, Measurements], bool] | None, allow_new_columns: bool,
        read_options: FormatOptions, layout: Layout | None = None,
    ) -> Appended:
        staged: list[tuple[SourceObject, FileFormat, Path]] = []
        left_out: dict[str, str] = {}
        try:
            for source, fmt in files:
                try:
                    staged.append((source, fmt, Path(self._stage(source))))
                except BadInputError as exc:  # gone or changed since its head: that file alone says so
                    left_out[source.identity] = str(exc)
            together, others = compatible(staged)
            left_out |= others
            if not together:
                return Appended(None, (), {}, left_out)
            return self._write_together(tables, together, left_out, table, branch, plan, keep, allow_new_columns,
                                        read_options, layout)
        finally:
            for _, _, path in staged:
                self._cleanup(path)

    def _write_together(
        self, tables: IcebergTables, together: list[tuple[SourceObject, FileFormat, Path]], left_out: dict[str, str],
        table: TableRef, branch: str, plan: MeasurementPlan, keep: Callable[[SourceObject, Measurements], bool] | None,
        allow_new_columns: bool, read_options: FormatOptions, layout: Layout | None = None,
    ) -> Appended:
        from pyspark.sql import functions as F

        spark = tables.spark
        by_tag = {tag_of(path): source for source, _, path in together}
        why = "it could not be read together with the other files (it runs alone)"
        apart = {s.identity: why for s, _, _ in together}
        try:
            frame = read_source(spark, [str(p) for _, _, p in together], together[0][1],
                                source_uri=f"{len(together)} files for {table}", table=table.qualified,
                                names={str(p): s.uri for s, _, p in together}, options=read_options)
            frame = frame.withColumn(FILE_COLUMN, F.input_file_name()).persist()
        except BadInputError:  # one of them is bad: each alone says which and why
            return Appended(None, (), {}, left_out | apart)
        try:
            columns = tuple(c for c in frame.columns if c != FILE_COLUMN)
            try:
                measured = measure_grouped(spark, frame, columns, plan, by_tag)
            except WapError:
                raise
            except Exception as exc:  # data pages are decoded here: a corrupt file is the file's fault, alone
                failure = engine_failure(exc, step=EngineStep.READ, doing=f"reading {len(together)} files for {table}",
                                         source_uri=together[0][0].uri, table=table.qualified)
                if isinstance(failure, BadInputError):
                    return Appended(None, (), {}, left_out | apart)
                raise failure from exc
            accepted = [s for s, _, _ in together if keep is None or keep(s, measured[s.identity])]
            if not accepted:
                return Appended(None, (), measured, left_out)
            tags = [tag_of(p) for s, _, p in together if s in accepted]
            rows = frame.filter(path_of(F.col(FILE_COLUMN)).isin(tags)).drop(FILE_COLUMN)
            loaded = [(s, measured[s.identity].row_count) for s in accepted]
            try:
                created, added = tables.write(rows, accepted[0].uri, table, branch, lineage.snapshot_properties(loaded),
                                              allow_new_columns=allow_new_columns, layout=layout)
            except BadInputError as exc:  # the batch's columns do not fit the table: each file alone says why
                return Appended(None, (), measured, left_out | {s.identity: str(exc) for s in accepted})
            appended = tables.last_append(table, branch, created, columns, added)
            return Appended(appended, tuple(accepted), measured, left_out)
        except WapError:
            raise
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.WRITE, doing=f"appending {len(together)} files to {table} on "
                                 f"{branch!r}", table=table.qualified) from exc
        finally:
            with contextlib.suppress(Exception):  # a dead engine has nothing to free
                frame.unpersist()


@contextlib.contextmanager
def _engine_lost_is_infrastructure(spark: Any, doing: str) -> Iterator[None]:
    """Whatever a failure looked like (a Py4J error, an unreadable file), if the engine is dead afterwards the file
    was not the problem: it is an infrastructure failure, retried, and the next use starts a fresh engine."""
    try:
        yield
    except Exception as exc:
        if spark is not None and not gateway_alive(spark):
            raise EngineLostError(f"{doing}: the Spark engine died ({first_line(exc)}); the file will be retried "
                                  f"and this process starts a fresh engine.") from exc
        raise


def remove_local(staged: Path | str) -> None:
    path = Path(staged)
    if path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
