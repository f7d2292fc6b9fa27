"""The stack's event path, as the Lambda event source mapping runs it in AWS:

  S3 ObjectCreated -> SQS `wap-events` (redrive to `wap-events-dlq` after maxReceiveCount)
    -> worker (polls, batches) -> Runtime Interface Emulator -> awslambdaric -> the handler
  alerts -> slack-sdk -> the Slack sink (its channel page: the alerts' buttons -> the interactivity endpoint, served
  in the sink's process -> SQS `wap-events` -> the handler, which answers in the channel)

There is one (worker, emulator) pair per execution environment (`StackConfig.workers`): each worker polls the
same queue and invokes its own emulator, which serves one invocation at a time, as one Lambda execution
environment does; N pairs model N concurrent execution environments.

Dropping a file into the source bucket with any S3 client is then all it takes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from functools import partial
from typing import Any

from wap_ingest.core.downstream import SOURCE
from wap_stack import emr, image, slack_workspace
from wap_stack.components import (
    ACCESS_KEY,
    DEAD_LETTER_QUEUE,
    DOWNSTREAM_QUEUE,
    EMR,
    EVENT_BUS,
    EVENTS_QUEUE,
    FUNCTION_NAME,
    HOST,
    LABELS,
    LAMBDA,
    SECRET_KEY,
    SLACK,
    WORKER,
    StackError,
    process_name,
)
from wap_stack.config import StackConfig, repo_root
from wap_stack.environment import service_environment
from wap_stack.iam import FUNCTION, principal_environment
from wap_stack.processes import port_open, spawn, wait_ready
from wap_stack.state import StackState, environment_layout, invoke_url, stack_environment, write_record
from wap_stack.status import sink_health

FUNCTION_TIMEOUT = 900
FUNCTION_MEMORY = 3008


def _client(config: StackConfig, service: str) -> Any:
    import boto3

    return boto3.client(
        service, endpoint_url=f"http://{HOST}:{config.moto_port}", aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=config.region,
    )


def setup_notifications(config: StackConfig) -> tuple[str, str]:
    """Create the events queue and its dead-letter queue; have the source bucket notify the queue."""
    sqs = _client(config, "sqs")
    dead_letter = sqs.create_queue(QueueName=DEAD_LETTER_QUEUE)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dead_letter, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName=EVENTS_QUEUE,
        Attributes={
            "VisibilityTimeout": str(FUNCTION_TIMEOUT * 6),  # >= 6x the function timeout, as AWS advises
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(config.max_receives)}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": f"arn:aws:s3:::{config.source_bucket}"}},
        }],
    }
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": json.dumps(policy)})
    _client(config, "s3").put_bucket_notification_configuration(
        Bucket=config.source_bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"Id": "wap-ingest", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    return queue, dead_letter


def setup_downstream(config: StackConfig) -> tuple[str, str]:
    """The bus the function sends downstream events to, and a rule that delivers every wap-lake event to a queue
    anyone can watch (WAP_STACK_DOWNSTREAM_QUEUE_URL), as a downstream consumer's rule would in AWS."""
    sqs, events = _client(config, "sqs"), _client(config, "events")
    queue = sqs.create_queue(QueueName=DOWNSTREAM_QUEUE)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.create_event_bus(Name=EVENT_BUS)
    events.put_rule(Name=DOWNSTREAM_QUEUE, EventBusName=EVENT_BUS, EventPattern=json.dumps({"source": [SOURCE]}))
    events.put_targets(Rule=DOWNSTREAM_QUEUE, EventBusName=EVENT_BUS, Targets=[{"Id": "queue", "Arn": queue_arn}])
    return EVENT_BUS, queue


def sink_command(config: StackConfig) -> list[str]:
    return [sys.executable, "-m", "wap_stack.slack_sink", "--port", str(config.slack_port),
            "--record", str(config.alerts_file), "--endpoint"]


def lambda_command(config: StackConfig, invoke_port: int, runtime_port: int) -> list[str]:
    if config.image:  # the function from the Lambda image, the emulator inside its container
        return image.lambda_command(config, invoke_port, runtime_port)
    if not config.rie.is_file():
        raise StackError(
            f"{LABELS[LAMBDA]}: the Runtime Interface Emulator {config.rie} is missing. Fix: make rie (extracts it "
            f"from the pinned aws-sam-cli wheel), or export WAP_RIE=/path/to/aws-lambda-rie"
        )
    return [
        str(config.rie),
        "--runtime-interface-emulator-address", f"{HOST}:{invoke_port}",
        "--runtime-api-address", f"{HOST}:{runtime_port}",
        sys.executable, "-m", "awslambdaric", "wap_ingest.entrypoints.lambda_handler.handler",
    ]


def function_environment(config: StackConfig, stack_env: Mapping[str, str], name: str,
                         caller: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the function in execution environment `name` sees: the system's basics and the tuning settings of the
    caller's shell (wap_stack/environment.py: never its endpoints, buckets, credentials or catalog client), then the
    stack's variables, the ones Lambda sets for a function, and a scratch folder of its own (as each execution
    environment has its own /tmp)."""
    return service_environment(dict(stack_env) | {
        "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(FUNCTION_MEMORY),
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(FUNCTION_TIMEOUT),
        "POWERTOOLS_SERVICE_NAME": FUNCTION_NAME,
        "WAP_WORK_DIR": str(config.state_dir / f"{name}-tmp"),
    } | principal_environment(config.state_dir, FUNCTION), caller)  # with --iam: the function's keys (infra/iam/)


def worker_command(config: StackConfig, queue_url: str, invoke: int, runtime: int, environment: str) -> list[str]:
    """The worker of one execution environment, which it supervises (a crashed one is replaced, as Lambda does)."""
    return [sys.executable, "-m", "wap_stack.worker", "--queue-url", queue_url, "--invoke-url",
            invoke_url(invoke), "--invoke-timeout", str(FUNCTION_TIMEOUT + 60), "--visibility",
            str(config.visibility_seconds), "--environment", environment, "--state-dir", str(config.state_dir),
            "--invoke-port", str(invoke), "--runtime-port", str(runtime)] + (
                ["--image", config.image] if config.image else [])


def start_event_path(config: StackConfig, record: dict[str, Any]) -> None:
    """Queues and notification, then the Slack sink, and for each execution environment the function under
    the emulator and the worker that feeds it (all emulators first: the workers start once all listen)."""
    queue_url, dead_letter_url = setup_notifications(config)
    event_bus, downstream_url = setup_downstream(config)
    application_id, role_arn = emr.register(partial(_client, config), config.lake_bucket)
    record |= {"queue_url": queue_url, "dead_letter_url": dead_letter_url, "max_receives": config.max_receives,
               "event_bus": event_bus, "downstream_queue_url": downstream_url,
               "slack_port": config.slack_port, "lambda_port": config.lambda_port,
               "emr_application_id": application_id, "emr_role_arn": role_arn}
    slack_workspace.install(_client(config, "ssm"))  # the local Slack app's signing secret, in the secret store
    stack_env = stack_environment(StackState.from_json(record | {"moto_seconds": 0, "nessie_seconds": 0}))
    record["slack_pid"] = spawn(SLACK, sink_command(config), config.log_for(SLACK), sink_environment(config, stack_env))
    write_record(config, record)
    wait_ready(SLACK, record["slack_pid"], config.log_for(SLACK), lambda: sink_health(config.slack_port),
               config.startup_timeout)
    ports = dict(enumerate(config.environment_ports(), start=1))
    record |= {"workers": config.workers,
               "environments": [environment_layout(n, invoke, runtime) for n, (invoke, runtime) in ports.items()]}
    envs: dict[int, dict[str, str]] = {}
    for n, (invoke, runtime) in ports.items():
        name = process_name(LAMBDA, n)
        envs[n] = function_environment(config, stack_env, name)
        record[f"{name}_pid"] = spawn(name, lambda_command(config, invoke, runtime), config.log_for(name), envs[n])
        write_record(config, record)
    for n, (invoke, _) in ports.items():
        name = process_name(LAMBDA, n)
        wait_ready(name, record[f"{name}_pid"], config.log_for(name), partial(_listening, invoke),
                   config.startup_timeout)
    for n, (invoke, runtime) in ports.items():
        name = process_name(WORKER, n)
        command = worker_command(config, queue_url, invoke, runtime, process_name(LAMBDA, n))
        record[f"{name}_pid"] = spawn(name, command, config.log_for(name), envs[n])
        write_record(config, record)
    if config.emr_mode == "local":
        record[f"{EMR}_pid"] = spawn(EMR, emr_command(config, application_id), config.log_for(EMR), envs[1])
        write_record(config, record)


def sink_environment(config: StackConfig, stack_env: Mapping[str, str],
                     caller: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Slack sink's: it also serves the app's interactivity endpoint (its HTTP API route), with the function's
    settings and, with --iam, the function's keys: in AWS the endpoint runs with the function's execution role."""
    return service_environment(dict(stack_env) | principal_environment(config.state_dir, FUNCTION), caller)


def emr_command(config: StackConfig, application_id: str) -> list[str]:
    """The local EMR Serverless runner (WAP_EMR_MODE=local), with the jars of .cache/jars/spark."""
    jars = repo_root() / ".cache" / "jars" / "spark"
    return [sys.executable, "-m", "wap_stack.emr", "--application-id", application_id,
            "--work-dir", str(config.state_dir / "emr"), "--jars", str(jars)]


def _listening(port: int) -> tuple[bool, str]:
    return (True, "listening") if port_open(port) else (False, "not listening yet")
