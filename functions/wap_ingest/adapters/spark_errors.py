"""Spark failures classified by type and step (interim version; replaced by the full classifier)."""

from __future__ import annotations

import enum
from typing import Any

from wap_ingest.core.errors import (
    BranchNotFoundError,
    CatalogUnavailableError,
    ConfigError,
    EngineError,
    EngineLostError,
    ObjectStoreUnavailableError,
    UnreadableSourceError,
    WapError,
)


class EngineStep(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    MEASURE = "measure"
    CATALOG = "catalog"


def gateway_alive(spark: Any) -> bool:
    try:
        return not bool(spark.sparkContext._jsc.sc().isStopped())
    except Exception:
        return False


def _lost(exc: BaseException) -> bool:
    try:
        from py4j.protocol import Py4JNetworkError
    except ImportError:  # pragma: no cover
        return False
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Py4JNetworkError | ConnectionError | BrokenPipeError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_FILE_FAULTS = ("ParquetDecodingException", "MalformedInputException", "BadRecordException",
                "TextParsingException", "is not a Parquet file", "MALFORMED_RECORD")


def engine_failure(exc: BaseException, *, step: EngineStep, doing: str, source_uri: str | None = None,
                   table: str | None = None) -> WapError:
    text = str(exc)
    first = first_line(exc)
    if _lost(exc):
        return EngineLostError(f"{doing}: the Spark engine is gone ({first}).")
    if step in (EngineStep.READ, EngineStep.WRITE) and source_uri and any(s in text for s in _FILE_FAULTS):
        return UnreadableSourceError(f"{source_uri}: cannot be read ({first}). Fix: check the file and upload it "
                                     f"again.")
    if any(s in text for s in ("NessieNotAuthorizedException", "OAuth2Exception", "invalid_client")):
        return ConfigError(
            f"{doing}: the Nessie catalog refused Spark's credentials ({first}). Fix: check "
            f"WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and the client secret "
            f"(WAP_NESSIE_CLIENT_SECRET_PARAMETER)."
        )
    if any(s in text for s in ("is no longer valid", "NessieReferenceNotFoundException", "does not exist")) and (
        "Nessie ref" in text or "ref '" in text or "Reference" in text
    ):
        return BranchNotFoundError(f"{doing}: the branch was deleted meanwhile ({first}).")
    if any(s in text for s in ("Connection refused", "HttpClientException", "NessieServiceException",
                               "Failed to connect", "connect timed out")):
        return CatalogUnavailableError(f"{doing}: the catalog is unreachable ({first}).")
    if any(s in text for s in ("SdkClientException", "S3Exception", "Unable to execute HTTP request")):
        return ObjectStoreUnavailableError(f"{doing}: the object store failed ({first}).")
    return EngineError(f"{doing}: Spark failed ({first}).")


def first_line(exc: BaseException) -> str:
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(text) > 1 and text[0].startswith("An error occurred while calling"):
        text = [text[1].removeprefix(": ")]
    return text[0][:300] if text else type(exc).__name__
