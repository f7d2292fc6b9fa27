"""The weighing of one object version from its own bytes (adapters/s3_weights.py), over an in-memory range reader:
what each read asks for is recorded, so the bounds are checked too. The same against moto: the integration tier."""

from __future__ import annotations

import bz2
import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wap_ingest.adapters.s3_weights import BZIP2_PROBE_BYTES, FOOTER_TAIL, PROBE_BYTES, PROBE_CAP, weigh
from wap_ingest.core.errors import UnreadableSourceError
from wap_ingest.core.models import FileFormat, SourceObject


class Ranges:
    def __init__(self, body: bytes) -> None:
        self.body, self.asked = body, []  # type: ignore[var-annotated]

    def __call__(self, header: str) -> bytes:
        self.asked.append(header)
        spec = header.removeprefix("bytes=")
        if spec.startswith("-"):
            return self.body[-int(spec[1:]):]
        start, end = (int(p) for p in spec.split("-"))
        return self.body[start:end + 1]


def text(rows: int) -> bytes:
    return "".join(f"{i},v{i % 97},{i / 2}\n" for i in range(rows)).encode()


def source(key: str, body: bytes) -> SourceObject:
    return SourceObject("b", key, size=len(body), etag="e")


def test_gzip_by_its_trailer_after_a_bounded_probe() -> None:
    raw = text(300_000)
    reads = Ranges(gzip.compress(raw))
    weight = weigh(source("t/a.csv.gz", reads.body), FileFormat.CSV, reads)
    assert (weight.processed, weight.how) == (len(raw), "gzip trailer")
    assert reads.asked == [f"bytes=0-{PROBE_BYTES - 1}", f"bytes={len(reads.body) - 4}-{len(reads.body) - 1}"]


def test_bzip2_by_a_probe_of_whole_blocks_and_a_bomb_by_a_bounded_one() -> None:
    raw = text(2_000_000)
    reads = Ranges(bz2.compress(raw))
    assert len(reads.body) > BZIP2_PROBE_BYTES
    weight = weigh(source("t/a.csv.bz2", reads.body), FileFormat.CSV, reads)
    assert weight.how == "bzip2 probe" and len(raw) / 1.5 < weight.processed < len(raw) * 1.5
    assert reads.asked == [f"bytes=0-{BZIP2_PROBE_BYTES - 1}"]
    bomb = Ranges(bz2.compress(b"0" * (PROBE_CAP * 3)))
    weight = weigh(source("t/b.csv.bz2", bomb.body), FileFormat.CSV, bomb)
    assert weight.how == "bzip2 probe (at least)" and weight.ratio > 10_000  # stopped at the cap


def test_parquet_by_its_footer_in_one_or_two_reads_and_lies_refused() -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": pa.array(range(200_000)), "b": pa.array(["x" * 40] * 200_000)}), sink)
    reads = Ranges(sink.getvalue())
    weight = weigh(source("t/a.parquet", reads.body), FileFormat.PARQUET, reads)
    assert weight.how == "Parquet footer" and weight.processed > weight.stored
    assert reads.asked == [f"bytes=-{FOOTER_TAIL}"]
    with pytest.raises(UnreadableSourceError, match="not a complete Parquet file"):
        weigh(source("t/b.parquet", b"not parquet"), FileFormat.PARQUET, Ranges(b"not parquet"))
    lying = b"PAR1" + b"\0" * 20 + (10**9).to_bytes(4, "little") + b"PAR1"
    with pytest.raises(UnreadableSourceError, match="footer claims 1000000000 bytes, more than the file"):
        weigh(source("t/c.parquet", lying), FileFormat.PARQUET, Ranges(lying))


def test_other_files_weigh_what_they_are_stored_as_and_nothing_is_read() -> None:
    reads = Ranges(b"a,b\n1,2\n")
    assert weigh(source("t/a.csv", reads.body), FileFormat.CSV, reads).processed == len(reads.body)
    assert reads.asked == []


def test_a_gzip_trailer_that_disagrees_with_the_probe_is_not_believed() -> None:
    raw = text(300_000)
    body = gzip.compress(raw)
    damaged = body[:-4] + (0xFFFFFFF0).to_bytes(4, "little")  # a truncated or damaged file's last bytes: anything
    weight = weigh(source("t/a.csv.gz", damaged), FileFormat.CSV, Ranges(damaged))
    assert weight.how == "gzip probe" and weight.processed < len(raw) * 4  # the probe's estimate, not 4 GiB
    truncated = body[:40]  # smaller than a probe: what its start inflates to, left to the engine to call incomplete
    weight = weigh(source("t/b.csv.gz", truncated), FileFormat.CSV, Ranges(truncated))
    assert weight.stored == 40 and weight.processed < 4000
