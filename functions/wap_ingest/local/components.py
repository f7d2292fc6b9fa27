"""What the local stack is made of: its two components, where they listen, the credentials they share.

Every other module of the stack imports its names from here (and nothing else from the stack), so this is
also where `StackError` lives: the error any of them raises when a component fails to start.
"""

from __future__ import annotations

from wap_ingest.core.errors import InfrastructureError

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
WAREHOUSE = "warehouse"
NESSIE_VERSION = "0.99.0"
HOST = "127.0.0.1"

MOTO = "moto"
NESSIE = "nessie"
LABELS = {MOTO: "moto (S3)", NESSIE: "Nessie"}


class StackError(InfrastructureError):
    """A local stack component failed to start. The message names the component and its log file."""
