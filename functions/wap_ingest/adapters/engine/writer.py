"""SparkIcebergWriter: the TableWriter port on PySpark + Iceberg, with Nessie as the Iceberg catalog.

One file (`append`): a Parquet file whose schema fits the table as it is is registered (engine/register.py: its footer
read, the object copied server-side into the table's location and appended as a data file with the metrics the
service measured of its pages, each of the file's own claims checked against them; no Spark job); any other file,
and one whose claims do not check out, is rewritten: staged, read, appended in one snapshot. Either way the new rows
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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from wap_ingest.adapters.catalog import BranchTables
from wap_ingest.adapters.engine.audit import added_file_metrics, measure_frame
from wap_ingest.adapters.engine.audit_metadata import FileMetrics, measure_without_rows, metrics_of, spark_type_name
from wap_ingest.adapters.engine.deadline import Deadline, within
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure, engine_lost_is_infrastructure
from wap_ingest.adapters.engine.parquet_decode import measure_parquet
from wap_ingest.adapters.engine.parquet_measured import Measured
from wap_ingest.adapters.engine.quarantine import Split, split_rows
from wap_ingest.adapters.engine.read import read_source
from wap_ingest.adapters.engine.references import measure_reconciliations
from wap_ingest.adapters.engine.register import LakeCopies, Registration, register
from wap_ingest.adapters.engine.session import SparkEngine
from wap_ingest.adapters.engine.staged import SparkStaged
from wap_ingest.adapters.engine.tables import IcebergTables, table_identifier
from wap_ingest.core import lineage
from wap_ingest.core.errors import NotRegistrableError, WapError
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import Appended, AppendResult, FileFormat, QuarantinePlan, SourceObject, TableRef
from wap_ingest.core.ports import StagedFiles, TableWriter, WriteSpec
from wap_ingest.core.write_paths import REGISTERED, REWRITTEN, WritePath

Stage = Callable[[SourceObject, Callable[[], bool]], Path | str]  # (the version, "stop now?") -> what Spark reads
log = logging.getLogger(__name__)
# Reading a table as of one snapshot: Spark's own time-travel option. Iceberg's `snapshot-id` read option is refused
# by Iceberg 1.12's Spark 4 runtime ("Time travel option `snapshot-id` is no longer supported"); incremental scans
# (`start-snapshot-id`, `end-snapshot-id`) are not time travel and keep their options.
AS_OF = "versionAsOf"


class SparkIcebergWriter(TableWriter):
    def __init__(self, engine: SparkEngine, stage: Stage, *, cleanup: Callable[[Path | str], None] | None = None,
                 lake: LakeCopies | None = None, branches: BranchTables | None = None,
                 download: Stage | None = None) -> None:
        """`stage` makes a source object readable by Spark (a local copy, or its s3:// URI on EMR); it stops when
        asked (the invocation's deadline). `lake` reads a source's footer and copies it into a table's location,
        `branches` commits a registered file to the run's branch (either None: every file is rewritten).
        `download` makes a local copy of a file to be registered, whose every page is decoded and measured
        (parquet_decode.measure_parquet) while it is registered: the figures committed and audited are those; it is
        `stage` where that stages a local copy (the function), a download of its own where it does not (EMR)."""
        self._engine = engine
        self._stage = stage
        self._download = download or stage
        self._cleanup = cleanup or remove_local
        self._lake = lake
        self._branches = branches

    @property
    def spark(self) -> Any:
        """The live session (a fresh one if the last one died)."""
        return self._engine.session()

    def start(self, files: Sequence[tuple[WriteSpec, FileFormat]], *, together: bool = False) -> None:
        """The engine starts in the background when a file will surely need it: files read together, or one it
        rewrites whatever its schema. A file that may be registered does not start it: into an existing table, with
        an audit its metrics answer, it needs no engine at all; if it turns out to (a new table, a file that does
        not fit), the engine is started then."""
        if together or any(self._rewrite_reason(spec, fmt) is not None for spec, fmt in files):
            self._engine.start_in_background()

    def append(self, spec: WriteSpec, source: SourceObject, fmt: FileFormat) -> Appended:
        reason = self._rewrite_reason(spec, fmt)
        if reason is None:
            found = self._register(spec, source)
            if isinstance(found, Appended):
                return found
            reason = found
        if spec.write == "register":
            raise NotRegistrableError(
                f"{source.uri}: cannot be registered into {spec.table} as it is ({reason}), and the table says "
                f"`write: register` in the audits file. Fix: upload a Parquet file whose columns and types are the "
                f"table's, or set `write: auto` for {spec.table.name} so such files are rewritten.")
        log.info("rewriting %s into %s on %s: %s", source.uri, spec.table, spec.branch, reason)
        doing = f"appending {source.uri} to {spec.table}"
        with IcebergTables(self.spark) as tables, engine_lost_is_infrastructure(tables.spark, doing), \
                within(tables.spark, spec.out_of_time, doing) as deadline:
            return self._rewrite(tables, spec, source, fmt, lineage.snapshot_properties([(source, 0)]),
                                 WritePath(REWRITTEN, reason), deadline)

    def stage(self, spec: WriteSpec, files: Sequence[tuple[SourceObject, FileFormat]]) -> StagedFiles:
        spark, doing = self.spark, f"reading {len(files)} file(s) for {spec.table}"
        with engine_lost_is_infrastructure(spark, doing), within(spark, spec.out_of_time, doing) as deadline:
            return SparkStaged.read(self, spark, spec, files, deadline)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        with IcebergTables(self.spark) as tables, \
                engine_lost_is_infrastructure(tables.spark, f"looking for a source in {table}"):
            return tables.find_append(table, ref, identity)

    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        with IcebergTables(self.spark) as tables, \
                engine_lost_is_infrastructure(tables.spark, f"auditing the new rows of {table}"):
            return self._measure(tables, table, branch, appended, plan)

    def _register(self, spec: WriteSpec, source: SourceObject) -> Appended | str:
        """The file registered and its new rows measured, or why it is to be rewritten. The engine is started (or
        waited for) only if the table is to be made, its layout applied, or the audit needs the rows read."""
        assert self._lake is not None and self._branches is not None  # else _rewrite_reason said why not
        doing, properties = f"registering {source.uri} into {spec.table}", lineage.snapshot_properties([(source, 0)])
        with _OnDemand(self) as engine:
            with engine.lost_is_infrastructure(doing), within(None, spec.out_of_time, doing) as deadline, \
                    ThreadPoolExecutor(max_workers=1, thread_name_prefix="wap-decode") as meanwhile:
                # the pages are decoded and measured (another thread, the isolation worker) while the footer is judged
                # and the object copied; registration waits for the figures before it writes anything to the table
                measured = meanwhile.submit(self._measure_pages, spec, source, deadline)
                handed: list[tuple[int, Measurements]] = []  # the figures handed to the core before the commit

                def before_commit(data_file: Any, table: Any) -> None:
                    if spec.before_commit is None:
                        return
                    rows = int(data_file.record_count)
                    figures = _from_metrics(spec, table.schema(), _plan_metrics(spec, table.schema(), data_file), rows)
                    if figures is not None:  # the audit needs no engine: the core records its results meanwhile
                        handed.append((rows, figures))
                        spec.before_commit(figures)

                found = register(self._branches, engine.tables, self._lake, source, spec.table, spec.branch,
                                 properties, spec.layout, measured=measured.result, before_commit=before_commit)
                measured.result()  # also when the file is to be rewritten: a damaged file is INVALID either way
            if isinstance(found, str):
                return found
            log.info("registered %s as a data file of %s on %s: %s (%s)", source.uri, spec.table, spec.branch,
                     found.location, found.reason)
            return self._measured(engine, spec, source, _committed(found), handed)

    def _measure_pages(self, spec: WriteSpec, source: SourceObject, deadline: Deadline) -> Measured | str:
        """A registered file reaches every reader of the table without any engine having read it: a page that does
        not decode would be on `main`, and a figure of its own that is false would be audited and committed. Raises
        UnreadableSourceError (INVALID, naming the column) for damaged bytes; the figures, or why there are none."""
        local = self._download(source, deadline.passed)
        try:
            return measure_parquet(Path(local), source.uri, spec.table.qualified)
        finally:
            remove_local(local)

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
        if self._lake is None or self._branches is None:
            return "this engine has no object store to copy files into the lake, or no catalog to register them in"
        return None

    def _measured(self, engine: _OnDemand, spec: WriteSpec, source: SourceObject,
                  committed: tuple[AppendResult, Registration],
                  handed: Sequence[tuple[int, Measurements]] = ()) -> Appended:
        """A registered file's new rows measured: from its measured metrics when they answer the whole plan (no
        engine), else by the engine from the table. A failure to decode the rows is the file's (its pages).
        `handed`: the figures handed to the core before the commit, from the same data file: the very same answer when
        the commit added as many rows (the same computation on the same inputs)."""
        appended, registration = committed
        write = {source.identity: WritePath(REGISTERED, registration.reason)}
        if appended.rows == 0:  # the caller says the file is empty
            return Appended(appended, (), {source.identity: Measurements(row_count=0)}, write=write)
        for rows, figures in handed:
            if rows == appended.rows:
                return Appended(appended, (source,), {source.identity: figures}, write=write)
        metrics = _plan_metrics(spec, registration.table.schema(), registration.data_file)
        measured = _from_metrics(spec, registration.table.schema(), metrics, appended.rows)
        if measured is None:
            doing = f"auditing the new rows of {spec.table}"
            tables = engine.tables()
            with engine.lost_is_infrastructure(doing), within(tables.spark, spec.out_of_time, doing):
                measured = self._measure(tables, spec.table, spec.branch, appended, spec.plan, source=source,
                                         metrics=metrics)
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
        *, source: SourceObject | None = None, metrics: FileMetrics | None = None,
    ) -> Measurements:
        """The new rows are the incremental scan of the append's snapshot (only the data files it added); the
        files' metrics from its manifests answer what they can before any row is read. `source`: the registered
        file those data files are, whose undecodable pages are its own fault (else a failure here is the engine's)."""
        spark = tables.spark
        ident = table_identifier(table, branch)
        reader = spark.read.format("iceberg")
        if appended.parent_snapshot_id is None:
            reader = reader.option(AS_OF, str(appended.snapshot_id))
        else:  # an incremental scan: only the data files this snapshot added
            reader = reader.option("start-snapshot-id", str(appended.parent_snapshot_id)).option(
                "end-snapshot-id", str(appended.snapshot_id))
        try:
            if metrics is None:
                metrics = added_file_metrics(spark, tables.iceberg_table(table, branch), appended.snapshot_id,
                                             plan.bounded_columns)
            base = None
            if plan.existing_keys and appended.parent_snapshot_id is not None:  # the table as it was on main
                base = spark.read.format("iceberg").option(AS_OF, str(appended.parent_snapshot_id)).load(ident)
            lookup = _on_branch(tables, branch) if plan.references or plan.reconciliations else None
            measured = measure_frame(spark, reader.load(ident), plan, row_count=appended.rows, metrics=metrics,
                                     base=base, lookup=lookup)
            if plan.reconciliations and lookup is not None:  # the table after the append, and the others
                reconciled, absent = measure_reconciliations(plan.reconciliations, lookup, table.qualified)
                measured = replace(measured, reconciled=reconciled,
                                   absent=tuple(dict.fromkeys(measured.absent + absent)))
        except WapError:
            raise
        except Exception as exc:
            raise engine_failure(exc, step=EngineStep.MEASURE if source is None else EngineStep.READ,
                                 doing=f"auditing the new rows of {table} on {branch!r}", table=table.qualified,
                                 source_uri=None if source is None else source.uri) from exc
        return replace(measured, added_columns=appended.added_columns)


def _on_branch(tables: IcebergTables, branch: str) -> Callable[[str], Any | None]:
    """A table as `branch` has it (a references or reconcile check's), or None when the branch has no such table."""
    def lookup(qualified: str) -> Any | None:
        other = TableRef(*qualified.split(".", 1))
        if tables.find(other, branch) is None:
            return None
        return tables.spark.read.format("iceberg").load(table_identifier(other, branch))
    return lookup


class _OnDemand:
    """One registration's IcebergTables, made (so the engine started, or waited for) only when first asked for."""

    def __init__(self, writer: SparkIcebergWriter) -> None:
        self._writer = writer
        self._tables: IcebergTables | None = None

    def tables(self) -> IcebergTables:
        if self._tables is None:
            self._tables = IcebergTables(self._writer.spark)
        return self._tables

    def __enter__(self) -> _OnDemand:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tables is not None:
            self._tables.forget()

    def lost_is_infrastructure(self, doing: str) -> contextlib.AbstractContextManager[None]:
        """Once the engine was asked for, its death is the failure's cause (before that, no engine to lose)."""
        return engine_lost_is_infrastructure(lambda: None if self._tables is None else self._tables.spark, doing)


def _plan_metrics(spec: WriteSpec, schema: Any, data_file: Any) -> Any:
    """A registered data file's metrics (the service's own figures), with the bounds the plan can use."""
    return metrics_of(schema, data_file, spec.plan.bounded_columns)


def _from_metrics(spec: WriteSpec, schema: Any, metrics: Any, rows: int) -> Measurements | None:
    """A registered data file's rows measured from its metrics (`_plan_metrics`), or None when the plan needs the
    rows read."""
    plan = spec.plan
    columns = tuple(f.name for f in schema.fields)
    return measure_without_rows(plan, columns, {f.name: spark_type_name(f.field_type) for f in schema.fields},
                                metrics, rows)


def _committed(registration: Registration) -> tuple[AppendResult, Registration]:
    """The append a registration committed (its table's current snapshot), as the rewrite path's last_append."""
    snapshot = registration.table.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    return AppendResult(rows=int(summary.get("added-records") or 0), snapshot_id=int(snapshot.snapshot_id),
                        parent_snapshot_id=snapshot.parent_snapshot_id, table_created=registration.created,
                        columns=registration.columns, snapshots=len(registration.table.metadata.snapshots)
                        ), registration


def remove_local(staged: Path | str) -> None:
    path = Path(staged)
    if path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
