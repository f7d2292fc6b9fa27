"""The stack's function run from the Lambda image (`wap stack up --image [NAME]`, WAP_STACK_IMAGE=NAME).

Each execution environment is then a container of the image, as Lambda runs it: a read-only root file system with a
tmpfs /tmp of the function's ephemeral storage, the function's memory (serverless.yml's `memorySize`) as the
container's memory limit, the user Lambda runs images as (uid 993, gid 990), and the Runtime Interface Emulator as
the entry point, which starts the image's own runtime (awslambdaric in /opt/venv) with the handler. The emulator is
the one `make rie` extracts, mounted read-only: it is not in the image, so the image run here is byte for byte the
image deployed. The container shares the host's network, so the emulator listens on the environment's invoke and
runtime API ports on 127.0.0.1 as the host's emulator would, and the function reaches moto, Nessie and the Slack
sink on 127.0.0.1.

The environment's recorded process is `python -m wap_stack.image ...`, which replaces itself (exec) by
`podman run` with the function's variables: the service's settings (wap_ingest.bootstrap.variables) and Lambda's own,
taken from its environment by name (`-e NAME`), so no value, secret or not, is on a command line. Paths that belong to
the host are not passed: the image has its own jars, scratch folder and audits file; a WAP_AUDITS_FILE of the host is
mounted read-only and used instead. Stopping the process (SIGTERM) stops the container (podman passes the signal
on; --init reaps and forwards), which is then removed (--rm). When the environment crashes, its worker's supervisor
kills every process that carries the environment's runtime API address (wap_stack/runtime.py), and every process of the
container does, its init included: the container ends with them. A container still left (the podman process killed
alone) is replaced (--replace) by the next start of the same environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from wap_ingest.core.errors import ConfigError
from wap_stack.components import FUNCTION_NAME, HOST, LABELS, LAMBDA, StackError
from wap_stack.config import StackConfig, repo_root

DEFAULT_IMAGE = "localhost/wap-lambda:dev"  # what `make image` builds
HANDLER = "wap_ingest.entrypoints.lambda_handler.handler"  # docker/Dockerfile's CMD
RUNTIME = ("/opt/venv/bin/python", "-m", "awslambdaric")  # docker/Dockerfile's ENTRYPOINT
RIE_MOUNT = "/aws-lambda/aws-lambda-rie"
AUDITS_MOUNT = "/etc/wap/audits.yml"
LAMBDA_USER = "993:990"  # the user Lambda runs a container image's processes as (sbx_user1051), whatever the image's
# podman on these machines: runc (crun fails on their hybrid cgroups), which is refused without explicit limits.
PODMAN = ("podman", "--runtime", "runc")
ULIMITS = ("--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096")
# Lambda's variables the function reads, besides the service's own (wap_ingest.bootstrap.variables).
LAMBDA_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
                    "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_TIMEOUT", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
# The image's own paths (docker/Dockerfile's ENV): the host's values would point at nothing inside the container.
IMAGE_PATHS = ("WAP_JARS_DIR", "WAP_WORK_DIR", "WAP_AUDITS_FILE")


@dataclass(frozen=True)
class FunctionLimits:
    """The deployed function's sizes, from serverless.yml's `functions.ingest`."""

    memory_mb: int
    ephemeral_mb: int
    timeout_seconds: int


def function_limits(serverless_yml: Path | None = None) -> FunctionLimits:
    path = serverless_yml or repo_root() / "serverless.yml"
    try:
        function = yaml.safe_load(path.read_text())["functions"]["ingest"]
        return FunctionLimits(int(function["memorySize"]), int(function.get("ephemeralStorageSize", 512)),
                              int(function["timeout"]))
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: no functions.ingest memorySize/timeout to size the image's container ({exc!r}). "
                          "Fix: restore them in serverless.yml") from exc


def container_name(invoke_port: int) -> str:
    """One container per execution environment, named by its invoke port (which no other stack can hold)."""
    return f"{FUNCTION_NAME}-{invoke_port}"


def forwarded(env: Mapping[str, str]) -> list[str]:
    """The names of `env` the function in the container is given: the service's settings and Lambda's variables."""
    from wap_ingest.bootstrap.variables import KNOWN_VARIABLES  # here: importing the composition root costs `wap
    # stack` commands about 0.3 s of CPU each, and only a containerized function needs the list

    names = (set(KNOWN_VARIABLES) | set(LAMBDA_VARIABLES)) - set(IMAGE_PATHS)
    return sorted(name for name in env if name in names)


def lambda_command(config: StackConfig, invoke_port: int, runtime_port: int) -> list[str]:
    """The execution environment's command (wap_stack/trigger.py runs it in place of the host's emulator), once what it
    needs is there: the emulator to mount, podman, the image."""
    if not config.rie.is_file():
        raise StackError(
            f"{LABELS[LAMBDA]}: the Runtime Interface Emulator {config.rie} is missing (the image's container mounts "
            "it). Fix: make rie, or export WAP_RIE=/path/to/aws-lambda-rie"
        )
    if shutil.which(PODMAN[0]) is None:
        raise StackError(f"{LABELS[LAMBDA]}: --image needs podman. Fix: make container-tools (as root), or run the "
                         "stack without --image")
    if subprocess.run([PODMAN[0], "image", "exists", str(config.image)], check=False, timeout=120).returncode != 0:
        raise StackError(f"{LABELS[LAMBDA]}: podman has no image {config.image}. Fix: make image (IMAGE={config.image} "
                         "make image for another name)")
    return launcher_command(config, invoke_port, runtime_port)


def launcher_command(config: StackConfig, invoke_port: int, runtime_port: int) -> list[str]:
    """`python -m wap_stack.image ...`: it carries the emulator's address options, which mark the process as
    the environment's emulator (wap_stack/processes.py), and becomes `podman run` (main)."""
    return [sys.executable, "-m", "wap_stack.image", "--image", str(config.image), "--rie", str(config.rie),
            "--runtime-interface-emulator-address", f"{HOST}:{invoke_port}",
            "--runtime-api-address", f"{HOST}:{runtime_port}"]


def podman_command(image: str, rie: Path, invoke_address: str, runtime_address: str, env: Mapping[str, str],
                   limits: FunctionLimits) -> list[str]:
    """`podman run` of the image as Lambda runs it, under the emulator, with the function's variables from `env`."""
    invoke_port = int(invoke_address.rsplit(":", 1)[1])
    command = [*PODMAN, "run", "--rm", "--replace", "--name", container_name(invoke_port), "--init",
               "--network=host", *ULIMITS, "--user", LAMBDA_USER,
               "--read-only", "--read-only-tmpfs=false", "--tmpfs", f"/tmp:rw,size={limits.ephemeral_mb}m,mode=1777",
               "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
               "--volume", f"{rie}:{RIE_MOUNT}:ro", "--entrypoint", RIE_MOUNT,
               # Every process of the container carries the environment's runtime API address (the emulator sets the
               # same for its runtime), which is how a crashed environment's processes are found and killed
               # (wap_stack/runtime.py): the container's init among them, so the container goes with them.
               "--env", f"AWS_LAMBDA_RUNTIME_API={runtime_address}"]
    for name in forwarded(env):
        command += ["--env", name]
    audits = env.get("WAP_AUDITS_FILE", "").strip()
    if audits and Path(audits).is_file():
        command += ["--volume", f"{Path(audits).resolve()}:{AUDITS_MOUNT}:ro",
                    "--env", f"WAP_AUDITS_FILE={AUDITS_MOUNT}"]
    return [*command, image, "--runtime-interface-emulator-address", invoke_address,
            "--runtime-api-address", runtime_address, *RUNTIME, HANDLER]


def container_environment(env: Mapping[str, str], limits: FunctionLimits) -> dict[str, str]:
    """`env` with Lambda's sizes of the deployed function (what the emulator and the handler read)."""
    return dict(env) | {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(limits.memory_mb),
                        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(limits.timeout_seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Lambda image under the Runtime Interface Emulator (podman)")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--rie", type=Path, required=True, help="the emulator to mount (make rie)")
    parser.add_argument("--runtime-interface-emulator-address", required=True, help="host:port of the invoke API")
    parser.add_argument("--runtime-api-address", required=True, help="host:port of the runtime API")
    args = parser.parse_args(argv)
    limits = function_limits()
    env = container_environment(os.environ, limits)
    command = podman_command(args.image, args.rie.resolve(), args.runtime_interface_emulator_address,
                             args.runtime_api_address, env, limits)
    print(f"$ {' '.join(command)}", flush=True)
    os.execvpe(command[0], command, env)  # this process becomes podman: its pid stays the environment's


if __name__ == "__main__":
    sys.exit(main())
