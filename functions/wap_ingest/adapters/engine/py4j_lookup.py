"""What the process keeps for the life of one JVM: Java classes and their static members, looked up once.

Through Py4J, each dot of `jvm.org.apache.iceberg.SchemaParser` is a round trip to the JVM (is this a package or a
class?), and so is the lookup of a static member before its call: a registered small file made 188 round trips from
its thread, most of them such lookups, and 83 once they were made here
(tests/integration/adapters/engine/test_register.py). `static(jvm, "org.apache.iceberg.SchemaParser", "toJson")` costs
one lookup per JVM, and each call after it one round trip. A restarted engine has a new JVM view, whose lookups start
afresh."""

from __future__ import annotations

import threading
from typing import Any

from py4j.java_gateway import JavaClass


class _Known:
    """The current JVM view and what was looked up in it."""

    lock = threading.Lock()
    jvm: Any = None
    found: dict[str, Any] = {}  # noqa: RUF012 (replaced whole, with the JVM view it belongs to)


def per_jvm(jvm: Any) -> dict[str, Any]:
    """What callers keep for the life of this JVM view, by key (a fresh dict for a restarted engine's new view)."""
    with _Known.lock:
        if _Known.jvm is not jvm:
            _Known.jvm, _Known.found = jvm, {}
        return _Known.found


def static(jvm: Any, class_name: str, member: str | None = None) -> Any:
    """The class `class_name` of `jvm` (no round trip), or its static `member`: a method to call, a nested class,
    or the value of a static field (looked up once)."""
    known = per_jvm(jvm)
    key = class_name if member is None else f"{class_name}#{member}"
    found = known.get(key)
    if found is None:
        klass = known.get(class_name)
        if klass is None:
            klass = known[class_name] = JavaClass(class_name, jvm._gateway_client)
        found = klass if member is None else getattr(klass, member)
        known[key] = found
    return found
