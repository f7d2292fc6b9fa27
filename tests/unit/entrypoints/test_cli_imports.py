"""`wap`'s parser (every command family, `wap stack` among them) is built without importing the composition root or
an adapter: a `wap stack` command or `--help` does not pay for the service's imports (pynessie, PyIceberg, PySpark:
about 2 s of CPU per process before, 0.5 s after); each command imports them when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import ROOT

PROBE = """
import json, sys
from wap_ingest.entrypoints import cli
cli.build_parser()
heavy = ("wap_ingest.bootstrap", "pynessie", "pyiceberg", "pyspark", "pyarrow")
print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))))
"""


def test_the_parser_imports_neither_the_composition_root_nor_the_adapters_clients() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
