"""`wap stack up --image`: how an execution environment runs the Lambda image (wap_stack/image.py), checked without
podman. The image itself, run this way against the real stack, is tests/e2e/test_image.py (`make image-test`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT
from wap_ingest.core.errors import ConfigError
from wap_stack import cli as stack_cli
from wap_stack import image, trigger
from wap_stack.config import StackConfig

LIMITS = image.FunctionLimits(memory_mb=4096, ephemeral_mb=4096, timeout_seconds=900)
RIE = Path("/cache/rie/aws-lambda-rie")


def command(env: dict[str, str]) -> list[str]:
    return image.podman_command("localhost/wap-lambda:dev", RIE, "127.0.0.1:21004", "127.0.0.1:21005", env, LIMITS)


def option(words: list[str], name: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word == name]


def test_the_container_is_run_as_lambda_runs_the_image() -> None:
    words = command({})
    at = words.index("localhost/wap-lambda:dev")
    flags, args = words[:at], words[at + 1:]

    assert flags[:4] == ["podman", "--runtime", "runc", "run"]
    assert {"--rm", "--replace", "--init", "--network=host", "--read-only", "--read-only-tmpfs=false"} <= set(flags)
    assert option(flags, "--tmpfs") == ["/tmp:rw,size=4096m,mode=1777"]
    assert option(flags, "--memory") == ["4096m"] == option(flags, "--memory-swap")
    assert option(flags, "--user") == ["993:990"]
    assert option(flags, "--ulimit") == ["nofile=20000:20000", "nproc=4096:4096"]
    assert option(flags, "--volume") == [f"{RIE}:/aws-lambda/aws-lambda-rie:ro"]
    assert option(flags, "--entrypoint") == ["/aws-lambda/aws-lambda-rie"]
    assert option(flags, "--name") == ["wap-ingest-21004"]
    assert args == ["--runtime-interface-emulator-address", "127.0.0.1:21004", "--runtime-api-address",
                    "127.0.0.1:21005", "/opt/venv/bin/python", "-m", "awslambdaric",
                    "wap_ingest.entrypoints.lambda_handler.handler"]


def test_the_runtime_and_handler_are_the_dockerfiles() -> None:
    text = (ROOT / "docker" / "Dockerfile").read_text()

    assert f"ENTRYPOINT {list(image.RUNTIME)!r}".replace("'", '"') in text
    assert f'CMD ["{image.HANDLER}"]' in text


def test_the_service_and_lambda_variables_are_passed_by_name_and_host_paths_are_not() -> None:
    env = {"SOURCE_BUCKET": "source", "NESSIE_ENDPOINT": "http://127.0.0.1:1", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
           "WAP_NESSIE_CLIENT_SECRET": "hush", "AWS_LAMBDA_FUNCTION_NAME": "wap-ingest", "WAP_RETRY_BASE_SECONDS": "1",
           "WAP_JARS_DIR": "/work/.cache/jars/spark", "WAP_WORK_DIR": "/work/.wap/tmp", "WAP_STACK_DIR": "/work/.wap",
           "PATH": "/work/.venv/bin", "HOME": "/root", "VIRTUAL_ENV": "/work/.venv", "JAVA_HOME": "/usr/lib/jvm/x",
           "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9", "WAP_AUDITS_FILE": "/nowhere/audits.yml"}
    words = command(env)

    assert option(words, "--env") == ["AWS_LAMBDA_RUNTIME_API=127.0.0.1:21005",  # marks the container's processes
                                      "AWS_LAMBDA_FUNCTION_NAME", "AWS_SECRET_ACCESS_KEY", "NESSIE_ENDPOINT",
                                      "SOURCE_BUCKET", "WAP_NESSIE_CLIENT_SECRET", "WAP_RETRY_BASE_SECONDS"]
    assert not [w for w in words if "s3cr3t" in w or "hush" in w]  # values never on the command line


def test_a_host_audits_file_is_mounted_read_only_and_used(tmp_path: Path) -> None:
    audits = tmp_path / "audits.yml"
    audits.write_text("tables: {}\n")
    words = command({"WAP_AUDITS_FILE": str(audits)})

    assert f"{audits}:/etc/wap/audits.yml:ro" in option(words, "--volume")
    assert "WAP_AUDITS_FILE=/etc/wap/audits.yml" in option(words, "--env")


def test_the_function_limits_are_serverless_ymls(tmp_path: Path) -> None:
    function = yaml.safe_load((ROOT / "serverless.yml").read_text())["functions"]["ingest"]

    assert image.function_limits() == image.FunctionLimits(function["memorySize"], function["ephemeralStorageSize"],
                                                           function["timeout"])
    env = image.container_environment({"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3008"}, LIMITS)
    assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "4096" and env["AWS_LAMBDA_FUNCTION_TIMEOUT"] == "900"
    broken = tmp_path / "serverless.yml"
    broken.write_text("functions: {}\n")
    with pytest.raises(ConfigError, match="memorySize"):
        image.function_limits(broken)


def test_the_stack_runs_the_image_only_when_asked(tmp_path: Path) -> None:
    rie = tmp_path / "aws-lambda-rie"
    rie.write_text("")
    config = StackConfig(state_dir=tmp_path, rie=rie)
    with_image = StackConfig(state_dir=tmp_path, rie=rie, image="localhost/wap-lambda:dev")

    assert trigger.lambda_command(config, 21004, 21005)[0] == str(rie)  # the emulator on this machine
    launcher = image.launcher_command(with_image, 21004, 21005)  # what trigger.lambda_command runs with an image
    assert launcher[1:3] == ["-m", "wap_stack.image"]
    assert launcher[3:7] == ["--image", "localhost/wap-lambda:dev", "--rie", str(rie)]
    assert "--runtime-interface-emulator-address" in launcher  # what marks the environment's process as `lambda`
    assert "--image" not in trigger.worker_command(config, "q", 21004, 21005, "lambda")
    worker = trigger.worker_command(with_image, "q", 21004, 21005, "lambda")
    assert worker[-2:] == ["--image", "localhost/wap-lambda:dev"]  # its restarts run the image too


def test_image_settings_from_the_environment_and_the_cli() -> None:
    assert StackConfig.from_env({}).image is None
    assert StackConfig.from_env({"WAP_STACK_IMAGE": "localhost/other:1"}).image == "localhost/other:1"
    parser = argparse.ArgumentParser()
    stack_cli.register(parser.add_subparsers())
    assert parser.parse_args(["stack", "up", "--image"]).image == image.DEFAULT_IMAGE
    assert parser.parse_args(["stack", "up", "--image", "localhost/other:1"]).image == "localhost/other:1"
    assert parser.parse_args(["stack", "up"]).image is None
