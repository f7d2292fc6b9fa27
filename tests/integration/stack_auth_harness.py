"""The local stack with the catalog's roles (`wap stack up --auth`) for the modules that test it:
tests/integration/stack/test_stack_auth.py (the roles, the function as the service, a dry run) and
tests/integration/stack/test_stack_auth_publish.py (publish requests through the service). `stack_with_auth` starts one
on free ports (each module makes it its module-scoped `auth_stack` fixture), `wap` runs a command in this process,
`role_env` gives this process a role's environment as `wap stack env --role R` gives a shell."""

from __future__ import annotations

import argparse
import io
import shlex
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AUDITS
from tests.stacks import running_stack
from wap_stack import cli as stack_cli
from wap_stack.stack import StackConfig, StackState, free_port_block, free_ports


def wap(*argv: str, commands: Callable[[Any], None] = stack_cli.register) -> tuple[int, str, str]:
    """`wap ARGV` in this process (`commands`: the module that registers them; the stack's by default)."""
    parser = argparse.ArgumentParser(prog="wap")
    commands(parser.add_subparsers(required=True))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = args.func(args)
    return code, out.getvalue(), err.getvalue()


def stack_with_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig, StackState]]:
    """`wap stack up --auth` on free ports, for one test module (each module declares it as its module-scoped
    `auth_stack` fixture), stopped after it."""
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2, avoid=(moto, nessie, management, slack))
    config = StackConfig(state_dir=tmp_path_factory.mktemp("auth-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=management, slack_port=slack, lambda_port=function,
                         runtime_port=function + 1, auth=True)
    env = {"WAP_AUDITS_FILE": str(AUDITS), "WAP_STACK_DIR": str(config.state_dir)}  # the dir: for `wap stack env`
    for name, value in (("WAP_STACK_MOTO_PORT", moto), ("WAP_STACK_NESSIE_PORT", nessie),
                        ("WAP_STACK_NESSIE_MGMT_PORT", management), ("WAP_STACK_SLACK_PORT", slack),
                        ("WAP_STACK_LAMBDA_PORT", function), ("WAP_STACK_RUNTIME_PORT", function + 1)):
        env[name] = str(value)
    with running_stack(config, env) as state:
        yield config, state


def role_env(role: str, monkeypatch: pytest.MonkeyPatch, work: Path) -> dict[str, str]:
    """`eval "$(wap stack env --role <role>)"` in this process."""
    code, out, err = wap("stack", "env", "--role", role)
    assert code == 0, err
    env = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0] if value else ""
    env |= {"WAP_AUDITS_FILE": str(AUDITS), "WAP_WORK_DIR": str(work)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
