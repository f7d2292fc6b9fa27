"""core.formats (suffixes, a table's format_options) and text_checks with a table's dialect, without Spark."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest

from wap_ingest.adapters.engine.read import reader_options
from wap_ingest.adapters.engine.text_checks import Dialect, check_text, csv_header
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import AuditSuiteError, UnreadableSourceError
from wap_ingest.core.formats import compression_of, format_options_from, spark_options
from wap_ingest.core.models import FileFormat, TableRef


def test_the_mapping_form_takes_format_options_and_the_list_form_stays_valid() -> None:
    suites = suites_from({"tables": {
        "eu": {"checks": [{"check": "row_count", "min": 1}],
               "format_options": {"delimiter": ";", "null_value": "NA", "header": True, "encoding": "latin-1"}},
        "plain": [{"check": "row_count", "min": 1}],
    }}, default_namespace="wap")
    eu = suites.suite_for(TableRef("wap", "eu"))
    assert dict(eu.format_options) == {"delimiter": ";", "null_value": "NA", "header": "true", "encoding": "latin-1"}
    assert suites.suite_for(TableRef("wap", "plain")).format_options == ()
    assert spark_options(FileFormat.CSV, eu.format_options) == {"sep": ";", "nullValue": "NA", "header": "true",
                                                                "encoding": "latin-1"}
    assert spark_options(FileFormat.JSON, eu.format_options) == {"encoding": "latin-1"}  # CSV-only keys dropped
    assert reader_options(FileFormat.TSV, ())["sep"] == "\t"
    assert reader_options(FileFormat.CSV, ()).get("sep", ",") == ","
    assert reader_options(FileFormat.JSON, (("multiline", "true"),))["multiLine"] == "true"


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        ({"delimeter": ";"}, "unknown key(s) delimeter"),
        ({"delimiter": ";;"}, "one ASCII character"),
        ({"header": "yes"}, "true or false"),
        ({"encoding": "klingon"}, "not a known text encoding"),
        ({"null_value": 0}, "must be a string"),
        ("delimiter=;", "must be a mapping"),
    ],
)
def test_bad_format_options_name_the_table_and_the_key(raw: object, phrase: str) -> None:
    with pytest.raises(AuditSuiteError, match="table 'eu'") as caught:
        format_options_from(raw, "eu")
    assert phrase in str(caught.value)


def test_compression_comes_from_the_suffix() -> None:
    assert compression_of("a.csv.GZ") == "gzip" and compression_of("a.tsv.bz2") == "bzip2"
    assert compression_of("a.csv") is None


def test_semicolon_quotes_are_checked_with_the_tables_delimiter(tmp_path: Path) -> None:
    semicolons = Dialect(delimiter=";")
    good = tmp_path / "good.csv"
    good.write_bytes(b'a;b\n1;"x;y"\n2;"5\'11"\n')
    check_text(good, "s3://in/t/good.csv", dialect=semicolons)
    assert csv_header(good, dialect=semicolons) == ["a", "b"]
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b'a;b\n1;"open\n2;x\n')
    with pytest.raises(UnreadableSourceError, match="line 2 opens a quoted value"):
        check_text(bad, "s3://in/t/bad.csv", dialect=semicolons)


def test_doubled_quotes_when_the_escape_is_the_quote(tmp_path: Path) -> None:
    path = tmp_path / "rfc.csv"
    path.write_bytes(b'a,b\n1,"say ""hi"", then go"\n2,"x"\n')
    check_text(path, "rfc", dialect=Dialect(escape='"'))
    assert csv_header(path, dialect=Dialect(escape='"')) == ["a", "b"]


def test_latin1_text_passes_when_the_table_says_latin1_and_compressed_files_are_checked_inside(tmp_path: Path) -> None:
    text = "a,b\n1,caf\u00e9\n".encode("latin-1")
    path = tmp_path / "l.csv"
    path.write_bytes(text)
    with pytest.raises(UnreadableSourceError, match="not valid UTF-8"):
        check_text(path, "utf8 expected")
    check_text(path, "latin-1 declared", dialect=Dialect(encoding="latin-1"))
    for name, packed in (("l.csv.gz", gzip.compress(text)), ("l.csv.bz2", bz2.compress(text))):
        compressed = tmp_path / name
        compressed.write_bytes(packed)
        with pytest.raises(UnreadableSourceError, match="not valid UTF-8"):
            check_text(compressed, name)
        check_text(compressed, name, dialect=Dialect(encoding="latin-1"))
    truncated = tmp_path / "t.csv.gz"
    truncated.write_bytes(gzip.compress(b"a,b\n" * 1000)[:30])
    with pytest.raises(UnreadableSourceError, match="not a complete gzip file"):
        check_text(truncated, "t.csv.gz")
