"""The WAP pipeline against in-memory fakes of its ports: every outcome and failure path."""

from __future__ import annotations

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, Unreadable, rows_on, run_one
from wap_ingest.core.audits import suites_from
from wap_ingest.core.branches import RunKind, identity_digest, run_branch_name
from wap_ingest.core.errors import CatalogUnavailableError, MergeConflictError
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports

SUITES = suites_from(
    {"tables": {"customer_data_log": [{"check": "not_null", "columns": ["my_col_1"]},
                                      {"check": "row_count", "min": 1}]}},
    default_namespace="wap",
)
TABLE = "wap.customer_data_log"


def rows(n: int, nulls: int = 0) -> list[dict[str, object]]:
    return [{"my_col_0": i, "my_col_1": None if i < nulls else f"v{i}", "my_col_2": i / 2} for i in range(n)]


class Lake:
    def __init__(self) -> None:
        self.catalog = FakeCatalog()
        self.objects = FakeObjectStore()
        self.writer = FakeWriter(self.catalog, self.objects)
        self.sleeps: list[float] = []
        self.config = PipelineConfig(default_namespace="wap", sleep=self.sleeps.append)

    @property
    def ports(self) -> Ports:
        return Ports(catalog=self.catalog, writer=self.writer, objects=self.objects)

    def put(self, key: str, content: object) -> SourceObject:
        return self.objects.put("source", key, content)  # type: ignore[arg-type]

    def run(self, source: SourceObject, table: TableRef | None = None):  # type: ignore[no-untyped-def]
        return run_one(source, ports=self.ports, suites=SUITES, config=self.config, table=table)

    def wap_branches(self) -> list[str]:
        return [b.name for b in self.catalog.list_branches("wap-")]


@pytest.fixture
def lake() -> Lake:
    return Lake()


def test_clean_file_is_published_and_its_branch_deleted(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(10))
    outcome = lake.run(src)
    assert outcome.status is OutcomeStatus.PUBLISHED
    assert outcome.rows == 10 and outcome.report is not None and outcome.report.passed
    assert len(rows_on(lake.catalog, "main", TABLE)) == 10
    assert lake.wap_branches() == []
    merge = lake.catalog.commits[lake.catalog.refs["main"]]
    assert merge.properties["wap.source.key"] == "customer_data_log/a.parquet"
    assert merge.properties["wap.source.identity"] == src.identity


def test_file_with_nulls_is_rejected_branch_kept_main_unchanged(lake: Lake) -> None:
    lake.run(lake.put("customer_data_log/good.parquet", rows(5)))
    main_before = lake.catalog.refs["main"]
    src = lake.put("customer_data_log/bad.parquet", rows(8, nulls=3))
    outcome = lake.run(src)
    assert outcome.status is OutcomeStatus.REJECTED
    assert lake.catalog.refs["main"] == main_before
    assert outcome.branch and outcome.branch.startswith(
        f"wap-customer_data_log-{identity_digest(outcome.source.identity)}-f")
    assert lake.wap_branches() == [outcome.branch]
    assert len(rows_on(lake.catalog, outcome.branch, TABLE)) == 13
    assert outcome.report is not None
    failed = [(c.check, c.target, c.measured) for c in outcome.report.failures]
    assert failed == [("not_null", "my_col_1", "3 nulls")]
    assert "my_col_1" in outcome.message and outcome.branch in outcome.message


def test_table_is_created_on_first_ingest_and_appended_after(lake: Lake) -> None:
    first = lake.run(lake.put("customer_data_log/1.parquet", rows(3)))
    second = lake.run(lake.put("customer_data_log/2.parquet", rows(4)))
    assert [first.status, second.status] == [OutcomeStatus.PUBLISHED] * 2
    assert len(rows_on(lake.catalog, "main", TABLE)) == 7


def test_unlisted_table_uses_the_default_suite(lake: Lake) -> None:
    outcome = lake.run(lake.put("other_table/x.csv", rows(2, nulls=2)))
    assert outcome.status is OutcomeStatus.PUBLISHED
    assert outcome.table == "wap.other_table"


@pytest.mark.parametrize(
    ("key", "content", "phrase"),
    [
        ("orphan.parquet", rows(1), "no table prefix"),
        ("Bad-Name!/x.parquet", rows(1), "not a valid identifier"),
        ("customer_data_log/x.xlsx", rows(1), "unsupported file type"),
        ("customer_data_log/empty.parquet", b"", "empty"),
    ],
)
def test_bad_input_is_invalid_and_touches_nothing(lake: Lake, key: str, content: object, phrase: str) -> None:
    main_before = lake.catalog.refs["main"]
    outcome = lake.run(lake.put(key, content))
    assert outcome.status is OutcomeStatus.INVALID
    assert phrase in outcome.message and "s3://source/" in outcome.message
    assert "Fix:" in outcome.message
    assert lake.catalog.refs["main"] == main_before
    assert lake.wap_branches() == []
    assert lake.writer.starts == 0  # refused while routed: no engine is started for it


def test_the_engine_is_asked_to_start_before_the_first_branch(lake: Lake) -> None:
    """Its start overlaps the catalog steps before the write (the ledger lookup, the branch): asked once per run."""
    created: list[int] = []
    create = lake.catalog.create_branch

    def creating(*args: object, **kwargs: object) -> object:
        created.append(lake.writer.starts)
        return create(*args, **kwargs)  # type: ignore[arg-type]

    lake.catalog.create_branch = creating  # type: ignore[method-assign]
    assert lake.run(lake.put("customer_data_log/a.parquet", rows(3))).status is OutcomeStatus.PUBLISHED
    assert created == [1] and lake.writer.starts == 1


@pytest.mark.parametrize(("key", "content", "table"), [
    ("orphan.parquet", rows(1), None),  # no table: its key names none
    ("customer_data_log/x.xlsx", rows(1), "wap.customer_data_log"),
    ("customer_data_log/empty.parquet", b"", "wap.customer_data_log"),
])
def test_a_file_refused_once_its_table_is_known_names_the_table(lake: Lake, key: str, content: object,
                                                               table: str | None) -> None:
    """Its outcome and alert name the table (an alert's Retry needs it), as a file refused while it is read does."""
    assert lake.run(lake.put(key, content)).table == table


def test_missing_object_is_invalid(lake: Lake) -> None:
    outcome = lake.run(SourceObject("source", "customer_data_log/gone.parquet"))
    assert outcome.status is OutcomeStatus.INVALID
    assert "no such object" in outcome.message
    assert lake.wap_branches() == []


@pytest.mark.parametrize("content", [Unreadable(), []])
def test_unreadable_or_rowless_file_deletes_its_branch(lake: Lake, content: object) -> None:
    outcome = lake.run(lake.put("customer_data_log/broken.parquet", content))
    assert outcome.status is OutcomeStatus.INVALID
    assert lake.wap_branches() == []
    assert rows_on(lake.catalog, "main", TABLE) == []


def test_schema_mismatch_is_invalid_and_main_keeps_its_rows(lake: Lake) -> None:
    lake.run(lake.put("customer_data_log/1.parquet", rows(3)))
    outcome = lake.run(lake.put("customer_data_log/2.parquet", [{"other": 1}]))
    assert outcome.status is OutcomeStatus.INVALID
    assert "do not fit table" in outcome.message
    assert len(rows_on(lake.catalog, "main", TABLE)) == 3
    assert lake.wap_branches() == []


def test_infrastructure_failure_raises_and_leaves_main_untouched(lake: Lake) -> None:
    lake.writer.fail_with = CatalogUnavailableError("Nessie is down")
    with pytest.raises(CatalogUnavailableError, match="Nessie is down"):
        lake.run(lake.put("customer_data_log/a.parquet", rows(2)))
    # only the ledger's namespace (the repository's first commit: metadata, no rows) may have reached main
    assert set(lake.catalog.contents("main")) == {"wap_ledger"}
    assert lake.wap_branches() == []


def test_failure_to_clean_up_names_the_branch(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    lake.writer.fail_with = CatalogUnavailableError("Nessie is down")

    def broken_delete(_branch: object) -> None:
        raise CatalogUnavailableError("still down")

    monkeypatch.setattr(lake.catalog, "delete_branch", broken_delete)
    with pytest.raises(CatalogUnavailableError) as info:
        lake.run(lake.put("customer_data_log/a.parquet", rows(2)))
    assert "could not be deleted and is left open" in str(info.value)
    assert "wap-customer_data_log-" in str(info.value)


def test_merge_conflict_is_retried_on_a_fresh_branch(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    lake.run(lake.put("customer_data_log/0.parquet", rows(1)))
    other = lake.put("customer_data_log/other.parquet", rows(2))
    original = lake.writer._measure
    raced: list[bool] = []

    def racing_measure(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if not raced:  # another worker publishes a file for the same table meanwhile
            raced.append(True)
            monkeypatch.setattr(lake.writer, "_measure", original)
            assert lake.run(other).status is OutcomeStatus.PUBLISHED
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lake.writer, "_measure", racing_measure)
    outcome = lake.run(lake.put("customer_data_log/mine.parquet", rows(4)))
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.attempts == 2
    assert len(rows_on(lake.catalog, "main", TABLE)) == 1 + 2 + 4
    assert len(lake.sleeps) == 1
    assert lake.wap_branches() == []


def test_merge_conflicts_beyond_the_bound_raise(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    def always_conflict(*_args: object, **_kwargs: object) -> str:
        raise MergeConflictError("main moved")

    monkeypatch.setattr(lake.catalog, "merge", always_conflict)
    with pytest.raises(MergeConflictError):
        lake.run(lake.put("customer_data_log/a.parquet", rows(1)))
    assert len(lake.sleeps) == lake.config.merge_attempts - 1
    assert lake.wap_branches() == []


def test_an_empty_earlier_attempt_is_replaced(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(2))
    main_hash = lake.catalog.ensure_namespace("main", "wap")
    lake.catalog.create_branch(run_branch_name(RunKind.FILE, TableRef("wap", "customer_data_log"), src.identity,
                                                started=0, default_namespace="wap"), main_hash)
    assert lake.run(src).status is OutcomeStatus.PUBLISHED
    assert lake.wap_branches() == []


def test_a_redelivered_rejected_file_leaves_one_branch(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(3, nulls=1))
    first = lake.run(src)
    again = lake.run(src)
    assert first.status is again.status is OutcomeStatus.REJECTED
    assert again.branch is not None and lake.wap_branches() == [again.branch]
    assert len(rows_on(lake.catalog, again.branch, TABLE)) == 3


def test_the_same_object_version_is_published_once(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(4))
    assert lake.run(src).status is OutcomeStatus.PUBLISHED
    main_after_first = lake.catalog.refs["main"]
    again = lake.run(src)
    assert again.status is OutcomeStatus.DUPLICATE and "already published" in again.message and again.rows == 4
    assert lake.catalog.refs["main"] == main_after_first
    assert len(rows_on(lake.catalog, "main", TABLE)) == 4 and lake.wap_branches() == []


def test_a_new_version_of_the_same_key_is_ingested(lake: Lake) -> None:
    lake.run(lake.put("customer_data_log/a.parquet", rows(4)))
    outcome = lake.run(lake.put("customer_data_log/a.parquet", rows(6)))
    assert outcome.status is OutcomeStatus.PUBLISHED
    assert len(rows_on(lake.catalog, "main", TABLE)) == 10


def test_crash_after_the_merge_leaves_a_branch_the_retry_removes(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(2))
    real_delete = lake.catalog.delete_branch
    lake.catalog.delete_branch = lambda _b: (_ for _ in ()).throw(KeyboardInterrupt())  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):  # the process dies right after merging
        lake.run(src)
    lake.catalog.delete_branch = real_delete  # type: ignore[method-assign]
    assert len(lake.wap_branches()) == 1 and len(rows_on(lake.catalog, "main", TABLE)) == 2
    outcome = lake.run(src)
    assert outcome.status is OutcomeStatus.DUPLICATE
    assert lake.wap_branches() == [] and len(rows_on(lake.catalog, "main", TABLE)) == 2


def test_crash_after_the_append_is_cleanly_redone(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(5))
    real_measure = lake.writer._measure  # measuring follows the write: the rows are on the branch
    monkeypatch.setattr(lake.writer, "_measure", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        lake.run(src)
    monkeypatch.setattr(lake.writer, "_measure", real_measure)
    appends: list[object] = []
    real_append = lake.writer.append
    monkeypatch.setattr(lake.writer, "append", lambda *a, **k: appends.append(a) or real_append(*a, **k))
    assert len(lake.wap_branches()) == 1  # the interrupted attempt
    assert lake.run(src).status is OutcomeStatus.PUBLISHED
    assert len(appends) == 1 and len(rows_on(lake.catalog, "main", TABLE)) == 5 and lake.wap_branches() == []


def test_crash_after_branch_creation_starts_afresh(lake: Lake) -> None:
    src = lake.put("customer_data_log/a.parquet", rows(2))
    base = lake.catalog.ensure_namespace("main", "wap")
    lake.catalog.create_branch(run_branch_name(RunKind.FILE, TableRef("wap", "customer_data_log"), src.identity,
                                                started=0, default_namespace="wap"), base)
    lake.catalog.commit("main", {"unrelated": 1})  # main moved meanwhile
    assert lake.run(src).status is OutcomeStatus.PUBLISHED
    assert len(rows_on(lake.catalog, "main", TABLE)) == 2 and lake.wap_branches() == []


def test_explicit_table_overrides_the_key(lake: Lake) -> None:
    outcome = lake.run(lake.put("anything.parquet", rows(2)), table=TableRef("raw", "events"))
    assert outcome.status is OutcomeStatus.PUBLISHED
    assert len(rows_on(lake.catalog, "main", "raw.events")) == 2
