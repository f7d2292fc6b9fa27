"""Write tests/durations.json from pytest JUnit reports: each test file's summed test time (the mean over the
reports given: one run's figures swing with what its workers ran beside them), slowest first.

    python scripts/test_durations.py JUNIT.xml [MORE.xml ...]   (from `PYTEST_ADDOPTS=--junitxml=JUNIT.xml make test`)

`make test` hands whole files to its workers (pytest-xdist, --dist loadfile) in the order tests/conftest.py collects
them, slowest first by this file, so that no long file starts last while the other workers run out of work. A file
missing from it (a new one) goes after the listed ones; a stale figure only makes the order less good, never a
test fail. Refresh it when a file's time changes by minutes."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "durations.json"
LISTED_ABOVE_S = 5.0  # shorter files run in the tail, in collection order


def file_seconds(junit: Path) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        if parts[0] == "tests":
            module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
            path = "/".join(parts[:module + 1]) + ".py"  # a test in a class: its module's path
            seconds[path] = seconds.get(path, 0.0) + float(case.get("time") or 0)
    return seconds


def mean_seconds(reports: list[Path]) -> dict[str, float]:
    runs = [file_seconds(report) for report in reports]
    paths = {path for run in runs for path in run}
    mean = {path: sum(run.get(path, 0.0) for run in runs) / len(runs) for path in paths}
    slowest = sorted(mean.items(), key=lambda item: -item[1])
    return {path: round(s) for path, s in slowest if s > LISTED_ABOVE_S}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    durations = mean_seconds([Path(a) for a in argv])
    OUT.write_text(json.dumps(durations, indent=0) + "\n")
    print(f"{OUT}: {len(durations)} files, {sum(durations.values())} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
