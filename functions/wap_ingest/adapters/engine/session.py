"""The SparkSession: its configuration (a pure function of plain settings, reused by the EMR submission), its
start, and the process's engine holder that starts it on first use and starts a fresh one when the old one died.

A warm Lambda keeps one session across invocations. If its JVM or Py4J gateway dies, the file that was running
fails as an infrastructure error (retried), and the next use builds a new session instead of keeping the dead
one (which would fail every later file).

Cold start (the first file of a fresh execution environment pays for a JVM, Spark and every class the pipeline
loads): the driver JVM maps the application class-data sharing (AppCDS) archive that `make setup` and the image
build make (scripts/build_cds_archive.py), found by a key of the java and the classpath, so a changed JVM or jar
finds none and starts without it; the pipeline starts the engine in the background as soon as a delivery's files
are routed (`SparkEngine.start_in_background`), so the catalog steps before the first write overlap it; the pinned
jars are on the driver's own classpath, where the archive covers them;
the driver compiles with C1 only, which suits a short-lived driver; SPARK_HOME is set before spark-submit runs,
which otherwise starts a Python interpreter to find it; and only Iceberg's SQL extensions are loaded.
WAP_SPARK_STARTUP_TUNING=off turns the archive, the JIT flag and SPARK_HOME off (benchmarks/cold_start.py measures
each cut, and all of them, against the start-up before).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wap_ingest.adapters.catalog import ClientCredentials
from wap_ingest.adapters.engine.errors import forget_session, gateway_alive
from wap_ingest.core.errors import ConfigError

log = logging.getLogger(__name__)

CATALOG = "nessie"
# Iceberg's SQL extensions only: the pipeline handles Nessie branches through Nessie's REST API, never through
# Nessie's SQL (CREATE/MERGE BRANCH ... IN nessie), whose parser cost every cold start its lexer's ~250 classes.
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
SUBMITTED_BY_CLUSTER = ("spark.jars", "spark.driver.memory", "spark.local.dir", "spark.driver.extraJavaOptions",
                        "spark.driver.extraClassPath")
# The driver JVM of a Lambda lives for minutes and runs small jobs: C1 alone compiles sooner and cheaper than C1+C2.
SHORT_RUN_JIT = ("-XX:TieredStopAtLevel=1",)
# The serial collector: no concurrent GC threads competing for the function's few cores, and a heap that grows
# only as far as it must. Measured on a 2M-row file (benchmarks/results/large_gc.json): peak memory 894 -> 760 MiB
# against G1, no slower; the parallel collector peaked at 1,353 MiB.
SMALL_FOOTPRINT_GC = ("-XX:+UseSerialGC",)
ARCHIVE_FORMAT = "3"  # part of the archive's key: bump it when the training workload changes
TUNING_VARIABLE = "WAP_SPARK_STARTUP_TUNING"
SECRET_SETTING = re.compile(r"(?i)secret|password")  # settings kept off the JVM's command line


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
    """Everything the session needs. With `credentials` the conf holds the Nessie client secret: it is set on the
    running session (spark_session_for), never on a command line, and never logged (Spark redacts keys containing
    "secret")."""
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
        # Loaded tables are cached for one run only: spark_tables.IcebergTables drops what a run touched when it
        # ends, so a `tbl@branch` read never gets a table another run or process committed to since.
        f"{cat}.cache-enabled": "true",
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
        # Spark 4 turned ANSI mode on by default; the service keeps Spark 3.5's semantics, on purpose (README,
        # "Spark 4's ANSI mode"): an invalid cast or an overflow in an audit's or a custom_sql check's expression
        # gives null, as before, instead of an exception that the engine's error classification files as an
        # infrastructure failure (retried, then dead-lettered) rather than as the file's fault. Writes are not
        # affected: a table's column types are enforced by `spark.sql.storeAssignmentPolicy` (ANSI in both).
        "spark.sql.ansi.enabled": "false",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Every exception keeps its stack (C2 drops it from one thrown often at one site): spark_errors reads it.
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={settings.work_dir / 'spark'} "
                                         "-XX:-OmitStackTraceInFastThrow",
    }
    if local_jars and settings.jars:
        # The same jars on the driver's own classpath (as in a Spark distribution's jars/): loaded by the JVM's
        # application class loader, which maps them from the class-data archive without reading the jars. Absent
        # without local jars: a cluster (EMR) keeps its own driver classpath.
        conf["spark.driver.extraClassPath"] = ":".join(str(p) for p in settings.jars)
    if settings.s3_endpoint:
        conf[f"{cat}.s3.endpoint"] = settings.s3_endpoint
        conf[f"{cat}.s3.path-style-access"] = "true"
        # An S3-compatible store need not decode the AWS SDK's (2.30+) signed aws-chunked uploads with a trailing
        # checksum: moto 5.1 stores them with their chunk headers, so Iceberg 1.11's metadata files came back
        # unreadable. Unchunked, each part carries its checksum in a header instead. AWS S3 keeps the default.
        conf[f"{cat}.s3.chunked-encoding-enabled"] = "false"
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


def spark_session_for(
    conf: dict[str, str], *, submitted: bool = False, work_dir: Path | None = None, tuning: bool | None = None
) -> Any:
    """Start (or join) the process's session. `submitted`: started by spark-submit (an EMR job, or its local run),
    whose master, jars and driver sizing come from the submission; only the catalog settings are added here.
    `tuning`: the cold-start cuts (class-data archive, JIT flags); None: on unless WAP_SPARK_STARTUP_TUNING=off."""
    began = time.time()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("wap-ingest")
    archive = None
    if submitted:
        conf = {k: v for k, v in conf.items() if k not in SUBMITTED_BY_CLUSTER}
    else:
        if work_dir is not None:
            (work_dir / "spark").mkdir(parents=True, exist_ok=True)
        builder = builder.master("local[*]")
        if tuning_from(os.environ) if tuning is None else tuning:
            archive = class_data_archive(jars_in(conf), os.environ)
            conf = with_java_options(conf, startup_java_options(archive))
            # spark-submit's scripts otherwise start a Python interpreter to find it (pyspark's find-spark-home).
            os.environ.setdefault("SPARK_HOME", str(spark_home()))
    # A secret (the Nessie client's) is set on the session once it runs, never in the builder: pyspark hands the
    # builder's settings to spark-submit as `--conf` arguments, which the driver JVM's command line keeps for anyone
    # who lists the processes. The catalog reads it from the session's settings at its first use.
    hidden = {key: value for key, value in conf.items() if SECRET_SETTING.search(key)}
    for key, value in conf.items():
        if key not in hidden:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    for key, value in hidden.items():
        session.conf.set(key, value)
    session.sparkContext.setLogLevel("ERROR")
    log.info("Spark started", extra={"spark_startup": startup_times(session, began, archive)})
    return session


def tuning_from(env: Mapping[str, str]) -> bool:
    value = env.get(TUNING_VARIABLE, "on").strip().lower() or "on"
    if value not in ("on", "off"):
        raise ConfigError(f"{TUNING_VARIABLE}={value!r}: use `on` (the default) or `off`. Fix: unset it.")
    return value == "on"


def startup_java_options(archive: Path | None) -> list[str]:
    """The driver JVM's start-up options: the class-data archive when there is one, the JIT and the GC flags."""
    return ([f"-XX:SharedArchiveFile={archive}"] if archive is not None else []) + [*SHORT_RUN_JIT,
                                                                                    *SMALL_FOOTPRINT_GC]


def local_driver_options(jars: Sequence[Path], env: Mapping[str, str]) -> list[str]:
    """spark-submit's options for a local driver of these jars that starts as the function's does: the jars on the
    driver's own classpath (sorted, as the archive was built), its class-data archive when one is built, the JIT and
    GC flags. For the local stack's EMR runner, whose jobs are each a cold start."""
    ordered = sorted(jars)
    options = startup_java_options(class_data_archive(ordered, env) if tuning_from(env) else None)
    return ["--driver-class-path", ":".join(str(j) for j in ordered), "--driver-java-options", " ".join(options)]


def with_java_options(conf: Mapping[str, str], options: Sequence[str]) -> dict[str, str]:
    key = "spark.driver.extraJavaOptions"
    return dict(conf) | {key: " ".join([conf.get(key, ""), *options]).strip()}


def jars_in(conf: Mapping[str, str]) -> list[Path]:
    return [Path(p) for p in conf.get("spark.jars", "").split(",") if p.strip()]


def spark_java(env: Mapping[str, str]) -> Path | None:
    """The java that spark-submit runs (pyspark's bin/spark-class): $JAVA_HOME/bin/java, else `java` on the PATH."""
    home = env.get("JAVA_HOME", "").strip()
    if home:
        return Path(home) / "bin" / "java"
    found = shutil.which("java", path=env.get("PATH"))
    return Path(found) if found else None


def spark_home() -> Path:
    """The Spark that pyspark launches (SPARK_HOME, or the pyspark package), as pyspark itself finds it."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())  # type: ignore[no-untyped-call]


def archive_dir_for(jars: Sequence[Path]) -> Path | None:
    """Where the archive lives: `cds/` beside the folder of the jars (.cache/jars/cds locally, /opt/wap/cds in the
    image), so it goes with what it was built from."""
    return jars[0].resolve().parent.parent / "cds" if jars else None


def archive_key(java: Path, home: Path, jars: Sequence[Path]) -> str:
    """What an archive is valid for: the JVM build (its `release` file, libjvm and base archive) and every jar of the
    driver's classes (Spark's own and spark.jars), each by path, size and modification time. Any change gives
    another key, so a stale archive is never used (the JVM would refuse it, silently, at a cost)."""
    real = java.resolve()
    java_home = real.parent.parent
    release = java_home / "release"
    parts = [ARCHIVE_FORMAT, str(real), release.read_text() if release.is_file() else _stamp(real)]
    parts += [_stamp(p) for p in sorted(java_home.glob("lib/server/*")) if p.suffix in (".so", ".jsa")]
    parts += [_stamp(p) for p in sorted((home / "jars").glob("*.jar"))]
    parts += sorted(_stamp(p.resolve()) for p in jars)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def archive_path_for(jars: Sequence[Path], env: Mapping[str, str]) -> Path | None:
    """Where the archive for this java and these jars is (or would be); None without jars or java."""
    folder, java = archive_dir_for(jars), spark_java(env)
    if folder is None or java is None or not java.exists():
        return None
    return folder / f"spark-{archive_key(java, spark_home(), jars)}.jsa"


def class_data_archive(jars: Sequence[Path], env: Mapping[str, str]) -> Path | None:
    """The archive built for this java and classpath, or None (said in the log, with the fix)."""
    try:
        path = archive_path_for(jars, env)
    except OSError as exc:  # a jar vanished meanwhile: Spark will say so; start without the archive
        log.warning("no class-data archive: %s", exc)
        return None
    if path is not None and archive_complete(path):
        return path
    log.info("no class-data archive for this java and classpath (%s): the JVM starts without it. Fix: make setup "
             "(or python scripts/build_cds_archive.py --jars <jars folder>)", path)
    return None


def archive_complete(path: Path) -> bool:
    """The archive is there with the size its build recorded beside it (`<archive>.json`, written first). Java 17
    maps the file without checking its length: a truncated archive would crash every JVM that maps it (SIGBUS)."""
    try:
        recorded = json.loads(path.with_suffix(".json").read_text()).get("bytes")
        return isinstance(recorded, int) and path.stat().st_size == recorded
    except (OSError, ValueError, AttributeError):
        return False


def startup_times(session: Any, began: float, archive: Path | None) -> dict[str, Any]:
    """When the start-up's steps happened (epoch seconds): the call (before pyspark's import), the driver JVM's
    start, Spark's context, ready."""
    times: dict[str, Any] = {"began_at": round(began, 3), "ready_at": round(time.time(), 3),
                             "class_data_archive": str(archive) if archive else None}
    try:
        jvm = session.sparkContext._jvm
        times["jvm_started_at"] = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime() / 1000
        times["context_started_at"] = session.sparkContext.startTime / 1000
    except Exception as exc:  # only a log line: never fail a start for it
        times["error"] = str(exc)
    return times


def _stamp(path: Path) -> str:
    found = path.stat()
    return f"{path}:{found.st_size}:{found.st_mtime_ns}"


class SparkEngine:
    """The process's session, started on first use (listing objects or refusing a bad key needs no JVM), checked
    before each use, and replaced when its JVM or gateway died."""

    def __init__(self, start: Callable[[], Any], on_start: Callable[[Any], None] | None = None) -> None:
        """`on_start(session)`: checks to run once on each new session (the audits' custom SQL); what it raises
        is raised by that call and by every later one, until a fresh session passes them."""
        self._start = start
        self._on_start = on_start
        self._session: Any = None
        self._refused: Exception | None = None  # what on_start raised for the current session
        self._lock = threading.Lock()
        self._starting: threading.Thread | None = None
        self._thread = threading.local()  # the session this thread made its JVM thread's active one
        self.restarts = 0

    @property
    def started(self) -> bool:
        return self._session is not None

    def start_in_background(self) -> None:
        """Start the session in a thread of its own unless it is started or starting; `session()` then waits for
        that start instead of making its own. A failed start is logged here and made again (and raised) by the
        next `session()`."""
        if self._session is not None or (self._starting is not None and self._starting.is_alive()):
            return
        self._starting = threading.Thread(target=self._start_quietly, name="wap-engine-start", daemon=True)
        self._starting.start()

    def _start_quietly(self) -> None:
        try:
            self.session()
        except Exception as exc:  # the caller that needs the engine meets it again, and raises it
            log.info("the engine's start in the background failed (%s); its first use starts it again",
                     type(exc).__name__)

    def session(self) -> Any:
        with self._lock:
            if self._session is not None and not gateway_alive(self._session):
                log.warning("the Spark engine of this process died; starting a fresh one")
                forget_session()
                self._session, self._refused = None, None
                self.restarts += 1
            if self._session is None:
                started = time.monotonic()
                self._session = self._start()
                if self._on_start is not None:
                    try:
                        self._on_start(self._session)
                    except Exception as exc:
                        self._refused = exc
                log.info("Spark session started in %.2fs (once per process)", time.monotonic() - started,
                         extra={"spark_ready_at": round(time.time(), 3)})
            if self._refused is not None:
                raise self._refused.with_traceback(None)
            session = self._session
        if getattr(self._thread, "session", None) is not session:
            # Spark reads its SQL settings (the catalogs among them) from the active session of the JVM thread that
            # runs the call, and each Python thread has a JVM thread of its own: a session started by another
            # thread (the background start) is made this one's too, once
            session._jvm.SparkSession.setActiveSession(session._jsparkSession)
            self._thread.session = session
        return session
