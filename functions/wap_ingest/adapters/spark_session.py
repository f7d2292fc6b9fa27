"""The SparkSession: its configuration (a pure function of plain settings, reused by the EMR submission), its
start, and the process's engine holder that starts it on first use and starts a fresh one when the old one died.

A warm Lambda keeps one session across invocations. If its JVM or Py4J gateway dies, the file that was running
fails as an infrastructure error (retried), and the next use builds a new session instead of keeping the dead
one (which would fail every later file).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wap_ingest.adapters.oauth2 import ClientCredentials

from .spark_errors import forget_session, gateway_alive

log = logging.getLogger(__name__)

CATALOG = "nessie"
EXTENSIONS = (
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
    "org.projectnessie.spark.extensions.NessieSparkSessionExtensions"
)
SUBMITTED_BY_CLUSTER = ("spark.jars", "spark.driver.memory", "spark.local.dir", "spark.driver.extraJavaOptions")


@dataclass(frozen=True)
class SparkSettings:
    """The plain values the session needs (bootstrap makes them from config.Settings)."""

    nessie_uri: str  # Nessie REST API v2
    main_branch: str
    warehouse: str
    region: str
    s3_endpoint: str | None  # an S3-compatible endpoint (moto locally); None: AWS
    http_timeout: float
    driver_memory: str
    work_dir: Path
    jars: tuple[Path, ...] = ()


def spark_conf_for(
    settings: SparkSettings, credentials: ClientCredentials | None = None, *, local_jars: bool = True
) -> dict[str, str]:
    """Everything the session needs. With `credentials` the conf holds the Nessie client secret: it stays
    in-process and is never logged (Spark redacts keys containing "secret")."""
    cat = f"spark.sql.catalog.{CATALOG}"
    timeout_ms = int(settings.http_timeout * 1000)
    conf = {
        "spark.jars": ",".join(str(p) for p in settings.jars) if local_jars else "",
        "spark.sql.extensions": EXTENSIONS,
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.catalog-impl": "org.apache.iceberg.nessie.NessieCatalog",
        f"{cat}.uri": settings.nessie_uri,
        f"{cat}.ref": settings.main_branch,
        f"{cat}.warehouse": settings.warehouse,
        f"{cat}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{cat}.client.region": settings.region,
        # Without this, `tbl@branch` reads are served from a stale cached table.
        f"{cat}.cache-enabled": "false",
        # Timeouts on every call: the Nessie client (its `nessie.transport.*` settings, read by the catalog
        # without the `nessie.` prefix) and S3FileIO's HTTP client, in milliseconds.
        f"{cat}.transport.connect-timeout": str(min(timeout_ms, 10_000)),
        f"{cat}.transport.read-timeout": str(timeout_ms),
        f"{cat}.http-client.type": "apache",
        f"{cat}.http-client.apache.connection-timeout-ms": str(min(timeout_ms, 10_000)),
        f"{cat}.http-client.apache.socket-timeout-ms": str(timeout_ms),
        "spark.driver.memory": settings.driver_memory,
        "spark.local.dir": str(settings.work_dir / "spark"),
        "spark.sql.shuffle.partitions": "4",
        # Iceberg's vectorized (Arrow) Parquet reader crashed the JVM (SIGSEGV) auditing a 1M-row append in the
        # large-file benchmark; the row reader is slower on wide scans but safe, and an audit reads only new rows.
        "spark.sql.iceberg.vectorization.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={settings.work_dir / 'spark'}",
    }
    if settings.s3_endpoint:
        conf[f"{cat}.s3.endpoint"] = settings.s3_endpoint
        conf[f"{cat}.s3.path-style-access"] = "true"
    if credentials is not None:
        conf |= nessie_oauth2_conf(credentials)
    return conf


def nessie_oauth2_conf(credentials: ClientCredentials) -> dict[str, str]:
    """The Nessie client's OAuth2 settings (client-credentials grant; it refreshes the token itself).

    Keys are `nessie.authentication.*` of the Nessie client bundled in Iceberg (NessieConfigConstants); Iceberg's
    NessieCatalog reads them from its catalog options without the `nessie.` prefix."""
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


def spark_session_for(conf: dict[str, str], *, submitted: bool = False, work_dir: Path | None = None) -> Any:
    """Start (or join) the process's session. `submitted`: started by spark-submit (an EMR job, or its local run),
    whose master, jars and driver sizing come from the submission; only the catalog settings are added here."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("wap-ingest")
    if submitted:
        conf = {k: v for k, v in conf.items() if k not in SUBMITTED_BY_CLUSTER}
    else:
        if work_dir is not None:
            (work_dir / "spark").mkdir(parents=True, exist_ok=True)
        builder = builder.master("local[*]")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkEngine:
    """The process's session, started on first use (listing objects or refusing a bad key needs no JVM), checked
    before each use, and replaced when its JVM or gateway died."""

    def __init__(self, start: Callable[[], Any], on_start: Callable[[Any], None] | None = None) -> None:
        """`on_start(session)`: checks to run once on each new session (the audits' custom SQL); what it raises
        is raised by that call."""
        self._start = start
        self._on_start = on_start
        self._session: Any = None
        self._lock = threading.Lock()
        self.restarts = 0

    @property
    def started(self) -> bool:
        return self._session is not None

    def session(self) -> Any:
        with self._lock:
            if self._session is not None and not gateway_alive(self._session):
                log.warning("the Spark engine of this process died; starting a fresh one")
                forget_session()
                self._session = None
                self.restarts += 1
            if self._session is None:
                started = time.monotonic()
                self._session = self._start()
                log.info("Spark session started in %.2fs (once per process)", time.monotonic() - started)
                if self._on_start is not None:
                    self._on_start(self._session)
            return self._session
