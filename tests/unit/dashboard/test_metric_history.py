"""The dashboard's metric history (issue 36, item 4) from the audit results on the fakes: every metric's loads, oldest
first, each marked published, published after review with a failed audit, or rejected and waiting on its branch;
the anomaly check's band computed from the published loads as the pipeline computes it; the watched metric first."""

from __future__ import annotations

from tests.unit.core.pipeline.test_audit_results import NULL_SHARE, Lake, T, emails
from wap_ingest.core.anomaly import band
from wap_ingest.core.models import OutcomeStatus
from wap_ingest.core.pipeline import Transactions
from wap_ingest.core.review import publish_branch
from wap_ingest.dashboard.metrics import PUBLISHED, PUBLISHED_FAILED, REJECTED, metric_history


def test_each_metric_over_its_loads_with_the_band_and_the_failed_loads_marked() -> None:
    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    for i in range(6):
        assert lake.load(f"orders/clean-{i}.parquet", emails(100, 2 + i % 2)).status is OutcomeStatus.PUBLISHED
    reviewed = lake.load("orders/reviewed.parquet", emails(100, 50))
    publish_branch(Transactions(lake.catalog, lake.config), reviewed.branch, reason="a known outage, fixed",
                   actor="op", source_of=lambda _t, _b: {}, reaudit=None)
    waiting = lake.load("orders/waiting.parquet", emails(100, 60))
    assert waiting.status is OutcomeStatus.REJECTED

    series = metric_history(lake.results, lake.suites.suite_for(T), T, "main", [waiting.branch])
    assert [s.metric for s in series] == ["null_share(email)", "row_count"]  # the watched metric first
    shares = series[0]
    assert [p.value for p in shares.points] == [0.02, 0.03, 0.02, 0.03, 0.02, 0.03, 0.5, 0.6]
    assert [p.state for p in shares.points] == [PUBLISHED] * 6 + [PUBLISHED_FAILED, REJECTED]
    assert shares.failed == 2 and shares.points[-1].load == "s3://inbox/orders/waiting.parquet"
    expected = band([0.5, 0.03, 0.02, 0.03, 0.02, 0.03, 0.02], "mad", 4.0)  # newest first, the waiting one left out
    assert shares.band == (expected.low, expected.high)
    assert shares.rule == "anomaly: mad, threshold 4, last 30, min_loads 5"
    assert series[1].band is None and series[1].rule is None


def test_a_band_waits_for_min_loads_and_a_table_without_results_has_no_series() -> None:
    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    assert metric_history(lake.results, lake.suites.suite_for(T), T, "main", []) == ()
    lake.load("orders/a.parquet", emails(10, 1))
    [shares, _] = metric_history(lake.results, lake.suites.suite_for(T), T, "main", [])
    assert shares.band is None and shares.rule is not None and "too few loads" in shares.rule
