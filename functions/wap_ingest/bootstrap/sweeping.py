"""Settings -> the sweep of the lake's unreferenced files (core.pipeline.sweep): its adapter and its rules, for one
`wap maintain` run (the function's schedule or the command); the EMR job sweeps nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from wap_ingest.adapters.catalog import (
    BearerAuth,
    CatalogLakeFiles,
    MetadataFiles,
    NessieLiveContents,
    TokenProvider,
    pyarrow_io,
)
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.lake_files import SweepPolicy
from wap_ingest.core.pipeline import Sweep
from wap_ingest.core.ports import DecisionLog


def lake_files_for(settings: Settings, s3: Any, tokens: TokenProvider | None) -> CatalogLakeFiles:
    """The lake's files as the catalog sees them (Nessie, as the catalog client authenticates) and S3 holds them."""
    contents = NessieLiveContents(settings.nessie_endpoint, timeout=settings.http_timeout,
                                  auth=BearerAuth(tokens) if tokens is not None else None)
    metadata = MetadataFiles(pyarrow_io(settings.aws_endpoint_url, settings.aws_region, settings.http_timeout))
    return CatalogLakeFiles(contents, metadata, s3)


def sweep_for(settings: Settings, s3: Any, tokens: TokenProvider | None, decisions: DecisionLog | None,
              actor: str = "wap maintain") -> Sweep:
    """A sweep that begins now: files written before now minus WAP_SWEEP_GRACE_SECONDS may go."""
    return Sweep(lake_files_for(settings, s3, tokens), SweepPolicy(settings.sweep_grace_seconds, settings.warehouse),
                 datetime.now(UTC), decisions, actor)
