"""An ORC file's tail read in Python (adapters/formats/orc_tail.py) and its compressed chunks
(adapters/formats/orc_codecs.py): each codec's chunks, bounded by the block and the limit, natively decoded in the
isolation worker; and every seeded damage of real files' tails (tests/corruption.py) weighed, or refused as the file's
fault, never anything else. The weighing itself over ranged reads: tests/unit/adapters/formats/test_weights.py."""

from __future__ import annotations

import io
import zlib
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import orc

from tests import corruption
from tests.unit.adapters.formats.test_weights import Ranges, source
from wap_ingest.adapters.formats import orc_codecs, weigh
from wap_ingest.adapters.formats.isolation import ChildDiedError
from wap_ingest.adapters.formats.orc_codecs import CodecError, inflated
from wap_ingest.core.errors import UnreadableSourceError
from wap_ingest.core.models import FileFormat

KINDS = {"zlib": 1, "snappy": 2, "lz4": 4, "zstd": 5}
TABLE = pa.table({f"column_{i:03}": pa.array([f"value {i}"] * 1000) for i in range(300)})


def chunks(codec: str, data: bytes, block: int) -> bytes:
    """`data` as ORC's compressed chunks of `block` bytes (each compressed, never stored as original)."""
    out = bytearray()
    for start in range(0, len(data), block):
        piece = data[start:start + block]
        if codec == "zlib":
            packed = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            body = packed.compress(piece) + packed.flush()
        else:
            body = pa.Codec("lz4_raw" if codec == "lz4" else codec).compress(piece, asbytes=True)
        out += (len(body) << 1).to_bytes(3, "little") + body
    return bytes(out)


def recompressed(codec: str, block: int = 1024) -> tuple[bytes, bytes]:
    """An uncompressed ORC file, and the same file with its footer compressed with `codec` in chunks of `block`
    bytes (its postscript saying so): pyarrow's own LZ4 writer stores footers as original chunks."""
    sink = io.BytesIO()
    orc.write_table(TABLE, sink, compression="uncompressed")
    data = sink.getvalue()
    length = data[-1]
    postscript = data[-1 - length:-1]
    footer_length = corruption.protobuf_fields(postscript)[1]
    footer = data[-1 - length - footer_length:-1 - length]
    packed = chunks(codec, footer, block)
    for field, value in ((1, len(packed)), (2, KINDS[codec]), (3, block)):
        postscript = corruption._protobuf_set(postscript, field, value)
    return data, data[:-1 - length - footer_length] + packed + postscript + bytes([len(postscript)])


@pytest.mark.parametrize("codec", sorted(KINDS))
def test_each_codecs_chunks_are_read_and_the_native_ones_in_the_worker(codec: str, monkeypatch: Any) -> None:
    calls: list[str] = []
    real = orc_codecs.isolated

    def recording(fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(orc_codecs, "isolated", recording)
    plain, packed = recompressed(codec)
    assert len(packed) < len(plain)  # the footer was compressed, in several chunks
    expected = weigh(source("t/plain.orc", plain), FileFormat.ORC, Ranges(plain))
    assert weigh(source("t/packed.orc", packed), FileFormat.ORC, Ranges(packed)).processed == expected.processed
    assert expected.processed == TABLE.nbytes
    assert calls == ([] if codec == "zlib" else [codec])


def test_a_chunk_or_a_stream_beyond_its_bounds_is_refused_before_it_is_all_decompressed() -> None:
    big = b"x" * 100_000
    for codec in KINDS:
        one = chunks(codec, big, len(big))  # one chunk of 100 kB, where the block says 1 kB
        with pytest.raises(CodecError, match="holds more than the compression block"):
            inflated(codec, one, 1024, 1 << 20)
        with pytest.raises(CodecError, match="holds more than the 10000 bytes read here"):
            inflated(codec, chunks(codec, big, 1024), 1024, 10_000)
    with pytest.raises(CodecError, match="claims 1000 bytes, 3 are left"):
        inflated("zlib", (1000 << 1).to_bytes(3, "little") + b"abc", 1024, 1 << 20)
    with pytest.raises(CodecError, match="cut short"):
        inflated("zstd", b"\x01\x00", 1024, 1 << 20)
    assert inflated("zlib", (3 << 1 | 1).to_bytes(3, "little") + b"abc", 1024, 10) == b"abc"  # an original chunk


def test_a_decompressor_that_dies_is_the_files_fault_and_this_process_lives_on(monkeypatch: Any) -> None:
    def dying(fn: Any, *args: Any, **kwargs: Any) -> Any:
        raise ChildDiedError("killed by SIGABRT")

    monkeypatch.setattr(orc_codecs, "isolated", dying)
    _, packed = recompressed("snappy")
    with pytest.raises(UnreadableSourceError, match=r"its snappy bytes crash the decompressor \(it killed by SIGABRT"):
        weigh(source("t/a.orc", packed), FileFormat.ORC, Ranges(packed))


@pytest.mark.parametrize("codec", corruption.CODECS["orc"])
def test_every_damaged_tail_is_weighed_or_refused_as_the_files_fault(codec: str) -> None:
    good = corruption.orc_file(codec, 2000)
    outcomes: dict[str, int] = {"weighed": 0, "refused": 0}
    for damage in corruption.damaged("orc", codec, good, 24, 25):
        if "-footer-" not in damage.case and "-postscript-" not in damage.case:
            continue
        try:
            weight = weigh(source(f"t/{damage.case}.orc", damage.data), FileFormat.ORC, Ranges(damage.data))
        except UnreadableSourceError as exc:
            assert f"t/{damage.case}.orc" in str(exc) and "Fix:" in str(exc)
            outcomes["refused"] += 1
        else:
            assert weight.processed >= weight.stored
            outcomes["weighed"] += 1
    assert outcomes["refused"] > 10, outcomes
