"""The Lambda image's entry command starts the handler: the Dockerfile's CMD, run the way the image's
base runs it (awslambdaric under the Runtime Interface Emulator), processes a real S3 event from the stack."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import Lake, parquet_bytes
from tests.paths import ROOT
from wap_stack.config import default_rie
from wap_stack.processes import free_ports, port_open

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def image_handler() -> str:
    [cmd] = re.findall(r'^CMD \[(.*)\]\s*$', (ROOT / "docker" / "Dockerfile").read_text(), flags=re.MULTILINE)
    [handler] = json.loads(f"[{cmd}]")
    return str(handler)


def test_the_image_command_runs_the_handler_on_a_real_s3_event(lake: Lake, table_name: str, tmp_path: Path) -> None:
    handler = image_handler()
    assert handler == "wap_ingest.entrypoints.lambda_handler.handler"
    invoke_port, runtime_port = free_ports(2)
    env = os.environ | lake.env | {"AWS_LAMBDA_FUNCTION_NAME": "wap-ingest", "AWS_LAMBDA_FUNCTION_TIMEOUT": "900",
                                   "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3008", "WAP_WORK_DIR": str(tmp_path / "tmp")}
    runtime = subprocess.Popen(
        [str(default_rie()), "--runtime-interface-emulator-address", f"127.0.0.1:{invoke_port}",
         "--runtime-api-address", f"127.0.0.1:{runtime_port}", sys.executable, "-m", "awslambdaric", handler],
        env=env, stdout=(tmp_path / "rie.log").open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open(invoke_port):
            assert time.monotonic() < deadline and runtime.poll() is None, (tmp_path / "rie.log").read_text()
            time.sleep(0.1)
        key = f"{table_name}/from image.parquet"
        lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=parquet_bytes(12))
        event = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                              "awsRegion": "us-east-1", "s3": {"bucket": {"name": lake.inbox_bucket},
                                                               "object": {"key": key.replace(" ", "+")}}}]}
        reply = requests.post(f"http://127.0.0.1:{invoke_port}/2015-03-31/functions/function/invocations",
                              json=event, timeout=600).json()
        assert [(o["object"], o["status"], o["rows"]) for o in reply["objects"]] == [
            (f"s3://{lake.inbox_bucket}/{key}", "published", 12)
        ], reply
        assert lake.count(f"wap.{table_name}") == 12
    finally:
        runtime.terminate()
        runtime.wait(timeout=30)
