"""Damaged Parquet, ORC and Avro files through the service's real path (issue 24, item 6): good files written with
every codec, damaged by a seeded fuzz in each region (magic numbers, page and block headers and bodies, footers,
postscripts, sync markers; tests/corruption.py), each ingested by the service on the local stack (its SparkIcebergWriter
on Nessie and moto, one Spark session for the whole fuzz). A damaged file may still read (published, or rejected by
its audit); what must never happen is an infrastructure verdict (FAILED: retried to the dead-letter queue) for the
file's own bytes, a hang, or a killed engine. Each INVALID names the object.

WAP_CORRUPTION_SEED picks another seed (the default is the one the suite runs); WAP_CORRUPTION_FORMATS fewer formats
(comma-separated)."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import corruption
from tests.conftest import Lake
from wap_ingest.adapters.engine.errors import gateway_alive
from wap_ingest.core.errors import WapError
from wap_ingest.core.models import OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]

SEED = int(os.environ.get("WAP_CORRUPTION_SEED", "24"))
FORMATS = os.environ.get("WAP_CORRUPTION_FORMATS", "parquet,orc,avro").split(",")
PER_REGION = {"parquet": 1, "orc": 2, "avro": 1}  # damaged copies per kind of region, per codec
LONGEST_CASE_SECONDS = 300  # far beyond any case's time on a loaded machine: past it, the engine is hung


def good_files(spark: Any, folder: Path) -> Iterator[tuple[str, str, bytes]]:
    for fmt in FORMATS:
        for codec in corruption.CODECS[fmt]:
            if fmt == "avro":
                yield fmt, codec, corruption.avro_file(spark, codec, folder)
            else:
                yield fmt, codec, corruption.parquet_file(codec) if fmt == "parquet" else corruption.orc_file(codec)


@contextmanager
def hang_guard(spark: Any, case: str, hung: list[str]) -> Iterator[None]:
    """Kill the engine's JVM if one case runs past LONGEST_CASE_SECONDS, so that a hang fails the test naming the
    case instead of blocking it (the next use starts a fresh engine)."""
    def kill() -> None:
        hung.append(case)
        os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL)

    timer = threading.Timer(LONGEST_CASE_SECONDS, kill)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def test_no_damaged_file_is_an_infrastructure_failure(lake: Lake, tmp_path: Path) -> None:
    spark = lake.service.ports.writer.spark
    engine = lake.service.engine
    restarts = engine.restarts
    run = uuid.uuid4().hex[:8]
    verdicts: Counter[str] = Counter()
    failed: list[str] = []
    hung: list[str] = []
    unnamed: list[str] = []
    for fmt, codec, good in list(good_files(spark, tmp_path)):
        table = f"fuzz_{fmt}_{codec}_{run}"
        for damage in corruption.damaged(fmt, codec, good, SEED, PER_REGION[fmt]):
            source = lake.put(f"{table}/{damage.case}.{fmt}", damage.data)
            with hang_guard(spark, damage.case, hung):
                try:
                    outcome = lake.service.ingest(source)
                except WapError as exc:  # FAILED: the service would retry it, then dead-letter it
                    failed.append(f"{damage.case}: {type(exc).__name__}: {str(exc)[:400]}")
                    continue
            verdicts[outcome.status.value] += 1
            if outcome.status is OutcomeStatus.INVALID and source.uri not in outcome.message:
                unnamed.append(f"{damage.case}: {outcome.message[:300]}")
    print(f"seed {SEED}: {dict(verdicts)}")
    assert not hung, f"the engine hung on {hung}"
    assert not failed, "damaged files came out as infrastructure failures:\n" + "\n".join(failed)
    assert not unnamed, "INVALID without the object's name:\n" + "\n".join(unnamed)
    assert engine.restarts == restarts and gateway_alive(spark), "a damaged file killed the engine"
    assert verdicts[OutcomeStatus.INVALID.value] > sum(verdicts.values()) // 2  # the fuzz damages, mostly
