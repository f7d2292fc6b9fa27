"""WAP_SWEEP_GRACE_SECONDS: a safe default, and no value that a run in flight could outlast."""

from __future__ import annotations

import pytest

from wap_ingest.bootstrap.config import DEFAULT_SWEEP_GRACE_SECONDS, EMR_RUN_LIMIT_SECONDS, Settings
from wap_ingest.bootstrap.emr_request import EXECUTION_TIMEOUT_MINUTES
from wap_ingest.core.errors import ConfigError

BASE = {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:19120"}
EMR = {"WAP_EMR_APPLICATION_ID": "app", "WAP_EMR_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/wap-emr"}


def test_the_default_outlasts_a_function_and_an_emr_run() -> None:
    assert Settings.from_env(BASE).sweep_grace_seconds == DEFAULT_SWEEP_GRACE_SECONDS == 259_200
    assert Settings.from_env(BASE | EMR).sweep_grace_seconds > EMR_RUN_LIMIT_SECONDS > 900
    assert EMR_RUN_LIMIT_SECONDS == EXECUTION_TIMEOUT_MINUTES * 60  # the limit every EMR job run is started with


@pytest.mark.parametrize(("env", "phrase"), [
    ({"WAP_SWEEP_GRACE_SECONDS": "0"}, "must be a positive number"),
    ({"WAP_SWEEP_GRACE_SECONDS": "soon"}, "must be a positive number"),
    ({"WAP_SWEEP_GRACE_SECONDS": "900"}, "not longer than WAP_ABANDONED_BRANCH_SECONDS"),
    ({"WAP_SWEEP_GRACE_SECONDS": "30", "WAP_ABANDONED_BRANCH_SECONDS": "30"}, "not longer than WAP_ABANDONED"),
    ({"WAP_SWEEP_GRACE_SECONDS": "10800"} | EMR, "not longer than an EMR job run's limit"),
])
def test_a_grace_period_a_run_could_outlast_is_refused(env: dict[str, str], phrase: str) -> None:
    with pytest.raises(ConfigError, match="WAP_SWEEP_GRACE_SECONDS") as info:
        Settings.from_env(BASE | env)
    assert phrase in str(info.value)


def test_a_shorter_grace_period_follows_a_shorter_run_bound() -> None:
    assert Settings.from_env(BASE | {"WAP_SWEEP_GRACE_SECONDS": "30", "WAP_ABANDONED_BRANCH_SECONDS": "10"}
                             ).sweep_grace_seconds == 30
