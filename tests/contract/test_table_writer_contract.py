"""One behaviour suite for the TableWriter port (the engine), run against the in-memory fake and the real Spark +
Iceberg + Nessie adapter: one file appended then measured; several staged and measured first, the accepted ones in
one snapshot; lineage found again by identity; schema drift refused (or allowed on the branch); files that cannot join
the others left out, never raised."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, Unreadable
from wap_ingest.core.errors import BadInputError, SchemaDriftError
from wap_ingest.core.measurements import ColumnProfile, MeasurementPlan, Reference
from wap_ingest.core.models import FileFormat, SourceObject, TableRef
from wap_ingest.core.ports import CatalogBranches, TableWriter, WriteSpec

Rows = list[dict[str, Any]]
PLAN = MeasurementPlan(null_count_columns=("b",))


@dataclass
class Harness:
    writer: TableWriter
    catalog: CatalogBranches
    put_rows: Any  # (key, rows) -> SourceObject
    put_garbage: Any  # key -> SourceObject
    table: TableRef

    def branch(self) -> str:
        name = f"contract_{uuid.uuid4().hex[:10]}"
        main = self.catalog.ensure_namespace("main", self.table.namespace)
        return self.catalog.create_branch(name, main).name

    def files(self, *sources: SourceObject) -> list[tuple[SourceObject, FileFormat]]:
        return [(s, FileFormat.PARQUET) for s in sources]

    def spec(self, branch: str) -> WriteSpec:
        return WriteSpec(self.table, branch, PLAN)


def rows(n: int, *, start: int = 0, nulls: int = 0, extra: str | None = None) -> Rows:
    made: Rows = [{"a": start + i, "b": None if i < nulls else f"v{i}"} for i in range(n)]
    if extra:
        for row in made:
            row[extra] = 1.5
    return made


def _parquet(content: Rows) -> bytes:
    columns = list(content[0]) if content else ["a", "b"]
    types = {"a": pa.int64(), "b": pa.string()}
    table = pa.table({c: pa.array([r.get(c) for r in content], types.get(c, pa.float64())) for c in columns})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@pytest.fixture(params=["fake", pytest.param("spark", marks=[pytest.mark.stack, pytest.mark.spark])])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    table = TableRef("wap", f"contract_{uuid.uuid4().hex[:10]}")
    if request.param == "fake":
        catalog, objects = FakeCatalog(), FakeObjectStore()
        yield Harness(FakeWriter(catalog, objects), catalog,
                      lambda key, content: objects.put("inbox", key, content),
                      lambda key: objects.put("inbox", key, Unreadable()), table)
        return
    lake = request.getfixturevalue("lake")

    def put(key: str, body: bytes) -> SourceObject:
        lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=body)
        return lake.service.objects.head(lake.inbox_bucket, key)  # with its ETag: the identity of this version

    yield Harness(lake.service.ports.writer, lake.service.ports.catalog,
                  lambda key, content: put(key, _parquet(content)), lambda key: put(key, b"PAR1 not parquet"), table)


def test_one_file_is_one_snapshot_measured_and_found_again_by_its_identity(harness: Harness) -> None:
    branch = harness.branch()
    source = harness.put_rows(f"{harness.table.name}/one.parquet", rows(5, nulls=2))
    appended = harness.writer.append(harness.spec(branch), source, FileFormat.PARQUET)
    assert appended.snapshot is not None and appended.snapshot.rows == 5 and appended.snapshot.table_created
    assert appended.snapshot.snapshots >= 1  # what the core bounds the table's metadata by
    assert appended.written == (source,) and dict(appended.left_out) == {}
    measured = appended.measured[source.identity]
    assert measured.row_count == 5 and measured.null_counts["b"] == 2
    found = harness.writer.find_append(harness.table, branch, source.identity)
    assert found is not None and found.rows == 5 and found.snapshot_id == appended.snapshot.snapshot_id
    assert harness.writer.find_append(harness.table, branch, "other#x") is None
    assert harness.writer.find_append(harness.table, "main", source.identity) is None  # the table is not on main
    again = harness.writer.measure_appended(harness.table, branch, found, PLAN)
    assert again.row_count == 5 and again.null_counts["b"] == 2


def test_several_files_are_measured_before_and_the_accepted_ones_are_one_snapshot(harness: Harness) -> None:
    branch = harness.branch()
    sources = [harness.put_rows(f"{harness.table.name}/f{i}.parquet", rows(3 + i, start=100 * i, nulls=i % 2))
               for i in range(3)]
    with harness.writer.stage(harness.spec(branch), harness.files(*sources)) as staged:
        assert {i: m.row_count for i, m in staged.measured.items()} == {
            s.identity: 3 + n for n, s in enumerate(sources)}
        assert staged.measured[sources[1].identity].null_counts["b"] == 1  # measured before anything is written
        assert harness.writer.find_append(harness.table, branch, sources[0].identity) is None
        kept = [s for s in sources if staged.measured[s.identity].null_counts.get("b", 0) == 0]
        appended = staged.append(kept)
    assert kept == [sources[0], sources[2]]
    assert appended.snapshot is not None and appended.snapshot.rows == 3 + 5
    assert set(appended.written) == set(kept) and set(appended.measured) == {s.identity for s in kept}
    found = {s.identity: harness.writer.find_append(harness.table, branch, s.identity) for s in sources}
    assert {i: a.rows for i, a in found.items() if a} == {sources[0].identity: 3, sources[2].identity: 5}


def test_a_file_that_cannot_join_the_others_is_left_out_not_raised(harness: Harness) -> None:
    branch = harness.branch()
    good = [harness.put_rows(f"{harness.table.name}/g{i}.parquet", rows(2, start=10 * i)) for i in range(2)]
    odd = harness.put_rows(f"{harness.table.name}/odd.parquet", rows(2, extra="c"))
    broken = harness.put_garbage(f"{harness.table.name}/broken.parquet")
    with harness.writer.stage(harness.spec(branch), harness.files(*good, odd, broken)) as staged:
        assert set(staged.left_out) == {odd.identity, broken.identity} and set(staged.measured) == {
            s.identity for s in good}
        appended = staged.append(good)
    assert set(appended.written) == set(good) and appended.snapshot is not None and appended.snapshot.rows == 4


def test_one_unreadable_file_raises_a_bad_input_error(harness: Harness) -> None:
    broken = harness.put_garbage(f"{harness.table.name}/broken.parquet")
    with pytest.raises(BadInputError, match=r"broken\.parquet"):
        harness.writer.append(harness.spec(harness.branch()), broken, FileFormat.PARQUET)


def test_a_file_without_rows_writes_nothing(harness: Harness) -> None:
    empty = harness.put_rows(f"{harness.table.name}/empty.parquet", [])
    appended = harness.writer.append(harness.spec(harness.branch()), empty, FileFormat.PARQUET)
    assert appended.written == () and (appended.snapshot is None or appended.snapshot.rows == 0)
    assert appended.measured[empty.identity].row_count == 0


def test_new_columns_are_refused_with_the_difference_or_added_on_the_branch_only(harness: Harness) -> None:
    branch = harness.branch()
    base = harness.put_rows(f"{harness.table.name}/base.parquet", rows(2))
    harness.writer.append(harness.spec(branch), base, FileFormat.PARQUET)
    wider = harness.put_rows(f"{harness.table.name}/wider.parquet", rows(2, start=50, extra="c"))
    with pytest.raises(SchemaDriftError) as refused:
        harness.writer.append(harness.spec(branch), wider, FileFormat.PARQUET)
    assert any("new c" in line for line in refused.value.difference)
    appended = harness.writer.append(replace(harness.spec(branch), allow_new_columns=True), wider,
                                     FileFormat.PARQUET)
    assert appended.snapshot is not None and appended.snapshot.added_columns == ("c",)
    assert appended.written == (wider,)


def test_staged_files_are_released_when_the_core_appends_none_of_them(harness: Harness) -> None:
    branch = harness.branch()
    sources = [harness.put_rows(f"{harness.table.name}/n{i}.parquet", rows(2, start=10 * i, nulls=1))
               for i in range(2)]
    with harness.writer.stage(harness.spec(branch), harness.files(*sources)) as staged:
        assert all(m.null_counts["b"] == 1 for m in staged.measured.values())
    appended = staged.append([])  # after release: nothing to write, nothing written
    assert appended.snapshot is None and appended.written == ()
    assert harness.writer.find_append(harness.table, branch, sources[0].identity) is None


def test_the_profile_of_the_new_rows_is_measured_in_the_audits_pass(harness: Harness) -> None:
    source = harness.put_rows(f"{harness.table.name}/profiled.parquet", rows(4, nulls=1))  # a: 0..3, b: 1 null
    spec = replace(harness.spec(harness.branch()), plan=MeasurementPlan(profile_columns=("a", "b", "gone")))
    profile = harness.writer.append(spec, source, FileFormat.PARQUET).measured[source.identity].profile
    assert profile["a"] == ColumnProfile(null_share=0.0, distinct=4.0, min=0.0, max=3.0, mean=1.5)
    assert profile["b"] == ColumnProfile(null_share=0.25, distinct=3.0)  # text: no min, max or mean
    assert "gone" not in profile  # a column the file does not have


def test_each_staged_files_profile_is_its_own(harness: Harness) -> None:
    sources = [harness.put_rows(f"{harness.table.name}/s{i}.parquet", rows(2 + i, start=10 * i, nulls=i))
               for i in range(2)]
    spec = replace(harness.spec(harness.branch()), plan=MeasurementPlan(profile_columns=("a", "b")))
    with harness.writer.stage(spec, harness.files(*sources)) as staged:
        measured = staged.measured
    assert measured[sources[0].identity].profile["a"] == ColumnProfile(0.0, 2.0, 0.0, 1.0, 0.5)
    assert measured[sources[1].identity].profile["a"] == ColumnProfile(0.0, 3.0, 10.0, 12.0, 11.0)
    assert measured[sources[1].identity].profile["b"] == ColumnProfile(null_share=1 / 3, distinct=2.0)


def test_values_that_are_no_key_of_another_table_on_the_branch_are_counted(harness: Harness) -> None:
    branch = harness.branch()
    keys = TableRef(harness.table.namespace, f"{harness.table.name}_keys")
    harness.writer.append(WriteSpec(keys, branch, PLAN), harness.put_rows(f"{keys.name}/k.parquet", rows(5, start=10)),
                          FileFormat.PARQUET)  # keys a = 10..14 on the branch
    refs = (Reference("a", keys.qualified, "a"), Reference("a", f"{harness.table.namespace}.nowhere", "a"),
            Reference("a", keys.qualified, "no_such_key"), Reference("gone", keys.qualified, "a"))
    spec = replace(harness.spec(branch), plan=MeasurementPlan(references=refs))
    source = harness.put_rows(f"{harness.table.name}/refs.parquet", rows(8, start=8))  # a = 8..15: 8, 9, 15 missing
    measured = harness.writer.append(spec, source, FileFormat.PARQUET).measured[source.identity]
    assert measured.missing[refs[0].name] == 3
    assert measured.missing[refs[1].name] == 8 and measured.missing[refs[2].name] == 8  # no table, no key column
    assert refs[3].name not in measured.missing  # the new rows have no such column
    assert f"{harness.table.namespace}.nowhere" in measured.absent
