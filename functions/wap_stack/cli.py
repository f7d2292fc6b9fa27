"""`wap stack up | down | status | env | alerts | invoke`: run the local stack as local processes.

The lake (moto S3/SQS + Nessie) and the event path (S3 notifications -> SQS -> worker(s) -> the handler
under the Lambda Runtime Interface Emulator, one per worker; alerts -> a local Slack sink)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys

from wap_ingest.adapters.catalog import OPERATOR, ROLES
from wap_ingest.core.alerts import readable
from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.publish_requests import QUEUE_VARIABLE
from wap_stack.auth import auth_enabled, role_environment
from wap_stack.aws_roles import PEOPLE, role_credentials
from wap_stack.heal import Healed
from wap_stack.iam import OPERATOR as IAM_OPERATOR
from wap_stack.iam import iam_enabled, principal_environment
from wap_stack.image import DEFAULT_IMAGE
from wap_stack.runtime import invoke
from wap_stack.slack_sink import ENDPOINT_PATH, read_messages
from wap_stack.stack import (
    LABELS,
    MOTO,
    NESSIE,
    StackConfig,
    StackState,
    check_leftovers,
    ensure_not_running,
    heal_stack,
    label,
    load_state,
    process_alive,
    recorded_processes,
    stack_environment,
    stack_status,
    start_stack,
    take_down,
)

ENV_HINT = 'eval "$(wap stack env)"'


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stack = subparsers.add_parser(
        "stack",
        help="run the local stack (moto S3 server + Nessie server + the event path)",
        description="Run the local stack: a moto S3 server (in memory) and a Nessie server (its version store in "
        "<WAP_STACK_DIR>/nessie-store), which `down` discards together, and the event path. A part that crashed "
        "comes back on its own store (the stack's keeper restarts it; `up` on a half-up stack starts what is "
        "missing). "
        "Ports and folders: WAP_STACK_DIR, WAP_STACK_MOTO_PORT, WAP_STACK_NESSIE_PORT, "
        "WAP_STACK_NESSIE_MGMT_PORT, WAP_STACK_SLACK_PORT, WAP_STACK_LAMBDA_PORT, WAP_STACK_RUNTIME_PORT; "
        "WAP_STACK_WORKERS=N runs N Lambda execution environments (worker + emulator pairs; the n-th listens on "
        "the LAMBDA and RUNTIME ports + 2(n-1)). WAP_STACK_VISIBILITY_SECONDS (default 1200, above "
        "WAP_ABANDONED_BRANCH_SECONDS) is how long a crashed batch's messages wait before they come back. "
        "WAP_EMR_MODE=local also runs the large files' EMR Serverless "
        "job runs with spark-submit (default: recorded by moto only). Nessie needs Java 21+ (WAP_NESSIE_JAVA) and "
        "its jar (WAP_NESSIE_JAR).",
    )
    commands = stack.add_subparsers(dest="stack_command", metavar="{up,down,status,env,alerts,invoke}", required=True)
    up = commands.add_parser(
        "up", help="start the lake (moto, Nessie) and the event path (queue, worker, Lambda runtime, Slack sink)"
    )
    up.add_argument("--auth", action="store_true", help="Nessie with authentication and the catalog's roles "
                    "(service, operator, reader), tokens from a local OIDC issuer; the stack's function uses the "
                    "service role (also WAP_STACK_AUTH=1)")
    up.add_argument("--image", nargs="?", const=DEFAULT_IMAGE, default=None, metavar="NAME",
                    help="run the function from the Lambda image (default NAME: %(const)s, `make image`) under podman, "
                    "as Lambda runs it, instead of awslambdaric on this machine (also WAP_STACK_IMAGE=NAME)")
    up.add_argument("--iam", action="store_true", help="IAM enforced by moto: the function and its worker use "
                    "infra/iam/lambda-policy.json, `wap stack env --role operator` infra/iam/operator-policy.json, "
                    "`wap stack env` an admin (also WAP_STACK_IAM=1; decisions in <WAP_STACK_DIR>/iam-decisions.jsonl)")
    up.add_argument("--clean-leftovers", action="store_true",
                    help="first stop the processes an earlier stack of this WAP_STACK_DIR left running (without it, "
                    "`up` names them and stops)")
    up.set_defaults(func=cmd_up)
    commands.add_parser("down", help="stop everything and discard the local lake").set_defaults(func=cmd_down)
    status = commands.add_parser("status", help="show pids, URLs, health and logs (exit 1 unless healthy)")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=cmd_status)
    env = commands.add_parser("env", help=f"print export lines for the running stack: {ENV_HINT}")
    env.add_argument("--role", choices=ROLES, default=None,
                     help="with `up --auth`: the catalog role whose client credentials to print (default: service)")
    env.set_defaults(func=cmd_env)
    alerts = commands.add_parser("alerts", help="print the alerts the local Slack sink received, as plain text "
                                 "(--json: as Slack got them)")
    alerts.add_argument("--json", action="store_true", help="print them as JSON")
    alerts.set_defaults(func=cmd_alerts)
    invoke = commands.add_parser("invoke", help="send one event (JSON) straight to the function, as SNS or "
                                 "EventBridge would, once the first environment's current invocation is done; print "
                                 "its answer (exit 1 if the function failed)")
    invoke.add_argument("event", help='the event, e.g. \'{"wap_maintain": "all"}\' (the daily schedule\'s)')
    invoke.add_argument("--timeout", type=float, default=960.0, help="seconds to wait for the answer")
    invoke.set_defaults(func=cmd_invoke)


def _fail(exc: WapError) -> int:
    print(f"wap: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, ConfigError) else 1


def cmd_up(args: argparse.Namespace) -> int:
    try:
        config = StackConfig.from_env()
        config = dataclasses.replace(config, auth=True) if args.auth else config
        config = dataclasses.replace(config, image=args.image) if args.image else config
        config = dataclasses.replace(config, iam=True) if args.iam else config
        healed = heal_stack(config)  # a half-up stack: its missing parts, on their stores, the lake kept
        if healed is not None:
            return _healed(config, *healed)
        ensure_not_running(config)
        if args.clean_leftovers:
            for leftover in check_leftovers(config, clean=True):
                print(f"Stopped a leftover of an earlier stack: {leftover.describe()}", flush=True)
        print(f"Starting the local stack (logs in {config.logs_dir}) ...", flush=True)
        state = start_stack(config)
    except WapError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        print("wap: interrupted; stopped the processes this start-up had started.", file=sys.stderr)
        return 130
    print(
        f"  {LABELS[MOTO]:<10} up in {state.moto_seconds:5.1f} s  {state.moto_url}  (pid {state.moto_pid}; "
        f"buckets {state.source_bucket}, {state.lake_bucket})"
    )
    print(
        f"  {LABELS[NESSIE]:<10} up in {state.nessie_seconds:5.1f} s  {state.nessie_url}  "
        f"(pid {state.nessie_pid}; Iceberg REST {state.nessie_url}/iceberg, ready {state.nessie_health_url})"
    )
    if state.environments:
        pairs = ", ".join(
            f"{env.worker_name} (pid {env.worker_pid}) -> Lambda runtime {env.invoke_url} (pid {env.lambda_pid})"
            for env in state.environments
        )
        print(
            f"  {'events':<10} up in {state.trigger_seconds or 0:5.1f} s  s3://{state.source_bucket}/<table>/... -> "
            f"SQS {state.queue_url} -> {pairs}; alerts -> Slack sink {state.slack_url} (pid {state.slack_pid}); "
            f"dead letters after {state.max_receives} receives: {state.dead_letter_url}"
        )
    if state.slack_port:
        print(f"  {'slack':<10} the channel, as a person uses it: http://127.0.0.1:{state.slack_port}/ (act on an "
              f"alert's buttons as alice or bob, operators; mallory is not one); interactivity endpoint "
              f"http://127.0.0.1:{state.slack_port}{ENDPOINT_PATH}")
    if config.image:
        print(f"  {'image':<10} the function runs from {config.image} (podman, read-only root, tmpfs /tmp, the "
              "function's memory as its limit; docs/deploy.md)")
    if state.emr_application_id:
        runner = (f"jobs run here with spark-submit (pid {state.emr_pid}, log {config.log_for('emr')})"
                  if state.emr_pid else "jobs are recorded, not run (WAP_EMR_MODE=local runs them)")
        print(f"  {'emr':<10} application {state.emr_application_id} on moto for files over WAP_LARGE_FILE_BYTES; "
              f"{runner}")
    if config.auth:
        issuer = role_environment(config.state_dir)["WAP_NESSIE_TOKEN_ENDPOINT"].removesuffix("/token")
        print(f"  {'auth':<10} Nessie requires tokens of the local OIDC issuer {issuer} and applies the catalog's "
              f"roles ({', '.join(ROLES)}); the function uses service. Another role: wap stack env --role operator")
    if config.iam:
        print(f"  {'iam':<10} moto enforces IAM: the function and its worker use infra/iam/lambda-policy.json, "
              "`wap stack env --role operator` operator-policy.json, `wap stack env` an admin; decisions in "
              f"{config.state_dir / 'iam-decisions.jsonl'}")
    total = state.moto_seconds + state.nessie_seconds + (state.trigger_seconds or 0)
    print(f"Local stack up in {total:.1f} s. Logs (one per component): {config.logs_dir}")
    print("Drop a file to ingest it:  .venv/bin/python data_loader.py --no-null  (then: wap stack alerts)")
    print(f"Point your shell at it:  {ENV_HINT}")
    return 0


def _healed(config: StackConfig, state: StackState, healed: list[Healed]) -> int:
    for part in healed:
        print(f"  started again: {label(part.name)} (pid {part.pid}; log {config.log_for(part.name)})")
    print(f"The local stack was half up: {len(healed)} part(s) started again on their own stores, the lake kept "
          f"(moto pid {state.moto_pid}, Nessie's store {config.nessie_store}). Point your shell at it:  {ENV_HINT}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        config = StackConfig.from_env()
        alive = {n: p for n, p in recorded_processes(config).items() if process_alive(n, p)}
        report = take_down(config)
    except WapError as exc:
        return _fail(exc)
    stopped = [f"{label(n)} (pid {alive[n]})" for n in report.stopped if n in alive]
    if stopped:
        print(f"Stopped {', '.join(stopped[:-1])} and {stopped[-1]}." if len(stopped) > 1 else f"Stopped {stopped[0]}.")
    for leftover in report.swept:
        print(f"Stopped a process of the stack that no record named: {leftover.describe()}")
    if report.taken:
        print(f"wap: port(s) of the stack still taken after stopping it: {', '.join(report.taken)}. Fix: stop what "
              "holds them (kill <pid>), then wap stack up", file=sys.stderr)
        return 1
    if not report:
        print(f"No local stack process was running (state dir {config.state_dir}); nothing to stop.")
        return 0
    print(
        "The local lake is discarded: the S3 contents lived in memory, and the catalog's version store "
        f"({config.nessie_store}) is deleted with them. Logs are kept in {config.logs_dir}."
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        status = stack_status(StackConfig.from_env())
    except WapError as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(status.to_json(), indent=2))
        return 0 if status.healthy else 1
    for component in status.components:
        alive = "alive" if component.alive else "NOT running"
        health = ("ok: " if component.healthy else "FAILING: ") + component.health
        print(component.name)
        print(f"  pid     {component.pid if component.pid is not None else '-'} ({alive})")
        print(f"  url     {component.url}")
        print(f"  health  {health}  [{component.health_url}]")
        print(f"  log     {component.log}")
    if status.messages is not None:
        print("messages (SQS events queue)")
        for line in status.messages.lines():
            print(f"  {line}")
    print(status.summary)
    return 0 if status.healthy else 1


def _running_state(config: StackConfig) -> StackState | None:
    state = load_state(config)
    if state is None:
        return None
    if not process_alive(MOTO, state.moto_pid):  # the lake is gone; a part that crashed comes back (the keeper)
        return None
    return state


def cmd_env(args: argparse.Namespace) -> int:
    try:
        config = StackConfig.from_env()
        state = _running_state(config)
    except WapError as exc:
        return _fail(exc)
    if state is None:
        print(
            f"wap: the local stack is not running (state dir {config.state_dir}). "
            f"Fix: wap stack up (if moto is gone, with the lake: wap stack down first), then {ENV_HINT}",
            file=sys.stderr,
        )
        return 1
    if args.role is not None and not auth_enabled(config.state_dir) and not iam_enabled(config.state_dir):
        print(f"wap: --role {args.role}: the local stack runs without authentication. Fix: wap stack down, then "
              "wap stack up --auth", file=sys.stderr)
        return 2
    environment = stack_environment(state) | role_environment(config.state_dir, args.role or "service")
    if args.role == OPERATOR and state.queue_url:  # the operator publishes by asking the service (catalog/authz.py)
        environment[QUEUE_VARIABLE] = state.queue_url
    if args.role == OPERATOR and iam_enabled(config.state_dir):  # --iam: the operator user's keys (its policy)
        environment |= principal_environment(config.state_dir, IAM_OPERATOR)
    elif args.role in PEOPLE:  # a person's AWS identity: the stack's role wap-<role>, assumed (wap_stack/aws_roles.py)
        environment |= role_credentials(state.moto_url, state.region, args.role)
    for name, value in environment.items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


def cmd_alerts(args: argparse.Namespace) -> int:
    config = StackConfig.from_env()
    messages = read_messages(config.alerts_file)
    if args.json:
        print(json.dumps(messages, indent=2))
        return 0
    if not messages:
        print(f"No alerts received (sink record: {config.alerts_file}).")
        return 0
    for message in messages:
        print(f"--- {message['channel']} at {message['ts']}" + (" (edited)" if message.get("edited") else ""))
        print(readable(message["text"]))
    return 0


def cmd_invoke(args: argparse.Namespace) -> int:
    config = StackConfig.from_env()
    try:
        event = json.loads(args.event)
    except ValueError as exc:
        event = exc
    if not isinstance(event, dict):
        print(f"wap: the event is not a JSON object ({event}). Fix: wap stack invoke '{{\"wap_maintain\": \"all\"}}'",
              file=sys.stderr)
        return 2
    state = _running_state(config)
    if state is None or not state.environments:
        print(f"wap: the local stack's function is not running (state dir {config.state_dir}). Fix: wap stack up",
              file=sys.stderr)
        return 1
    first = state.environments[0]
    answer = invoke(first.invoke_url, event, args.timeout, (config.state_dir, first.lambda_name))
    print(json.dumps(answer, indent=2))
    return 1 if "errorType" in answer or "errorMessage" in answer else 0
