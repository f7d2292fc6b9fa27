from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import DATA, ROOT
from wap_ingest.bootstrap.config import Settings, driver_memory_for, nessie_base_from
from wap_ingest.bootstrap.variables import KNOWN_VARIABLES
from wap_ingest.core.errors import ConfigError

AUDITS = str(DATA / "audits.yml")
BASE = {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:19120", "WAP_AUDITS_FILE": AUDITS}


def test_minimal_settings_and_defaults() -> None:
    s = Settings.from_env(BASE)
    assert s.warehouse == "s3://lake/warehouse" and s.namespace == "wap" and s.main_branch == "main"
    assert s.nessie_api_v2 == "http://127.0.0.1:19120/api/v2" and s.source_bucket is None
    assert s.spark_driver_memory == "2g"


def test_the_defaults_are_the_repositorys_jars_and_audits_file(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    """Outside the image (which names them), the jars `make jars` fetched and the audits file at the repository's
    root: bootstrap/config.py is three levels below it."""
    from wap_ingest.bootstrap import config

    monkeypatch.chdir(tmp_path)  # no ./audits.yml here
    assert config.REPO_ROOT == ROOT
    assert Settings.from_env(BASE).jars_dir == ROOT / ".cache" / "jars" / "spark"
    assert config._default_audits_file() == ROOT / "audits.yml"


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v2/", "/api"])
def test_nessie_endpoint_accepts_seed_style_urls(suffix: str) -> None:
    assert nessie_base_from(f"http://h:19120{suffix}") == "http://h:19120"


@pytest.mark.parametrize(
    ("env", "phrase"),
    [
        ({"LAKE_BUCKET": ""}, "LAKE_BUCKET is not set"),
        ({"LAKE_BUCKET": "Bad_Bucket"}, "LAKE_BUCKET='Bad_Bucket' is not a valid S3 bucket name"),
        ({"NESSIE_ENDPOINT": "localhost:19120"}, "NESSIE_ENDPOINT='localhost:19120' is not an http(s) URL"),
        ({"WAP_NAMESPACE": "my-ns"}, "not a valid identifier"),
        ({"WAP_WAREHOUSE": "/tmp/x"}, "WAP_WAREHOUSE='/tmp/x' must be an s3:// location"),
        ({"WAP_AUDITS_FILE": "/nope.yml"}, "WAP_AUDITS_FILE: /nope.yml does not exist"),
        ({"WAP_SPARK_DRIVER_MEMORY": "lots"}, "WAP_SPARK_DRIVER_MEMORY='lots'"),
        ({"WAP_HTTP_TIMEOUT": "soon"}, "WAP_HTTP_TIMEOUT='soon' must be a positive number"),
        ({"SLACK_TOKEN": "t"}, "SLACK_CHANNEL is not set"),
        ({"WAP_MAX_RECEIVES": "x"}, "WAP_MAX_RECEIVES='x' must be a positive whole number"),
    ],
)
def test_invalid_settings_name_the_variable(env: dict[str, str], phrase: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(BASE | env)
    assert phrase in str(info.value)


def test_the_slack_token_never_appears_in_the_settings_repr() -> None:
    s = Settings.from_env(BASE | {"SLACK_TOKEN": "secret-value-123", "SLACK_CHANNEL": "#a"})
    assert s.slack_token == "secret-value-123"
    assert "secret-value-123" not in repr(s)


def test_driver_memory_follows_the_lambda_memory() -> None:
    assert driver_memory_for("10240") == "6144m"
    assert driver_memory_for("3008") == "1804m"
    assert driver_memory_for("512") == "512m"
    assert driver_memory_for("") == "2g"
    assert Settings.from_env(BASE | {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "4096"}).spark_driver_memory == "2457m"


def test_every_variable_read_is_documented() -> None:
    source = (ROOT / "functions" / "wap_ingest" / "bootstrap" / "config.py").read_text()
    import re

    read = set(re.findall(r'env\.get\("([A-Z0-9_]+)"', source))
    read |= set(re.findall(r'_(?:bucket|require|url)\(env, "([A-Z_]+)"', source))
    aliases = {"AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"}
    assert "LAKE_BUCKET" in read and read - set(KNOWN_VARIABLES) <= aliases


@pytest.mark.parametrize(("name", "value"), [("WAP_HTTP_TIMEOUT", "0"), ("WAP_HTTP_TIMEOUT", "-3"),
                                             ("WAP_HTTP_TIMEOUT", "soon"), ("WAP_MAX_RECEIVES", "0"),
                                             ("WAP_MAX_RECEIVES", "-1"), ("WAP_MAX_RECEIVES", "2.5"),
                                             ("WAP_RETRY_MAX_SECONDS", "50000"), ("WAP_RETRY_BASE_SECONDS", "0")])
def test_a_zero_or_negative_setting_stops_start_up_naming_it_and_the_fix(name: str, value: str) -> None:
    from wap_ingest.bootstrap.config import Settings
    from wap_ingest.core.errors import ConfigError

    env = {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:1", "WAP_AUDITS_FILE": AUDITS, name: value}
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env)
    assert name in str(info.value) and "Fix: export" in str(info.value)
