"""One chunk's claims against its values (adapters/engine/parquet_check.py) where no writer at hand makes the claim: the
statistics in page headers (pyarrow writes none; parquet-java and other writers may), checked page by page; and a
chunk fed in several batches (a large chunk) is measured as one."""

from __future__ import annotations

import struct

import pyarrow as pa

from wap_ingest.adapters.engine.parquet_check import ChunkCheck
from wap_ingest.adapters.engine.parquet_claims import DATA_PAGE, ChunkClaims, PageClaim, StatsClaim
from wap_ingest.adapters.engine.parquet_figures import key_kind
from wap_ingest.adapters.engine.parquet_leaves import leaves_of


def int64(value: int) -> bytes:
    return struct.pack("<q", value)


def claims(first: StatsClaim, second: StatsClaim) -> ChunkClaims:
    pages = (PageClaim(4, 100, DATA_PAGE, 0, 5, stats=first), PageClaim(104, 100, DATA_PAGE, 0, 5, stats=second))
    return ChunkClaims(path="n", physical="INT64", values=10, encodings=frozenset({0, 3}), encoding_stats=None,
                       stats=None, pages=pages, start=4, compressed=200)


VALUES = pa.array([1, 2, None, 4, 5, 6, 7, None, None, 10], pa.int64())


def problems(chunk: ChunkClaims, *pieces: pa.Array) -> list[str]:
    check = ChunkCheck(chunk, key_kind(pa.int64()), "n")
    for piece in pieces:
        [leaf] = leaves_of(piece)
        check.feed(leaf)
    _, found, unchecked = check.finish()
    assert unchecked == []
    return found


def test_true_page_statistics_pass_in_one_piece_or_several() -> None:
    chunk = claims(StatsClaim(nulls=1, low=int64(1), high=int64(5)), StatsClaim(nulls=2, low=int64(6),
                                                                               high=int64(10)))
    assert problems(chunk, VALUES) == []
    assert problems(chunk, VALUES.slice(0, 3), VALUES.slice(3, 4), VALUES.slice(7)) == []  # pages across batches


def test_false_page_statistics_are_named_with_their_page() -> None:
    chunk = claims(StatsClaim(nulls=0, low=int64(1), high=int64(5)), StatsClaim(nulls=2, low=int64(7),
                                                                               high=int64(9)))
    assert problems(chunk, VALUES.slice(0, 6), VALUES.slice(6)) == [
        "n page 0 null_count 0, measured 1", "n page 1 min 7, measured 6, max 9, measured 10"]
