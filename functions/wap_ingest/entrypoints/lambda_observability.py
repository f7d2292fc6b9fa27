"""What the function tells CloudWatch: JSON log lines (Powertools' Logger, shared with the core's standard-library
loggers), a correlation id on every line about an object, and one EMF metrics document per invocation."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from wap_ingest.adapters.aws import OutcomeMetrics
from wap_ingest.core.ingest import Item

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "wap-ingest"))
metrics = OutcomeMetrics()


class Correlation(logging.Filter):
    """Puts the correlation id of the object a line is about (its `object_key`) on the line: the core logs
    about many objects in one call, and knows keys, not deliveries."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}

    def follow(self, items: Iterable[Item]) -> None:
        """The objects the lines to come are about."""
        self.ids = {item.source.key: item.delivery.correlation_id or "" for item in items}

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, "object_key", None)
        if isinstance(key, str) and key in self.ids and not getattr(record, "correlation_id", None):
            record.correlation_id = self.ids[key]
        return True


correlation = Correlation()


def observe() -> None:
    """Once per invocation: the core's loggers get the handler's JSON format and keys, and the correlation ids."""
    copy_config_to_registered_loggers(source_logger=logger, include={"wap_ingest"})
    if correlation not in logger.registered_handler.filters:
        logger.registered_handler.addFilter(correlation)
