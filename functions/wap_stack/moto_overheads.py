"""Two of moto's per-request costs that AWS has no counterpart of, removed in the stack's moto process (installed by
wap_stack.moto_queue, as moto_ranges is). The stack runs every AWS service in that one Python process, so each is
paid by every request of every component, the service's and the reference's alike:

- Which service a request is for: moto lists its own package directory (an `os.listdir` and an `isdir` for each of
  its ~170 entries) on every request, to see whether the host names a service (moto/moto_server/werkzeug_app.py
  `get_backend_for_host`; moto/backends.py `list_of_moto_modules`). The directory does not change while the server
  runs: it is listed once (`list_of_moto_modules` answers the same names, from memory).
- An EventBridge rule's target input: moto builds a JSONPath parser (PLY reading its parse tables) for every input
  path of every event it delivers (moto/events/utils.py `EventTemplateParser.parse`, `jsonpath_ng.ext.parse`): a
  downstream event's PutEvents cost moto about 6 ms of CPU (py-spy, on this stack). Each expression is parsed once
  (`parse` keeps the parsed expression by its text: a tree that `find` only reads).

Both answer exactly what moto's own code answers (tests/unit/stack/test_moto_overheads.py, a differential).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from wap_stack.patches import Patches

_PATCHES = Patches()  # moto's own list_of_moto_modules and jsonpath_ng.ext.parse, once installed
PARSED = 256  # JSONPath expressions kept parsed (a stack's rules use a handful)


def _modules() -> tuple[Any, Any]:
    """moto's backends module and jsonpath_ng's `ext` (whose `parse` moto imports when it delivers an event)."""
    return importlib.import_module("moto.backends"), importlib.import_module("jsonpath_ng.ext")


def install() -> None:
    """Patch moto in this process (the stack's moto server)."""
    if _PATCHES.active:
        return
    backends, ext = _modules()
    modules, parse = backends.list_of_moto_modules, ext.parse
    listed = tuple(modules())

    def list_of_moto_modules() -> Iterable[str]:
        return iter(listed)

    _PATCHES.replace(backends, "list_of_moto_modules", list_of_moto_modules)
    _PATCHES.replace(ext, "parse", functools.lru_cache(maxsize=PARSED)(parse))


def installed() -> AbstractContextManager[None]:
    """`install` for the length of a block, moto's own behaviour restored after it (a test's process)."""
    return _PATCHES.during(install)
