"""Where a Spark failure was raised decides what the format's own classes cannot (issue 24, item 6): a throwable
raised inside a Parquet, ORC or Avro reader, above the file I/O under it, is the file's fault while reading or
writing it, whatever its class. Chains recorded from Spark 3.5.7 reading damaged files (tests/corruption.py,
tests/bad_inputs.py) with its own readers, the checks before it bypassed (spark.read.format(f).load(path) into the
`noop` sink), the innermost link's stack as spark_chain reads it (trimmed). And gateway_alive's bounded wait. No JVM."""

from __future__ import annotations

import threading

import pytest

from wap_ingest.adapters.engine.errors import (
    Cause,
    EngineStep,
    Kind,
    classify,
    engine_failure,
    gateway_alive,
    raised_decoding,
)
from wap_ingest.core.errors import EngineError, UnreadableSourceError

JOB_ABORTED = Cause("org.apache.spark.SparkException", "Job aborted due to stage failure: Task 0 in stage 4.0 ...")
SPARK_PARQUET = "org.apache.spark.sql.execution.datasources.parquet.VectorizedColumnReader"

GZIP_CRC = ("org.apache.hadoop.io.compress.zlib.BuiltInGzipDecompressor",
            "org.apache.hadoop.io.compress.zlib.BuiltInGzipDecompressor",
            "org.apache.hadoop.io.compress.DecompressorStream", "org.apache.hadoop.io.compress.DecompressorStream",
            "java.io.DataInputStream", "java.io.DataInputStream",
            "org.apache.parquet.bytes.BytesInput$StreamBytesInput", "org.apache.parquet.bytes.BytesInput",
            "org.apache.parquet.bytes.BytesInput", SPARK_PARQUET)
ORC_STRIPE_FOOTER = ("io.airlift.compress.zstd.Util", "io.airlift.compress.zstd.Huffman",
                     "io.airlift.compress.zstd.ZstdFrameDecompressor", "io.airlift.compress.zstd.ZstdDecompressor",
                     "org.apache.orc.impl.AircompressorCodec", "org.apache.orc.impl.InStream$CompressedStream",
                     "org.apache.orc.protobuf.CodedInputStream$StreamDecoder", "org.apache.orc.OrcProto$StripeFooter")
AVRO_HEADER_JSON = ("com.fasterxml.jackson.core.JsonParser", "com.fasterxml.jackson.core.base.ParserMinimalBase",
                    "com.fasterxml.jackson.core.json.ReaderBasedJsonParser",
                    "com.fasterxml.jackson.databind.ObjectMapper", "org.apache.avro.Schema$Parser",
                    "org.apache.avro.file.DataFileStream", "org.apache.avro.file.DataFileReader")
DICTIONARY_EOF = ("java.io.DataInputStream", "java.io.DataInputStream",
                  "org.apache.parquet.bytes.BytesInput$StreamBytesInput", "org.apache.parquet.bytes.BytesInput",
                  "org.apache.parquet.column.values.dictionary.PlainValuesDictionary$PlainLongDictionary",
                  "org.apache.parquet.column.Encoding$1", SPARK_PARQUET)
# not recorded (a failing disk is hard to make): the shape of a read error under the same reader
DISK_READ = ("java.io.FileInputStream", "java.io.FileInputStream",
             "org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileInputStream", "org.apache.hadoop.fs.FSDataInputStream",
             "org.apache.parquet.hadoop.util.H1SeekableInputStream", "org.apache.parquet.hadoop.ParquetFileReader")
ICEBERG_WRITER = ("org.apache.iceberg.shaded.org.apache.parquet.column.values.dictionary.DictionaryValuesWriter",
                  "org.apache.iceberg.parquet.ParquetWriter")  # our own output: Iceberg's shaded Parquet
SHUFFLE_BLOCK = ("net.jpountz.lz4.LZ4BlockInputStream", "org.apache.spark.io.ReadAheadInputStream",
                 "org.apache.spark.storage.ShuffleBlockFetcherIterator")

CHAINS = {  # innermost link last; the links above as recorded (no Spark file-read wrapper on any of them)
    "orc stripe footer": [JOB_ABORTED, Cause("java.io.IOException", "Problem opening stripe 0 footer in file:/s/x."),
                          Cause("io.airlift.compress.MalformedInputException",
                                "Bit stream is not fully consumed: offset=57", frames=ORC_STRIPE_FOOTER)],
    "avro header": [Cause("org.apache.avro.SchemaParseException", "com.fasterxml.jackson.core.JsonParseException: "
                          "Illegal unquoted character"),
                    Cause("com.fasterxml.jackson.core.JsonParseException", "Illegal unquoted character ((CTRL-CHAR, "
                          "code 1)): has to be escaped", frames=AVRO_HEADER_JSON)],
    "the issue's gzip dictionary": [JOB_ABORTED,
                                    Cause("java.io.IOException", "could not decode the dictionary for [x] optional "
                                          "int64 x"),
                                    Cause("java.io.IOException", "gzip stream CRC failure", frames=GZIP_CRC)],
}


@pytest.mark.parametrize(("frames", "decoding"), [
    (GZIP_CRC, True), (ORC_STRIPE_FOOTER, True), (AVRO_HEADER_JSON, True), (DICTIONARY_EOF, True),
    (DISK_READ, False), (ICEBERG_WRITER, False), (SHUFFLE_BLOCK, False), ((), False),
])
def test_a_reader_above_the_file_io_decides(frames: tuple[str, ...], decoding: bool) -> None:
    assert raised_decoding(frames) is decoding


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("step", [EngineStep.READ, EngineStep.WRITE])
def test_what_a_reader_raised_is_the_files_fault_while_reading_or_writing_it(name: str, step: EngineStep) -> None:
    assert classify(CHAINS[name], step) is Kind.DAMAGED
    assert classify([*CHAINS[name][:-1], Cause(CHAINS[name][-1].name, "x", frames=DISK_READ)], step) is None


@pytest.mark.parametrize("name", CHAINS)
def test_it_is_the_engines_while_measuring_and_infrastructure_still_decides_first(name: str) -> None:
    assert classify(CHAINS[name], EngineStep.MEASURE) is None  # our own table's data
    outage = Cause("software.amazon.awssdk.core.exception.SdkClientException", "Unable to execute HTTP request")
    assert classify([JOB_ABORTED, outage, *CHAINS[name][1:]], EngineStep.WRITE) is Kind.STORE_DOWN
    oom = Cause("java.lang.OutOfMemoryError", "Java heap space", frames=GZIP_CRC)
    assert classify([JOB_ABORTED, oom], EngineStep.WRITE) is Kind.LOST


class Frame:
    def __init__(self, name: str) -> None:
        self.name = name

    def getClassName(self) -> str:  # noqa: N802 - the Java name
        return self.name


class Throwable:
    """A Java throwable as Py4J shows it, with its stack."""

    _target_id = "o1"

    def __init__(self, name: str, message: str, cause: Throwable | None = None, frames: tuple[str, ...] = ()
                 ) -> None:
        self.name, self.message, self.cause, self.frames = name, message, cause, frames

    def getClass(self) -> Throwable:  # noqa: N802
        return self

    def getName(self) -> str:  # noqa: N802
        return self.name

    def getMessage(self) -> str:  # noqa: N802
        return self.message

    def getCause(self) -> Throwable | None:  # noqa: N802
        return self.cause

    def getStackTrace(self) -> list[Frame]:  # noqa: N802
        return [Frame(f) for f in self.frames]


def test_the_issues_failure_is_invalid_naming_the_object_and_the_column() -> None:
    """"Spark failed (could not decode the dictionary for [x] optional int64 x: gzip stream CRC failure)" was an
    EngineError (FAILED, retried to the dead-letter queue): no Spark wrapper said it was a file read."""
    from py4j.protocol import Py4JJavaError

    root = Throwable("java.io.IOException", "gzip stream CRC failure", frames=GZIP_CRC)
    dictionary = Throwable("java.io.IOException", "could not decode the dictionary for [x] optional int64 x", root)
    exc = Py4JJavaError("An error occurred while calling o85.append.\n",
                        Throwable("org.apache.spark.SparkException", "Job aborted due to stage failure", dictionary))
    error = engine_failure(exc, step=EngineStep.WRITE, doing="appending s3://in/t/a.parquet to wap.t",
                           source_uri="s3://in/t/a.parquet", table="wap.t", spark=object())
    assert type(error) is UnreadableSourceError
    for phrase in ("s3://in/t/a.parquet", "wap.t", "[x] optional int64 x", "gzip stream CRC failure", "Fix:"):
        assert phrase in str(error)
    root.frames = DISK_READ  # the same chain raised by the disk under the reader: the engine's, retried
    assert type(engine_failure(exc, step=EngineStep.WRITE, doing="appending", spark=object())) is EngineError


class HungContext:
    """A SparkContext whose JVM does not answer: the call blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._jsc = self

    def sc(self) -> HungContext:
        return self

    def isStopped(self) -> bool:  # noqa: N802
        self.release.wait()
        return False


class HungSpark:
    def __init__(self) -> None:
        self.sparkContext = HungContext()


def test_gateway_alive_gives_up_on_a_jvm_that_does_not_answer() -> None:
    spark = HungSpark()
    try:
        assert gateway_alive(spark, timeout=0.2) is False
    finally:
        spark.sparkContext.release.set()  # the probe's thread ends with the call it waited for
