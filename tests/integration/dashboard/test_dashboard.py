"""The quality dashboard on real stack data: its data module, the page through Streamlit's AppTest, and the
page served by `wap dashboard` rendered once in headless Chromium (screenshot kept in test-artifacts/)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from streamlit.testing.v1 import AppTest

from tests.browser import ChromiumMissingError, render
from tests.conftest import Lake, parquet_bytes
from tests.paths import ROOT
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.models import OutcomeStatus, TableRef
from wap_ingest.dashboard import app as app_module
from wap_ingest.dashboard.data import sources_for, table_list, table_view
from wap_ingest.entrypoints.cli import main
from wap_stack.leftovers import port_holders

pytestmark = [pytest.mark.stack, pytest.mark.spark]

APP = Path(app_module.__file__)
ARTIFACTS = ROOT / "test-artifacts"


@dataclass(frozen=True)
class Scene:
    table: str
    open_branch: str
    discarded_branch: str


@pytest.fixture(scope="module")
def scene(lake: Lake) -> Scene:
    """One table with a published load, a rejected file's open branch and a discarded one."""
    import uuid

    name = f"dash_{uuid.uuid4().hex[:8]}"
    assert lake.service.ingest(lake.put(f"{name}/base.parquet", parquet_bytes(5))).status is OutcomeStatus.PUBLISHED
    rejected = lake.service.ingest(lake.put(f"{name}/bad.parquet", parquet_bytes(20, nulls=3)))
    dropped = lake.service.ingest(lake.put(f"{name}/worse.parquet", parquet_bytes(4, nulls=4)))
    assert rejected.branch and dropped.branch
    assert main(["discard", dropped.branch, "--reason", "producer resends it"]) == 0
    return Scene(f"wap.{name}", rejected.branch, dropped.branch)


def test_data_gathers_rows_loads_branches_and_nulls(lake: Lake, scene: Scene) -> None:
    sources = sources_for(Settings.from_env())
    table = TableRef(*scene.table.split("."))
    assert (table, 1) in table_list(sources)
    started = time.monotonic()
    view = table_view(sources, table)
    seconds = time.monotonic() - started
    print(f"table_view({scene.table}) took {seconds:.2f}s")
    assert seconds < 15  # "a few seconds"; generous on a shared 2-core machine
    assert view.rows_on_main == 5 and view.main_rows == 5 and view.rows_over_time[-1][1] == 5
    [branch] = view.branches
    assert branch.name == scene.open_branch and branch.rows_added == 20
    assert branch.failed == ("not_null(my_col_1): 3 nulls, expected 0 nulls",)
    nulls = {n.column: (n.branch_nulls, n.main_nulls) for n in branch.nulls}
    assert nulls == {"my_col_0": (0, 0), "my_col_1": (3, 0), "my_col_2": (0, 0)}
    assert f"wap publish {scene.open_branch} --no-reaudit --reason '<why it is fine>'" in dict(branch.commands).values()
    outcomes = [(load.outcome, load.branch) for load in view.loads]
    assert ("rejected (branch open)", scene.open_branch) in outcomes
    assert ("discarded", scene.discarded_branch) in outcomes
    assert [load.outcome for load in view.loads].count("published") == 1
    assert view.loads == tuple(sorted(view.loads, key=lambda load: load.at, reverse=True))
    shares = {s.metric: s for s in view.metrics}["null_share(my_col_1)"]  # from wap_meta.wap__<table>
    assert [(p.value, p.state) for p in shares.points] == [(0.0, "published"), (0.15, "rejected (branch open)")]


def test_page_renders_the_table_with_apptest(lake: Lake, scene: Scene) -> None:
    page = AppTest.from_file(str(APP), default_timeout=120)
    page.query_params["table"] = scene.table
    page.run()
    assert not page.exception, [e.value for e in page.exception]
    assert [h.value for h in page.main.header] == [scene.table]
    assert page.sidebar.radio[0].value == scene.table
    assert {m.label: m.value for m in page.metric} == {
        "Rows on main": "5", "Open branches": "1", "Open branches failing their audit": "1"}
    assert any(scene.open_branch in m.value for m in page.markdown)
    [commands] = page.code
    assert f"wap publish {scene.open_branch} --no-reaudit" in commands.value
    assert f"wap discard {scene.open_branch}" in commands.value
    loads, checks, nulls = (t.value for t in page.table)
    assert scene.discarded_branch in set(loads["branch"]) and "discarded" in set(loads["outcome"])
    assert list(checks["status"]) == ["failed", "passed"]
    assert nulls.set_index("column").loc["my_col_1"].tolist() == ["3", "0"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])



@contextlib.contextmanager
def dashboard() -> Iterator[int]:
    """`wap dashboard` on a free port, up; stopped afterwards (and its Streamlit server with it)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "wap_ingest.entrypoints.cli", "dashboard", "--port", str(port)],
                              env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok":
                    break
            except requests.RequestException:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "wap dashboard did not start"
            time.sleep(0.5)
        yield port
    finally:
        server.terminate()  # stops its Streamlit server too (tests/integration/dashboard/test_dashboard_stop.py)
        server.wait(timeout=30)
    assert not port_holders(port), "the Streamlit server of `wap dashboard` outlived it"


def test_wap_dashboard_in_headless_chromium(lake: Lake, scene: Scene, tmp_path: Path) -> None:
    shot = tmp_path / "dashboard.png"
    with dashboard() as port:
        try:
            page = render(f"http://127.0.0.1:{port}/?table={scene.table}", screenshot=shot, markers=(
                "Open branches (1)", scene.discarded_branch, f"wap discard {scene.open_branch}",
                "Audit metrics over loads", "no anomaly check on this metric"))
        except ChromiumMissingError as exc:
            pytest.fail(str(exc))
        print(f"rendered in {page.seconds:.1f}s")
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "dashboard.png")
    (ARTIFACTS / "dashboard.html").write_text(page.html)
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The text of the page Chromium rendered (after the app's script ran on the server and the browser drew it).
    assert "wap-lake data quality" in page.text and scene.table in page.text and "Open branches (1)" in page.text
    assert scene.open_branch in page.text and scene.discarded_branch in page.text
    assert f"wap publish {scene.open_branch} --no-reaudit" in page.text


def test_a_metrics_history_with_its_anomaly_band_in_headless_chromium(lake: Lake, tmp_path: Path) -> None:
    """Eight clean loads of a table with an anomaly check on a null share, then one with ten times the nulls: the
    page draws the metric over the loads with the band and the rejected load (docs/dashboard-anomaly.png is this
    test's screenshot)."""
    for load in range(8):
        clean = lake.service.ingest(lake.put(f"dash_anomaly/clean-{load}.parquet", parquet_bytes(100, 2 + load % 3)))
        assert clean.status is OutcomeStatus.PUBLISHED, clean.message
    shifted = lake.service.ingest(lake.put("dash_anomaly/shifted.parquet", parquet_bytes(100, 30)))
    assert shifted.status is OutcomeStatus.REJECTED and shifted.branch
    view = table_view(sources_for(Settings.from_env()), TableRef("wap", "dash_anomaly"))
    shares = view.metrics[0]
    assert shares.metric == "null_share(my_col_1)" and shares.band is not None
    assert [p.state for p in shares.points][-1] == "rejected (branch open)" and shares.failed == 1
    assert shares.band[0] < 0.03 < shares.band[1] < 0.3
    [branch] = view.branches  # judged against the same history on the page as in the pipeline
    assert branch.failed and branch.failed[0].startswith("anomaly(null_share(my_col_1)): null_share(my_col_1) = 0.3")
    shot = tmp_path / "dashboard-anomaly.png"
    with dashboard() as port:  # the last part of the page as a marker: the charts above it are drawn by then
        page = render(f"http://127.0.0.1:{port}/?table=wap.dash_anomaly", screenshot=shot, height=1300, markers=(
            "anomaly: mad, threshold 4, last 30, min_loads 5", "1 of these loads failed their audit",
            f"wap discard {shifted.branch}"))
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "dashboard-anomaly.png")
    assert shot.stat().st_size > 20_000
    assert "null_share(my_col_1)" in page.html and "rejected (branch open)" in page.html  # the chart's SVG
