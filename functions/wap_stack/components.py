"""What the local stack is made of: its components, where they listen, the credentials they share.

The lake (moto S3 in memory + Nessie, its version store in <state_dir>/nessie-store, + the queue server, its messages
in <state_dir>/queue-store) lives and dies as one; Nessie and the queue server can crash and come back on their stores
(the keeper restarts them), moto cannot (S3 is in its memory).
The trigger (Slack sink, one or more pairs of a Lambda runtime under the emulator and its SQS worker)
delivers S3 notifications to the handler.

A process is named by its component, numbered from the second instance on: `lambda`, `worker`, `lambda-2`,
`worker-2`, ... (its pid is recorded as `<name>_pid`, its output goes to logs/<name>.log).

Every other module of the stack imports its names from here (and nothing else from the stack), so this is
also where `StackError` lives: the error any of them raises when a component fails to start.
"""

from __future__ import annotations

from wap_ingest.core.errors import InfrastructureError

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
WAREHOUSE = "warehouse"
NESSIE_VERSION = "0.99.0"
HOST = "127.0.0.1"

MOTO = "moto"
NESSIE = "nessie"
SLACK = "slack"
LAMBDA = "lambda"
WORKER = "worker"
EMR = "emr"  # the local EMR Serverless runner (WAP_EMR_MODE=local)
OIDC = "oidc"  # the local OIDC issuer of `wap stack up --auth`
QUEUE = "queue"  # ElasticMQ, serving the events queues behind moto's endpoint (wap_stack/queue.py)
KEEPER = "keeper"  # restarts a crashed part of the stack on its own store (wap_stack/heal.py, wap_stack/keeper.py)
HELD = "held"  # the record's list of parts stopped on purpose (`stop_nessie`: an outage a test makes): none restarted
LAKE_COMPONENTS = (MOTO, NESSIE, QUEUE)
TRIGGER_COMPONENTS = (SLACK, LAMBDA, WORKER, EMR)
COMPONENTS = LAKE_COMPONENTS + TRIGGER_COMPONENTS + (OIDC, KEEPER)
LABELS = {
    MOTO: "moto (S3, SQS)",
    NESSIE: "Nessie",
    SLACK: "Slack sink",
    LAMBDA: "Lambda runtime (emulator + awslambdaric)",
    WORKER: "SQS worker",
    EMR: "EMR Serverless runner (spark-submit)",
    OIDC: "OIDC issuer (local tokens for Nessie)",
    QUEUE: "queue server (ElasticMQ: the events queues)",
    KEEPER: "keeper (restarts a crashed part)",
}

EVENTS_QUEUE = "wap-events"
DEAD_LETTER_QUEUE = "wap-events-dlq"
EVENT_BUS = "wap-lake-events"  # downstream events (WAP_EVENT_BUS), delivered by a rule to DOWNSTREAM_QUEUE
DOWNSTREAM_QUEUE = "wap-downstream"
ALERT_CHANNEL = "#wap-alerts"
# The local sink accepts any bearer token; this one is not a secret and not a real Slack token.
SINK_TOKEN = "local-sink-token"
FUNCTION_NAME = "wap-ingest"


def process_name(component: str, number: int = 1) -> str:
    """The name of instance `number` (1-based) of `component`: `lambda`, `lambda-2`, ..."""
    return component if number == 1 else f"{component}-{number}"


def component_of(name: str) -> str:
    """The component a process name belongs to (`lambda-2` -> `lambda`)."""
    return name.split("-", 1)[0]


def label(name: str) -> str:
    """How a process is called in messages: its component's label, numbered from the second instance on."""
    component, _, number = name.partition("-")
    return f"{LABELS[component]} #{number}" if number else LABELS[component]


class StackError(InfrastructureError):
    """A local stack component failed to start. The message names the component and its log file."""
