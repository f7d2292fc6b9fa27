"""The catalog: Nessie's REST API v2 (branches, merges, the ledger, history), the Python table commits and reads
(PyIceberg), OAuth2, the authorization rules. Its failures are judged in `catalog.errors`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .audit_results import LakeAuditResults
    from .authz import OPERATOR, READER, ROLES, SERVICE, nessie_properties, scope_for
    from .credentials import nessie_client
    from .iceberg_files import MetadataFiles, pyarrow_io
    from .lake_files import CatalogLakeFiles
    from .live import NessieLiveContents
    from .nessie import NessieBranches
    from .oauth2 import BearerAuth, ClientCredentials, TokenProvider
    from .reader import BranchChanges, IcebergRestReader
    from .tables import BranchTables

# What the rest of the service may use of this package, and the module each name lives in. Importing the face imports
# none of them: each is imported when first asked for (PEP 562), so an entry point pays only for what it uses.
_WHERE = {
    "BearerAuth": "oauth2",
    "BranchChanges": "reader",
    "BranchTables": "tables",
    "CatalogLakeFiles": "lake_files",
    "ClientCredentials": "oauth2",
    "IcebergRestReader": "reader",
    "LakeAuditResults": "audit_results",
    "MetadataFiles": "iceberg_files",
    "NessieBranches": "nessie",
    "NessieLiveContents": "live",
    "OPERATOR": "authz",
    "READER": "authz",
    "ROLES": "authz",
    "SERVICE": "authz",
    "TokenProvider": "oauth2",
    "nessie_client": "credentials",
    "nessie_properties": "authz",
    "pyarrow_io": "iceberg_files",
    "scope_for": "authz",
}
__all__ = [
    "OPERATOR", "READER", "ROLES", "SERVICE", "BearerAuth", "BranchChanges", "BranchTables", "CatalogLakeFiles",
    "ClientCredentials", "IcebergRestReader", "LakeAuditResults", "MetadataFiles", "NessieBranches",
    "NessieLiveContents",
    "TokenProvider", "nessie_client", "nessie_properties", "pyarrow_io", "scope_for",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
