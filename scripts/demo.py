"""`make demo`: the service end to end on the local stack, driven the way users drive it.

Starts the stack if needed (moto S3/SQS, Nessie, the Lambda runtime under the emulator, the SQS worker,
the Slack sink), drops one clean file and then one file with nulls into the source bucket with
data_loader.py, waits for each outcome, and reports: the rows on `main`, the branch the bad file left
open, and the alert the Slack sink received, as a person reads it (plain text: Slack's escaped form goes to Slack
only), with the address of the local channel page where its buttons work. The stack keeps running afterwards;
`wap stack down` stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIMEOUT = 300.0


def stack() -> tuple[Any, dict[str, str]]:
    from wap_stack.stack import StackConfig, load_state, stack_environment, stack_status, start_stack

    config = StackConfig.from_env()
    state = load_state(config)
    if state is not None and not stack_status(config).healthy:
        raise SystemExit("The local stack is recorded but not healthy. Fix: .venv/bin/wap stack down, then make demo")
    if state is None:
        print("Starting the local stack ...", flush=True)
        state = start_stack(config)
        total = state.moto_seconds + state.nessie_seconds + (state.trigger_seconds or 0)
        print(f"  up in {total:.1f}s (moto {state.moto_seconds:.1f}s, Nessie {state.nessie_seconds:.1f}s, "
              f"event path {state.trigger_seconds or 0:.1f}s)", flush=True)
    else:
        print("Using the running local stack.", flush=True)
    return state, dict(os.environ) | stack_environment(state)


def drop(env: dict[str, str], *flags: str) -> str:
    out = subprocess.run([str(BIN / "python"), "data_loader.py", "-n", "1000", *flags], cwd=ROOT, env=env,
                         text=True, capture_output=True, check=True).stdout.split()
    return out[0]


def wait_outcome(logs: Path, uri: str) -> dict[str, Any]:
    """The outcome the workers logged for `uri` (one log per worker: worker.log, worker-2.log, ...)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for log in sorted(logs.glob("worker*.log")):
            for line in log.read_text().splitlines()[1:]:
                entry = json.loads(line)
                for obj in entry.get("objects", []):
                    if obj.get("object") == uri:
                        return dict(obj)
        time.sleep(0.2)
    raise SystemExit(f"No outcome for {uri} after {TIMEOUT:.0f}s. Look at the logs in {logs}.")


def main() -> int:
    state, env = stack()
    os.environ.update(env)  # the report reads the lake with PyIceberg in this process
    logs = state.state_dir / "logs"
    for label, flags in (("clean file", ["--no-null"]), ("file with nulls", [])):
        started = time.monotonic()
        uri = drop(env, *flags)
        print(f"\nDropped the {label}: {uri}", flush=True)
        outcome = wait_outcome(logs, uri)
        print(f"  -> {outcome['status'].upper()} {outcome['rows']} rows into {outcome['table']} "
              f"in {time.monotonic() - started:.1f}s from upload (branch {outcome['branch']})", flush=True)
    report(env, state)
    print("\nThe stack is still running. Point a shell at it:  eval \"$(.venv/bin/wap stack env)\"")
    print("Alerts received:  .venv/bin/wap stack alerts      Stop it (discards the local lake):  "
          ".venv/bin/wap stack down")
    return 0


def report(env: dict[str, str], state: Any) -> None:
    import requests
    from pyiceberg.catalog import load_catalog

    from wap_stack.slack_sink import read_messages

    nessie = env["NESSIE_ENDPOINT"]
    catalog = load_catalog("demo", type="rest", uri=f"{nessie}/iceberg/main",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    rows = catalog.load_table("wap.customer_data_log").scan().to_arrow().num_rows
    print(f"\nRows on main in wap.customer_data_log: {rows}")
    refs = requests.get(f"{nessie}/api/v2/trees", timeout=10).json()["references"]
    print("Open WAP branches (rejected files, kept for inspection):")
    for name in sorted(r["name"] for r in refs if r["name"].startswith("wap-")):
        print(f"  {name}")
    print("\nThe tables (wap tables):", flush=True)
    subprocess.run([str(BIN / "wap"), "tables"], env=env, check=False)
    messages = read_messages(state.state_dir / "alerts.jsonl")
    if messages:
        print(f"\nLatest alert received by the Slack sink ({messages[-1]['channel']}):")
        print(printout_for(messages[-1]["text"]))
        print(f"\nAct on it where it arrives: http://127.0.0.1:{state.slack_port}/ (the local channel; as alice, "
              "click Discard or Publish after review, give a reason; then: wap history customer_data_log)")


def printout_for(alert_text: str) -> str:
    """An alert's text (Slack mrkdwn, as the sink received it) as the demo prints it: what a person reads, indented
    under its heading. Slack's escapes and links are written out (core.alerts.readable); Slack gets the escaped form."""
    from wap_ingest.core.alerts import readable

    return "  " + readable(alert_text).replace("\n", "\n  ")


if __name__ == "__main__":
    raise SystemExit(main())
