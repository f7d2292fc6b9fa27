"""core/table_loads.py: every table's last load from one read of main's history (`wap tables`)."""

from __future__ import annotations

from typing import Any

from tests.fake_catalog import FakeCatalog
from wap_ingest.core import lineage
from wap_ingest.core.maintenance import MAINTENANCE
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.table_loads import last_loads

A, B, C, NEVER = (TableRef("wap", n) for n in ("a", "b", "c", "never"))


class Counting(FakeCatalog):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str | None] = []

    def publications(self, table: TableRef | None, on: str = "main", limit: int = 100) -> Any:
        self.reads.append(None if table is None else table.qualified)
        return super().publications(table, on, limit)


def published(catalog: FakeCatalog, table: TableRef, key: str, rows: int, extra: dict[str, str] | None = None) -> None:
    source = SourceObject("inbox", key, etag="e")
    catalog.commit("main", {f"{table.qualified}.{key}": rows}, f"publish {key}",
                   lineage.merge_properties(table, [(source, rows)]) | (extra or {}))


def test_each_tables_last_load_comes_from_one_read_of_mains_history() -> None:
    catalog = Counting()
    published(catalog, A, "a/1.parquet", 3)
    published(catalog, B, "b/1.parquet", 4)
    load = lineage.load_properties(SourceObject("inbox", "loads/m.json", etag="m"),
                                   [(SourceObject("inbox", "b/2.csv", etag="x"), B, 5),
                                    (SourceObject("inbox", "c/1.csv", etag="y"), C, 6)])
    catalog.commit("main", {"wap.b.2": 1, "wap.c.1": 1}, "a load", load)
    published(catalog, A, "a/2.parquet", 7)
    catalog.commit("main", {"wap.a.m": 1}, "maintained", {lineage.TABLE: A.qualified, MAINTENANCE: "{}"})

    found = last_loads(catalog, [A, B, C, NEVER], main="main")

    assert catalog.reads == [None]  # one read for every table, never one per table
    assert {t.name: (e.source, e.rows) if e else None for t, e in found.items()} == {
        "a": ("s3://inbox/a/2.parquet", 7),  # the maintenance after it published no load
        "b": ("s3://inbox/b/2.csv", 5), "c": ("s3://inbox/c/1.csv", 6), "never": None}


def test_a_table_older_than_the_window_is_looked_up_on_its_own() -> None:
    catalog = Counting()
    published(catalog, A, "a/old.parquet", 2)
    for n in range(3):
        published(catalog, B, f"b/{n}.parquet", n + 1)

    found = last_loads(catalog, [A, B], main="main", window=3)

    assert catalog.reads == [None, A.qualified]  # the window did not reach A's load: A alone, once
    assert found[A] is not None and found[A].source == "s3://inbox/a/old.parquet"
    assert found[B] is not None and found[B].rows == 3
