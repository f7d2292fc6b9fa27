"""Settings -> the Spark engine's settings (adapters.engine.session.SparkSettings): one mapping, used by the
composition root (bootstrap) and by the EMR job request (emr_request), which both build a session's configuration."""

from __future__ import annotations

from wap_ingest.adapters.engine import SparkSettings
from wap_ingest.bootstrap.config import Settings


def spark_settings_for(settings: Settings, *, jars: bool = True) -> SparkSettings:
    """`jars`: the local pinned jars on the classpath (False for a session spark-submit configures, as EMR's)."""
    return SparkSettings(
        nessie_uri=settings.nessie_api_v2, main_branch=settings.main_branch, warehouse=settings.warehouse,
        region=settings.aws_region, s3_endpoint=settings.aws_endpoint_url, http_timeout=settings.http_timeout,
        driver_memory=settings.spark_driver_memory, work_dir=settings.work_dir,
        jars=tuple(settings.spark_jars()) if jars else (),
    )
