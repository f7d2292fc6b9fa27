"""Each bad input of issue 13 (item 6) and each exact lie of issue 24 (item 6: a page longer than its data, footers
and postscripts past the end, a failed checksum, bad magic, a damaged ORC stripe) read for real by `read_source` and
fully decoded (the `noop` sink, or an Iceberg append as the engine does), and the class `engine_failure` gives; the
engine's death, by SIGKILL of a throw-away session's JVM in a child process, and its hang, by SIGSTOP. The process's
session, with a Hadoop-catalog Iceberg warehouse in a temporary folder added at runtime."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import bad_inputs, corruption
from tests.paths import ROOT
from wap_ingest.adapters.engine import read as spark_read
from wap_ingest.adapters.engine import text_checks
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure
from wap_ingest.adapters.engine.read import read_source
from wap_ingest.core.columns import column_problems
from wap_ingest.core.errors import (
    EmptySourceError,
    EngineError,
    InvalidColumnError,
    UnreadableSourceError,
    WapError,
)
from wap_ingest.core.models import FileFormat

pytestmark = [pytest.mark.stack, pytest.mark.spark]
URI = "s3://inbox/t/bad-file"
CATALOG = "failures"


@pytest.fixture(scope="module")
def spark(lake: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The process's one session (the service's engine, started with the stack's environment: a JVM started before
    it would lack the stack's credentials for the rest of the run), with a Hadoop Iceberg catalog added at runtime."""
    session = lake.service.ports.writer.spark
    session.conf.set(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
    session.conf.set(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
    session.conf.set(f"spark.sql.catalog.{CATALOG}.warehouse", tmp_path_factory.mktemp("warehouse").as_uri())
    yield session


def staged(tmp_path: Path, data: bytes, fmt: FileFormat) -> str:
    path = tmp_path / f"staged.{fmt.value}"
    path.write_bytes(data)
    return str(path)


def decode_fully(spark: Any, paths: list[str], fmt: FileFormat) -> WapError | None:
    """read_source, then every row decoded (the `noop` sink), as the append job would: the error, or None."""
    try:
        frame = read_source(spark, paths, fmt, source_uri=URI, table="wap.t")
    except WapError as exc:
        return exc
    try:
        frame.write.format("noop").mode("overwrite").save()
    except Exception as exc:
        return engine_failure(exc, step=EngineStep.WRITE, doing=f"appending {URI} to wap.t", source_uri=URI,
                              table="wap.t", spark=spark)
    return None


@pytest.mark.parametrize(
    ("data", "fmt", "cls", "phrases"),
    [
        pytest.param(bad_inputs.parquet_corrupt_page(), FileFormat.PARQUET, UnreadableSourceError,
                     ["column 'name' in row group 0", "GZipCodec failed"], id="corrupt-gzip-page"),
        pytest.param(bad_inputs.parquet_corrupt_page(compression="none"), FileFormat.PARQUET, UnreadableSourceError,
                     ["its bytes do not decode", "column 'name'"], id="corrupt-plain-page"),
        pytest.param(bad_inputs.parquet_truncated(), FileFormat.PARQUET, UnreadableSourceError,
                     ["not a complete Parquet file", "magic bytes not found"], id="truncated-parquet"),
        *[pytest.param(corruption.parquet_page_longer_than_its_data(codec), FileFormat.PARQUET,
                       UnreadableSourceError, ["column 'x' in row group 0", "decompress to expected size"],
                       id=f"page-longer-than-its-data-{codec}")  # Spark alone reads it for ever (PARQUET-2060)
          for codec in ("snappy", "lz4")],
        pytest.param(corruption.parquet_footer_past_the_end(), FileFormat.PARQUET, UnreadableSourceError,
                     ["column 'x' in row group 0"], id="footer-past-the-end"),  # Spark alone: OutOfMemoryError
        pytest.param(bad_inputs.parquet_checksum_mismatch(), FileFormat.PARQUET, UnreadableSourceError,
                     ["column 'd' in row group 0", "CRC checksum verification failed"], id="checksum"),
        *[pytest.param(corruption.orc_postscript_lie(field, 1_900_000_000), FileFormat.ORC, UnreadableSourceError,
                       ["its postscript claims"], id=f"orc-postscript-{name}")  # Spark alone: OutOfMemoryError
          for field, name in ((1, "footer"), (3, "block"), (5, "metadata"))],
        pytest.param(b"PAR1" + corruption.orc_file("zlib")[3:], FileFormat.ORC, UnreadableSourceError,
                     ["it is not an ORC file"], id="orc-magic"),
        pytest.param(corruption.orc_damaged_stripe(), FileFormat.ORC, UnreadableSourceError,
                     ["Problem opening stripe 0 footer in the file"],  # its cause's text is the ORC version's: "Bit
                     id="orc-stripe"),  # stream is not fully consumed" (Spark 3.5), "Data corruption detected" (4.1)
        # Spark's own failure, no file-read wrapper: decided by where it was raised
        pytest.param(corruption.avro_block_larger_than_the_file(corruption.avro_container()), FileFormat.AVRO,
                     UnreadableSourceError, ["block 0 at byte", "1900000000 bytes"], id="avro-block"),
        pytest.param(b"Obj\x02" + corruption.avro_container()[4:], FileFormat.AVRO, UnreadableSourceError,
                     ["not an Avro container file"], id="avro-magic"),
        pytest.param(bad_inputs.csv_extra_fields(), FileFormat.CSV, UnreadableSourceError,
                     ["a row does not match the header", "2,beta,surplus"], id="extra-fields"),
        pytest.param(bad_inputs.csv_unbalanced_quote(), FileFormat.CSV, UnreadableSourceError,
                     ["line 3 opens a quoted value"], id="unbalanced-quote"),
        pytest.param(bad_inputs.csv_latin1(), FileFormat.CSV, UnreadableSourceError,
                     [f"byte 0xE9 at offset {bad_inputs.LATIN1_OFFSET} (line 2)"], id="latin-1"),
        pytest.param(bad_inputs.csv_utf16(), FileFormat.CSV, UnreadableSourceError, ["UTF-16"], id="utf-16"),
        pytest.param(bad_inputs.csv_utf16(bom=False), FileFormat.CSV, UnreadableSourceError,
                     ["byte 0x00 at offset 1"], id="utf-16-no-bom"),
        *[pytest.param(bad_inputs.csv_header(names), FileFormat.CSV, InvalidColumnError,
                       ["column", "Then upload the file"], id=f"header-{case}")
          for case, names in bad_inputs.BAD_HEADERS.items()],
        pytest.param(bad_inputs.empty_file(), FileFormat.CSV, EmptySourceError, ["0 bytes"], id="zero-byte-csv"),
        pytest.param(bad_inputs.empty_file(), FileFormat.PARQUET, EmptySourceError, ["0 bytes"],
                     id="zero-byte-parquet"),
    ],
)
def test_each_bad_input_is_the_files_fault_with_its_class(
    spark: Any, tmp_path: Path, data: bytes, fmt: FileFormat, cls: type[WapError], phrases: list[str]
) -> None:
    error = decode_fully(spark, [staged(tmp_path, data, fmt)], fmt)
    assert type(error) is cls, error
    for phrase in [URI, "Fix:", *phrases]:
        assert phrase in str(error)


def test_the_good_files_read_and_decode(spark: Any, tmp_path: Path) -> None:
    """The control: the builders' good files pass every check (else the bad cases prove nothing)."""
    assert decode_fully(spark, [staged(tmp_path, bad_inputs.good_parquet(), FileFormat.PARQUET)],
                        FileFormat.PARQUET) is None
    assert decode_fully(spark, [staged(tmp_path, bad_inputs.GOOD_CSV, FileFormat.CSV)], FileFormat.CSV) is None
    for fmt, data in ((FileFormat.ORC, corruption.orc_file("zstd")), (FileFormat.AVRO, corruption.avro_container()),
                      (FileFormat.PARQUET, corruption.parquet_file("lz4"))):
        assert decode_fully(spark, [staged(tmp_path, data, fmt)], fmt) is None, fmt


def test_orc_names_come_from_the_engines_reader(spark: Any, tmp_path: Path) -> None:
    """Not pyarrow's (it crashes the process on some damaged footers): refused names, and a batch's grouping."""
    import io

    import pyarrow as pa
    from pyarrow import orc

    sink = io.BytesIO()
    orc.write_table(pa.table({"id": [1], "a.b": [2]}), sink)
    error = decode_fully(spark, [staged(tmp_path, sink.getvalue(), FileFormat.ORC)], FileFormat.ORC)
    assert type(error) is InvalidColumnError and "column 2 ('a.b')" in str(error)
    path = staged(tmp_path, corruption.orc_file("snappy"), FileFormat.ORC)
    assert spark_read.header_of(path, FileFormat.ORC, spark) == "struct<x:bigint,s:string,d:double>"
    assert spark_read.header_of(path, FileFormat.ORC) == "struct<x:bigint,s:string,d:double>"  # the process's
    damaged = staged(tmp_path, corruption.orc_postscript_lie(1, 1_900_000_000), FileFormat.ORC)
    assert spark_read.header_of(damaged, FileFormat.ORC) is None  # the file then runs alone, and says why


def test_a_parquet_header_spark_cannot_address_is_refused_from_the_footer(spark: Any, tmp_path: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [1], "a.b": [2]}), sink)
    error = decode_fully(spark, [staged(tmp_path, sink.getvalue(), FileFormat.PARQUET)], FileFormat.PARQUET)
    assert type(error) is InvalidColumnError and "column 2 ('a.b')" in str(error)


@pytest.mark.parametrize("case", bad_inputs.BAD_HEADERS)
def test_a_header_spark_reads_itself_is_checked_as_written(spark: Any, tmp_path: Path, case: str) -> None:
    """The path for files Spark reaches itself (s3:// on EMR): the raw header row, before Spark renames it."""
    path = staged(tmp_path, bad_inputs.csv_header(bad_inputs.BAD_HEADERS[case]), FileFormat.CSV)
    names = spark_read.spark_csv_header(spark, path, URI, "wap.t")
    assert names == bad_inputs.BAD_HEADERS[case]
    assert column_problems(names)


def test_corrupt_pages_fail_the_iceberg_append_on_a_branch_as_the_files_fault(spark: Any, tmp_path: Path) -> None:
    """As the engine appends (WRITE step), on a branch: the footer reads, the data page fails inside the append job,
    and neither the branch nor main gets a snapshot."""
    good = read_source(spark, [staged(tmp_path, bad_inputs.good_parquet(10), FileFormat.PARQUET)],
                       FileFormat.PARQUET, source_uri=URI, table="wap.t")
    ident = f"{CATALOG}.wap.corrupt_pages"
    good.writeTo(ident).create()
    spark.sql(f"ALTER TABLE {ident} CREATE BRANCH wap_attempt")
    snapshots = f"SELECT count(*) AS n FROM {ident}.snapshots"
    before = spark.sql(snapshots).collect()[0]["n"]
    path = tmp_path / "bad" / "staged.parquet"
    path.parent.mkdir()
    path.write_bytes(bad_inputs.parquet_corrupt_page())
    frame = spark.read.parquet(str(path))  # Spark's own reader, past read_source's checks (they refuse the file)
    with pytest.raises(Exception) as caught:
        frame.writeTo(f"{ident}.branch_wap_attempt").append()
    error = engine_failure(caught.value, step=EngineStep.WRITE, doing="appending", source_uri=URI, table="wap.t",
                           spark=spark)
    assert type(error) is UnreadableSourceError and "in col [name]" in str(error)
    assert spark.sql(snapshots).collect()[0]["n"] == before
    assert spark.table(f"{ident}.branch_wap_attempt").count() == spark.table(ident).count() == 10
    # the same failure while measuring is the engine's (our table), not the file's
    assert type(engine_failure(caught.value, step=EngineStep.MEASURE, doing="auditing")) is EngineError


def test_a_long_line_without_newline_fails_before_spark_with_bounded_memory(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 MiB without a newline after the header: refused at MAX_LINE_BYTES, holding about that much, not the line."""
    path = staged(tmp_path, bad_inputs.csv_long_line(64 * 1024 * 1024), FileFormat.CSV)
    monkeypatch.setattr(text_checks, "MAX_LINE_BYTES", 2 * 1024 * 1024)  # where the checks read their bound
    tracemalloc.start()
    try:
        error = decode_fully(spark, [path], FileFormat.CSV)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert type(error) is UnreadableSourceError and "line 2 is longer than 2097152 bytes" in str(error)
    assert peak < 4 * 2 * 1024 * 1024 + 4 * spark_read.CHUNK_BYTES, f"peak {peak} bytes for a 64 MiB line"


def test_a_value_longer_than_sparks_column_limit_fails_at_that_limit(spark: Any, tmp_path: Path) -> None:
    """Below the line bound, above maxCharsPerColumn: Spark's parser stops at the limit (during inference)."""
    path = staged(tmp_path, bad_inputs.csv_long_line(spark_read.MAX_CHARS_PER_COLUMN + 4096), FileFormat.CSV)
    error = decode_fully(spark, [path], FileFormat.CSV)
    assert type(error) is UnreadableSourceError
    assert "longer than the engine accepts" in str(error) and str(spark_read.MAX_CHARS_PER_COLUMN) in str(error)


DEATH = r"""
import json, os, signal, sys, threading, time
from pyspark.sql import SparkSession
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure, forget_session, gateway_alive
from wap_ingest.adapters.engine.read import read_source
from wap_ingest.core.models import FileFormat

def session():
    s = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    s.sparkContext.setLogLevel("OFF")
    return s

def outcome(call, step):
    try:
        call()
        return "no error"
    except BaseException as exc:
        error = engine_failure(exc, step=step, doing="x", source_uri="s3://b/k", table="wap.t")
        raw = exc.__cause__ if exc is error else exc  # read_source raised the classified error from the raw one
        print("RAISED", step, type(raw).__module__, type(raw).__name__, str(getattr(raw, "errmsg", ""))[:80],
              file=sys.stderr)
        return type(error).__name__

good = sys.argv[1]
spark = session()
report = {"alive_before": gateway_alive(spark)}
killer = threading.Timer(3, lambda: os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL))
killer.start()  # the JVM dies in the middle of a job
started = time.monotonic()
report["killed_mid_job"] = outcome(lambda: spark.range(1).selectExpr(
    "reflect('java.lang.Thread', 'sleep', CAST(60000 AS BIGINT))").collect(), EngineStep.WRITE)
report["job_ran_until_the_kill"] = time.monotonic() - started > 2.5
spark.sparkContext._gateway.proc.wait()
report["alive_after"] = gateway_alive(spark)
report["read"] = outcome(lambda: read_source(spark, [good], FileFormat.CSV, source_uri="s3://b/k", table="wap.t"),
                         EngineStep.READ)
report["count"] = outcome(lambda: spark.range(3).count(), EngineStep.WRITE)
report["sql"] = outcome(lambda: spark.sql("SELECT 1").collect(), EngineStep.CATALOG)
forget_session()
fresh = session()
report["fresh_count"] = fresh.range(5).count()
report["fresh_alive"] = gateway_alive(fresh)
os.kill(fresh.sparkContext._gateway.proc.pid, signal.SIGKILL)  # killed between calls this time
fresh.sparkContext._gateway.proc.wait()
report["fresh_killed_count"] = outcome(lambda: fresh.range(3).count(), EngineStep.WRITE)  # a bare Py4JError
print("REPORT " + json.dumps(report))
"""


def test_the_engine_dying_is_engine_lost_and_a_fresh_session_works(tmp_path: Path) -> None:
    good = staged(tmp_path, bad_inputs.GOOD_CSV, FileFormat.CSV)
    env = os.environ.copy() | {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", DEATH, good], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith("REPORT ")]
    assert lines, done.stderr[-3000:]
    print("\n".join(x for x in done.stderr.splitlines() if x.startswith("RAISED")))  # what Py4J really raised
    report = json.loads(lines[0].removeprefix("REPORT "))
    assert report == {
        "alive_before": True, "killed_mid_job": "EngineLostError", "alive_after": False,
        "read": "EngineLostError", "count": "EngineLostError", "sql": "EngineLostError",
        "fresh_count": 5, "fresh_alive": True, "job_ran_until_the_kill": True, "fresh_killed_count": "EngineLostError",
    }


HUNG = r"""
import json, os, signal, sys
from pyspark.sql import SparkSession
from wap_ingest.adapters.engine import gateway as spark_gateway
from wap_ingest.adapters.engine.errors import gateway_alive
from wap_ingest.adapters.engine.session import SparkEngine

def session():
    s = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    s.sparkContext.setLogLevel("OFF")
    return s

spark_gateway.GATEWAY_TIMEOUT_SECONDS = 5  # the engine's own probe, shortened for the test
engine = SparkEngine(session)
spark = engine.session()
old = spark.sparkContext._gateway.proc
print("PID", old.pid, flush=True)
report = {"alive_before": gateway_alive(spark, timeout=120)}
os.kill(old.pid, signal.SIGSTOP)  # the JVM hangs: its sockets stay open and nothing answers
report["alive_while_stopped"] = gateway_alive(spark, timeout=3)
fresh = engine.session()  # probes with its default wait, takes the JVM as dead, ends it and starts another
report["restarts"] = engine.restarts
report["old_jvm_killed"] = old.wait(timeout=60) == -signal.SIGKILL
report["fresh_count"] = fresh.range(5).count()
report["fresh_alive"] = gateway_alive(fresh, timeout=120)
print("REPORT " + json.dumps(report), flush=True)
"""


def test_a_hung_jvm_is_taken_as_dead_within_the_wait_and_replaced() -> None:
    """SIGSTOP on the engine's JVM: gateway_alive answers False within its wait instead of blocking, and the engine
    ends that JVM and starts a fresh one. The stopped JVM is continued and killed afterwards whatever happened."""
    env = os.environ.copy() | {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}
    child = subprocess.Popen([sys.executable, "-c", HUNG], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    out = err = ""
    try:
        out, err = child.communicate(timeout=300)
    except subprocess.TimeoutExpired:  # the child and its JVMs (a stopped one would hold the pipes open for ever)
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
    finally:
        for line in out.splitlines():
            if line.startswith("PID "):
                _end_stopped(int(line.split()[1]))
    lines = [x for x in out.splitlines() if x.startswith("REPORT ")]
    assert lines, f"no report (a probe that blocks never returns): {err[-3000:]}"
    assert json.loads(lines[0].removeprefix("REPORT ")) == {
        "alive_before": True, "alive_while_stopped": False, "restarts": 1, "old_jvm_killed": True,
        "fresh_count": 5, "fresh_alive": True,
    }


def _end_stopped(pid: int) -> None:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
