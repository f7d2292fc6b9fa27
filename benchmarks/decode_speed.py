"""pyarrow's read and the service's page measurement on workload 4's file, in this process: what a pyarrow upgrade
changes in the register path's own work (issue 35, item 6).

    python -m benchmarks.decode_speed --label NAME [--tree PATH] [--file F] [--runs 3]
        [--out benchmarks/results/decode_speed.json]

`--tree`: the checkout whose service code is measured (its `functions/` first on the path; default: this one), run
with that checkout's interpreter to measure its pyarrow. Three steps on one file, each `--runs` times: pyarrow's
`read_table`, the service's decode of every page (`check_parquet`'s work), and its decode with every leaf measured and
every claim checked (`measure_parquet`'s work, the register path's audit), both in this process (no isolation
worker). The measurement runs first, so its first call is what a fresh isolation worker pays. Several labels sit
side by side in one file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "decode_speed.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--file", type=Path, default=Path("/tmp/wap-decode-speed/flights.parquet"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(args.tree / "functions"), str(args.tree)]
    import pyarrow
    import pyarrow.parquet as pq

    from wap_ingest.adapters.engine import parquet_decode

    if not args.file.exists():
        from benchmarks.flights import write_flights

        write_flights(args.file, 5_000_000)
    found: dict[str, object] = {"pyarrow": pyarrow.__version__, "file_bytes": args.file.stat().st_size}
    # the register path's measurement first: its first call is what a fresh isolation worker pays
    steps: dict[str, Callable[[], object]] = {
        "decode_and_measure": lambda: parquet_decode._decoded_parquet(args.file, "f", "t", True),
        "decode_every_page": lambda: parquet_decode._decoded_parquet(args.file, "f", "t", False),
        "read_table": lambda: pq.read_table(args.file)}
    for name, step in steps.items():
        seconds = []
        for _ in range(args.runs):
            began = time.perf_counter()
            step()
            seconds.append(round(time.perf_counter() - began, 3))
        found[name] = {"seconds": seconds, "first": seconds[0], "min": min(seconds)}
    document = json.loads(args.out.read_text()) if args.out.exists() else {}
    document.setdefault("runs", {})[args.label] = found
    document["about"] = (__doc__ or "").splitlines()[0]
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
