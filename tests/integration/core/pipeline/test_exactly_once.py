"""Exactly once on the real stack: duplicates, concurrency on one table, no FORCE, no leftover branch.

Concurrent workers are threads sharing one Service (one SparkSession, as a warm Lambda container has);
each thread runs the whole pipeline, so branches, appends and merges really race in Nessie.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def run_all(lake: Lake, sources: list[SourceObject], workers: int) -> list[IngestOutcome]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lake.service.ingest, sources))


def test_the_same_event_twice_adds_the_rows_once(lake: Lake, table_name: str) -> None:
    source = lake.put(f"{table_name}/a.parquet", parquet_bytes(11))
    first, second = lake.service.ingest(source), lake.service.ingest(source)
    assert (first.status, second.status) == (OutcomeStatus.PUBLISHED, OutcomeStatus.DUPLICATE)
    assert lake.count(f"wap.{table_name}") == 11
    assert not [b for b in lake.wap_branches() if table_name in b]


def test_the_same_event_ten_times_concurrently_adds_the_rows_once(lake: Lake, table_name: str) -> None:
    source = lake.put(f"{table_name}/a.parquet", parquet_bytes(13))
    outcomes = run_all(lake, [source] * 10, workers=10)
    statuses = sorted(o.status.value for o in outcomes)
    assert statuses.count("published") == 1 and statuses.count("duplicate") == 9, statuses
    assert lake.count(f"wap.{table_name}") == 13
    assert not [b for b in lake.wap_branches() if table_name in b]


def test_twenty_files_for_one_table_at_once_land_exactly_once(lake: Lake, table_name: str) -> None:
    sources = [lake.put(f"{table_name}/{i:02d}.parquet", parquet_bytes(10 + i)) for i in range(20)]
    started = time.monotonic()
    outcomes = run_all(lake, sources, workers=4)
    seconds = time.monotonic() - started
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED] * 20, [o.message for o in outcomes]
    assert lake.count(f"wap.{table_name}") == sum(10 + i for i in range(20))
    assert not [b for b in lake.wap_branches() if table_name in b]
    retries = sum(o.attempts - 1 for o in outcomes)
    print(f"\n20-file burst, 4 concurrent workers: {seconds:.1f}s, {20 / seconds * 60:.0f} files/min, "
          f"{retries} merge retries")
    # every publish is a merge commit carrying its own source: none was forced over another
    import requests

    log = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/main/history", params={"maxRecords": 200},
                       timeout=10).json()["logEntries"]
    keys = [e["commitMeta"].get("allProperties", {}).get("wap.source.key", [None])[0] for e in log]
    assert sorted(k for k in keys if k and k.startswith(f"{table_name}/")) == sorted(s.key for s in sources)


def test_a_slack_outage_never_changes_the_outcome(lake: Lake, table_name: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:

    from wap_ingest.adapters.slack.client import SlackNotifier, slack_client_for
    from wap_stack.processes import free_port

    down = SlackNotifier(slack_client_for("token", f"http://127.0.0.1:{free_port()}/api/", 2), "#alerts")
    service = lake.service.replaced(notifier=down)
    bad = service.ingest(lake.put(f"{table_name}/bad.parquet", parquet_bytes(6, nulls=2)))
    good = service.ingest(lake.put(f"{table_name}/good.parquet", parquet_bytes(6)))
    assert (bad.status, good.status) == (OutcomeStatus.REJECTED, OutcomeStatus.PUBLISHED)
    assert bad.branch in lake.wap_branches() and lake.count(f"wap.{table_name}") == 6
    assert "alert not delivered to Slack #alerts" in caplog.text


def test_nessie_stopped_mid_run_then_restarted(lake: Lake, table_name: str, stack_config: object,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Nessie goes down right after the append: the run fails with a clear error and main untouched; once
    Nessie is back (its store on disk survived), the redelivered event publishes the rows exactly once."""
    from wap_ingest.core.errors import InfrastructureError
    from wap_stack.stack import start_nessie, stop_nessie

    lake.service.ingest(lake.put(f"{table_name}/before.parquet", parquet_bytes(3)))
    source = lake.put(f"{table_name}/during.parquet", parquet_bytes(8))
    main_before = lake.main_hash()
    writer = lake.service.ports.writer
    real_append = writer.append

    def append_then_outage(*args: object, **kwargs: object) -> object:
        appended = real_append(*args, **kwargs)  # type: ignore[arg-type]
        stop_nessie(stack_config)  # type: ignore[arg-type]
        return appended

    monkeypatch.setattr(writer, "append", append_then_outage)
    try:
        with pytest.raises(InfrastructureError) as info:
            lake.service.ingest(source)
    finally:
        monkeypatch.setattr(writer, "append", real_append)
        start_nessie(stack_config)  # type: ignore[arg-type]
    assert "unreachable" in str(info.value) or "catalog" in str(info.value)
    assert lake.main_hash() == main_before and lake.count(f"wap.{table_name}") == 3

    outcome = lake.service.ingest(source)  # the event, redelivered
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert lake.count(f"wap.{table_name}") == 11
    assert not [b for b in lake.wap_branches() if table_name in b]
