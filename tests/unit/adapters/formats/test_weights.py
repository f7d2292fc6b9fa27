"""The weighing of one object version from its own bytes (adapters/formats/weights.py), over an in-memory range reader:
what each read asks for is recorded, so the bounds are checked too. The same against moto: the integration tier."""

from __future__ import annotations

import bz2
import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

from tests import corruption
from wap_ingest.adapters.formats.weights import BZIP2_PROBE_BYTES, FOOTER_TAIL, PROBE_BYTES, PROBE_CAP, weigh
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


def orc_bytes(table: pa.Table, codec: str) -> bytes:
    sink = io.BytesIO()
    orc.write_table(table, sink, compression=codec)
    return sink.getvalue()


@pytest.mark.parametrize("codec", ["uncompressed", "zlib", "snappy", "lz4", "zstd"])
def test_orc_by_its_footers_statistics_in_one_read_for_every_codec(codec: str) -> None:
    rows = 100_000
    table = pa.table({"a": pa.array(range(rows)), "b": pa.array([f"v{i % 97}" + "x" * 40 for i in range(rows)]),
                      "c": pa.array([i / 3 for i in range(rows)], pa.float32()), "d": pa.array([[1, 2, 3]] * rows)})
    reads = Ranges(orc_bytes(table, codec))
    weight = weigh(source("t/a.orc", reads.body), FileFormat.ORC, reads)
    # each value at its type's width, the strings by their bytes: here exactly what Arrow holds them in
    assert (weight.how, weight.processed, weight.stored) == ("ORC footer", table.nbytes, len(reads.body))
    assert reads.asked == [f"bytes=-{min(FOOTER_TAIL, len(reads.body))}"]


def test_a_highly_compressible_orc_weighs_what_its_rows_decode_to() -> None:
    rows = 3_000_000  # identical rows: a few tens of kilobytes with zstd
    table = pa.table({"a": pa.array([7] * rows, pa.int64()), "b": pa.array(["the same value"] * rows)})
    reads = Ranges(orc_bytes(table, "zstd"))
    weight = weigh(source("t/a.orc", reads.body), FileFormat.ORC, reads)
    assert weight.processed == rows * (8 + 4 + len("the same value")) and weight.ratio > 1000
    assert len(reads.body) < FOOTER_TAIL and reads.asked == [f"bytes=-{len(reads.body)}"]  # the file was its tail


def test_a_long_orc_footer_is_read_in_a_second_bounded_read() -> None:
    table = pa.table({f"column_{i:04}": pa.array([i, i + 1], pa.int64()) for i in range(4000)})
    reads = Ranges(orc_bytes(table, "lz4"))
    weight = weigh(source("t/a.orc", reads.body), FileFormat.ORC, reads)
    assert weight.how == "ORC footer" and weight.processed == max(len(reads.body), 4000 * 2 * 8)
    assert reads.asked[0] == f"bytes=-{FOOTER_TAIL}" and len(reads.asked) == 2
    assert FOOTER_TAIL < int(reads.asked[1].removeprefix("bytes=-")) < len(reads.body)


def test_a_damaged_orc_tail_is_unreadable_naming_the_object() -> None:
    good = orc_bytes(pa.table({"a": pa.array(range(50_000)), "b": pa.array(["x"] * 50_000)}), "zlib")
    ps_length = good[-1]
    footer_end = len(good) - 1 - ps_length
    stripes = next(r for r in corruption.orc_regions(good) if r.kind == "stripes")
    cases = {
        "not orc": (b"not an ORC file at all", "postscript length"),
        "cut short": (good[:-7], "postscript"),
        "footer flipped": (good[:footer_end - 40] + bytes(b ^ 0x5A for b in good[footer_end - 40:footer_end])
                           + good[footer_end:], "its footer does not"),
        "stripes cut short": (good[:stripes.end // 2] + good[stripes.end:], "outside the file's data"),
        "lying postscript": (corruption.orc_postscript_lie(1, 1_900_000_000), "postscript claims a 1900000000-byte"),
    }
    for name, (data, phrase) in cases.items():
        with pytest.raises(UnreadableSourceError) as caught:
            weigh(source(f"t/{name}.orc", data), FileFormat.ORC, Ranges(data))
        assert phrase in str(caught.value) and f"s3://b/t/{name}.orc: not a complete ORC file" in str(caught.value)
        assert "Fix:" in str(caught.value)
    lzo = corruption.orc_postscript_lie(2, 3)  # a codec pyarrow cannot decompress (the engine's reader can)
    weight = weigh(source("t/lzo.orc", lzo), FileFormat.ORC, Ranges(lzo))
    assert (weight.processed, weight.how) == (len(lzo), "ORC with an LZO footer (weighed as stored)")
    brotli = corruption.orc_postscript_lie(2, 6)  # ORC 2.0's brotli: the engine's ORC 1.9 reader cannot read it
    with pytest.raises(UnreadableSourceError, match=r"compressed with brotli, which neither this service nor its "
                                                    r"engine reads.* Fix: write it with zlib, snappy, LZ4 or zstd"):
        weigh(source("t/brotli.orc", brotli), FileFormat.ORC, Ranges(brotli))


def test_other_files_weigh_what_they_are_stored_as_and_nothing_is_read() -> None:
    reads = Ranges(b"a,b\n1,2\n")
    assert weigh(source("t/a.csv", reads.body), FileFormat.CSV, reads).processed == len(reads.body)
    assert reads.asked == []
    avro = corruption.avro_container()  # its blocks record only their compressed length: weighed as stored
    assert weigh(source("t/a.avro", avro), FileFormat.AVRO, Ranges(avro)).processed == len(avro)


def test_a_gzip_trailer_that_disagrees_with_the_probe_is_not_believed() -> None:
    raw = text(300_000)
    body = gzip.compress(raw)
    damaged = body[:-4] + (0xFFFFFFF0).to_bytes(4, "little")  # a truncated or damaged file's last bytes: anything
    weight = weigh(source("t/a.csv.gz", damaged), FileFormat.CSV, Ranges(damaged))
    assert weight.how == "gzip probe" and weight.processed < len(raw) * 4  # the probe's estimate, not 4 GiB
    truncated = body[:40]  # smaller than a probe: what its start inflates to, left to the engine to call incomplete
    weight = weigh(source("t/b.csv.gz", truncated), FileFormat.CSV, Ranges(truncated))
    assert weight.stored == 40 and weight.processed < 4000
