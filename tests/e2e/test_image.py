"""The Lambda image as Lambda runs it (`make image-test`, which builds it and sets WAP_TEST_IMAGE): a local stack whose
function is the image's container (`wap stack up --image`, wap_stack/image.py) under the Runtime Interface Emulator,
with a read-only root file system, a tmpfs /tmp and the function's memory as its limit, on the host's network. Files
dropped into the source bucket go S3 -> SQS -> worker -> the container, which reads its own audits.yml (the one
deployed): a clean file is published on main, a file with nulls is rejected (its branch left open, one alert in the
Slack sink), a corrupt file is INVALID (alerted, main untouched). Stopping the stack leaves no container. The image
carries the service only: none of its Python modules belongs to the local development stack (wap_stack)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchTableError

from tests import bad_inputs
from tests.conftest import parquet_bytes
from tests.e2e.test_bad_inputs import outcomes_of
from tests.e2e.test_event_path import alerts_about, wait_for
from tests.stacks import running_stack
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_stack import image
from wap_stack.stack import (
    ACCESS_KEY,
    SECRET_KEY,
    StackConfig,
    StackState,
    free_ports,
    stack_environment,
)

IMAGE = os.environ.get("WAP_TEST_IMAGE", "").strip()
if not IMAGE:
    pytest.skip("the image's e2e runs in `make image-test` (it builds the image, sets WAP_TEST_IMAGE)",
                allow_module_level=True)
pytestmark = [pytest.mark.stack, pytest.mark.spark]
TABLE = "customer_data_log"  # the image's audits.yml: not_null(my_col_1), row_count >= 1
COLD = 420.0  # a first file starts the JVM and Spark in the container: seconds, minutes on a loaded machine


def containers(name: str) -> list[str]:
    done = subprocess.run(["podman", "ps", "--all", "--filter", f"name=^{name}$", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.split()


@pytest.fixture(scope="module")
def image_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackState]:
    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=tmp_path_factory.mktemp("image-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=mgmt, slack_port=slack, lambda_port=function, runtime_port=runtime,
                         image=IMAGE)
    # the image's own audits.yml, as deployed
    with running_stack(config, {"WAP_RETRY_BASE_SECONDS": "1", "WAP_RETRY_MAX_SECONDS": "4"},
                       unset=("WAP_AUDITS_FILE",)) as state:
        yield state
    assert containers(image.container_name(function)) == [], "wap stack down left the image's container"


@pytest.fixture(scope="module")
def env(image_stack: StackState) -> dict[str, str]:
    return stack_environment(image_stack)


def drop(env: dict[str, str], key: str, body: bytes) -> str:
    """Upload to the source bucket, as a producer does: the notification, the queue and the worker do the rest."""
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    s3.put_object(Bucket=env["SOURCE_BUCKET"], Key=key, Body=body)
    return f"s3://{env['SOURCE_BUCKET']}/{key}"


def outcome(state: StackState, uri: str, timeout: float = 300.0) -> dict[str, Any]:
    [found] = wait_for(lambda: outcomes_of(state, uri) or None, f"the function's outcome for {uri}", timeout)
    return found


def rows_on(env: dict[str, str], ref: str) -> int | None:
    """Rows of the table on `ref` (None: no such table there), read by PyIceberg through Nessie's Iceberg REST
    endpoint, not by the function."""
    catalog = load_catalog("nessie", type="rest", uri=f"{env['NESSIE_ENDPOINT']}/iceberg/{ref}",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO", "s3.endpoint": env["AWS_ENDPOINT_URL"],
                              "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
                              "s3.region": env["AWS_REGION"]})
    try:
        return int(catalog.load_table(f"wap.{TABLE}").scan().to_arrow().num_rows)
    except NoSuchTableError:
        return None


def wap_branches(env: dict[str, str]) -> list[str]:
    return [b.name for b in NessieBranches(env["NESSIE_ENDPOINT"]).list_branches("wap-")]


# Run inside the image by its own interpreter: every Python module it can import (each file under each folder of its
# sys.path, as a dotted name), and what the import system and the installed distributions' records say of wap_stack.
LIST_MODULES = r"""
import importlib.metadata, importlib.util, json, os, sys
modules = set()
for root in [p for p in sys.path if p and os.path.isdir(p)]:
    for folder, _, files in os.walk(root):
        for name in files:
            stem, _, suffix = name.partition(".")
            if suffix in ("py", "pyc") or (suffix.endswith("so") and suffix.startswith("cpython")):
                relative = os.path.relpath(os.path.join(folder, stem), root)
                modules.add(relative.replace(os.sep, ".").removesuffix(".__init__"))
recorded = sorted(str(f) for d in importlib.metadata.distributions() for f in (d.files or ()) if "wap_stack" in str(f))
print(json.dumps({"modules": sorted(modules), "spec": importlib.util.find_spec("wap_stack") is not None,
                  "recorded": recorded}))
"""


DEV_STACK_BEFORE = ("wap_ingest.local.", "wap_ingest.local")  # where the dev stack lived inside the service before


def image_python_modules() -> dict[str, Any]:
    done = subprocess.run([*image.PODMAN, "run", "--rm", *image.ULIMITS, "--network=none", "--entrypoint",
                           "/opt/venv/bin/python", IMAGE, "-c", LIST_MODULES],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    listed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return listed


def test_the_image_carries_no_module_of_the_development_stack() -> None:
    listed = image_python_modules()

    assert "wap_ingest.entrypoints.lambda_handler" in listed["modules"]  # the listing sees the service
    assert len(listed["modules"]) > 1000, len(listed["modules"])  # and the runtime's packages (pyspark...)
    dev_stack = [m for m in listed["modules"] if m.split(".")[0] == "wap_stack" or ".wap_stack" in m
                 or m.startswith(DEV_STACK_BEFORE)]
    assert dev_stack == [], dev_stack
    assert listed["spec"] is False, "`import wap_stack` finds a module in the image"
    assert listed["recorded"] == [], listed["recorded"]


def test_the_stack_runs_the_image_as_lambda_runs_it(image_stack: StackState) -> None:
    [environment] = image_stack.environments
    [inspected] = json.loads(subprocess.run(["podman", "inspect", image.container_name(environment.invoke_port)],
                                            capture_output=True, text=True, check=True, timeout=60).stdout)
    host, config = inspected["HostConfig"], inspected["Config"]
    limits = image.function_limits()

    assert inspected["ImageName"] == IMAGE
    assert host["ReadonlyRootfs"] is True
    assert list(host["Tmpfs"]) == ["/tmp"] and f"size={limits.ephemeral_mb}m" in host["Tmpfs"]["/tmp"]
    assert host["Memory"] == limits.memory_mb * 2**20 == host["MemorySwap"]
    assert host["NetworkMode"] == "host"
    assert config["User"] == image.LAMBDA_USER
    assert config["Entrypoint"] == image.RIE_MOUNT or config["Entrypoint"] == [image.RIE_MOUNT]
    assert config["Cmd"][-4:] == [*image.RUNTIME, image.HANDLER]
    assert f"AWS_LAMBDA_FUNCTION_MEMORY_SIZE={limits.memory_mb}" in config["Env"]
    assert not [v for v in config["Env"] if v.startswith(("WAP_JARS_DIR=/work", "WAP_STACK_", "VIRTUAL_ENV="))]


def test_a_clean_file_is_published_on_main(image_stack: StackState, env: dict[str, str]) -> None:
    uri = drop(env, f"{TABLE}/clean.parquet", parquet_bytes(120))

    assert outcome(image_stack, uri, COLD)["status"] == "published"
    assert rows_on(env, "main") == 120
    assert not [b for b in wap_branches(env) if TABLE in b]
    assert alerts_about(image_stack, "clean.parquet") == []


def test_a_file_with_nulls_is_rejected_its_branch_kept_and_alerted(image_stack: StackState,
                                                                   env: dict[str, str]) -> None:
    before = rows_on(env, "main")
    uri = drop(env, f"{TABLE}/nulls.parquet", parquet_bytes(50, nulls=5))

    found = outcome(image_stack, uri, COLD)
    assert found["status"] == "rejected", found
    [alert] = wait_for(lambda: alerts_about(image_stack, "nulls.parquet"), "the alert")
    assert found["branch"] in wap_branches(env)
    assert found["branch"] in alert["text"]
    assert "not_null(my_col_1): measured 5 nulls, expected 0 nulls" in alert["text"]
    assert rows_on(env, found["branch"]) == (before or 0) + 50
    assert rows_on(env, "main") == before


def test_a_corrupt_file_is_invalid_alerted_and_main_untouched(image_stack: StackState, env: dict[str, str]) -> None:
    table = "corrupt_files"
    # truncated: its footer is gone, so the function's read fails whichever way it would take the file (a file with a
    # valid footer and a damaged page is registered as it is unless a check reads its rows, issue 27)
    uri = drop(env, f"{table}/corrupt.parquet", bad_inputs.parquet_truncated())

    found = outcome(image_stack, uri, COLD)
    assert found["status"] == "invalid", found
    [alert] = wait_for(lambda: alerts_about(image_stack, "corrupt.parquet"), "the alert")
    assert "cannot be ingested" in alert["text"] and "Fix" in alert["text"], alert["text"]
    assert not [b for b in wap_branches(env) if table in b]


def test_the_function_ran_inside_the_container(image_stack: StackState) -> None:
    """The handler's log lines come from the image: its jars, its class-data archive, its scratch folder."""
    log = Path(image_stack.state_dir / "logs" / "lambda.log").read_text()

    assert '"class_data_archive":"/opt/wap/cds/' in log
    assert "(rapid) exec '/opt/venv/bin/python'" in log
