"""The part size of a parallel download (adapters/aws/s3.py, `part_bytes`): one wave of parallel ranged GETs, each at
least PART_BYTES and at most MAX_PART_BYTES."""

from __future__ import annotations

from wap_ingest.adapters.aws.s3 import MAX_PART_BYTES, PARALLEL_PARTS, PART_BYTES, part_bytes

MIB = 1024 * 1024


def test_parts_are_one_wave_within_their_bounds() -> None:
    assert part_bytes(20 * MIB) == PART_BYTES  # small: the smallest part (3 requests)
    assert part_bytes(97 * MIB) == -(-97 * MIB // PARALLEL_PARTS)  # 8 requests, all in flight at once
    assert part_bytes(10 * 1024 * MIB) == MAX_PART_BYTES  # large: several waves of the largest part
    for size in (PART_BYTES + 1, 97 * MIB + 3, 700 * MIB, 10**10):
        part = part_bytes(size)
        assert PART_BYTES <= part <= MAX_PART_BYTES
        assert -(-size // part) <= PARALLEL_PARTS or part == MAX_PART_BYTES
