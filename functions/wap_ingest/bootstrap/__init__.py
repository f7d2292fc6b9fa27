"""The composition root: Settings -> adapters -> the use cases entry points call (root.py); one function per
adapter (builders.py). Built once per process and cached, so warm Lambda invocations (and a long `wap ingest` run)
reuse one engine and one set of clients. Adapters get plain values and clients from here, never the Settings."""

from __future__ import annotations

import logging
import threading
import time

from wap_ingest.bootstrap.config import Settings

from .builders import (
    boto3_client,
    catalog_for,
    decisions_for,
    jobs_for,
    load_suites,
    nessie_credentials_for,
    nessie_tokens_for,
    notifier_for,
    reader_for,
    reports_for,
    results_for,
    spark_settings_for,
)
from .root import Service

log = logging.getLogger(__name__)

__all__ = ["Service", "boto3_client", "build_service", "catalog_for", "decisions_for", "jobs_for", "load_suites",
           "nessie_credentials_for", "nessie_tokens_for", "notifier_for", "operations", "reader_for", "reports_for",
           "results_for", "service", "spark_settings_for"]


def build_service(settings: Settings, *, submitted: bool = False) -> Service:
    """A Service for the pipeline, checked (audits, jars, the catalog client's secret) before anything starts.
    `submitted`: the process was started by spark-submit (the EMR job)."""
    return Service(settings, submitted=submitted).check()


_lock = threading.Lock()
_cache: dict[str, Service] = {}


def operations() -> Service:
    """An operator command's Service, from the environment as it is now (a `wap` process runs one command): it
    builds only the adapters the command touches, each once (never the engine unless it re-audits)."""
    return Service(Settings.from_env())


def service() -> Service:
    """The process-wide Service for the pipeline's entry points (the function, `wap ingest`, the EMR job), built on
    first use from the environment and checked; warm invocations reuse it."""
    with _lock:
        if "service" not in _cache:
            started = time.monotonic()
            _cache["service"] = Service(Settings.from_env()).check()
            log.info("service built (once per process; warm invocations reuse it) in %.2fs", time.monotonic() - started)
        return _cache["service"]
