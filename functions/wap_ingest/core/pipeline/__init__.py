"""The WAP pipeline, defined once, in this package: route, dedupe, branch, write, audit, then publish or reject, and
clean up. `groups` runs the files of one table (a single file: a group of one); `loads` runs a multi-table load (one
branch and one merge for several tables); `maintain` a table's upkeep; `transaction` owns what all of them share: the
branch, the ledger, the merge, the retries from main and the clean-up. No other module of the core creates a branch
or merges one (tests/unit/project/test_layering.py)."""

from .base import RETRY_FROM_MAIN, PipelineConfig, Ports, Result, retry_delay
from .groups import route_or_result, run_routed, run_wap
from .loads import Load, is_manifest, is_pending, waiting
from .maintain import MaintenancePorts, maintain_table
from .sweep import Sweep, sweep_table
from .transaction import Ended, Guards, Loaded, Merge, Transactions

__all__ = ["RETRY_FROM_MAIN", "Ended", "Guards", "Load", "Loaded", "MaintenancePorts", "Merge", "PipelineConfig",
           "Ports", "Result", "Sweep", "Transactions", "is_manifest", "is_pending", "maintain_table", "retry_delay",
           "route_or_result", "run_routed", "run_wap", "sweep_table", "waiting"]
