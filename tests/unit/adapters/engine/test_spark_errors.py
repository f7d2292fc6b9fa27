"""spark_errors without a JVM: the text table row by row, the class map on cause chains recorded from real Spark
failures (tests/integration/adapters/engine/test_spark_failures.py raises them for real), and the Python-side gateway
checks."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

from wap_ingest.adapters.engine.errors import (
    TEXT_RULES,
    Cause,
    EngineStep,
    Kind,
    classify,
    engine_failure,
    gateway_alive,
    value_does_not_fit,
)
from wap_ingest.core.errors import (
    BranchNotFoundError,
    CatalogUnavailableError,
    ConfigError,
    EngineError,
    EngineLostError,
    ObjectStoreUnavailableError,
    SourceNotFoundError,
    StaleHashError,
    UnreadableSourceError,
    WapError,
)

# --- the text table, row by row ---------------------------------------------------------------------------------

TEXT_EXAMPLES: dict[Kind, tuple[str, str]] = {  # kind -> (a message the row must match, a near miss it must not)
    Kind.LOST: ("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.",
                "The SparkContext is running"),
    Kind.AUTH: ('OAuth2 error: {"error": "invalid_client"}', "client id is valid_client_x"),
    Kind.BRANCH_GONE: ("Failed to refresh as ref 'wap-t-1' is no longer valid.",
                       "ref 'main' is valid"),
    Kind.NOT_PARQUET: ("file:/tmp/x.parquet is not a Parquet file. Expected magic number at tail",
                       "a Parquet file with 3 row groups"),
}


def test_every_text_rule_has_an_example() -> None:
    assert sorted(rule.kind.name for rule in TEXT_RULES) == sorted(k.name for k in TEXT_EXAMPLES)


@pytest.mark.parametrize("rule", TEXT_RULES, ids=lambda r: r.kind.name)
def test_each_text_rule_matches_its_example_and_not_its_near_miss(rule: Any) -> None:
    hit, miss = TEXT_EXAMPLES[rule.kind]
    assert rule.pattern.search(hit)
    assert not rule.pattern.search(miss)
    assert classify([Cause("java.lang.RuntimeException", hit)], EngineStep.READ) is rule.kind
    assert classify([Cause("java.lang.RuntimeException", miss)], EngineStep.READ) is None


@pytest.mark.parametrize("message", ["Nessie ref 'wap-x' does not exist. This ref must exist before creating",
                                     "Cannot commit: Reference 'wap-x' no longer exists"])
def test_the_branch_row_covers_icebergs_other_phrasings(message: str) -> None:
    assert classify([Cause("java.lang.IllegalArgumentException", message)], EngineStep.CATALOG) is Kind.BRANCH_GONE


# --- chains recorded from Spark 3.5.7 (see the integration tests) -------------------------------------------------

JOB_ABORTED = Cause("org.apache.spark.SparkException", "Job aborted due to stage failure: Task 0 in stage 2.0 ...")
READ_FILE = Cause("org.apache.spark.SparkException", "Encountered error while reading file file:///tmp/s/x. Details:",
                  "_LEGACY_ERROR_TEMP_2064")
CORRUPT_GZIP_PAGE = [
    JOB_ABORTED, READ_FILE,
    Cause("java.lang.RuntimeException", "java.io.IOException: could not read page Page [bytes.size=58007] in col "
                                        "[name] optional binary name (STRING)"),
    Cause("java.io.IOException", "could not read page Page [bytes.size=58007] in col [name] optional binary name"),
    Cause("java.io.IOException", "gzip stream CRC failure"),
]
CORRUPT_PLAIN_PAGE = [JOB_ABORTED, READ_FILE, Cause("java.lang.IllegalArgumentException", "newLimit < 0: (-26 < 0)")]
TRUNCATED_PARQUET = [
    JOB_ABORTED, Cause("org.apache.spark.SparkException", "Exception thrown in awaitResult: "),
    Cause("org.apache.spark.SparkException", "[CANNOT_READ_FILE_FOOTER] Could not read footer for file: file:/x",
          "CANNOT_READ_FILE_FOOTER"),
    Cause("java.lang.RuntimeException", "file:/x is not a Parquet file. Expected magic number at tail, but found"),
]
EXTRA_FIELDS = [
    JOB_ABORTED,
    Cause("org.apache.spark.SparkException", "[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are "
          "detected in record parsing: [2,beta].", "MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION"),
    Cause("org.apache.spark.sql.catalyst.util.BadRecordException", "org.apache.spark.SparkRuntimeException: "
          "[MALFORMED_CSV_RECORD] Malformed CSV record: 2,beta,surplus"),
    Cause("org.apache.spark.SparkRuntimeException", "[MALFORMED_CSV_RECORD] Malformed CSV record: 2,beta,surplus",
          "MALFORMED_CSV_RECORD"),
]
LONG_VALUE = [
    JOB_ABORTED,
    Cause("com.univocity.parsers.common.TextParsingException", "Length of parsed input (1048577) exceeds the maximum "
          "number of characters defined in your parser settings (1048576)."),
    Cause("java.lang.ArrayIndexOutOfBoundsException", "Index 1048576 out of bounds for length 1048576"),
]
SOURCE_CHAINS = {"corrupt gzip page": (CORRUPT_GZIP_PAGE, Kind.READ_FAILED),
                 "corrupt plain page": (CORRUPT_PLAIN_PAGE, Kind.READ_FAILED),
                 "truncated parquet": (TRUNCATED_PARQUET, Kind.NOT_PARQUET),
                 "extra fields": (EXTRA_FIELDS, Kind.BAD_ROW),
                 "long value": (LONG_VALUE, Kind.LONG_VALUE)}


@pytest.mark.parametrize("name", SOURCE_CHAINS)
@pytest.mark.parametrize("step", [EngineStep.READ, EngineStep.WRITE])
def test_the_sources_own_failures_are_the_files_while_reading_or_writing_it(name: str, step: EngineStep) -> None:
    chain, kind = SOURCE_CHAINS[name]
    assert classify(chain, step) is kind


@pytest.mark.parametrize("name", SOURCE_CHAINS)
@pytest.mark.parametrize("step", [EngineStep.MEASURE, EngineStep.CATALOG])
def test_decoding_failures_elsewhere_are_the_engines(name: str, step: EngineStep) -> None:
    assert classify(SOURCE_CHAINS[name][0], step) is None  # our own table's data: not the producer's file


INFRA_LINKS = {
    Kind.LOST: Cause("java.lang.OutOfMemoryError", "Java heap space"),
    Kind.STORE_DOWN: Cause("software.amazon.awssdk.core.exception.SdkClientException", "Unable to execute HTTP"),
    Kind.CATALOG_DOWN: Cause("org.projectnessie.client.http.HttpClientException", "Failed to execute GET request"),
    Kind.AUTH: Cause("org.projectnessie.client.rest.NessieNotAuthorizedException", "Unauthorized (HTTP/401)"),
}


@pytest.mark.parametrize("kind", INFRA_LINKS, ids=lambda k: k.name)
@pytest.mark.parametrize("name", SOURCE_CHAINS)
def test_infrastructure_anywhere_in_the_chain_is_never_the_files_fault(kind: Kind, name: str) -> None:
    chain = [*SOURCE_CHAINS[name][0], INFRA_LINKS[kind]]
    assert classify(chain, EngineStep.READ) is kind


@pytest.mark.parametrize(
    ("chain", "step", "kind"),
    [
        ([Cause("java.lang.IllegalArgumentException", "x"),
          Cause("org.projectnessie.error.NessieReferenceNotFoundException", "Named reference 'b' not found")],
         EngineStep.CATALOG, Kind.BRANCH_GONE),
        ([Cause("org.apache.iceberg.exceptions.CommitFailedException", "Cannot commit: hash changed")],
         EngineStep.WRITE, Kind.CONFLICT),
        ([Cause("org.apache.iceberg.exceptions.CommitFailedException", "x"),
          Cause("org.projectnessie.client.http.HttpClientException", "timeout")], EngineStep.WRITE, Kind.CATALOG_DOWN),
        ([Cause("org.projectnessie.client.auth.oauth2.OAuth2Exception", "x")], EngineStep.CATALOG, Kind.AUTH),
        ([Cause("software.amazon.awssdk.services.s3.model.S3Exception", "Service Unavailable (503)")],
         EngineStep.WRITE, Kind.STORE_DOWN),
        ([Cause("org.apache.iceberg.shaded.org.projectnessie.error.NessieConflictException", "x")],
         EngineStep.WRITE, Kind.CONFLICT),  # shaded copies keep the tail of the name
        ([Cause("java.net.ConnectException", "Connection refused")], EngineStep.CATALOG, Kind.CATALOG_DOWN),
        ([Cause("java.net.ConnectException", "Connection refused")], EngineStep.WRITE, None),
        ([JOB_ABORTED, READ_FILE, Cause("java.io.EOFException", "")], EngineStep.WRITE, Kind.TRUNCATED),
        ([Cause("java.io.EOFException", "")], EngineStep.WRITE, None),  # not in a file read: not the file's
        ([Cause("java.io.FileNotFoundException", "File file:/tmp/s/x does not exist")], EngineStep.READ, Kind.MISSING),
        ([Cause("org.apache.spark.sql.AnalysisException", "[PATH_NOT_FOUND] Path does not exist", "PATH_NOT_FOUND")],
         EngineStep.READ, Kind.MISSING),
        ([Cause("java.nio.charset.MalformedInputException", "Input length = 1")], EngineStep.WRITE, Kind.ENCODING),
        ([Cause("com.univocity.parsers.common.TextParsingException", "Unexpected character")], EngineStep.WRITE,
         Kind.BAD_ROW),
        ([Cause("org.apache.parquet.io.ParquetDecodingException", "Can not read value at 0 in block -1")],
         EngineStep.WRITE, Kind.DAMAGED),
        ([Cause("shaded.parquet.org.apache.thrift.protocol.TProtocolException", "Required field 'type' was not found")],
         EngineStep.READ, Kind.DAMAGED),
        ([Cause("java.lang.IllegalStateException", "something else")], EngineStep.WRITE, None),
    ],
)
def test_classes_decide(chain: list[Cause], step: EngineStep, kind: Kind | None) -> None:
    assert classify(chain, step) is kind


# --- engine_failure: Python types, the Java walk, the messages ---------------------------------------------------


class FakeThrowable:
    """A Java throwable as Py4J shows it: getClass().getName(), getMessage(), getCause(), and getErrorClass() for
    Spark's throwables (others raise, as Py4J does for a missing method)."""

    _target_id = "o1"

    def __init__(self, name: str, message: str = "", cause: FakeThrowable | None = None,
                 error_class: str | None = None, *, dead: bool = False) -> None:
        self.name, self.message, self.cause, self.error_class, self.dead = name, message, cause, error_class, dead

    def getClass(self) -> FakeThrowable:  # noqa: N802 - the Java names
        if self.dead:
            raise ConnectionRefusedError(111, "Connection refused")
        return self

    def getName(self) -> str:  # noqa: N802
        return self.name

    def getCause(self) -> FakeThrowable | None:  # noqa: N802
        return self.cause

    def getErrorClass(self) -> str:  # noqa: N802
        if self.error_class is None:
            raise Py4JError("Method getErrorClass([]) does not exist")
        return self.error_class

    broken = False

    def getMessage(self) -> str:  # noqa: N802
        if self.broken:
            raise Py4JError("An error occurred while calling o7.getMessage")
        return self.message


def java_error(*links: tuple[str, str] | tuple[str, str, str], dead: bool = False) -> Py4JJavaError:
    cause: FakeThrowable | None = None
    for link in reversed(links):
        cause = FakeThrowable(link[0], link[1], cause, link[2] if len(link) > 2 else None)  # type: ignore[misc]
    assert cause is not None
    cause.dead = dead
    return Py4JJavaError("An error occurred while calling o85.save.\n", cause)


class FakeContext:
    def __init__(self, *, alive: bool) -> None:
        self.alive = alive
        self._jsc = self

    def sc(self) -> FakeContext:
        return self

    def isStopped(self) -> bool:  # noqa: N802
        if not self.alive:
            raise Py4JNetworkError("Answer from Java side is empty")
        return False


class FakeSpark:
    def __init__(self, *, alive: bool) -> None:
        self.sparkContext = FakeContext(alive=alive)


def fail(exc: BaseException, step: EngineStep = EngineStep.WRITE, spark: Any = None) -> WapError:
    return engine_failure(exc, step=step, doing="appending s3://in/t/a.csv to wap.t", source_uri="s3://in/t/a.csv",
                          table="wap.t", spark=spark or FakeSpark(alive=True))


@pytest.mark.parametrize("exc", [Py4JNetworkError("Answer from Java side is empty"),
                                 ConnectionRefusedError(111, "Connection refused"),
                                 ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "pipe")])
def test_a_gone_gateway_is_engine_lost_by_python_type(exc: BaseException) -> None:
    assert isinstance(fail(exc), EngineLostError)


def test_a_gone_gateway_behind_another_exception_is_engine_lost() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise RuntimeError("reading failed") from inner
    except RuntimeError as outer:
        assert isinstance(fail(outer, EngineStep.READ), EngineLostError)


def test_a_bare_py4j_error_is_engine_lost_only_when_the_gateway_is_really_gone() -> None:
    exc = Py4JError("functions does not exist in the JVM")
    assert isinstance(fail(exc, spark=FakeSpark(alive=False)), EngineLostError)
    kept = fail(exc, spark=FakeSpark(alive=True))
    assert type(kept) is EngineError and "functions does not exist in the JVM" in str(kept)


def test_the_gateway_dying_while_the_chain_is_read_is_engine_lost_not_the_files_fault() -> None:
    exc = java_error(("org.apache.spark.SparkException", "x", "MALFORMED_RECORD_IN_PARSING"), dead=True)
    assert isinstance(fail(exc, EngineStep.READ), EngineLostError)


def test_a_walk_broken_by_an_error_answer_is_engine_lost_only_if_the_gateway_is_gone() -> None:
    exc = java_error(("org.apache.spark.SparkException", "x"), ("java.io.IOException", "y"))
    assert exc.java_exception.cause is not None
    exc.java_exception.cause.broken = True
    assert isinstance(fail(exc, spark=FakeSpark(alive=False)), EngineLostError)
    assert type(fail(exc, spark=FakeSpark(alive=True))) is EngineError


def test_gateway_alive_answers_from_one_round_trip() -> None:
    assert gateway_alive(FakeSpark(alive=True)) is True
    assert gateway_alive(FakeSpark(alive=False)) is False
    assert gateway_alive(object()) is False  # no context at all


def test_a_malformed_row_names_the_object_the_row_the_table_and_the_fix() -> None:
    exc = java_error(("org.apache.spark.SparkException", "Job aborted due to stage failure: ..."),
                     ("org.apache.spark.SparkException", "[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed "
                      "records are detected in record parsing: [2,beta].", "MALFORMED_RECORD_IN_PARSING"),
                     ("org.apache.spark.SparkRuntimeException", "[MALFORMED_CSV_RECORD] Malformed CSV record: "
                      "2,beta,surplus", "MALFORMED_CSV_RECORD"))
    error = fail(exc)
    assert type(error) is UnreadableSourceError
    text = str(error)
    for phrase in ("s3://in/t/a.csv", "wap.t", "Malformed CSV record: 2,beta,surplus", "Fix: give every row"):
        assert phrase in text
    assert "Job aborted" not in text and "[MALFORMED" not in text


def test_a_corrupt_page_names_the_column_spark_gives() -> None:
    exc = java_error(("org.apache.spark.SparkException", "Job aborted due to stage failure"),
                     ("org.apache.spark.SparkException", "Encountered error while reading file f. Details:",
                      "_LEGACY_ERROR_TEMP_2064"),
                     ("java.io.IOException", "could not read page Page [bytes.size=58007] in col [name] optional "
                      "binary name (STRING)"),
                     ("java.io.IOException", "gzip stream CRC failure"))
    error = fail(exc)
    assert type(error) is UnreadableSourceError
    assert "in col [name]" in str(error) and "gzip stream CRC failure" in str(error)


@pytest.mark.parametrize(
    ("links", "step", "cls"),
    [
        ([("org.projectnessie.client.rest.NessieNotAuthorizedException", "401")], EngineStep.CATALOG, ConfigError),
        ([("java.lang.IllegalArgumentException", "x"),
          ("org.projectnessie.error.NessieReferenceNotFoundException", "gone")], EngineStep.CATALOG,
         BranchNotFoundError),
        ([("org.apache.iceberg.exceptions.CommitFailedException", "hash changed")], EngineStep.WRITE, StaleHashError),
        ([("org.projectnessie.client.http.HttpClientException", "x"), ("java.net.ConnectException", "refused")],
         EngineStep.CATALOG, CatalogUnavailableError),
        ([("software.amazon.awssdk.services.s3.model.S3Exception", "503")], EngineStep.WRITE,
         ObjectStoreUnavailableError),
        ([("java.io.FileNotFoundException", "File file:/tmp/x does not exist")], EngineStep.READ,
         SourceNotFoundError),
        ([("java.lang.IllegalStateException", "boom")], EngineStep.WRITE, EngineError),
    ],
)
def test_each_kind_becomes_its_error(links: list[tuple[str, str]], step: EngineStep, cls: type[WapError]) -> None:
    error = fail(java_error(*links), step)
    assert type(error) is cls
    assert str(error).startswith("appending s3://in/t/a.csv to wap.t") or cls is SourceNotFoundError


def test_our_own_errors_pass_through() -> None:
    error = UnreadableSourceError("x")
    assert fail(error) is error


# --- a value that does not fit the table's column: the file against the table, not the engine ------------------

OVERFLOW = ('[CAST_OVERFLOW_IN_TABLE_INSERT] Fail to insert a value of "BIGINT" type into the "INT" type column '
            '`my_col_0` due to an overflow. Use `try_cast` on the input value to tolerate overflow and return NULL '
            'instead.')


@pytest.mark.parametrize("error_class", ["CAST_OVERFLOW_IN_TABLE_INSERT", "CAST_OVERFLOW",
                                         "NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION"])
def test_a_value_past_the_tables_column_type_is_named_from_the_chain(error_class: str) -> None:
    exc = java_error(("org.apache.spark.SparkException", "Job aborted due to stage failure: Task 0 ..."),
                     ("org.apache.spark.SparkArithmeticException", OVERFLOW + "\n== SQL ==", error_class))
    assert value_does_not_fit(exc) == OVERFLOW


@pytest.mark.parametrize("exc", [
    java_error(("org.apache.spark.SparkException", "Job aborted"),
               ("org.apache.spark.SparkException", "x", "MALFORMED_RECORD_IN_PARSING")),
    java_error(("org.apache.spark.SparkArithmeticException", "[DIVIDE_BY_ZERO] Division by zero.", "DIVIDE_BY_ZERO")),
    UnreadableSourceError("s3://in/t/a.csv: already mapped"),
    RuntimeError("[CAST_OVERFLOW_IN_TABLE_INSERT] in a Python message only"),
])
def test_other_failures_are_not_a_value_that_does_not_fit(exc: BaseException) -> None:
    assert value_does_not_fit(exc) is None
