"""What an S3 object version weighs once decompressed (core.weights), from its own bytes, with bounded ranged reads of
exactly that version (its version id, else its ETag):
- gzip: the trailer's ISIZE (the size of the last member, modulo 4 GiB) and a probe of its first PROBE_BYTES;
- bzip2: a probe of its first BZIP2_PROBE_BYTES (bzip2 has no size field; it emits a block at a time);
- Parquet: the footer's uncompressed row-group sizes (one ranged read of the tail, a second for a long footer);
- ORC: what its footer's statistics say the rows decode to (adapters/formats/orc_tail.py: each value at its type's
width,
  strings and binary by their bytes), read as Parquet's is, its compressed footer decompressed bounded (natively in
  the isolation worker);
- any other file (plain text; Avro, whose blocks record only their compressed length): its stored size.
A probe decompresses at most PROBE_BYTES of input into at most PROBE_CAP of output, so a bomb costs a bounded read
and a bounded amount of work: past the cap, the ratio is reported as at least what the cap shows."""

from __future__ import annotations

import bz2
import zlib
from collections.abc import Callable
from typing import Any

from wap_ingest.adapters.formats.orc_codecs import READABLE
from wap_ingest.adapters.formats.orc_tail import TailError, footer_of, postscript_of
from wap_ingest.core.errors import UnreadableSourceError
from wap_ingest.core.formats import compression_of
from wap_ingest.core.models import FileFormat, SourceObject
from wap_ingest.core.weights import Weight

PROBE_BYTES = 64 * 1024  # compressed input a gzip probe reads (deflate emits output as it goes)
BZIP2_PROBE_BYTES = 1024 * 1024  # bzip2 emits nothing before a whole block (up to 900 kB of text) is read
CHUNK = 16 * 1024  # a bzip2 probe's feeding step: its ratio is measured at the chunk where output appeared
PROBE_CAP = 64 * 1024 * 1024  # decompressed output a probe stops at (a ratio of 1,024 at most is measured)
FOOTER_TAIL = 64 * 1024  # a Parquet or ORC file's tail read first (its footer is usually smaller)
TRAILER_AGREES = 8.0  # how far gzip's ISIZE may be from the probe's estimate to be believed

Read = Callable[[str], bytes]  # an HTTP Range header value -> the bytes of exactly the version


def weigh(source: SourceObject, fmt: FileFormat, read: Read) -> Weight:
    stored = source.size or 0
    codec = compression_of(source.key)
    if stored == 0:
        return Weight(0, 0)
    if codec == "gzip":
        return _gzip(source, stored, read)
    if codec == "bzip2":
        return _bzip2(source, stored, read(f"bytes=0-{min(stored, BZIP2_PROBE_BYTES) - 1}"))
    if fmt is FileFormat.PARQUET:
        return _parquet(source, stored, read)
    if fmt is FileFormat.ORC:
        return _orc(source, stored, read)
    return Weight(stored, stored)


def _gzip(source: SourceObject, stored: int, read: Read) -> Weight:
    probed = _probed(source, stored, read(f"bytes=0-{min(stored, PROBE_BYTES) - 1}"),
                     zlib.decompressobj(16 + zlib.MAX_WBITS), "gzip probe")
    if stored <= PROBE_BYTES:  # the whole file was probed: what it inflated to (or a truncated file's start)
        return probed
    trailer = int.from_bytes(read(f"bytes={stored - 4}-{stored - 1}")[-4:], "little")
    # ISIZE is the last member's size modulo 2**32, and a truncated or damaged file's last bytes are anything: it is
    # believed only when it agrees with the probe's ratio within TRAILER_AGREES (else the probe's estimate stands)
    if probed.processed / TRAILER_AGREES <= trailer <= probed.processed * TRAILER_AGREES:
        return Weight(stored, max(trailer, stored), "gzip trailer")
    return probed


def _probed(source: SourceObject, stored: int, head: bytes, decompressor: Any, how: str) -> Weight:
    """Decompress the head of the file, bounded; extrapolate its ratio to the whole file."""
    try:
        produced = len(decompressor.decompress(head, PROBE_CAP))
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        codec = how.split(maxsplit=1)[0]
        raise UnreadableSourceError(f"{source.uri}: its first bytes are not {codec} data ({exc}); nothing "
                                    f"was ingested. Fix: upload the file compressed as its suffix says.") from exc
    if len(head) >= stored and decompressor.eof:
        return Weight(stored, produced, f"{how} (whole file)")
    ratio = produced / max(1, len(head))
    return Weight(stored, int(stored * ratio), how if produced < PROBE_CAP else f"{how} (at least)")


def _bzip2(source: SourceObject, stored: int, head: bytes) -> Weight:
    """Feed the head in chunks, bounded in output; the ratio is the output over the input fed when it appeared."""
    decompressor, produced, fed_at_output = bz2.BZ2Decompressor(), 0, 0
    try:
        for start in range(0, len(head), CHUNK):
            got = len(decompressor.decompress(head[start:start + CHUNK], PROBE_CAP - produced))
            while not decompressor.needs_input and not decompressor.eof and produced + got < PROBE_CAP:
                got += len(decompressor.decompress(b"", PROBE_CAP - produced - got))
            if got:
                produced, fed_at_output = produced + got, min(len(head), start + CHUNK)
            if produced >= PROBE_CAP or decompressor.eof:
                break
    except (OSError, EOFError, ValueError) as exc:
        raise UnreadableSourceError(f"{source.uri}: its first bytes are not bzip2 data ({exc}); nothing was "
                                    f"ingested. Fix: upload the file compressed as its suffix says.") from exc
    if decompressor.eof and len(head) >= stored:
        return Weight(stored, produced, "bzip2 probe (whole file)")
    if not produced:  # no block ended within the probe: barely compressible, as large as it is stored
        return Weight(stored, stored, "bzip2 probe")
    estimate = int(stored * produced / fed_at_output)
    return Weight(stored, estimate, "bzip2 probe" if produced < PROBE_CAP else "bzip2 probe (at least)")


def _parquet(source: SourceObject, stored: int, read: Read) -> Weight:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tail = read(f"bytes=-{min(stored, FOOTER_TAIL)}")
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        raise UnreadableSourceError(f"{source.uri}: not a complete Parquet file (no PAR1 magic at its end); "
                                    f"nothing was ingested. Fix: upload a complete Parquet file.")
    footer = int.from_bytes(tail[-8:-4], "little")
    if footer + 8 > stored:
        raise UnreadableSourceError(f"{source.uri}: its Parquet footer claims {footer} bytes, more than the file "
                                    f"({stored}); nothing was ingested. Fix: upload a complete Parquet file.")
    if footer + 8 > len(tail):
        tail = read(f"bytes=-{footer + 8}")
    try:
        meta = pq.read_metadata(pa.BufferReader(tail[-(footer + 8):]))
    except (OSError, pa.ArrowException) as exc:
        raise UnreadableSourceError(f"{source.uri}: its Parquet footer cannot be read ({exc}); nothing was "
                                    f"ingested. Fix: upload a complete Parquet file.") from exc
    decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return Weight(stored, max(stored, int(decoded)), "Parquet footer")


def _orc(source: SourceObject, stored: int, read: Read) -> Weight:
    tail = read(f"bytes=-{min(stored, FOOTER_TAIL)}")
    try:
        postscript = postscript_of(tail, stored)
        if postscript.codec == "lzo":  # the engine reads LZO; nothing here decompresses its footer: as stored
            return Weight(stored, stored, "ORC with an LZO footer (weighed as stored)")
        if postscript.codec not in READABLE:
            raise UnreadableSourceError(
                f"{source.uri}: its ORC footer is compressed with {postscript.codec}, which neither this service nor "
                f"its engine reads; nothing was ingested. Fix: write it with zlib, snappy, LZ4 or zstd compression "
                f"(or none) and upload it again.")
        if postscript.footer_tail > len(tail):
            tail = read(f"bytes=-{postscript.footer_tail}")
        footer = footer_of(tail, stored, postscript)
    except TailError as exc:
        raise UnreadableSourceError(f"{source.uri}: not a complete ORC file: {exc}; nothing was ingested. Fix: "
                                    f"write the file again from the original data and upload it again.") from exc
    return Weight(stored, max(stored, footer.decoded_bytes), footer.how)
