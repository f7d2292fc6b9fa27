"""The manifests and manifest lists a commit put, kept in memory by location (adapters/catalog/lake_io.Written)."""

from __future__ import annotations

from wap_ingest.adapters.catalog.lake_io import Written


def test_only_manifests_and_manifest_lists_within_the_bounds_are_kept() -> None:
    written = Written(budget=10, largest=6)
    written.keep("s3://lake/t/metadata/snap-1.avro", b"abc")
    written.keep("s3://lake/t/metadata/00001.metadata.json", b"{}")  # kept parsed elsewhere, not here
    written.keep("s3://lake/t/data/f.parquet", b"PAR1")
    written.keep("s3://lake/t/metadata/big.avro", b"x" * 7)  # larger than the largest kept
    assert written.get("s3://lake/t/metadata/snap-1.avro") == b"abc"
    assert written.get("s3://lake/t/metadata/00001.metadata.json") is None
    assert written.get("s3://lake/t/data/f.parquet") is None
    assert written.get("s3://lake/t/metadata/big.avro") is None


def test_the_oldest_are_forgotten_past_the_budget_and_a_location_holds_what_was_put_there_last() -> None:
    written = Written(budget=10, largest=6)
    for name in "abc":
        written.keep(f"s3://lake/{name}.avro", name.encode() * 4)  # 12 bytes in all: the first goes
    assert [written.get(f"s3://lake/{n}.avro") for n in "abc"] == [None, b"bbbb", b"cccc"]
    written.keep("s3://lake/b.avro", b"B")  # put again: the new bytes, the old ones no longer counted
    written.keep("s3://lake/d.avro", b"dddd")
    assert [written.get(f"s3://lake/{n}.avro") for n in "bcd"] == [b"B", b"cccc", b"dddd"]
    written.keep("s3://lake/c.avro", b"c" * 9)  # too large now: what was kept there is forgotten, not left stale
    assert written.get("s3://lake/c.avro") is None
    written.forget("s3://lake/d.avro")  # deleted
    assert written.get("s3://lake/d.avro") is None
    written.keep("s3://lake/e.avro", b"e" * 6)  # fits: the budget counts only what is still kept (B and e)
    assert [written.get(f"s3://lake/{n}.avro") for n in "be"] == [b"B", b"e" * 6]
