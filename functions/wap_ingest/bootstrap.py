"""Wiring: Settings -> adapters -> the pipeline's ports. Built once per process and cached, so warm
Lambda invocations (and a long `wap ingest` run) reuse one SparkSession and one set of clients."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from wap_ingest.adapters.lake_reader import IcebergRestReader
from wap_ingest.adapters.nessie import NessieBranches
from wap_ingest.adapters.s3 import S3ObjectStore, s3_client_for
from wap_ingest.adapters.slack import LogNotifier, SlackNotifier, slack_client_for, token_from_parameter
from wap_ingest.adapters.spark import SparkIcebergWriter, spark_session_for
from wap_ingest.config import Settings
from wap_ingest.core.audits import AuditSuites, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.ingest import UNKNOWN_DELIVERY, Delivery, ingest_and_notify
from wap_ingest.core.models import (
    AppendResult,
    FileFormat,
    IngestOutcome,
    MeasurementPlan,
    Measurements,
    SourceObject,
    TableRef,
)
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.ports import Notifier, TableWriter

log = logging.getLogger(__name__)


def load_suites(path: Path, default_namespace: str) -> AuditSuites:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise AuditSuiteError(f"audits file {path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise AuditSuiteError(f"audits file {path}: cannot be read ({exc}). Fix: check WAP_AUDITS_FILE.") from exc
    try:
        return suites_from(document, default_namespace=default_namespace)
    except AuditSuiteError as exc:
        raise AuditSuiteError(f"{path}: {exc}") from exc


class LazyWriter(TableWriter):
    """Starts Spark on first use: listing objects or refusing a bad key needs no JVM."""

    def __init__(self, factory: Callable[[], SparkIcebergWriter]) -> None:
        self._factory = factory
        self._writer: SparkIcebergWriter | None = None

    @property
    def writer(self) -> SparkIcebergWriter:
        if self._writer is None:
            started = time.monotonic()
            self._writer = self._factory()
            log.info("Spark session started in %.2fs (once per process)", time.monotonic() - started)
        return self._writer

    @property
    def started(self) -> bool:
        return self._writer is not None

    def append(
        self, source: SourceObject, fmt: FileFormat, table: TableRef, branch: str, properties: Mapping[str, str]
    ) -> AppendResult:
        return self.writer.append(source, fmt, table, branch, properties)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        return self.writer.find_append(table, ref, identity)

    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        return self.writer.measure_appended(table, branch, appended, plan)


@dataclass(frozen=True)
class Service:
    """Everything one process needs to run the pipeline."""

    settings: Settings
    ports: Ports
    suites: AuditSuites
    config: PipelineConfig
    objects: S3ObjectStore
    notifier: Notifier

    def ingest(
        self, source: SourceObject, table: TableRef | None = None, delivery: Delivery = UNKNOWN_DELIVERY
    ) -> IngestOutcome:
        return ingest_and_notify(
            source, ports=self.ports, suites=self.suites, config=self.config, notifier=self.notifier,
            delivery=delivery, table=table,
        )


def notifier_for(settings: Settings) -> Notifier:
    token = settings.slack_token
    if token is None and settings.slack_token_parameter:
        token = token_from_parameter(settings.slack_token_parameter)
    if token is None or settings.slack_channel is None:
        return LogNotifier()
    client = slack_client_for(token, settings.slack_base_url, settings.http_timeout)
    return SlackNotifier(client, settings.slack_channel)


def build_service(settings: Settings) -> Service:
    """Validate the audits first (cheap, and a bad suite must fail before anything starts)."""
    suites = load_suites(settings.audits_file, settings.namespace)
    settings.spark_jars()  # fail early, with the fix, if the jars are missing
    objects = S3ObjectStore(s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout))
    downloads = settings.work_dir / "downloads"
    writer = LazyWriter(
        lambda: SparkIcebergWriter(spark_session_for(settings), lambda src: objects.download(src, downloads))
    )
    catalog = NessieBranches(settings.nessie_endpoint, timeout=settings.http_timeout)
    return Service(
        settings=settings,
        ports=Ports(catalog=catalog, writer=writer, objects=objects),
        suites=suites,
        config=PipelineConfig(default_namespace=settings.namespace, main_branch=settings.main_branch),
        objects=objects,
        notifier=notifier_for(settings),
    )


_lock = threading.Lock()
_cache: dict[str, Service] = {}


def service() -> Service:
    """The process-wide Service, built on first use from the environment."""
    with _lock:
        if "service" not in _cache:
            started = time.monotonic()
            _cache["service"] = build_service(Settings.from_env())
            log.info("service built (once per process; warm invocations reuse it) in %.2fs", time.monotonic() - started)
        return _cache["service"]


def catalog_for(settings: Settings) -> NessieBranches:
    """The catalog alone, for operator commands that need no Spark."""
    return NessieBranches(settings.nessie_endpoint, timeout=settings.http_timeout)


def reader_for(settings: Settings) -> IcebergRestReader:
    return IcebergRestReader(settings.nessie_endpoint)
