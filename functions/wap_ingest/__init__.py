"""wap-ingest: Write-Audit-Publish ingestion of S3 files into Iceberg tables on a Nessie catalog."""

__version__ = "0.1.0"
