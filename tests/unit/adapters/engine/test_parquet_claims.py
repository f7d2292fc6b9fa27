"""A Parquet file's own claims checked against its decoded pages (adapters/engine/parquet_measuring.py and its parts),
on real files written by pyarrow whose claims the tests then make false (tests/parquet_lies.py): every claim a reader
of the table skips data by is either checked and found true, or the file is not registered as it is
(`Measured.problem`). The figures measured are the values' own, whatever the footer says, or does not say."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests import parquet_lies as lies
from wap_ingest.adapters.engine.parquet_decode import _decoded_parquet
from wap_ingest.adapters.engine.parquet_measured import DISAGREE, Measured

ROWS = 1_000


def table() -> pa.Table:
    return pa.table({
        "my_col_1": pa.array([None if i % 10 == 0 else i for i in range(ROWS)], pa.int64()),
        "name": pa.array([f"v{i:04d}" for i in range(ROWS)]),
        "ratio": pa.array([float("nan") if i == 7 else i / 4 for i in range(ROWS)]),
        "tags": pa.array([[str(i), None] if i % 3 else ([] if i % 2 else None) for i in range(ROWS)],
                         pa.list_(pa.string())),
        "point": pa.array([{"x": i, "y": None} if i % 7 else None for i in range(ROWS)],
                          pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "attrs": pa.array([[("k", i)] if i % 5 else [] for i in range(ROWS)], pa.map_(pa.string(), pa.int64())),
        "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i % 40) for i in range(ROWS)]),
        "at": pa.array([dt.datetime(2026, 1, 1) + dt.timedelta(minutes=i) for i in range(ROWS)],
                       pa.timestamp("us", tz="UTC")),
        "price": pa.array([decimal.Decimal(i) / 100 for i in range(ROWS)], pa.decimal128(9, 2)),
    })


def measured(tmp_path: Path, data: bytes) -> Measured:
    path = tmp_path / "f.parquet"
    path.write_bytes(data)
    _, found = _decoded_parquet(path, "s3://inbox/t/f.parquet", "wap.t", True)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def good() -> bytes:
    return lies.parquet_bytes(table(), row_group_size=400)


@pytest.mark.parametrize("options", [
    {}, {"write_page_index": True}, {"data_page_version": "2.0", "write_page_index": True},
    {"use_dictionary": False, "data_page_size": 512, "write_page_index": True}, {"compression": "zstd"},
    {"write_statistics": False}, {"store_decimal_as_integer": True, "write_page_index": True},
])
def test_a_truthful_file_has_no_problem_and_its_figures_are_the_values(tmp_path: Path,
                                                                       options: dict[str, object]) -> None:
    found = measured(tmp_path, lies.parquet_bytes(table(), row_group_size=400, **options))
    assert found.problem == "" and found.rows == ROWS
    leaves = {leaf.path: leaf for leaf in found.leaves}
    values = table()
    assert leaves["my_col_1"].nulls == 100 and (leaves["my_col_1"].low, leaves["my_col_1"].high) == (1, 999)
    assert leaves["ratio"].nans == 1 and leaves["ratio"].nulls == 0
    assert (leaves["ratio"].low, leaves["ratio"].high) == (0.0, 999 / 4)  # NaN left out of the bounds
    assert (leaves["name"].low, leaves["name"].high) == ("v0000", "v0999")
    assert leaves["price"].low == decimal.Decimal("0.00") and leaves["price"].high == decimal.Decimal("9.99")
    assert leaves["at"].high == pc.max(values["at"]).as_py()
    assert leaves["day"].low == dt.date(2026, 1, 1)
    # a list's element: an entry per element, and one without a value per null or empty list
    lists = values["tags"].to_pylist()
    entries = sum(len(v) if v else 1 for v in lists)
    assert (leaves["tags.list.element"].values, leaves["tags.list.element"].repeated) == (entries, True)
    assert leaves["tags.list.element"].nulls == entries - sum(1 for v in lists if v for x in v if x is not None)
    assert leaves["tags.list.element"].low is None  # no bounds inside lists and maps
    assert leaves["point.x"].nulls == sum(1 for i in range(ROWS) if i % 7 == 0)
    assert leaves["point.y"].nulls == ROWS
    assert leaves["attrs.key_value.key"].values == ROWS  # a map's empty slots are entries too


LIES: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "hidden nulls": (lambda d: lies.lie(d, lies.set_null_count(0, "my_col_1", 0)),
                     f"{DISAGREE}: my_col_1 (row group 0) null_count 0, measured 40"),
    "too many nulls": (lambda d: lies.lie(d, lies.set_null_count(1, "name", 400)),
                       "name (row group 1) null_count 400, measured 0"),
    "a minimum above the values": (lambda d: lies.lie(d, lies.set_bounds(1, "my_col_1", low=lies.int64(500))),
                                   "my_col_1 (row group 1) min 500, measured 401"),
    "a maximum below the values": (lambda d: lies.lie(d, lies.set_bounds(0, "ratio", high=lies.double(10.0))),
                                   "ratio (row group 0) max 10.0, measured 99.75"),
    "a deprecated minimum": (lambda d: lies.lie(d, lies.set_bounds(2, "my_col_1", low=lies.int64(900),
                                                                   deprecated=True)),
                             "my_col_1 (row group 2) (deprecated) min 900, measured 801"),
    "a NaN bound": (lambda d: lies.lie(d, lies.set_bounds(0, "ratio", low=lies.double(math.nan))),
                    "ratio (row group 0) min NaN"),
    "a string maximum cut short": (lambda d: lies.lie(d, lies.set_bounds(0, "name", high=b"v03")),
                                   "name (row group 0) max 'v03', measured 'v0399'"),
    "fewer rows in the file": (lambda d: lies.lie(d, lies.set_file_rows(900)), "num_rows 900, measured 1000"),
    # pyarrow 26 decodes as many rows as a row group claims (pyarrow 20 decoded its pages): the lie shows as pages
    # that hold more values than were decoded, named per column
    "fewer rows in a row group": (lambda d: lies.lie(d, lies.set_group_rows(0, 300)),
                                  "my_col_1 (row group 0): its pages hold 400 values, 300 decoded"),
    "fewer values in a chunk": (lambda d: lies.lie(d, lies.set_num_values(0, "my_col_1", 100)),
                                "my_col_1 (row group 0) num_values 100, its pages hold 400"),
    "plain pages said to be dictionary-encoded": (
        lambda d: lies.lie(d, lies.set_encodings(0, "name", [8, 3])),
        "name (row group 0) encodings [3, 8], its pages use [0]"),
}


@pytest.mark.parametrize("case", sorted(LIES))
def test_a_false_claim_is_found_and_named(tmp_path: Path, case: str) -> None:
    body = lies.parquet_bytes(table(), row_group_size=400, use_dictionary=["my_col_1", "ratio"])
    make, expected = LIES[case]
    found = measured(tmp_path, make(body))
    assert expected in found.problem, found.problem
    assert found.problem.startswith(DISAGREE)


def test_a_truncated_but_true_bound_is_no_lie(tmp_path: Path, good: bytes) -> None:
    """Writers may shorten a string's bounds: a prefix below the minimum, a larger string above the maximum, each
    marked inexact (a shortened bound the footer calls exact is a lie: "a string maximum cut short")."""
    found = measured(tmp_path, lies.lie(good, lies.set_bounds(0, "name", low=b"v", high=b"v1", exact=False)))
    assert found.problem == ""
    assert {leaf.path: leaf for leaf in found.leaves}["name"].high == "v0999"  # the committed bound is measured


def test_a_footer_without_statistics_gets_figures_all_the_same(tmp_path: Path, good: bytes) -> None:
    body = good
    for group in range(3):
        body = lies.lie(body, lies.drop_statistics(group, "my_col_1"))
    found = measured(tmp_path, body)
    assert found.problem == ""
    [leaf] = [leaf for leaf in found.leaves if leaf.path == "my_col_1"]
    assert (leaf.nulls, leaf.low, leaf.high) == (100, 1, 999)


@pytest.mark.parametrize(("edit", "expected"), [
    (lies.add_bloom_filter(0, "name"), "a bloom filter (column name)"),
    (lambda footer: lies.row_groups(footer)[0].set(4, lies.LIST, (lies.STRUCT, [])),
     "sorting columns (a claim that its rows are sorted) (row group 0)"),
    (lambda footer: lies.chunk_metadata(footer, 0, "name").set(30, lies.I32, 1), "field 30 of a column metadata"),
])
def test_a_claim_the_service_does_not_check_keeps_the_file_from_registering(tmp_path: Path, good: bytes,
                                                                            edit: Callable[[lies.TStruct], None],
                                                                            expected: str) -> None:
    found = measured(tmp_path, lies.lie(good, edit))
    assert found.problem.startswith("its footer makes claims the service does not check: ")
    assert expected in found.problem, found.problem


def indexed() -> bytes:
    """Sorted values in small pages with a page index: several pages per chunk, an ascending boundary order."""
    values = pa.table({"n": pa.array(range(ROWS), pa.int64()), "s": pa.array([f"k{i:05d}" for i in range(ROWS)])})
    return lies.parquet_bytes(values, use_dictionary=False, data_page_size=256, write_batch_size=50,
                              write_page_index=True, row_group_size=ROWS)


def test_a_column_index_is_checked_page_by_page(tmp_path: Path) -> None:
    body = indexed()
    assert measured(tmp_path, body).problem == ""

    def raise_second_minimum(index: lies.TStruct) -> None:
        _, minimums = index.fields[2][1]
        minimums[1] = struct.pack("<q", struct.unpack("<q", minimums[1])[0] + 5)

    found = measured(tmp_path, lies.edit_column_index(body, 0, "n", raise_second_minimum))
    assert "n page 1 (column index) min" in found.problem, found.problem

    def a_null_page(index: lies.TStruct) -> None:
        index.fields[1][1][1][2] = True

    found = measured(tmp_path, lies.edit_column_index(body, 0, "n", a_null_page))
    assert "n page 2 (column index): null page, measured" in found.problem, found.problem

    def descending(index: lies.TStruct) -> None:
        index.set(4, lies.I32, 2)

    found = measured(tmp_path, lies.edit_column_index(body, 0, "s", descending))
    assert "its column index says its pages are descending, they are not" in found.problem, found.problem


def test_an_offset_index_is_checked_page_by_page(tmp_path: Path) -> None:
    def shift_a_first_row(index: lies.TStruct) -> None:
        location = index.fields[1][1][1][3]
        location.set(3, lies.I64, location[3] + 1)

    found = measured(tmp_path, lies.edit_offset_index(indexed(), 0, "n", shift_a_first_row))
    assert "n page 3 (offset index)" in found.problem and "first row" in found.problem, found.problem


def test_a_v2_page_header_is_checked(tmp_path: Path) -> None:
    values = pa.table({"n": pa.array([None if i % 4 == 0 else i for i in range(ROWS)], pa.int64())})
    body = lies.parquet_bytes(values, data_page_version="2.0", use_dictionary=False)
    assert measured(tmp_path, body).problem == ""

    def fewer_nulls(header: lies.TStruct) -> None:
        header[8].set(2, lies.I32, header[8][2] - 1)

    found = measured(tmp_path, lies.edit_first_data_page(body, 0, "n", fewer_nulls))
    assert "n page 0 num_nulls 249, measured 250" in found.problem, found.problem
