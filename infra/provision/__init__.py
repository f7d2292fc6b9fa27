"""Provisioning of wap-lake's AWS resources, used by `setup_aws.py`.

One module per AWS service; each exposes `ensure_*` (create or converge, idempotent, honours dry-run) and
`remove_*` (delete if present) functions that take a `Context` and report one line per resource. The
resource settings live beside this package as data files (`infra/*.json`, `infra/*.yml`, `infra/iam/`),
rendered with the names from `names.ResourceNames`. Nothing here does work at import time.
"""
