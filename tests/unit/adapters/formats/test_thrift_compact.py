"""The reader of Thrift's compact protocol the register path reads a file's claims with
(adapters/formats/thrift_compact.py): what it reads is what an independent encoder wrote (tests/parquet_lies.py), and
hostile bytes give a ThriftError, never another exception, an endless loop or an allocation the bytes alone size."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import parquet_lies as lies
from wap_ingest.adapters.formats.thrift_compact import Struct, ThriftError, read_struct


def plain(value: object) -> object:
    """A typed struct of the tests' codec as the reader gives it: field id -> value."""
    if isinstance(value, lies.TStruct):
        return {field_id: plain(item) for field_id, (_, item) in value.fields.items()}
    if isinstance(value, tuple):  # a list: (element type, items)
        return [plain(item) for item in value[1]]
    return value


def read(value: object) -> object:
    if isinstance(value, Struct):
        return {field_id: read(item) for field_id, item in value.fields.items()}
    if isinstance(value, list):
        return [read(item) for item in value]
    return value


def test_a_real_footer_reads_as_an_independent_decoder_reads_it() -> None:
    data = lies.parquet_bytes(pa.table({"a": [1, None, 3], "s": ["x", "y", None], "l": [[1], [], None]}),
                              write_page_index=True)
    length = int.from_bytes(data[-8:-4], "little")
    raw = data[-8 - length:-8]
    found, end = read_struct(raw)
    assert end == len(raw)
    assert read(found) == plain(lies.decode(raw))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_hostile_bytes_give_a_thrift_error_or_a_struct(data: bytes) -> None:
    try:
        found, end = read_struct(data)
    except ThriftError:
        return
    assert isinstance(found, Struct) and 0 < end <= len(data)


def test_a_list_claiming_more_elements_than_bytes_is_refused_before_it_is_made() -> None:
    data = bytes([0x19, 0xF5]) + b"\xff\xff\xff\xff\x0f"  # field 1: a list of 2^32-1 i32s, then nothing
    try:
        read_struct(data)
    except ThriftError as exc:
        assert "longer than the bytes left" in str(exc)
    else:
        raise AssertionError("read")


def test_nesting_is_bounded() -> None:
    data = bytes([0x1C]) * 100 + bytes([0]) * 101  # field 1: a struct, 100 deep
    try:
        read_struct(data)
    except ThriftError as exc:
        assert "nested more than" in str(exc)
    else:
        raise AssertionError("read")
