"""Python readers of file formats' own bytes (a file's footer, its weight once decompressed), and the worker process
native decoders run in (no SDK, no Spark)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .isolation import ChildDiedError, ChildHungError, isolated, start_worker
    from .orc_codecs import READABLE
    from .orc_tail import TailError, footer_of, postscript_of, postscript_problem
    from .thrift_compact import Struct, ThriftError, read_struct
    from .weights import weigh

# What the rest of the service may use of this package, and the module each name lives in. Importing the face imports
# none of them: each is imported when first asked for (PEP 562), so an entry point pays only for what it uses.
_WHERE = {
    "ChildDiedError": "isolation",
    "ChildHungError": "isolation",
    "READABLE": "orc_codecs",
    "Struct": "thrift_compact",
    "TailError": "orc_tail",
    "ThriftError": "thrift_compact",
    "footer_of": "orc_tail",
    "isolated": "isolation",
    "postscript_of": "orc_tail",
    "postscript_problem": "orc_tail",
    "read_struct": "thrift_compact",
    "start_worker": "isolation",
    "weigh": "weights",
}
__all__ = [
    "READABLE", "ChildDiedError", "ChildHungError", "Struct", "TailError", "ThriftError", "footer_of", "isolated",
    "postscript_of", "postscript_problem", "read_struct", "start_worker", "weigh",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
