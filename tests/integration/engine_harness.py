"""A warm process whose Spark JVM dies in the middle of a file: that file fails as infrastructure (to be retried),
and the next file in the same process gets a fresh engine and is published. The JVM is killed as the file's rows
are read (a rewrite), or as a registration first asks for the engine (a new table made from the file's schema; a
registration into an existing table whose audit its metrics answer asks for no engine at all).

    python -m tests.integration.engine_harness BUCKET KEY_BEFORE KEY_DURING KEY_AFTER

Prints one JSON line per file: its status and, for a failure, the error's type.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from wap_ingest.adapters.engine import writer as spark_writer
from wap_ingest.bootstrap import build_service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, SourceObject


def main(bucket: str, before: str, during: str, after: str) -> int:
    service = build_service(Settings.from_env())
    read, asked = spark_writer.read_source, spark_writer._OnDemand.tables

    def kill(spark: Any) -> None:
        gateway = spark.sparkContext._gateway
        os.kill(gateway.proc.pid, signal.SIGKILL)  # the JVM dies while the file is being read or registered
        gateway.proc.wait(timeout=30)

    def killing_read(spark: Any, *args: Any, **kwargs: Any) -> Any:
        kill(spark)
        return read(spark, *args, **kwargs)

    def killing_ask(self: Any) -> Any:
        tables = asked(self)
        kill(tables.spark)  # the engine dies as the registration starts using it
        return tables

    for key in (before, during, after):
        spark_writer.read_source = killing_read if key == during else read  # type: ignore[assignment]
        spark_writer._OnDemand.tables = killing_ask if key == during else asked  # type: ignore[method-assign]
        (result,) = service.ingest_all([Item(SourceObject(bucket, key))])
        line = {"key": key, "restarts": service.engine.restarts if service.engine else None}
        if isinstance(result, IngestOutcome):
            line |= {"status": result.status.value, "message": result.message}
        else:
            line |= {"status": "failed", "error": type(result).__name__, "message": str(result)}
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:5]))
