"""Adapters: one package per technology, each implementing core ports behind a face (its `__init__` names what the
rest of the service may import) and holding its own table of what that technology's failures mean:
- `formats`: Python readers of file formats' own bytes (Parquet's Thrift structures, ORC's tail and codecs) and the
  worker process native decoders run in; no SDK (the engine and S3's weighing both read formats);
- `aws`: S3 (and what an object weighs), SQS, EventBridge, EMR Serverless, dead letters, the decision log, publish
  requests, secrets, metrics (boto3; `aws.errors`);
- `catalog`: Nessie's REST API, the Python table commits and reads (PyIceberg), OAuth2 (`catalog.errors`);
- `engine`: Spark with Iceberg: the session, reads, writes, registration (a Parquet file measured page by page),
  audits measured by Spark, Py4J lookups (`engine.errors`);
- `slack`: the Slack client, Block Kit, requests Slack sends and the replies to them.
`Verdict` (below) is the shape of each error table's entries. Nothing runs at import time."""

from __future__ import annotations

from dataclasses import dataclass

from wap_ingest.core.errors import WapError


@dataclass(frozen=True)
class Verdict:
    """The project's error class for a failure, what happened in words, and the fix ("" when the caller gives it)."""

    error: type[WapError]
    meaning: str
    fix: str = ""

    def raised(self, where: str, answer: str, **values: str) -> WapError:
        """`<where>: <meaning>; <what the system answered>. Fix: <fix>.`, with `{name}` in meaning and fix filled
        from `values`."""
        meaning, fix = self.meaning.format(**values), self.fix.format(**values)
        text = f"{where}: {meaning}; {answer}."
        return self.error(f"{text} Fix: {fix}." if fix else text)
