"""SparkIcebergWriter: the TableWriter port on PySpark + Iceberg, with Nessie as the Iceberg catalog.

One SparkSession per process (`spark_session_for`, cached by bootstrap for warm starts). Tables are
addressed as ``nessie.<ns>.`<table>@<branch>` `` so that writes land on the WAP branch without
switching the session's reference. DataFrames never leave this module: callers get AppendResult and
Measurements.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from wap_ingest.adapters.oauth2 import ClientCredentials
from wap_ingest.config import Settings
from wap_ingest.core.errors import (
    BranchNotFoundError,
    CatalogUnavailableError,
    ConfigError,
    EmptySourceError,
    EngineError,
    ObjectStoreUnavailableError,
    SchemaDriftError,
    UnreadableSourceError,
    WapError,
)
from wap_ingest.core.models import (
    AppendResult,
    FileFormat,
    MeasurementPlan,
    Measurements,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import TableWriter

from .spark_audit import added_file_metrics, measure_frame

CATALOG = "nessie"
EXTENSIONS = (
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
    "org.projectnessie.spark.extensions.NessieSparkSessionExtensions"
)


def spark_conf_for(
    settings: Settings, credentials: ClientCredentials | None = None, *, local_jars: bool = True
) -> dict[str, str]:
    """Everything the session needs; a pure function so tests and the EMR submission reuse it.

    With Nessie client authentication configured, `credentials` (the secret read at start-up by bootstrap)
    is required: the conf then holds the client secret, so it must stay in-process and is never logged.
    """
    if settings.nessie_auth is not None and credentials is None:
        raise ConfigError(
            "Nessie client authentication is configured (WAP_NESSIE_CLIENT_ID) but the Spark conf was built "
            "without the client credentials. Fix: build it through wap_ingest.bootstrap (it reads the secret)."
        )
    cat = f"spark.sql.catalog.{CATALOG}"
    timeout_ms = int(settings.http_timeout * 1000)
    conf = {
        "spark.jars": ",".join(str(p) for p in settings.spark_jars()) if local_jars else "",
        "spark.sql.extensions": EXTENSIONS,
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.catalog-impl": "org.apache.iceberg.nessie.NessieCatalog",
        f"{cat}.uri": settings.nessie_api_v2,
        f"{cat}.ref": settings.main_branch,
        f"{cat}.warehouse": settings.warehouse,
        f"{cat}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{cat}.client.region": settings.aws_region,
        # Without this, `tbl@branch` reads are served from a stale cached table.
        f"{cat}.cache-enabled": "false",
        # Timeouts on every call: the Nessie client (its `nessie.transport.*` settings, read by the
        # catalog without the `nessie.` prefix) and S3FileIO's HTTP client, in milliseconds.
        f"{cat}.transport.connect-timeout": str(min(timeout_ms, 10_000)),
        f"{cat}.transport.read-timeout": str(timeout_ms),
        f"{cat}.http-client.type": "apache",
        f"{cat}.http-client.apache.connection-timeout-ms": str(min(timeout_ms, 10_000)),
        f"{cat}.http-client.apache.socket-timeout-ms": str(timeout_ms),
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.local.dir": str(settings.work_dir / "spark"),
        "spark.sql.shuffle.partitions": "4",
        # Iceberg's vectorized (Arrow) Parquet reader crashed the JVM (SIGSEGV) auditing a 1M-row append in the
        # large-file benchmark (Iceberg 1.7.1, Java 17); the row reader is slower on wide scans but safe, and an
        # audit reads only the new rows (most checks are answered from metadata).
        "spark.sql.iceberg.vectorization.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={settings.work_dir / 'spark'}",
    }
    if settings.aws_endpoint_url:
        conf[f"{cat}.s3.endpoint"] = settings.aws_endpoint_url
        conf[f"{cat}.s3.path-style-access"] = "true"
    if credentials is not None:
        conf |= nessie_oauth2_conf(credentials)
    return conf


def nessie_oauth2_conf(credentials: ClientCredentials) -> dict[str, str]:
    """The Nessie client's OAuth2 settings (client-credentials grant; it refreshes the token itself).

    Keys are `nessie.authentication.*` of the Nessie 0.99 client bundled in Iceberg 1.7.1
    (org.projectnessie.client.NessieConfigConstants); Iceberg's NessieCatalog reads them from its catalog
    options without the `nessie.` prefix. Spark redacts conf keys containing "secret" (spark.redaction.regex).
    """
    auth = f"spark.sql.catalog.{CATALOG}.authentication"
    conf = {
        f"{auth}.type": "OAUTH2",
        f"{auth}.oauth2.grant-type": "client_credentials",
        f"{auth}.oauth2.token-endpoint": credentials.token_endpoint,
        f"{auth}.oauth2.client-id": credentials.client_id,
        f"{auth}.oauth2.client-secret": credentials.client_secret,
    }
    if credentials.scope:
        conf[f"{auth}.oauth2.client-scopes"] = credentials.scope
    return conf


SUBMITTED_BY_CLUSTER = ("spark.jars", "spark.driver.memory", "spark.local.dir", "spark.driver.extraJavaOptions")


def spark_session_for(
    settings: Settings, credentials: ClientCredentials | None = None, *, submitted: bool = False
) -> Any:
    """The process's session. `submitted`: started by spark-submit (an EMR job, or its local run), whose
    master, jars and driver sizing come from the submission; only the catalog settings are added here."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("wap-ingest")
    conf = spark_conf_for(settings, credentials, local_jars=not submitted)
    if submitted:
        conf = {k: v for k, v in conf.items() if k not in SUBMITTED_BY_CLUSTER}
    else:
        (settings.work_dir / "spark").mkdir(parents=True, exist_ok=True)
        builder = builder.master("local[*]")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def table_identifier(table: TableRef, branch: str) -> str:
    """Identifiers are validated by core.naming; branch names are `[A-Za-z0-9_-]` by construction."""
    return f"{CATALOG}.{table.namespace}.`{table.name}@{branch}`"


class SparkIcebergWriter(TableWriter):
    def __init__(
        self,
        spark: Any,
        stage: Callable[[SourceObject], Path | str],
        *,
        cleanup: Callable[[Path | str], None] | None = None,
    ) -> None:
        """`stage` makes a source object readable by Spark (a local copy, or its s3:// URI on EMR)."""
        self._spark = spark
        self._stage = stage
        self._cleanup = cleanup or _remove_local

    def append(
        self,
        source: SourceObject,
        fmt: FileFormat,
        table: TableRef,
        branch: str,
        properties: Mapping[str, str],
        *,
        allow_new_columns: bool = False,
    ) -> AppendResult:
        staged = self._stage(source)
        try:
            frame = self._read(staged, fmt, source)
            created, added = self._write(frame, source, table, branch, properties, allow_new_columns)
            appended = self._last_append(table, branch, created, tuple(frame.columns), added)
        finally:
            self._cleanup(staged)
        if appended is None or appended.rows == 0:
            # Checked on the commit rather than with an extra Spark job first; the caller deletes the branch.
            raise EmptySourceError(
                f"{source.uri}: the file has a header/schema but no rows; nothing to ingest into "
                f"{table}. Fix: upload a file with data."
            )
        return appended

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        from wap_ingest.adapters.spark_batch import find_appends  # also finds files published in a batch

        return find_appends(self._spark, table, ref, [identity]).get(identity)

    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        """The new rows are the incremental scan of the append's snapshot (only the data files it added);
        the files' metrics from its manifests answer what they can before any row is read."""
        ident = table_identifier(table, branch)
        reader = self._spark.read.format("iceberg")
        if appended.parent_snapshot_id is None:
            reader = reader.option("snapshot-id", str(appended.snapshot_id))
        else:  # an incremental scan: only the data files this snapshot added
            reader = reader.option("start-snapshot-id", str(appended.parent_snapshot_id)).option(
                "end-snapshot-id", str(appended.snapshot_id)
            )
        try:
            metrics = added_file_metrics(self._spark, self._iceberg_table(table, branch), appended.snapshot_id)
            base = None
            if plan.existing_keys and appended.parent_snapshot_id is not None:  # the table as it was on main
                base = self._spark.read.format("iceberg").option(
                    "snapshot-id", str(appended.parent_snapshot_id)).load(ident)
            return measure_frame(self._spark, reader.load(ident), plan, row_count=appended.rows, metrics=metrics,
                                 base=base)
        except WapError:
            raise
        except Exception as exc:
            raise _engine_error(f"auditing the new rows of {table} on {branch!r}", exc) from exc

    # --- internals ---------------------------------------------------------------------------------

    def _read(self, staged: Path | str, fmt: FileFormat, source: SourceObject) -> Any:
        try:
            if fmt is FileFormat.PARQUET:
                frame = self._spark.read.parquet(str(staged))
            else:
                frame = (
                    self._spark.read.option("header", "true").option("inferSchema", "true")
                    .option("mode", "FAILFAST").csv(str(staged))
                )
            _ = frame.schema  # forces footer/schema inference: corrupt files fail here
            return frame
        except Exception as exc:
            raise UnreadableSourceError(
                f"{source.uri}: cannot be read as {fmt.value} ({_first_line(exc)}). Fix: check the file is a "
                f"valid {fmt.value} file (CSV needs a header row) and upload it again."
            ) from exc

    def _write(
        self, frame: Any, source: SourceObject, table: TableRef, branch: str, properties: Mapping[str, str],
        allow_new_columns: bool = False,
    ) -> tuple[bool, tuple[str, ...]]:
        """Append (or create the table); returns (created, the columns added to the table on the branch)."""
        from pyspark.errors import AnalysisException

        ident = table_identifier(table, branch)
        writer = frame.writeTo(ident)
        for key, value in properties.items():
            writer = writer.option(f"snapshot-property.{key}", value)
        current = self._schema(ident, table, branch)
        if current is None:
            try:
                writer.tableProperty("format-version", "2").create()
                return True, ()
            except Exception as exc:
                raise _engine_error(f"creating {table} on {branch!r} from {source.uri}", exc) from exc
        difference, new = schema_difference(current, frame.schema)
        if new and not allow_new_columns:
            raise self._drift(source, table, frame, difference, "the suite's schema policy rejects new columns",
                              "add `new_columns: allow` to the table's schema check in the audits file to add "
                              "them (on the branch; main gets them when the file is published), or drop them "
                              "from the file")
        if new:
            self._add_columns(table, branch, frame, new)
        try:
            writer.append()
            return False, new
        except AnalysisException as exc:
            raise self._drift(source, table, frame, difference, _first_line(exc),
                              "align the file's column names and types with the table, or ingest it into a new "
                              "table with --table") from exc
        except Exception as exc:
            raise _engine_error(f"appending {source.uri} to {table} on {branch!r}", exc) from exc

    def _schema(self, ident: str, table: TableRef, branch: str) -> Any:
        """The table's Spark schema on the branch, or None if there is no such table (metadata only)."""
        from pyspark.errors import AnalysisException

        try:
            return self._spark.table(ident).schema
        except AnalysisException as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "cannot be found" in str(exc):
                return None
            raise _engine_error(f"reading the schema of {table} on {branch!r}", exc) from exc
        except Exception as exc:
            raise _engine_error(f"reading the schema of {table} on {branch!r}", exc) from exc

    @staticmethod
    def _drift(source: SourceObject, table: TableRef, frame: Any, difference: tuple[str, ...], why: str,
               fix: str) -> SchemaDriftError:
        shown = "; ".join(difference) or "no column differs by name; a type or nullability does not fit"
        return SchemaDriftError(
            f"{source.uri}: its columns do not fit table {table} ({why}). Difference (file vs table): {shown}. "
            f"File schema: {frame.schema.simpleString()}. Fix: {fix}.", difference,
        )

    def _add_columns(self, table: TableRef, branch: str, frame: Any, new: tuple[str, ...]) -> None:
        """Add the file's new columns to the table on the branch (a schema commit there, not on main)."""
        try:
            jvm = self._spark.sparkContext._jvm
            added = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(frame.select(*new)._jdf.schema())
            self._iceberg_table(table, branch).updateSchema().unionByNameWith(added).commit()
        except Exception as exc:
            raise _engine_error(f"adding columns {', '.join(new)} to {table} on {branch!r}", exc) from exc

    def _iceberg_table(self, table: TableRef, ref: str) -> Any:
        """The Iceberg table object on `ref`, loaded through the session's catalog (one catalog call, no
        Spark job). Metadata that takes a single lookup is read from it rather than with a query."""
        gateway = self._spark.sparkContext._gateway
        namespace = gateway.new_array(gateway.jvm.java.lang.String, 1)
        namespace[0] = table.namespace
        identifier = gateway.jvm.org.apache.spark.sql.connector.catalog.Identifier.of(namespace, f"{table.name}@{ref}")
        catalog = self._spark._jsparkSession.sessionState().catalogManager().catalog(CATALOG)
        return catalog.loadTable(identifier).table()

    def _last_append(
        self, table: TableRef, branch: str, created: bool, columns: tuple[str, ...], added: tuple[str, ...] = ()
    ) -> AppendResult | None:
        """The snapshot the write just committed on the branch (ours alone writes there), or None if the write
        committed none (an empty file)."""
        try:
            snapshot = self._iceberg_table(table, branch).currentSnapshot()
            if snapshot is None:
                return None
            parent = snapshot.parentId()
            records = snapshot.summary().get("added-records")
            return AppendResult(
                rows=int(records or 0),
                snapshot_id=int(snapshot.snapshotId()),
                parent_snapshot_id=None if parent is None else int(parent),
                table_created=created,
                columns=columns,
                added_columns=added,
            )
        except Exception as exc:
            raise _engine_error(f"reading the new snapshot of {table} on {branch!r}", exc) from exc


def schema_difference(table: Any, file: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column by column, the file's Spark schema against the table's (names compared case-insensitively):
    the lines of the difference, and the names of the file's new columns."""
    mine = {f.name.lower(): f for f in file.fields}
    theirs = {f.name.lower(): f for f in table.fields}
    lines = [f"missing {f.name} ({f.dataType.simpleString()})" for k, f in theirs.items() if k not in mine]
    lines += [f"{f.name}: {theirs[k].dataType.simpleString()} in the table, {f.dataType.simpleString()} in the file"
              for k, f in mine.items() if k in theirs and theirs[k].dataType != f.dataType]
    new = tuple(f.name for k, f in mine.items() if k not in theirs)
    lines += [f"new {f.name} ({f.dataType.simpleString()})" for k, f in mine.items() if k not in theirs]
    return tuple(lines), new


def _first_line(exc: BaseException) -> str:
    """The message's first line; for a Py4J error ("An error occurred while calling o85.table.") the Java one."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(text) > 1 and text[0].startswith("An error occurred while calling"):
        text = [text[1].removeprefix(": ")]
    return text[0][:300] if text else type(exc).__name__


def _engine_error(doing: str, exc: BaseException) -> WapError:
    text = str(exc)
    if any(s in text for s in ("NessieNotAuthorizedException", "OAuth2Exception", "invalid_client")):
        return ConfigError(
            f"{doing}: the Nessie catalog refused Spark's credentials ({_first_line(exc)}). Fix: check "
            f"WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and the client secret "
            f"(WAP_NESSIE_CLIENT_SECRET_PARAMETER)."
        )
    if any(s in text for s in ("is no longer valid", "NessieReferenceNotFoundException", "does not exist")) and (
        "Nessie ref" in text or "ref '" in text or "Reference" in text
    ):
        return BranchNotFoundError(f"{doing}: the branch was deleted meanwhile ({_first_line(exc)}).")
    if any(s in text for s in ("Connection refused", "HttpClientException", "NessieServiceException",
                               "Failed to connect", "connect timed out")):
        return CatalogUnavailableError(f"{doing}: the catalog is unreachable ({_first_line(exc)}).")
    if any(s in text for s in ("SdkClientException", "S3Exception", "Unable to execute HTTP request")):
        return ObjectStoreUnavailableError(f"{doing}: the object store failed ({_first_line(exc)}).")
    return EngineError(f"{doing}: Spark failed ({_first_line(exc)}).")


def _remove_local(staged: Path | str) -> None:
    path = Path(staged)
    if path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
