"""The source tails the object store keeps (adapters/aws/s3_tails.py): by exact version, answered only when they
hold the bytes asked for."""

from __future__ import annotations

from wap_ingest.adapters.aws.s3_tails import Tails
from wap_ingest.core.models import SourceObject

V1 = SourceObject("inbox", "t/f.parquet", size=10, version_id="v1")


def test_a_kept_tail_answers_the_tails_it_holds_and_the_whole_only_when_it_is_all_of_it() -> None:
    tails = Tails()
    tails.keep(V1, b"56789", 10)
    assert tails.tail(V1, 3) == (b"789", 10)
    assert tails.tail(V1, 5) == (b"56789", 10)
    assert tails.tail(V1, 6) is None  # more than it holds: read from S3
    assert tails.whole(V1) is None
    tails.keep(V1, b"0123456789", 10)
    assert tails.tail(V1, 64) == (b"0123456789", 10)  # smaller than asked: all of it, as S3 answers
    assert tails.whole(V1) == b"0123456789"
    tails.keep(V1, b"9", 10)  # a shorter read of the same version keeps the longer tail
    assert tails.whole(V1) == b"0123456789"


def test_only_an_exact_version_is_kept_and_another_version_is_never_answered() -> None:
    tails = Tails()
    tails.keep(V1, b"0123456789", 10)
    for other in (SourceObject("inbox", "t/f.parquet", size=10, version_id="v2"),
                  SourceObject("inbox", "t/f.parquet", size=10, etag="abc"),
                  SourceObject("inbox", "t/g.parquet", size=10, version_id="v1"),
                  SourceObject("other", "t/f.parquet", size=10, version_id="v1"),
                  SourceObject("inbox", "t/f.parquet", size=11, version_id="v1")):
        assert tails.tail(other, 4) is None and tails.whole(other) is None
    unmarked = SourceObject("inbox", "t/u.parquet", size=4)  # no version id, no ETag: a read of it names none
    tails.keep(unmarked, b"abcd", 4)
    assert tails.tail(unmarked, 4) is None
    tails.keep(SourceObject("inbox", "t/e.parquet", size=4, etag="e1"), b"abcd", 5)  # a size unlike the head's
    assert tails.tail(SourceObject("inbox", "t/e.parquet", size=4, etag="e1"), 4) is None


def test_the_oldest_and_the_too_large_are_not_kept() -> None:
    tails = Tails(kept=2, largest=4)
    versions = [SourceObject("inbox", f"t/{n}.parquet", size=4, version_id="v") for n in "abc"]
    for version in versions:
        tails.keep(version, b"wxyz", 4)
    assert [tails.whole(v) for v in versions] == [None, b"wxyz", b"wxyz"]
    large = SourceObject("inbox", "t/large.parquet", size=5, version_id="v")
    tails.keep(large, b"vwxyz", 5)
    assert tails.tail(large, 1) is None
