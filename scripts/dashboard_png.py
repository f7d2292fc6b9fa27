"""Regenerate docs/dashboard.png: the dashboard on the running local stack (after `make demo`), rendered in
headless Chromium. Usage: .venv/bin/python scripts/dashboard_png.py [TABLE] (default wap.customer_data_log)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import render  # noqa: E402  (the test suite's Chromium driver)


def main() -> int:
    from wap_stack.stack import StackConfig, load_state, stack_environment

    table = sys.argv[1] if len(sys.argv) > 1 else "wap.customer_data_log"
    state = load_state(StackConfig.from_env())
    if state is None:
        raise SystemExit("No local stack is running. Fix: make demo")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = dict(os.environ) | stack_environment(state)
    server = subprocess.Popen([sys.executable, "-m", "wap_ingest.entrypoints.cli", "dashboard", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok":
                    break
            except requests.RequestException:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("wap dashboard did not start")
            time.sleep(0.5)
        out = ROOT / "docs" / "dashboard.png"
        page = render(f"http://127.0.0.1:{port}/?table={table}", markers=("Open branches (", "wap discard "),
                      screenshot=out, height=1700)
        print(f"{out} written; the page rendered in {page.seconds:.1f}s")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
