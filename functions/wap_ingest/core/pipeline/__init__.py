"""The WAP pipeline, defined once, in this package: route (core/routing.py, for every path), dedupe, branch, write,
audit, then publish or reject, and clean up. `groups` runs the files of one table (a single file: a group of one);
`loads` runs a multi-table load (one branch and one merge for several tables); `maintain` a table's upkeep;
`transaction` owns what all of them share: the branch, the ledger, the merge, the retries from main and the
clean-up. No other module of the core creates a branch or merges one (tests/unit/project/test_layering.py)."""

from wap_ingest.core.manifests import is_manifest, is_pending, waiting

from .base import RETRY_FROM_MAIN, PipelineConfig, Ports, Result, retry_delay, router_for
from .groups import run_routed, run_wap
from .loads import Load
from .maintain import MaintenancePorts, maintain_table
from .sweep import Sweep, sweep_table
from .transaction import Ended, Guards, Loaded, Merge, Transactions

__all__ = ["RETRY_FROM_MAIN", "Ended", "Guards", "Load", "Loaded", "MaintenancePorts", "Merge", "PipelineConfig",
           "Ports", "Result", "Sweep", "Transactions", "is_manifest", "is_pending", "maintain_table", "retry_delay",
           "router_for", "run_routed", "run_wap", "sweep_table", "waiting"]
