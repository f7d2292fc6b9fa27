"""A Spark failure's cause chain as plain values, read through Py4J: every link, Python and Java, outermost first,
with each Java throwable's class, message and Spark error class, and the stack of the innermost one (where it was
raised). Whether the engine is certainly gone is decided while walking: a gateway that stops answering is not a
cause. spark_errors classifies what this returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One link of a failure's cause chain: a Java throwable (seen through Py4J) or a Python exception."""

    name: str  # the Java class name, or the Python class as module.QualName
    message: str = ""
    error_class: str | None = None  # Spark's error class (SparkThrowable.getErrorClass), if any
    frames: tuple[str, ...] = ()  # the innermost throwable's stack, its classes from the raising call outwards


_FRAMES = 30  # of the innermost throwable's stack: a format reader is within a few calls of any decoding failure
_LOST_PYTHON = (ConnectionRefusedError, ConnectionResetError, BrokenPipeError)


def is_bare_py4j_error(exc: BaseException) -> bool:
    """A Py4JError that is not a Java exception: py4j raises it when the answer was an error, which is how a dead
    gateway shows on the first call after the JVM died ("An error occurred while calling o15.sc",
    "x does not exist in the JVM")."""
    from py4j.protocol import Py4JError, Py4JJavaError

    return isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError)


def chain_of(exc: BaseException) -> tuple[list[Cause], bool, bool]:
    """Every link, Python and Java, outermost first; whether the engine is certainly gone (a Py4J network error or
    a refused socket, in the Python chain or while walking the Java one); whether a Java walk broke off."""
    from py4j.protocol import Py4JNetworkError

    chain: list[Cause] = []
    seen: set[int] = set()
    broken = False
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < 40:
        seen.add(id(current))
        if isinstance(current, (Py4JNetworkError, *_LOST_PYTHON)):
            return [*chain, _python_cause(current)], True, broken
        java = getattr(current, "java_exception", None) or getattr(current, "_origin", None)
        chain.append(_python_cause(current))
        try:
            while java is not None and len(chain) < 40:  # the Java cause chain, one round trip per call
                name = str(java.getClass().getName())
                cause = java.getCause()  # null at the root (Throwable never returns itself)
                chain.append(Cause(name, str(java.getMessage() or ""), _error_class(java, name),
                                   _frames(java) if cause is None else ()))
                java = cause
        except (Py4JNetworkError, *_LOST_PYTHON):
            return chain, True, True
        except Exception:  # an error answer: a dying gateway, or a method the object lacks; the caller checks
            broken = True
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain, False, broken


def _frames(throwable: Any) -> tuple[str, ...]:
    """The classes of the first `_FRAMES` calls of a throwable's stack (two round trips each: the innermost link's
    only, on a failure). A gone gateway is raised (the engine is lost); any other error leaves the stack unknown."""
    from py4j.protocol import Py4JNetworkError

    try:
        trace = throwable.getStackTrace()
        return tuple(str(trace[i].getClassName()) for i in range(min(len(trace), _FRAMES)))
    except (Py4JNetworkError, *_LOST_PYTHON):
        raise
    except Exception:
        return ()


def _error_class(throwable: Any, name: str) -> str | None:
    if not name.startswith("org.apache.spark."):
        return None  # only Spark's throwables carry an error class: saves a round trip per link
    try:
        value = throwable.getErrorClass()
    except Exception:  # not a SparkThrowable
        return None
    return str(value) if value else None


def _python_cause(exc: BaseException) -> Cause:
    message = getattr(exc, "desc", None)  # pyspark's CapturedException: str() would call the JVM
    if not isinstance(message, str):
        try:
            message = getattr(exc, "errmsg", None) or str(exc)  # Py4JJavaError.errmsg: no JVM call
        except Exception:
            message = ""
    return Cause(f"{type(exc).__module__}.{type(exc).__qualname__}", str(message))
