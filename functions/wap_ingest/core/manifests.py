"""A multi-table load's manifest (core/pipeline/loads.py runs the load): `_loads/<name>.json` in a source bucket,
`{"files": ["_pending/<table>/<file>", {"key": ..., "table": ...}, ...]}`, keys in the manifest's own bucket, a file's
table the prefix after `_pending/` unless the entry names one. Its files wait under `_pending/`: their own
notifications do not ingest them (WAITING). Routing (core/routing.py) reads a manifest and routes each of its files."""

from __future__ import annotations

import json

from .errors import UnreadableSourceError
from .models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from .naming import LOADS_PREFIX, PENDING_PREFIX, table_for_key, table_ref_from

MAX_MANIFEST_BYTES = 1024 * 1024
MAX_FILES = 1000


def is_pending(key: str) -> bool:
    return key.startswith(PENDING_PREFIX)


def is_manifest(key: str) -> bool:
    return key.startswith(LOADS_PREFIX) and key.lower().endswith(".json")


def waiting(source: SourceObject) -> IngestOutcome:
    return IngestOutcome(source=source, status=OutcomeStatus.WAITING,
                         message=f"{source.uri} waits under {PENDING_PREFIX}: it is ingested with the manifest "
                         f"({LOADS_PREFIX}<name>.json) that lists it")


def parse_manifest(body: bytes, manifest: SourceObject, default_namespace: str) -> list[tuple[str, TableRef]]:
    """(key, table) for each file; a BadInputError naming the manifest, the entry and the fix."""
    fix = (f'Fix: upload {manifest.uri} again as {{"files": ["_pending/<table>/<file>", '
           f'{{"key": "_pending/...", "table": "<table>"}}]}}.')
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnreadableSourceError(f"{manifest.uri}: the manifest is not JSON ({exc}). {fix}") from exc
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list) or not files:
        raise UnreadableSourceError(f"{manifest.uri}: the manifest lists no files (a non-empty `files` list). {fix}")
    if len(files) > MAX_FILES:
        raise UnreadableSourceError(f"{manifest.uri}: {len(files)} files; a load takes at most {MAX_FILES}. Fix: split "
                                    f"it into several manifests.")
    entries: list[tuple[str, TableRef]] = []
    for index, entry in enumerate(files):
        key = entry.get("key") if isinstance(entry, dict) else entry
        if not isinstance(key, str) or not is_pending(key) or key.endswith("/"):
            raise UnreadableSourceError(
                f"{manifest.uri}: entry {index} ({entry!r}) is not a key under {PENDING_PREFIX} in this bucket (a "
                f"load's files wait there, so that their own notifications do not ingest them). {fix}")
        where = f"s3://{manifest.bucket}/{key}"
        named = entry.get("table") if isinstance(entry, dict) else None
        if named is not None:
            table = table_ref_from(str(named), default_namespace=default_namespace, source=manifest.uri)
        else:
            table = table_for_key(key.removeprefix(PENDING_PREFIX), default_namespace=default_namespace,
                                  bucket=manifest.bucket)
        if key in {k for k, _ in entries}:
            raise UnreadableSourceError(f"{manifest.uri}: {where} is listed twice. {fix}")
        entries.append((key, table))
    return entries
