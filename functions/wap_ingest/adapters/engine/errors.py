"""Spark failures classified by type and by the step they happened in (issue 13, item 4; issue 24, item 6).

`engine_failure` turns any exception raised by a Spark call into exactly one WapError:
1. the engine is gone (the Py4J gateway or the JVM died): EngineLostError, decided from Python types (Py4J network
   errors, refused or reset sockets) or, for a bare Py4JError, from a live check of the gateway;
2. otherwise the cause chain (spark_chain: the Java throwables behind a Py4JJavaError or a pyspark CapturedException,
   their class names and Spark error classes, the Python `__cause__`s, and where the innermost one was raised) is
   mapped by class: an infrastructure class anywhere in the chain (Nessie, S3 SDK, network, OutOfMemoryError)
   decides first, so an outage is never filed as the file's fault; then the source's own decoding failures, which
   are the file's fault (UnreadableSourceError) only while reading or writing it (READ, WRITE): a class that says so,
   or any throwable raised inside a Parquet, ORC or Avro reader above the file I/O (a CRC, a codec's error, an index
   out of bounds, a size that does not fit: `raised_decoding`);
3. what the types leave open is decided by `TEXT_RULES`, the one table of message patterns, tested row by row;
4. anything else is an EngineError (infrastructure: retried).

`gateway_alive` and `forget_session` (spark_gateway) are re-exported here for the engine's callers.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from wap_ingest.adapters.engine.chain import Cause, chain_of, is_bare_py4j_error
from wap_ingest.adapters.engine.gateway import GATEWAY_TIMEOUT_SECONDS, forget_session, gateway_alive
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

__all__ = ["GATEWAY_TIMEOUT_SECONDS", "TEXT_RULES", "Cause", "EngineStep", "Kind", "classify", "engine_failure",
           "first_line", "forget_session", "gateway_alive", "kind_of", "raised_decoding", "value_does_not_fit"]


class EngineStep(enum.StrEnum):
    READ = "read"  # reading the source: footer, header, schema inference (CSV inference parses every row)
    WRITE = "write"  # the append job and its commit: lazily read data pages are decoded here
    MEASURE = "measure"  # auditing the new rows (reads the table, not the source)
    CATALOG = "catalog"  # table and metadata calls


class Kind(enum.Enum):
    """What a failure is, before it becomes an error with a message."""

    LOST = "the engine's JVM or its Py4J gateway is gone"
    AUTH = "the catalog refused the engine's credentials"
    CATALOG_DOWN = "the catalog (Nessie) failed or cannot be reached"
    STORE_DOWN = "the object store (S3) failed or cannot be reached"
    BRANCH_GONE = "the branch no longer exists"
    CONFLICT = "the branch moved during the commit"
    DAMAGED = "its bytes do not decode (a damaged page, block or footer)"
    NOT_PARQUET = "it is not a complete Parquet file (no valid footer)"
    TRUNCATED = "the file ends early (truncated)"
    BAD_ROW = "a row does not match the header"
    LONG_VALUE = "a value is longer than the engine accepts"
    ENCODING = "its text is not valid UTF-8"
    MISSING = "the file disappeared while it was read"
    READ_FAILED = "its data cannot be decoded"  # a Spark file-read error with no more specific cause


INFRASTRUCTURE = (Kind.LOST, Kind.AUTH, Kind.CATALOG_DOWN, Kind.STORE_DOWN, Kind.BRANCH_GONE, Kind.CONFLICT)
"""In this order of precedence: the first found anywhere in the chain decides."""
SOURCE = (Kind.MISSING, Kind.ENCODING, Kind.LONG_VALUE, Kind.BAD_ROW, Kind.NOT_PARQUET, Kind.DAMAGED, Kind.TRUNCATED,
          Kind.READ_FAILED)
"""In this order of precedence, after the infrastructure."""


@dataclass(frozen=True)
class TextRule:
    pattern: re.Pattern[str]
    kind: Kind
    why: str  # why a type cannot decide it


TEXT_RULES: tuple[TextRule, ...] = (
    TextRule(re.compile(r"Cannot call methods on a stopped SparkContext|SparkContext (?:was|has been) shut ?down"),
             Kind.LOST, "Spark reports a stopped context as IllegalStateException / SparkException"),
    TextRule(re.compile(r"\b(?:invalid_client|unauthorized_client|invalid_grant)\b"),
             Kind.AUTH, "OAuth2 error codes of the token endpoint, in whatever exception carries them"),
    TextRule(re.compile(r"ref '[^']*' (?:is no longer valid|no longer exists|does not exist)"
                        r"|Nessie ref '[^']*' does not exist|Reference '[^']*' no longer exists"),
             Kind.BRANCH_GONE, "Iceberg's NessieCatalog rethrows a missing ref as IllegalArgumentException et al."),
    TextRule(re.compile(r"is not a Parquet file"),
             Kind.NOT_PARQUET, "parquet-mr raises a plain RuntimeException for a missing magic number or footer"),
)
"""The only text matching: each row is tried against every link's message, in order, after the types."""

# --- classes, by name (suffix match: shaded copies keep the tail of the name) -------------------------------------

_CLASS_KINDS: dict[str, Kind] = {
    "java.lang.OutOfMemoryError": Kind.LOST,  # Spark exits the JVM after it: the session is lost either way
    "org.projectnessie.client.rest.NessieNotAuthorizedException": Kind.AUTH,
    "org.projectnessie.error.NessieForbiddenException": Kind.AUTH,
    "org.projectnessie.client.auth.oauth2.OAuth2Exception": Kind.AUTH,
    "org.apache.iceberg.exceptions.NotAuthorizedException": Kind.AUTH,
    "org.apache.iceberg.exceptions.ForbiddenException": Kind.AUTH,
    "org.projectnessie.client.http.HttpClientException": Kind.CATALOG_DOWN,  # connect/read failures, timeouts
    "org.projectnessie.client.http.HttpClientReadTimeoutException": Kind.CATALOG_DOWN,
    "org.projectnessie.client.rest.NessieServiceException": Kind.CATALOG_DOWN,
    "org.projectnessie.client.rest.NessieInternalServerException": Kind.CATALOG_DOWN,
    "org.projectnessie.client.rest.NessieBadResponseException": Kind.CATALOG_DOWN,
    "org.projectnessie.error.NessieUnavailableException": Kind.CATALOG_DOWN,
    "org.projectnessie.error.NessieBackendThrottledException": Kind.CATALOG_DOWN,
    "org.apache.iceberg.exceptions.CommitStateUnknownException": Kind.CATALOG_DOWN,
    "org.apache.iceberg.exceptions.ServiceUnavailableException": Kind.CATALOG_DOWN,
    "org.apache.iceberg.exceptions.ServiceFailureException": Kind.CATALOG_DOWN,
    "org.projectnessie.error.NessieReferenceNotFoundException": Kind.BRANCH_GONE,
    "org.projectnessie.error.NessieConflictException": Kind.CONFLICT,
    "org.projectnessie.error.NessieReferenceConflictException": Kind.CONFLICT,
    "org.apache.iceberg.exceptions.CommitFailedException": Kind.CONFLICT,
    "java.io.FileNotFoundException": Kind.MISSING,
    "java.nio.charset.CharacterCodingException": Kind.ENCODING,
    "java.nio.charset.MalformedInputException": Kind.ENCODING,
    "java.nio.charset.UnmappableCharacterException": Kind.ENCODING,
    "com.univocity.parsers.common.TextParsingException": Kind.LONG_VALUE,  # refined below by its message
    "org.apache.spark.sql.catalyst.util.BadRecordException": Kind.BAD_ROW,
    "org.apache.parquet.io.ParquetDecodingException": Kind.DAMAGED,
    "org.apache.parquet.io.InvalidFileOffsetException": Kind.DAMAGED,
    "org.apache.parquet.format.InvalidParquetMetadataException": Kind.NOT_PARQUET,
    "org.apache.parquet.crypto.ParquetCryptoRuntimeException": Kind.DAMAGED,
    "org.apache.parquet.hadoop.codec.CompressionCodecNotSupportedException": Kind.DAMAGED,
}
_PACKAGE_KINDS: tuple[tuple[str, Kind], ...] = (
    ("software.amazon.awssdk.", Kind.STORE_DOWN),  # S3Exception, SdkClientException, ...
    ("com.amazonaws.", Kind.STORE_DOWN),  # SDK v1 (EMRFS, Hadoop s3a)
    ("org.apache.hadoop.fs.s3a.", Kind.STORE_DOWN),
    ("shaded.parquet.org.apache.thrift.", Kind.DAMAGED),  # a page header or footer that does not parse
)
_NETWORK_PACKAGES = ("java.net.", "javax.net.ssl.")  # a bare network error: the catalog's at CATALOG, else generic
_ERROR_CLASS_KINDS: tuple[tuple[str, Kind], ...] = (
    ("MALFORMED_RECORD_IN_PARSING", Kind.BAD_ROW),
    ("MALFORMED_CSV_RECORD", Kind.BAD_ROW),
    ("_LEGACY_ERROR_TEMP_2165", Kind.BAD_ROW),  # malformed records found during schema inference
    ("CANNOT_READ_FILE_FOOTER", Kind.NOT_PARQUET),
    ("PATH_NOT_FOUND", Kind.MISSING),
    ("_LEGACY_ERROR_TEMP_2063", Kind.DAMAGED),  # a Parquet column that cannot be converted to the read type
)
_READ_WRAPPERS = ("_LEGACY_ERROR_TEMP_2064", "FAILED_READ_FILE")
"""Spark's "error while reading file <path>": whatever it wraps is the file's, unless infrastructure is in the chain
(3.5 names it _LEGACY_ERROR_TEMP_2064; 4.x FAILED_READ_FILE.*)."""
_FORMAT_READERS = ("org.apache.parquet.", "org.apache.spark.sql.execution.datasources.parquet.", "org.apache.orc.",
                   "org.apache.spark.sql.execution.datasources.orc.", "org.apache.avro.", "org.apache.spark.sql.avro.")
"""The code that decodes a source's bytes: the libraries Spark reads Parquet, ORC and Avro with, and Spark's readers
over them (Iceberg's shaded copies, which read and write the lake's own files, are not among them)."""
_FILE_IO = ("java.io.FileInputStream", "java.io.RandomAccessFile", "java.nio.channels.", "sun.nio.ch.",
            "org.apache.hadoop.fs.", "org.apache.hadoop.io.nativeio.")
"""Reading bytes from the disk: what is raised there is the machine's, even under a format reader."""
_EOF = "java.io.EOFException"  # the file's only inside a file read (a wrapper above, or a Parquet reader beside it)
_FIXES: dict[Kind, str] = {
    Kind.DAMAGED: "write the file again from the original data and upload it again (a checksum, a compressed block, "
                  "an encoded value or an offset in it is wrong)",
    Kind.NOT_PARQUET: "upload the complete file again (it is truncated, or not Parquet)",
    Kind.BAD_ROW: "give every row as many fields as the header and close every quoted value, then upload it again",
    Kind.LONG_VALUE: "check the delimiter and the line breaks (a value or line this long is usually a missing "
                     "newline or quote), then upload it again",
    Kind.ENCODING: "re-save the file as UTF-8 and upload it again",
    Kind.TRUNCATED: "upload the complete file again",
    Kind.MISSING: "upload the file again",
    Kind.READ_FAILED: "write the file again from the original data (it is damaged, or not of the format its name "
                      "says) and upload it again",
}


def kind_of(cause: Cause, step: EngineStep) -> Kind | None:
    """One link's kind by its class or Spark error class (no message text)."""
    tail = _class_kind(cause.name)
    if tail is not None:
        if tail is Kind.LONG_VALUE and "exceeds the maximum number of characters" not in cause.message:
            return Kind.BAD_ROW  # univocity's other parse failures are a malformed row
        return tail
    if cause.error_class is not None:
        for prefix, kind in _ERROR_CLASS_KINDS:
            if cause.error_class.startswith(prefix):
                return kind
    if cause.name.startswith(_NETWORK_PACKAGES):
        return Kind.CATALOG_DOWN if step is EngineStep.CATALOG else None
    return None


def classify(chain: list[Cause], step: EngineStep) -> Kind | None:
    """The failure's kind from its whole chain, or None (a plain engine failure). Infrastructure first."""
    kinds = {kind for cause in chain if (kind := kind_of(cause, step)) is not None}
    for cause in chain:
        for rule in TEXT_RULES:
            if rule.pattern.search(cause.message):
                kinds.add(rule.kind)
    for kind in INFRASTRUCTURE:
        if kind in kinds:
            return kind
    if step not in (EngineStep.READ, EngineStep.WRITE):
        return None  # a decoding error while measuring or in the catalog is the table's, not the file's
    in_file_read = any(c.error_class and c.error_class.startswith(_READ_WRAPPERS) for c in chain)
    innermost = next((c for c in reversed(chain) if c.frames), None)
    if innermost is not None and raised_decoding(innermost.frames):
        kinds.add(Kind.DAMAGED)
    if any(c.name.endswith(_EOF) for c in chain) and (in_file_read or Kind.DAMAGED in kinds):
        kinds.add(Kind.TRUNCATED)
    for kind in SOURCE:
        if kind in kinds:
            return kind
    return Kind.READ_FAILED if in_file_read else None


def raised_decoding(frames: tuple[str, ...]) -> bool:
    """Whether a throwable raised with this stack (class names, the raising call first) was raised while a format
    reader decoded bytes it had read: a reader's frame comes before any frame of the file I/O under it. Whatever
    the throwable (a CRC or codec error, an index out of bounds, a negative size, a JSON schema that does not parse),
    the file's bytes are what the reader could not decode."""
    for name in frames:
        if name.startswith(_FILE_IO):
            return False
        if name.startswith(_FORMAT_READERS):
            return True
    return False


def engine_failure(
    exc: BaseException,
    *,
    step: EngineStep,
    doing: str,
    source_uri: str | None = None,
    table: str | None = None,
    spark: Any = None,
) -> WapError:
    """The WapError for `exc`, raised by a Spark call while `doing` (a phrase: "appending s3://b/k to wap.t").
    `spark`: the session, to check the gateway when Py4J gives no network type (default: PySpark's active one)."""
    if isinstance(exc, WapError):
        return exc
    chain, lost, broken = chain_of(exc)
    if lost or ((broken or is_bare_py4j_error(exc)) and not gateway_alive(spark)):
        return _error_for(Kind.LOST, chain, doing, source_uri, table)
    return _error_for(classify(chain, step), chain, doing, source_uri, table)


_DOES_NOT_FIT = ("CAST_OVERFLOW", "NUMERIC_VALUE_OUT_OF_RANGE")
"""Spark's error classes (3.5 and 4.1) for a value that its store assignment cannot cast to the table's column type
under ANSI rules: a bigint past int's range into an int column, a decimal past the column's precision."""


def value_does_not_fit(exc: BaseException) -> str | None:
    """Spark's message when an append stopped because one of the file's values does not fit the table's narrower
    column type (the schemas passed the analysis: a bigint column may be stored in an int one while its values fit),
    else None. A fact about the file against the table, not an engine failure: retrying cannot change it."""
    if isinstance(exc, WapError):
        return None
    chain, _, _ = chain_of(exc)
    for cause in chain:
        if cause.error_class is not None and cause.error_class.startswith(_DOES_NOT_FIT):
            return next((line.strip() for line in cause.message.splitlines() if line.strip()), cause.error_class)[:300]
    return None


def first_line(exc: BaseException) -> str:
    """The message's first line; for a Py4J error ("An error occurred while calling o85.table.") the Java one."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(text) > 1 and text[0].startswith("An error occurred while calling"):
        text = [text[1].removeprefix(": ")]
    return text[0][:300] if text else type(exc).__name__


# --- internals --------------------------------------------------------------------------------------------------


def _class_kind(name: str) -> Kind | None:
    for known, kind in _CLASS_KINDS.items():
        if name == known or name.endswith("." + known):
            return kind
    for package, kind in _PACKAGE_KINDS:
        if name.startswith(package) or f".{package}" in name:
            return kind
    return None


_LOCAL_PATH = re.compile(r"\bfile:/+[^\s,;]*[^\s,;.:]|(?<![\w:/])/(?:[\w.+-]+/)+[\w.+-]*[\w+-]")
"""A local path, as a URI or bare (ORC's reader names "/tmp/work/<staged>.orc:"), up to what follows it."""
_SENTENCE_END = re.compile(r"(?<=[a-z)\]])\.\s+(?=[A-Z])")


def _detail(chain: list[Cause], limit: int = 300) -> str:
    """The chain's messages, first lines only, without Spark's wrappers, repeats and local file URIs; the root causes
    are kept when it is too long: "could not read page ... in col [name] ...: gzip stream CRC failure"."""
    parts: list[str] = []
    for cause in chain:
        line = next((x.strip() for x in cause.message.splitlines() if x.strip()), "")
        line = re.sub(r"^(?:[a-z]+\.)+[A-Za-z]*(?:Exception|Error): ", "", line)
        line = re.sub(r"^\[[A-Z_.0-9]+\]\s*", "", line)
        line = _LOCAL_PATH.sub("the file", line)  # a staged copy's path: the object is named
        if (not line or line.startswith(("Job aborted due to stage failure", "Exception thrown in awaitResult",
                                         "Encountered error while reading file", "An error occurred while calling"))
                or line.endswith("Details:")):
            continue
        line = _SENTENCE_END.split(line, maxsplit=1)[0].rstrip(".")  # Spark's advice follows the first sentence
        line = line if len(line) <= 200 else line[:197] + "..."
        if parts and (line in parts[-1] or parts[-1] in line):
            parts[-1] = max(parts[-1], line, key=len)
            continue
        parts.append(line)
    while len(parts) > 1 and len(": ".join(parts)) > limit:
        parts.pop(0)  # the outer wrappers go first: the root cause says the most
    return ": ".join(parts) or (chain[0].name.rsplit(".", 1)[-1] if chain else "no detail")


_INFRA: dict[Kind, tuple[Callable[[str], WapError], str]] = {  # the error, and what to check if it persists
    Kind.LOST: (EngineLostError, "A fresh engine is needed. If it recurs, check the function's memory "
                                 "(WAP_SPARK_DRIVER_MEMORY) and the JVM's last log lines"),
    Kind.AUTH: (ConfigError, "Fix: check WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and the client secret "
                             "(WAP_NESSIE_CLIENT_SECRET_PARAMETER)"),
    Kind.CATALOG_DOWN: (CatalogUnavailableError, "If it persists, check the Nessie server (NESSIE_ENDPOINT)"),
    Kind.STORE_DOWN: (ObjectStoreUnavailableError, "If it persists, check S3 (AWS_ENDPOINT_URL locally) and the "
                                                   "function's permissions"),
    Kind.BRANCH_GONE: (BranchNotFoundError, "Another process deleted it; a new attempt starts from a new branch"),
    Kind.CONFLICT: (StaleHashError, "Another commit landed first; a new attempt starts from a new branch"),
}


def _error_for(kind: Kind | None, chain: list[Cause], doing: str, source_uri: str | None,
               table: str | None) -> WapError:
    detail = _detail(chain)
    if kind is None:
        return EngineError(f"{doing}: Spark failed ({detail}). If it persists, check the function's log.")
    if kind in _INFRA:
        error, advice = _INFRA[kind]
        return error(f"{doing}: {kind.value} ({detail}). {advice}.")
    what = source_uri or "the source file"
    into = f" into {table}" if table else ""
    bad = SourceNotFoundError if kind is Kind.MISSING else UnreadableSourceError
    return bad(f"{what}: cannot be ingested{into}: {kind.value} ({detail}). Fix: {_FIXES[kind]}.")


@contextlib.contextmanager
def engine_lost_is_infrastructure(spark: Any, doing: str) -> Iterator[None]:
    """Whatever a failure looked like (a Py4J error, an unreadable file), if the engine is dead afterwards the file
    was not the problem: it is an infrastructure failure, retried, and the next use starts a fresh engine. `spark`:
    the session, or a function giving it (None: no engine was used, so none was lost)."""
    try:
        yield
    except Exception as exc:
        session = spark() if callable(spark) else spark
        if session is not None and not gateway_alive(session):
            raise EngineLostError(f"{doing}: the Spark engine died ({first_line(exc)}); the file will be retried "
                                  f"and this process starts a fresh engine.") from exc
        raise
