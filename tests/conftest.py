"""Shared fixtures. The folder sets the tier: unit/ needs nothing; integration/ and e2e/ use the real
local stack (moto server + Nessie server processes, started once per session on free ports, so they
never collide with a developer's `wap stack up`) and a real SparkSession with the pinned jars. Under `pytest -n`
(pytest-xdist, as `make test` runs it) each worker is a session of its own: its own stack, its own Spark.

The session leaves no process of its own behind: every process it starts inherits WAP_TEST_SESSION=<id> (a
worker's id names the worker, so one worker never takes another's processes for its own leftovers; moto,
Nessie, the emulators, awslambdaric, the Spark JVMs, workers, Streamlit, Chromium...), and once the session's own
teardown is done (and this process's Spark is stopped) any of them still alive fails the run, named, and is killed."""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.stacks import running_stack
from wap_ingest.adapters.formats.isolation import stop_worker
from wap_stack.leftovers import Leftover, stop_leftovers, tagged_processes
from wap_stack.stack import StackConfig, StackState, free_ports, stack_environment

AUDITS = Path(__file__).parent / "data" / "audits.yml"
DURATIONS = Path(__file__).parent / "durations.json"
LARGE_FILE_BYTES = 2 * 1024 * 1024  # the test stack's threshold: files above it go to (local) EMR
SESSION_VARIABLE = "WAP_TEST_SESSION"
LEFTOVER_GRACE = 15.0  # seconds a process of the session may take to exit after the teardown signalled it


def pytest_configure(config: pytest.Config) -> None:
    session = os.environ.setdefault(SESSION_VARIABLE, uuid.uuid4().hex)  # inherited by every process it starts
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # a worker of `pytest -n`: its processes are its own to check
    if worker and not session.endswith(f"-{worker}"):
        os.environ[SESSION_VARIABLE] = f"{session}-{worker}"


def _stop_own_spark() -> None:
    """This process's Spark JVM (a child of pytest until the interpreter exits) is the session's too: stop it."""
    import sys

    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        process = getattr(gateway, "proc", None)
        gateway.shutdown()
        if process is not None:
            process.stdin.close()  # the JVM exits when its stdin closes (pyspark's launcher)
            process.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None


def session_leftovers(grace: float = LEFTOVER_GRACE) -> list[Leftover]:
    """The session's processes still alive once `grace` seconds have passed."""
    deadline = time.monotonic() + grace
    while True:
        alive = tagged_processes(SESSION_VARIABLE, os.environ[SESSION_VARIABLE])
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.5)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first (tests/durations.json; scripts/test_durations.py writes it), each file's tests in
    their order: `make test` runs with --no-loadscope-reorder, so its workers take whole files in this order and the
    long files never start last. Unlisted files follow, in collection order."""
    seconds: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _stop_own_spark()
    stop_worker()  # this process's isolation worker (adapters/formats/isolation.py) is the session's too
    leftovers = session_leftovers()
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(leftovers)} process(es) the test session started are still running after its teardown "
             "(a test or fixture did not stop them; killed now):", *(f"  {left.describe()}" for left in leftovers)]
    stop_leftovers(leftovers, grace=2.0)
    if reporter is not None:
        reporter.write_sep("=", "processes left running", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("\n".join(lines))
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _service_loggers_as_they_were() -> Iterator[None]:
    """A Lambda handler run in this process gives the service's loggers Powertools' handler and stops them
    propagating (entrypoints/lambda_observability.py `observe`); each test starts from the loggers as they were, so
    what a test sees of the logs (caplog) does not depend on which tests its worker ran before it."""
    import logging

    def service_loggers() -> dict[str, logging.Logger]:
        return {name: found for name, found in logging.Logger.manager.loggerDict.items()
                if isinstance(found, logging.Logger) and (name == "wap_ingest" or name.startswith("wap_ingest."))}

    before = {name: (found.handlers[:], found.propagate, found.level) for name, found in service_loggers().items()}
    yield
    for name, found in service_loggers().items():
        found.handlers[:], found.propagate, level = before.get(name, ([], True, logging.NOTSET))
        found.setLevel(level)


@pytest.fixture(scope="session")
def stack_config(tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    return StackConfig(
        state_dir=tmp_path_factory.mktemp("stack"), moto_port=moto, nessie_port=nessie, nessie_management_port=mgmt,
        slack_port=slack, lambda_port=function, runtime_port=runtime,
        emr_mode="local",  # large files run as EMR jobs with spark-submit against the stack
    )


@pytest.fixture(scope="session")
def local_stack(stack_config: StackConfig) -> Iterator[StackState]:
    env = {
        "WAP_AUDITS_FILE": str(AUDITS),  # the function under the emulator inherits it
        "WAP_LARGE_FILE_BYTES": str(LARGE_FILE_BYTES),  # so does the routing threshold
        "WAP_SOURCE_BUCKETS": "inbox",  # and the second source bucket (no notifications) tests use
        "WAP_RETRY_BASE_SECONDS": "1",  # a failed message's back-off: seconds in tests, as in AWS minutes
        "WAP_RETRY_MAX_SECONDS": "4",
    }
    with running_stack(stack_config, env) as state:
        yield state


@pytest.fixture(scope="session")
def stack_env(local_stack: StackState, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The stack's variables, exported for this process (Spark's JVM and boto3 read them)."""
    env = stack_environment(local_stack) | {
        "WAP_WORK_DIR": str(tmp_path_factory.mktemp("work")),
        "WAP_AUDITS_FILE": str(AUDITS),
        "WAP_SOURCE_BUCKETS": "inbox",  # tests run the pipeline on files uploaded there (no event)
    }
    patch = pytest.MonkeyPatch()
    for name, value in env.items():
        patch.setenv(name, value)
    try:
        yield env
    finally:
        patch.undo()


@dataclass
class Lake:
    """Handles on the real stack for assertions: the service under test and raw clients."""

    service: Any
    s3: Any
    env: dict[str, str]

    @property
    def source_bucket(self) -> str:
        """Notified: a file dropped here is ingested by the stack's event path (worker -> handler)."""
        return self.env["SOURCE_BUCKET"]

    inbox_bucket = "inbox"  # not notified: for tests that run the pipeline themselves

    def put(self, key: str, body: bytes) -> Any:
        """Upload to the inbox (no event fires) and return the object for a direct pipeline run."""
        from wap_ingest.core.models import SourceObject

        self.s3.put_object(Bucket=self.inbox_bucket, Key=key, Body=body)
        return SourceObject(self.inbox_bucket, key)

    def drop(self, key: str, body: bytes) -> None:
        """Upload to the source bucket, as a producer does: the event path takes it from there."""
        self.s3.put_object(Bucket=self.source_bucket, Key=key, Body=body)

    def count(self, table: str, ref: str = "main") -> int:
        spark = self.service.ports.writer.spark
        ident = table if ref == "main" else f"{table.rsplit('.', 1)[0]}.`{table.rsplit('.', 1)[1]}@{ref}`"
        spark.catalog.refreshTable(f"nessie.{ident}")  # the session's catalog caches tables: read it as it is now
        return int(spark.sql(f"SELECT count(*) AS n FROM nessie.{ident}").collect()[0]["n"])

    def wap_branches(self) -> list[str]:
        return [b.name for b in self.service.ports.catalog.list_branches("wap-")]

    def results(self, table: str, ref: str = "main") -> list[dict[str, Any]]:
        """The audit results rows of `table` (qualified) on `ref`, read by PyIceberg through Nessie's Iceberg REST
        endpoint (not the service's adapter); [] when the ref has no results table for it."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        from wap_ingest.core.audit_results import results_table
        from wap_ingest.core.models import TableRef

        catalog = load_catalog("nessie", type="rest", uri=f"{self.env['NESSIE_ENDPOINT']}/iceberg/{ref}",
                               **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
        try:
            loaded = catalog.load_table(results_table(TableRef(*table.split(".", 1))).qualified)
        except NoSuchTableError:
            return []
        return list(loaded.scan().to_arrow().to_pylist())

    def main_hash(self) -> str:
        return str(self.service.ports.catalog.reference_hash("main"))


@pytest.fixture(scope="session")
def lake(stack_env: dict[str, str]) -> Lake:
    from wap_ingest.bootstrap import build_service
    from wap_ingest.bootstrap.config import Settings

    service = build_service(Settings.from_env(stack_env))
    lake = Lake(service=service, s3=service.objects._s3, env=stack_env)
    lake.s3.create_bucket(Bucket=lake.inbox_bucket)
    return lake


@pytest.fixture
def table_name() -> str:
    """A fresh table per test: the session shares one lake."""
    return f"t_{uuid.uuid4().hex[:10]}"


def parquet_bytes(rows: int, nulls: int = 0, *, extra: dict[str, list[Any]] | None = None) -> bytes:
    columns: dict[str, Any] = {
        "my_col_0": pa.array(range(rows), pa.int32()),
        "my_col_1": pa.array([None if i < nulls else f"v{i}" for i in range(rows)], pa.string()),
        "my_col_2": pa.array([i / 2 for i in range(rows)], pa.float64()),
    }
    for name, values in (extra or {}).items():
        columns[name] = pa.array(values)
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()
