"""The checks a local Parquet, ORC or Avro file gets before Spark reads it (adapters/engine/columnar_checks.py), on real
files damaged in exact ways (tests/corruption.py): each lie is refused as the file's fault naming what is wrong
(the column, for Parquet), and the good files pass. No JVM: the ORC footer's Java half is tested with Spark in
tests/integration/adapters/engine/test_spark_failures.py."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests import bad_inputs, corruption
from wap_ingest.adapters.engine.columnar_checks import check_avro, orc_postscript_problem
from wap_ingest.adapters.engine.parquet_decode import check_parquet
from wap_ingest.core.errors import UnreadableSourceError

URI, TABLE = "s3://inbox/t/damaged", "wap.t"


def saved(tmp_path: Path, data: bytes, suffix: str) -> Path:
    path = tmp_path / f"file.{suffix}"
    path.write_bytes(data)
    return path


def refused(path: Path, check: object) -> str:
    with pytest.raises(UnreadableSourceError) as caught:
        check(path, URI, TABLE)  # type: ignore[operator]
    text = str(caught.value)
    assert text.startswith(f"{URI}: cannot be ingested into {TABLE}: ") and "Fix: " in text
    return text


@pytest.mark.parametrize("codec", corruption.CODECS["parquet"])
def test_good_parquet_files_pass_with_their_names(tmp_path: Path, codec: str) -> None:
    assert check_parquet(saved(tmp_path, corruption.parquet_file(codec), "parquet"), URI, TABLE) == ["x", "s", "d"]


@pytest.mark.parametrize("codec", ["snappy", "lz4", "gzip", "zstd"])
def test_a_page_longer_than_its_data_is_refused_naming_the_column(tmp_path: Path, codec: str) -> None:
    """The page Spark 3.5 reads for ever with snappy and LZ4 (PARQUET-2060)."""
    text = refused(saved(tmp_path, corruption.parquet_page_longer_than_its_data(codec), "parquet"), check_parquet)
    assert "column 'x' in row group 0" in text
    assert ("Corrupt ZSTD" if codec == "zstd" else "decompress to expected size") in text


def test_a_footer_claiming_more_bytes_than_the_file_is_refused(tmp_path: Path) -> None:
    """The footer Spark allocates for (an OutOfMemoryError that kills its JVM)."""
    text = refused(saved(tmp_path, corruption.parquet_footer_past_the_end(), "parquet"), check_parquet)
    assert "column 'x' in row group 0" in text


def test_a_page_whose_checksum_fails_is_refused_though_its_values_decode(tmp_path: Path) -> None:
    data = bad_inputs.parquet_checksum_mismatch()
    assert pq.read_table(io.BytesIO(data)).num_rows == 100  # without the checksum, a wrong value reads fine
    text = refused(saved(tmp_path, data, "parquet"), check_parquet)
    assert "column 'd' in row group 0" in text and "CRC checksum verification failed" in text


def test_the_issues_gzip_page_and_a_truncated_file(tmp_path: Path) -> None:
    text = refused(saved(tmp_path, bad_inputs.parquet_corrupt_page(), "parquet"), check_parquet)
    assert "column 'name' in row group 0" in text
    text = refused(saved(tmp_path, bad_inputs.parquet_truncated(), "parquet"), check_parquet)
    assert "not a complete Parquet file" in text and "magic bytes not found" in text


def test_good_avro_passes_and_each_lie_is_refused(tmp_path: Path) -> None:
    good = corruption.avro_container()
    check_avro(saved(tmp_path, good, "avro"), URI, TABLE)
    text = refused(saved(tmp_path, corruption.avro_block_larger_than_the_file(good), "avro"), check_avro)
    assert "block 0 at byte" in text and "1900000000 bytes" in text
    assert "magic number" in refused(saved(tmp_path, b"Obj\x02" + good[4:], "avro"), check_avro)
    last_sync = len(good) - 1
    broken = good[:last_sync] + bytes([good[last_sync] ^ 0xFF])
    assert "not followed by the file's sync marker" in refused(saved(tmp_path, broken, "avro"), check_avro)
    assert "header does not parse" in refused(saved(tmp_path, good.replace(b'"record"', b'"rec\x00rd"'), "avro"),
                                              check_avro)
    assert "block 3 at byte" in refused(saved(tmp_path, good[:-40], "avro"), check_avro)


@pytest.mark.parametrize(("field", "phrase"), [(3, "compression block of 1900000000 bytes"),
                                               (1, "1900000000-byte footer"), (5, "1900000000 bytes of metadata")])
def test_an_orc_postscript_that_lies_is_refused_before_any_reader_allocates(tmp_path: Path, field: int,
                                                                             phrase: str) -> None:
    data = corruption.orc_postscript_lie(field, 1_900_000_000)
    assert phrase in (orc_postscript_problem(saved(tmp_path, data, "orc"), len(data)) or "")


@pytest.mark.parametrize("codec", corruption.CODECS["orc"])
def test_good_orc_postscripts_pass_and_other_bytes_are_refused(tmp_path: Path, codec: str) -> None:
    data = corruption.orc_file(codec)
    assert orc_postscript_problem(saved(tmp_path, data, "orc"), len(data)) is None
    assert "magic" in (orc_postscript_problem(saved(tmp_path, b"PAR1" + data[3:], "orc"), len(data) + 1) or "")
    assert "postscript length" in (orc_postscript_problem(saved(tmp_path, data[:-1] + b"\x00", "orc"),
                                                          len(data)) or "")
