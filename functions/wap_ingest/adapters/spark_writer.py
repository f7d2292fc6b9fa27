"""SparkIcebergWriter: the TableWriter port on PySpark + Iceberg, with Nessie as the Iceberg catalog.

One file (`append`): a Parquet file whose schema fits the table as it is is registered (spark_register: its footer
read, the object copied server-side into the table's location and appended as a data file with its footer's
metrics; no Spark job); any other file is rewritten: staged, read, appended in one snapshot. Either way the new rows
are then measured from that snapshot (its files' metrics answer what they can without reading rows), and the
result says which path ran and why (`Appended.write`; the snapshot carries it too, core.lineage). Several files of
one table (`stage`): stage them, read together those that share a format and header/schema, measure each file in
one grouped pass; the core audits them, and `append` on the staged files writes the ones it accepts in one snapshot
carrying each file's identity and rows (core.lineage), from the rows already read. Files read together are always
rewritten: the group's point is one read, one measuring pass and one snapshot for many small files, written as few
data files (registering each would add as many small data files to the table, and a group's files are measured before
any of them is appended, where a registered file is measured through the table).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from wap_ingest.core import lineage
from wap_ingest.core.errors import BadInputError, EngineLostError, NotRegistrableError, WapError
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
from wap_ingest.core.ports import StagedFiles, TableWriter, WriteSpec
from wap_ingest.core.write_paths import REGISTERED, REWRITTEN, WritePath

from .columnar_checks import check_parquet
from .py4j_lookup import static
from .spark_audit import added_file_metrics, data_file_metrics, measure_frame
from .spark_batch import FILE_COLUMN, compatible, measure_grouped, path_of, tag_of
from .spark_deadline import Deadline, within
from .spark_errors import EngineStep, engine_failure, first_line, gateway_alive
from .spark_quarantine import Split, split_rows
from .spark_read import read_source
from .spark_register import LakeCopies, Registration, register
from .spark_session import SparkEngine
from .spark_tables import IcebergTables, table_identifier

Stage = Callable[[SourceObject, Callable[[], bool]], Path | str]  # (the version, "stop now?") -> what Spark reads
log = logging.getLogger(__name__)


class SparkIcebergWriter(TableWriter):
    def __init__(self, engine: SparkEngine, stage: Stage, *, cleanup: Callable[[Path | str], None] | None = None,
                 lake: LakeCopies | None = None, decode_before_register: bool = True) -> None:
        """`stage` makes a source object readable by Spark (a local copy, or its s3:// URI on EMR); it stops when
        asked (the invocation's deadline). `lake` reads a source's footer and copies it into a table's location
        (None: every file is rewritten). `decode_before_register`: a file to be registered is staged and its every
        page decoded first (adapters/columnar_checks.py), as the rewrite path checks what it reads; off where
        staging is a copy in S3 (EMR), whose cluster's readers decide, as for a rewrite there."""
        self._engine = engine
        self._stage = stage
        self._cleanup = cleanup or remove_local
        self._lake = lake
        self._decode_before_register = decode_before_register

    @property
    def spark(self) -> Any:
        """The live session (a fresh one if the last one died)."""
        return self._engine.session()

    def start(self) -> None:
        self._engine.start_in_background()

    def append(self, spec: WriteSpec, source: SourceObject, fmt: FileFormat) -> Appended:
        doing = f"appending {source.uri} to {spec.table}"
        with IcebergTables(self.spark) as tables, _engine_lost_is_infrastructure(tables.spark, doing), \
                within(tables.spark, spec.out_of_time, doing) as deadline:
            return self._append_one(tables, spec, source, fmt, deadline)

    def stage(self, spec: WriteSpec, files: Sequence[tuple[SourceObject, FileFormat]]) -> StagedFiles:
        spark, doing = self.spark, f"reading {len(files)} file(s) for {spec.table}"
        with _engine_lost_is_infrastructure(spark, doing), within(spark, spec.out_of_time, doing) as deadline:
            return _SparkStaged.read(self, spark, spec, files, deadline)

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

    def _append_one(self, tables: IcebergTables, spec: WriteSpec, source: SourceObject, fmt: FileFormat,
                    deadline: Deadline) -> Appended:
        properties = lineage.snapshot_properties([(source, 0)])
        reason = self._rewrite_reason(spec, fmt)
        if reason is None and self._lake is not None:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wap-decode") as meanwhile:
                # the pages are decoded (another thread, the isolation worker) while the footer is judged and the
                # object copied; registration waits for the verdict before it writes anything to the table
                decoded = meanwhile.submit(self._decode_pages, spec, source, deadline)
                found = register(tables, self._lake, source, spec.table, spec.branch, properties, spec.layout,
                                 ready=decoded.result)
                decoded.result()  # also when the file is to be rewritten: a damaged file is INVALID either way
            if not isinstance(found, str):
                log.info("registered %s as a data file of %s on %s: %s (%s)", source.uri, spec.table, spec.branch,
                         found.location, found.reason)
                appended = tables.last_append(spec.table, spec.branch, found.created, found.columns)
                return self._measured(tables, spec, source, appended, found)
            reason = found
        if spec.write == "register":
            raise NotRegistrableError(
                f"{source.uri}: cannot be registered into {spec.table} as it is ({reason}), and the table says "
                f"`write: register` in the audits file. Fix: upload a Parquet file whose columns and types are the "
                f"table's, or set `write: auto` for {spec.table.name} so such files are rewritten.")
        log.info("rewriting %s into %s on %s: %s", source.uri, spec.table, spec.branch, reason)
        return self._rewrite(tables, spec, source, fmt, properties, WritePath(REWRITTEN, str(reason)), deadline)

    def _decode_pages(self, spec: WriteSpec, source: SourceObject, deadline: Deadline) -> None:
        """A registered file reaches every reader of the table without any engine having read it: a page that does
        not decode would be on `main`. Raises UnreadableSourceError (INVALID, naming the column) for damaged bytes."""
        if not self._decode_before_register:
            return
        staged = self._stage(source, deadline.passed)
        try:
            check_parquet(Path(staged), source.uri, spec.table.qualified)
        finally:
            self._cleanup(staged)

    def _rewrite_reason(self, spec: WriteSpec, fmt: FileFormat) -> str | None:
        """Why the file is rewritten whatever its schema, or None (its footer decides)."""
        if spec.write == "rewrite":
            return "write: rewrite in the audits file"
        if fmt is not FileFormat.PARQUET:
            return f"a {fmt.value} file (only Parquet files are registered)"
        if spec.quarantine is not None:
            return "the table quarantines failing rows (on_failure: quarantine writes the good rows as a new file)"
        if spec.layout is not None and spec.layout.sort:
            return "the table's layout sorts its rows (sort_by)"
        if self._lake is None:
            return "this engine has no object store to copy files into the lake"
        return None

    def _measured(self, tables: IcebergTables, spec: WriteSpec, source: SourceObject, appended: AppendResult | None,
                  registration: Registration) -> Appended:
        """A registered file's new rows measured; a failure to decode them is the file's (its pages, as uploaded)."""
        write = {source.identity: WritePath(REGISTERED, registration.reason)}
        if appended is None or appended.rows == 0:  # the caller says the file is empty
            return Appended(appended, (), {source.identity: Measurements(row_count=0)}, write=write)
        measured = self._measure(tables, spec.table, spec.branch, appended, spec.plan, source=source,
                                 data_file=registration.data_file)
        return Appended(appended, (source,), {source.identity: measured}, write=write)

    def _rewrite(self, tables: IcebergTables, spec: WriteSpec, source: SourceObject, fmt: FileFormat,
                 properties: dict[str, str], path: WritePath, deadline: Deadline) -> Appended:
        table, branch, quarantine = spec.table, spec.branch, spec.quarantine
        staged, split = self._stage(source, deadline.passed), None
        properties = properties | lineage.write_properties([path])
        try:
            frame = read_source(tables.spark, [str(staged)], fmt, source_uri=source.uri, table=table.qualified,
                                options=spec.read_options)
            if quarantine is not None:
                split = self._split(tables, frame, quarantine, source.uri, table)
            created, added = tables.write(frame if split is None else split.good, source.uri, table, branch,
                                          properties, allow_new_columns=spec.allow_new_columns, layout=spec.layout)
            appended = tables.last_append(table, branch, created, tuple(frame.columns), added)
            if split is not None and quarantine is not None:  # the same lineage: exactly once for both tables
                tables.write(split.bad, source.uri, quarantine.table, branch, properties, allow_new_columns=True)
        finally:
            if split is not None:
                split.release()
            self._cleanup(staged)
        write = {source.identity: path}
        if appended is None or appended.rows == 0:  # the caller says the file is empty
            return Appended(appended, (), {source.identity: Measurements(row_count=0)}, write=write)
        measured = self._measure(tables, table, branch, appended, spec.plan)
        moved = {source.identity: split.quarantined} if split is not None else {}
        return Appended(appended, (source,), {source.identity: measured}, quarantined=moved, write=write)

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
        self, tables: IcebergTables, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan,
        *, source: SourceObject | None = None, data_file: Any = None,
    ) -> Measurements:
        """The new rows are the incremental scan of the append's snapshot (only the data files it added); the
        files' metrics from its manifests answer what they can before any row is read. `source`: the registered
        file those data files are, whose undecodable pages are its own fault (else a failure here is the engine's)."""
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
            iceberg = tables.iceberg_table(table, branch)
            metrics = added_file_metrics(spark, iceberg, appended.snapshot_id, bounds_for) if data_file is None else \
                data_file_metrics(spark, iceberg, static(spark.sparkContext._jvm, "java.util.Collections",
                                                         "singletonList")(data_file).iterator(), bounds_for)
            base = None
            if plan.existing_keys and appended.parent_snapshot_id is not None:  # the table as it was on main
                base = spark.read.format("iceberg").option("snapshot-id", str(appended.parent_snapshot_id)).load(ident)
            measured = measure_frame(spark, reader.load(ident), plan, row_count=appended.rows, metrics=metrics,
                                     base=base)
        except WapError:
            raise
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.MEASURE if source is None else EngineStep.READ,
                                 doing=f"auditing the new rows of {table} on {branch!r}", table=table.qualified,
                                 source_uri=None if source is None else source.uri) from exc
        return replace(measured, added_columns=appended.added_columns)


class _SparkStaged(StagedFiles):
    """Several files staged, read as one persisted frame and measured file by file in one grouped pass; `append`
    writes the accepted files' rows from that frame (nothing is read twice); `close` frees both."""

    def __init__(self, writer: SparkIcebergWriter, spark: Any, spec: WriteSpec, measured: Mapping[str, Measurements],
                 left_out: Mapping[str, str], together: list[tuple[SourceObject, FileFormat, Path]],
                 paths: list[Path], frame: Any = None) -> None:
        super().__init__(measured, left_out)
        self._writer, self._spark, self._spec = writer, spark, spec
        self._together, self._paths, self._frame = together, paths, frame

    @classmethod
    def read(cls, writer: SparkIcebergWriter, spark: Any, spec: WriteSpec,
             files: Sequence[tuple[SourceObject, FileFormat]], deadline: Deadline) -> _SparkStaged:
        staged: list[tuple[SourceObject, FileFormat, Path]] = []
        left_out: dict[str, str] = {}
        try:
            for source, fmt in files:
                try:
                    staged.append((source, fmt, Path(writer._stage(source, deadline.passed))))
                except BadInputError as exc:  # gone or changed since its head: that file alone says so
                    left_out[source.identity] = str(exc)
            together, others = compatible(staged)
            left_out |= others
            paths = [p for _, _, p in staged]
            if not together:
                return cls(writer, spark, spec, {}, left_out, [], paths)
            frame, measured = cls._measured(spark, spec, together)
        except BaseException:
            for _, _, path in staged:
                writer._cleanup(path)
            raise
        if frame is None:  # one of them is bad: each alone says which and why
            apart = {s.identity: "it could not be read together with the other files (it runs alone)"
                     for s, _, _ in together}
            return cls(writer, spark, spec, {}, left_out | apart, [], paths)
        return cls(writer, spark, spec, measured, left_out, together, paths, frame)

    @staticmethod
    def _measured(spark: Any, spec: WriteSpec, together: list[tuple[SourceObject, FileFormat, Path]]
                  ) -> tuple[Any, dict[str, Measurements]]:
        """The files read as one persisted frame and each one's measurements; (None, {}) when one of them is the
        problem (data pages are decoded here: a corrupt file is the file's fault, and runs alone)."""
        from pyspark.sql import functions as F

        table, frame = spec.table, None
        by_tag = {tag_of(path): source for source, _, path in together}
        try:
            frame = read_source(spark, [str(p) for _, _, p in together], together[0][1],
                                source_uri=f"{len(together)} files for {table}", table=table.qualified,
                                names={str(p): s.uri for s, _, p in together}, options=spec.read_options)
            frame = frame.withColumn(FILE_COLUMN, F.input_file_name()).persist()
            columns = tuple(c for c in frame.columns if c != FILE_COLUMN)
            return frame, measure_grouped(spark, frame, columns, spec.plan, by_tag)
        except BadInputError:
            _unpersist(frame)
            return None, {}
        except WapError:
            _unpersist(frame)
            raise
        except Exception as exc:
            _unpersist(frame)
            failure = engine_failure(exc, step=EngineStep.READ, doing=f"reading {len(together)} files for {table}",
                                     source_uri=together[0][0].uri, table=table.qualified)
            if isinstance(failure, BadInputError):
                return None, {}
            raise failure from exc

    def append(self, accepted: Sequence[SourceObject]) -> Appended:
        from pyspark.sql import functions as F

        spec = self._spec
        wanted = {s.identity for s in accepted}
        chosen = [s for s, _, _ in self._together if s.identity in wanted]
        if not chosen or self._frame is None:
            return Appended(None, (), {})
        tags = [tag_of(p) for s, _, p in self._together if s.identity in wanted]
        measured = {s.identity: self.measured[s.identity] for s in chosen}
        loaded = [(s, measured[s.identity].row_count) for s in chosen]
        path = WritePath(REWRITTEN, f"read together with {len(self._together) - 1} other file(s): a group is "
                         f"rewritten (one read, one snapshot)")
        properties = lineage.snapshot_properties(loaded) | lineage.write_properties([path])
        doing = f"appending {len(chosen)} files to {spec.table}"
        with IcebergTables(self._spark) as tables, _engine_lost_is_infrastructure(self._spark, doing), \
                within(self._spark, spec.out_of_time, doing):
            try:
                rows = self._frame.filter(path_of(F.col(FILE_COLUMN)).isin(tags)).drop(FILE_COLUMN)
                try:
                    created, added = tables.write(rows, chosen[0].uri, spec.table, spec.branch, properties,
                                                  allow_new_columns=spec.allow_new_columns, layout=spec.layout)
                except BadInputError as exc:  # the batch's columns do not fit the table: each file alone says why
                    return Appended(None, (), measured, {s.identity: str(exc) for s in chosen})
                columns = tuple(c for c in self._frame.columns if c != FILE_COLUMN)
                appended = tables.last_append(spec.table, spec.branch, created, columns, added)
            except WapError:
                raise
            except Exception as exc:
                raise engine_failure(exc, step=EngineStep.WRITE, doing=f"appending {len(chosen)} files to "
                                     f"{spec.table} on {spec.branch!r}", table=spec.table.qualified) from exc
        return Appended(appended, tuple(chosen), measured, write={s.identity: path for s in chosen})

    def close(self) -> None:
        frame, self._frame = self._frame, None
        _unpersist(frame)
        paths, self._paths = self._paths, []
        for path in paths:
            self._writer._cleanup(path)


def _unpersist(frame: Any) -> None:
    if frame is not None:
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
