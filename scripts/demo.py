"""`make demo`: the main job end to end on the local stack.

Starts the stack if needed, loads one clean file and one file with nulls with data_loader.py, runs the
WAP pipeline on both, and reports the rows on `main` and the branch the bad file left open. The stack
keeps running afterwards so you can look around; `wap stack down` stops it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ROOT, env=env, text=True, capture_output=True, check=check)


def stack_env() -> dict[str, str]:
    from wap_ingest.local.stack import StackConfig, load_state, stack_environment, start_stack

    config = StackConfig.from_env()
    state = load_state(config)
    if state is None:
        print("starting the local stack (moto S3 + Nessie) ...", flush=True)
        started = time.monotonic()
        state = start_stack(config)
        print(f"  stack up in {time.monotonic() - started:.1f}s", flush=True)
    else:
        print("using the running local stack", flush=True)
    return dict(os.environ) | stack_environment(state)


def main() -> int:
    env = stack_env()
    os.environ.update(env)  # the report below reads the lake with PyIceberg in this process
    uris: dict[str, str] = {}
    for label, extra in (("clean", ["--no-null"]), ("with nulls", [])):
        out = run(str(BIN / "python"), "data_loader.py", "-n", "1000", *extra, env=env).stdout.split()
        uris[label] = out[0]
        print(f"uploaded {label} file: {out[0]}", flush=True)
    started = time.monotonic()
    for uri in uris.values():
        result = run(str(BIN / "wap"), "ingest", uri, env=env, check=False)
        print(result.stdout.rstrip() or result.stderr.rstrip(), flush=True)
    print(f"\npipeline time for both files: {time.monotonic() - started:.1f}s (includes two Spark start-ups)")
    report(env)
    print('\nThe stack is still running. Point a shell at it with: eval "$(.venv/bin/wap stack env)"')
    print("Stop it (and discard the local lake) with: .venv/bin/wap stack down")
    return 0


def report(env: dict[str, str]) -> None:
    import requests
    from pyiceberg.catalog import load_catalog

    nessie = env["NESSIE_ENDPOINT"]
    catalog = load_catalog("demo", type="rest", uri=f"{nessie}/iceberg/main",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    rows = catalog.load_table("wap.customer_data_log").scan().to_arrow().num_rows
    print(f"\nrows on main in wap.customer_data_log: {rows}")
    refs = requests.get(f"{nessie}/api/v2/trees", timeout=10).json()["references"]
    open_branches = [r["name"] for r in refs if r["name"].startswith("wap-")]
    print("open WAP branches (rejected files, kept for inspection):")
    for name in open_branches:
        print(f"  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
