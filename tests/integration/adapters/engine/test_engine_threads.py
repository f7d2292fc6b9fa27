"""The engine started in the background (adapters/engine/session.py: it overlaps the catalog steps before the first
write) and then used from the thread that needs it, in a fresh process as a cold Lambda is: Spark loads a catalog
with the settings of the active session of the JVM thread running the call, and each Python thread has a JVM thread
of its own, so the session is made that thread's active one too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.paths import ROOT

pytestmark = [pytest.mark.stack, pytest.mark.spark]

COLD_PROCESS = textwrap.dedent('''
    import sys
    from wap_ingest.adapters.engine.tables import IcebergTables
    from wap_ingest.bootstrap import build_service
    from wap_ingest.bootstrap.config import Settings
    from wap_ingest.core.models import TableRef

    service = build_service(Settings.from_env())
    service.ports.writer.start([], together=True)  # as for files read together: a thread of its own starts Spark
    with IcebergTables(service.ports.writer.spark) as tables:  # this thread's first catalog call
        found = tables.find(TableRef("wap", sys.argv[1]), "main")
        print(found.currentSnapshot().summary().get("total-records"))
    service.engine.session().stop()
''')


def test_a_session_started_in_the_background_finds_the_catalog_from_the_caller(lake: Lake, table_name: str,
                                                                              tmp_path: Path) -> None:
    lake.service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(5)))
    audits = tmp_path / "audits.yml"  # no custom_sql: the engine's start-up check loads no catalog before the caller
    audits.write_text(f"tables:\n  {table_name}:\n    - check: not_null\n      columns: [my_col_1]\n")
    done = subprocess.run([sys.executable, "-c", COLD_PROCESS, table_name], cwd=ROOT, env=lake.env | {
        "WAP_WORK_DIR": str(tmp_path), "WAP_AUDITS_FILE": str(audits)}, capture_output=True, text=True, timeout=300,
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "5"
