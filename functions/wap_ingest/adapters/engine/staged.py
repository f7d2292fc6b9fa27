"""Several files of one table staged together (Staging.stage): read as one persisted frame, measured file
by file in one grouped pass; `append` writes the accepted files' rows from that frame (nothing is read twice)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from wap_ingest.adapters.engine.batch import FILE_COLUMN, compatible, measure_grouped, path_of, tag_of
from wap_ingest.adapters.engine.deadline import Deadline, within
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure, engine_lost_is_infrastructure
from wap_ingest.adapters.engine.read import read_source
from wap_ingest.adapters.engine.tables import IcebergTables
from wap_ingest.core import lineage
from wap_ingest.core.errors import BadInputError, WapError
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import Appended, FileFormat, SourceObject
from wap_ingest.core.ports import StagedFiles, WriteSpec
from wap_ingest.core.write_paths import REWRITTEN, WritePath


class Staging(Protocol):
    """What a group needs of its writer: make a source readable by Spark (stopping when asked), and free it."""

    def _stage(self, source: SourceObject, stop: Callable[[], bool]) -> Path | str: ...

    def _cleanup(self, staged: Path | str) -> None: ...


class SparkStaged(StagedFiles):
    """Several files staged, read as one persisted frame and measured file by file in one grouped pass; `append`
    writes the accepted files' rows from that frame (nothing is read twice); `close` frees both."""

    def __init__(self, writer: Staging, spark: Any, spec: WriteSpec, measured: Mapping[str, Measurements],
                 left_out: Mapping[str, str], together: list[tuple[SourceObject, FileFormat, Path]],
                 paths: list[Path], frame: Any = None) -> None:
        super().__init__(measured, left_out)
        self._writer, self._spark, self._spec = writer, spark, spec
        self._together, self._paths, self._frame = together, paths, frame

    @classmethod
    def read(cls, writer: Staging, spark: Any, spec: WriteSpec,
             files: Sequence[tuple[SourceObject, FileFormat]], deadline: Deadline) -> SparkStaged:
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
        with IcebergTables(self._spark) as tables, engine_lost_is_infrastructure(self._spark, doing), \
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
