"""What the stack's long-running helper processes (the keeper, the local EMR runner) share: a JSON line per event on
stdout (their log file), and a loop that ends on SIGTERM or SIGINT after the step it is in."""

from __future__ import annotations

import json
import signal
import time
from typing import Any


class Control:
    running = True


def _stop(_signum: int, _frame: Any) -> None:
    Control.running = False


def stop_on_signals() -> None:
    """SIGTERM and SIGINT end the loop (`Control.running`) instead of the process, mid-step."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"ts": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, **fields}), flush=True)
