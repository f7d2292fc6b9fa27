"""spark_read's checks before Spark, without Spark: a bad local CSV or header is refused before the engine is asked
(the session passed here fails the test if it is used)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import bad_inputs
from wap_ingest.adapters.engine import read as spark_read
from wap_ingest.adapters.engine.read import check_csv_text, header_of, read_source
from wap_ingest.core.errors import EmptySourceError, InvalidColumnError, UnreadableSourceError
from wap_ingest.core.models import FileFormat

URI = "s3://in/t/a.csv"


class UnusedSpark:
    """A session the checks must not reach."""

    @property
    def read(self) -> Any:
        raise AssertionError("Spark was asked to read a file the checks should have refused")


def refused(tmp_path: Path, data: bytes, fmt: FileFormat = FileFormat.CSV) -> str:
    path = tmp_path / f"staged.{fmt.value}"
    path.write_bytes(data)
    with pytest.raises((UnreadableSourceError, InvalidColumnError, EmptySourceError)) as caught:
        read_source(UnusedSpark(), [str(path)], fmt, source_uri=URI, table="wap.t")
    assert URI in str(caught.value) and "Fix:" in str(caught.value)
    return str(caught.value)


def test_latin1_names_the_byte_its_offset_and_line(tmp_path: Path) -> None:
    message = refused(tmp_path, bad_inputs.csv_latin1())
    assert f"byte 0xE9 at offset {bad_inputs.LATIN1_OFFSET} (line 2)" in message and "UTF-8" in message


def test_utf16_with_a_byte_order_mark(tmp_path: Path) -> None:
    assert "UTF-16 (it starts with the byte order mark FF FE)" in refused(tmp_path, bad_inputs.csv_utf16())


def test_utf16_without_a_byte_order_mark_is_found_by_its_nul_bytes(tmp_path: Path) -> None:
    assert "byte 0x00 at offset 1 (line 1)" in refused(tmp_path, bad_inputs.csv_utf16(bom=False))


def test_an_unclosed_quote_names_its_line(tmp_path: Path) -> None:
    assert "line 3 opens a quoted value that is not closed" in refused(tmp_path, bad_inputs.csv_unbalanced_quote())


@pytest.mark.parametrize("case", bad_inputs.BAD_HEADERS)
def test_unaddressable_headers_name_the_column(tmp_path: Path, case: str) -> None:
    message = refused(tmp_path, bad_inputs.csv_header(bad_inputs.BAD_HEADERS[case]))
    assert "InvalidColumnError" not in message and ("column 2" in message or "column 3" in message)


@pytest.mark.parametrize("fmt", list(FileFormat))
def test_a_zero_byte_file_is_empty(tmp_path: Path, fmt: FileFormat) -> None:
    assert "empty (0 bytes)" in refused(tmp_path, bad_inputs.empty_file(), fmt)


def test_a_blank_csv_has_no_header(tmp_path: Path) -> None:
    assert "no header row" in refused(tmp_path, b"\n\n  \n")


def test_a_header_longer_than_the_bound_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes(bad_inputs.csv_long_line(3 * 1024 * 1024, header=False))
    assert header_of(path, FileFormat.CSV) is None
    with pytest.raises(UnreadableSourceError, match="no header line within its first 1048576 bytes"):
        spark_read.csv_header(path, URI)


@pytest.mark.parametrize(
    "line",
    [b'1,"a\\"b"', b'2,"x""y"', b"3,5'11\"", b'4,"ab"c', b'5,"a,b"', b'6,""', b'7,"x"\r', b"8,plain"],
)
def test_closed_quotes_as_spark_reads_them_pass(tmp_path: Path, line: bytes) -> None:
    path = tmp_path / "ok.csv"
    path.write_bytes(b"id,name\n" + line + b"\n")
    check_csv_text(path, URI)


def test_a_line_longer_than_the_bound_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_bytes(b"id,name\n1,a\n2," + b"x" * 5000 + b"\n3,c\n")
    with pytest.raises(UnreadableSourceError, match="line 3 is longer than 4096 bytes"):
        check_csv_text(path, URI, max_line_bytes=4096)


def test_offsets_and_lines_are_exact_across_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_read, "CHUNK_BYTES", 7)
    good = "id,name\n1,Jüri\n2,Zoë\n3,日本\n".encode()  # multi-byte characters cut by the 7-byte chunks
    path = tmp_path / "c.csv"
    path.write_bytes(good)
    check_csv_text(path, URI)
    path.write_bytes(good + b"4,caf\xe9\n")
    with pytest.raises(UnreadableSourceError, match=rf"byte 0xE9 at offset {len(good) + 5} \(line 5\)"):
        check_csv_text(path, URI)
    path.write_bytes(good[:-1] + b"\xe6")  # the file ends inside a character
    with pytest.raises(UnreadableSourceError, match=rf"at offset {len(good) - 1} \(line 4\)"):
        check_csv_text(path, URI)


def test_header_of_reads_the_header_or_the_footer(tmp_path: Path) -> None:
    csv_path, parquet = tmp_path / "a.csv", tmp_path / "a.parquet"
    csv_path.write_bytes(b"\xef\xbb\xbfid,name\r\n1,a\n")
    parquet.write_bytes(bad_inputs.good_parquet(3))
    assert header_of(csv_path, FileFormat.CSV) == "id,name"
    assert "id: int64" in str(header_of(parquet, FileFormat.PARQUET))
    assert header_of(tmp_path / "missing.csv", FileFormat.CSV) is None


def test_in_a_batch_the_message_names_the_file_at_fault(tmp_path: Path) -> None:
    good, bad = tmp_path / "1.csv", tmp_path / "2.csv"
    good.write_bytes(bad_inputs.GOOD_CSV)
    bad.write_bytes(bad_inputs.csv_latin1())
    names = {str(good): "s3://in/t/good.csv", str(bad): "s3://in/t/latin.csv"}
    with pytest.raises(UnreadableSourceError, match=r"^s3://in/t/latin\.csv \(for wap\.t\): byte 0xE9"):
        read_source(UnusedSpark(), [str(good), str(bad)], FileFormat.CSV, source_uri="2 files", table="wap.t",
                    names=names)
