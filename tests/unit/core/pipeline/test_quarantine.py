"""Row quarantine in the core, with the fakes: the failing rows go to <table>_quarantine on the same branch and both
tables are published in one merge; above the fraction, or with a table-level failure, the file is rejected as with
`reject`; exactly once for both tables. Against the real Spark: tests/integration/adapters/engine/test_quarantine.py."""

from __future__ import annotations

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, rows_on, run_one
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports

SUITES = suites_from({"tables": {
    "penguins": {"checks": [{"check": "not_null", "columns": ["sex"]}, {"check": "unique", "columns": ["id"],
                                                                          "against_main": False},
                            {"check": "row_count", "min": 5}],
                 "on_failure": "quarantine", "max_quarantined_fraction": 0.3},
}}, default_namespace="wap")


def penguins(n: int, nulls: int = 0, repeat: int = 0) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [{"id": i, "sex": None if i < nulls else "f"} for i in range(n)]
    rows += [{"id": 10_000, "sex": "m"} for _ in range(repeat)]
    return rows


@pytest.fixture
def ports() -> Ports:
    catalog, objects = FakeCatalog(), FakeObjectStore()
    return Ports(catalog=catalog, writer=FakeWriter(catalog, objects), objects=objects)


def run(ports: Ports, key: str, rows: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    source: SourceObject = ports.objects.put("source", key, rows)  # type: ignore[attr-defined]
    return run_one(source, ports=ports, suites=SUITES, config=PipelineConfig(default_namespace="wap"))


def test_failing_rows_are_quarantined_and_both_tables_published_in_one_merge(ports: Ports) -> None:
    outcome = run(ports, "penguins/a.parquet", penguins(20, nulls=3, repeat=2))
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.rows == 17
    assert outcome.quarantined is not None and outcome.quarantined.rows == 5 and outcome.quarantined.total_rows == 22
    assert outcome.quarantined.by_check == {"not_null(sex)": 3, "unique(id)": 2}
    assert "5 of 22 rows failed row checks" in outcome.message and "wap.penguins_quarantine" in outcome.message
    catalog = ports.catalog
    assert len(rows_on(catalog, "main", "wap.penguins")) == 17  # type: ignore[arg-type]
    moved = rows_on(catalog, "main", "wap.penguins_quarantine")  # type: ignore[arg-type]
    assert len(moved) == 5 and {r["_wap_source"] for r in moved} == {"s3://source/penguins/a.parquet"}
    assert sorted(c for r in moved for c in r["_wap_failed_checks"]) == ["not_null(sex)"] * 3 + ["unique(id)"] * 2
    [merge] = catalog.publications(TableRef("wap", "penguins"))
    assert merge.properties[lineage.QUARANTINED_ROWS] == "5"
    again = run(ports, "penguins/a.parquet", penguins(20, nulls=3, repeat=2))  # the same version, redelivered
    assert again.status is OutcomeStatus.DUPLICATE
    assert len(rows_on(catalog, "main", "wap.penguins_quarantine")) == 5  # type: ignore[arg-type]


def test_above_the_fraction_the_file_is_rejected_whole(ports: Ports) -> None:
    outcome = run(ports, "penguins/b.parquet", penguins(10, nulls=4))
    assert outcome.status is OutcomeStatus.REJECTED and outcome.quarantined is None
    assert rows_on(ports.catalog, outcome.branch, "wap.penguins") and not rows_on(  # type: ignore[arg-type]
        ports.catalog, outcome.branch, "wap.penguins_quarantine")  # type: ignore[arg-type]


def test_a_table_level_failure_still_rejects_the_whole_file(ports: Ports) -> None:
    outcome = run(ports, "penguins/c.parquet", penguins(5, nulls=1))  # 4 good rows: row_count min 5 fails
    assert outcome.status is OutcomeStatus.REJECTED and outcome.quarantined is not None
    assert "row_count" in outcome.message and "1 of 5 rows failed row checks" in outcome.message
    assert not rows_on(ports.catalog, "main", "wap.penguins")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("entry", "phrase"),
    [({"checks": [], "on_failure": "drop"}, "reject or quarantine"),
     ({"checks": [], "on_failure": "quarantine", "max_quarantined_fraction": 0}, "above 0"),
     ({"checks": [], "max_quarantined_fraction": 0.1}, "applies with on_failure: quarantine")],
)
def test_bad_quarantine_settings_name_the_table(entry: dict[str, object], phrase: str) -> None:
    with pytest.raises(AuditSuiteError, match="table 'p'") as caught:
        suites_from({"tables": {"p": entry}}, default_namespace="wap")
    assert phrase in str(caught.value)


def test_the_alert_counts_the_rows_by_check_and_gives_the_query(ports: Ports) -> None:
    from wap_ingest.core.alerts import AlertKind, alert_for_outcome

    outcome = run(ports, "penguins/it's.parquet", penguins(20, nulls=3))
    alert = alert_for_outcome(outcome)
    assert alert is not None and alert.kind is AlertKind.QUARANTINED and "3 rows quarantined" in alert.title
    assert alert.details == ("not_null(sex): 3 rows",)
    assert alert.commands == (("See them", "SELECT * FROM nessie.wap.penguins_quarantine WHERE _wap_source = "
                                           "'s3://source/penguins/it''s.parquet'"),)


def test_the_dashboard_shows_what_a_published_load_set_aside() -> None:
    from datetime import UTC, datetime

    from wap_ingest.core.review import HistoryEntry
    from wap_ingest.dashboard.data import _load_for

    entry = HistoryEntry(datetime.now(UTC), "published", "audit passed", None, None, None, "s3://s/p/a.parquet", 17,
                         "abc", properties={lineage.QUARANTINED_ROWS: "5",
                                            lineage.QUARANTINE_TABLE: "wap.penguins_quarantine"})
    assert _load_for(entry).audit == "passed; 5 rows quarantined in wap.penguins_quarantine"
