"""The components' log lines: the message, then the record's structured fields.

Components log as klog's structured logging does: a fixed message, and the
parts that vary as fields (``logger.warning("proxy rules sync failed;
retrying", extra={"error": str(err), "failures": 2})``). A ``logging`` format
string shows only the attributes it names, so without this the fields, the
part that says *what* failed, never reached a component's log file. Here
they follow the message as ``key=value`` pairs, klog's text form::

    2026-12-06 04:09:08,676 WARNING k8py.proxy.proxier: proxy rules sync failed; retrying error="nft -f failed: …" failures=2

A string is quoted (JSON) when it is empty or holds a space, a quote or an
``=``; other values are written as JSON, or as ``str`` when they are not
JSON. Invariant: a record's standard attributes (and those a formatter adds)
are never repeated as fields, so a record without ``extra`` looks exactly as
it did.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["FORMAT", "FieldsFormatter", "configure_logging", "format_fields"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: what every LogRecord has (and what formatting adds): never a field
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}
#: a field's value is cut here: a log line is for reading
MAX_VALUE = 2000


def _value(value: Any) -> str:
    if isinstance(value, str):
        text = value if value and not any(c in value for c in ' "=\n\t') else json.dumps(value)
    elif isinstance(value, (bool, int, float)) or value is None:
        text = json.dumps(value)
    else:
        try:
            text = json.dumps(value, default=str, separators=(",", ":"))
        except (TypeError, ValueError):
            text = json.dumps(str(value))
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE] + "…"


def format_fields(record: logging.LogRecord) -> str:
    """`` key=value`` for each field the call site passed in ``extra`` ("" when none)."""
    return "".join(f" {key}={_value(value)}" for key, value in record.__dict__.items()
                   if key not in _STANDARD and not key.startswith("_"))


class FieldsFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return super().formatMessage(record) + format_fields(record)


def configure_logging(level: str) -> None:
    """The root logger, as every ``k8py`` command has it: ``level``, to stderr, fields shown."""
    handler = logging.StreamHandler()
    handler.setFormatter(FieldsFormatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
