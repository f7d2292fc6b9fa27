"""The operator commands against the real stack, and the commands an alert suggests, pasted as they are."""

from __future__ import annotations

import json
import shlex

import pytest
import requests

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.alerts import Alert, alert_for_outcome
from wap_ingest.core.models import OutcomeStatus
from wap_ingest.entrypoints import ops_cli
from wap_ingest.entrypoints.cli import main

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def rejected_branch(lake: Lake, table: str, rows: int = 20, nulls: int = 3) -> str:
    lake.service.ingest(lake.put(f"{table}/base.parquet", parquet_bytes(5)))
    outcome = lake.service.ingest(lake.put(f"{table}/bad.parquet", parquet_bytes(rows, nulls=nulls)))
    assert outcome.status is OutcomeStatus.REJECTED and outcome.branch
    return outcome.branch


def wap(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_reports_the_new_rows_from_metadata(lake: Lake, table_name: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "show", branch, "--json")
    shown = json.loads(out)
    assert code == 0
    assert shown["table"] == f"wap.{table_name}" and shown["rows_added"] == 20 and shown["rows_on_main"] == 5
    assert shown["null_counts"] == {"my_col_0": 0, "my_col_1": 3, "my_col_2": 0}
    assert shown["source"] == f"s3://{lake.inbox_bucket}/{table_name}/bad.parquet"
    code, listed, _ = wap(capsys, "branches", "--json")
    assert branch in [b["branch"] for b in json.loads(listed)["branches"]]


def test_publish_merges_with_the_decision_recorded(lake: Lake, table_name: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "publish", branch, "--reason", "nulls are expected here", "--json")
    assert code == 0 and json.loads(out)["action"] == "published"
    assert lake.count(f"wap.{table_name}") == 25
    assert branch not in lake.wap_branches()
    log = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/main/history", timeout=10).json()["logEntries"]
    props = log[0]["commitMeta"]["allProperties"]
    assert props["wap.decision.reason"] == ["nulls are expected here"] and props["wap.decision.branch"] == [branch]
    code, _, err = wap(capsys, "publish", branch, "--reason", "again")
    assert code == 1 and "does not exist (already published or discarded?)" in err


def test_discard_deletes_the_branch_and_leaves_main(lake: Lake, table_name: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    main_before = lake.main_hash()
    code, out, _ = wap(capsys, "discard", branch, "--reason", "producer will resend")
    assert code == 0 and "discarded" in out
    assert branch not in lake.wap_branches() and lake.main_hash() == main_before


def test_publish_is_refused_when_main_changed_the_table(lake: Lake, table_name: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    assert lake.service.ingest(lake.put(f"{table_name}/later.parquet", parquet_bytes(2))).status.value == "published"
    code, _, err = wap(capsys, "publish", branch, "--reason", "looks fine")
    assert code == 1 and "discard the branch and ingest the file again" in err
    assert branch in lake.wap_branches() and lake.count(f"wap.{table_name}") == 7


def test_non_wap_branches_are_not_touched(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = wap(capsys, "discard", "main", "--reason", "oops")
    assert code == 1 and "is not a WAP branch" in err
    assert lake.main_hash()


def test_the_alert_commands_work_when_pasted(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    lake.service.ingest(lake.put(f"{table_name}/base.parquet", parquet_bytes(5)))
    outcome = lake.service.ingest(lake.put(f"{table_name}/bad.parquet", parquet_bytes(9, nulls=1)))
    alert = alert_for_outcome(outcome)
    assert alert is not None
    commands = dict(alert.commands)
    inspect = shlex.split(commands["Inspect"].split("#")[0])
    assert inspect[0] == "wap"
    code, out, _ = wap(capsys, *inspect[1:])
    assert code == 0 and "my_col_1=1" in out
    publish = shlex.split(commands["Publish after review"].replace("<why it is fine>", "reviewed"))
    code, _, err = wap(capsys, *publish[1:])
    assert code == 0, err
    assert lake.count(f"wap.{table_name}") == 14


def test_history_lists_publications_and_reviewed_decisions(lake: Lake, table_name: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    wap(capsys, "publish", branch, "--reason", "accepted by data owner")
    code, out, _ = wap(capsys, "history", table_name, "--json")
    entries = json.loads(out)["entries"]
    assert code == 0 and len(entries) == 2
    newest, oldest = entries
    assert newest["properties"]["wap.decision.reason"] == "accepted by data owner"
    assert oldest["properties"]["wap.source.key"] == f"{table_name}/base.parquet"
    assert oldest["properties"]["wap.rows"] == "5"
    code, text, _ = wap(capsys, "history", table_name)
    assert "reviewed publish of branch" in text and "published 5 rows from s3://inbox/" in text


def test_branches_filter_by_table_and_age(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--json")
    [listed] = json.loads(out)["branches"]
    assert code == 0 and listed["branch"] == branch and listed["table"] == f"wap.{table_name}"
    assert listed["head_commit_time"] and 0 <= listed["age_seconds"] < 600
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--older-than", "0m", "--json")
    assert [b["branch"] for b in json.loads(out)["branches"]] == [branch]
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--older-than", "2w")
    assert code == 0 and out.strip() == f"No open WAP branches for wap.{table_name} older than 2w."
    code, out, _ = wap(capsys, "branches", "--older-than", "0m")
    assert branch in out and f"wap.{table_name}" in out and " old" in out
    code, _, err = wap(capsys, "branches", "--older-than", "7 days")
    assert code == 2 and "is not a duration. Fix:" in err


class Recorder:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> bool:
        self.alerts.append(alert)
        return True


def test_prune_discards_old_branches_with_one_alert(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(ops_cli, "notifier_for", lambda _settings: recorder)
    branch = rejected_branch(lake, table_name)
    main_before = lake.main_hash()
    code, out, _ = wap(capsys, "prune", "--older-than", "2w", "--table", table_name)
    assert code == 0 and "No open WAP branches older than 2w." in out and branch in lake.wap_branches()
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name, "--dry-run")
    assert code == 0 and f"would discard  {branch}" in out and branch in lake.wap_branches()
    assert recorder.alerts == []
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name, "--json")
    pruned = json.loads(out)
    assert code == 0 and [b["branch"] for b in pruned["discarded"]] == [branch]
    assert pruned["reason"] == "pruned: older than 0m"
    assert branch not in lake.wap_branches() and lake.main_hash() == main_before
    [alert] = recorder.alerts
    assert ("Reason", "pruned: older than 0m") in alert.fields and f"{branch} (wap.{table_name})" in alert.details
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name)
    assert code == 0 and "No open WAP branches" in out and len(recorder.alerts) == 1  # nothing pruned: no alert
