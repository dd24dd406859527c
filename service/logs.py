"""Logging setup: plain text for people, JSON lines for collectors, same structured fields.

Code everywhere logs with the standard `logging` module and passes the object it talks about
as `extra={"cluster": ..., "kind": ..., "namespace": ..., "object_name": ...}` (any subset;
`name` itself cannot be used: `logging` reserves it for the logger's name and raises KeyError).
This module promises that those fields appear in every line that carries them — as `key=value`
suffixes in plain mode, as top-level keys in JSON mode, the object's name printed as `name` —
and that configuring twice (tests, the demo) replaces the handler instead of doubling lines.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

# Structured fields: LogRecord attribute -> the key printed, in the order plain lines print them.
FIELDS = {
    "cluster": "cluster",
    "kind": "kind",
    "namespace": "namespace",
    "object_name": "name",
    "resource_version": "resource_version",
    "attempt": "attempt",
    "retry_in": "retry_in",
}

_HANDLER_NAME = "dra-mirror"


class PlainFormatter(logging.Formatter):
    """`2026-01-01T00:00:00Z INFO service.reactor: synced cluster=east kind=Pod`"""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts = [f"{when} {record.levelname} {record.name}: {record.getMessage()}"]
        parts.extend(
            f"{key}={getattr(record, attribute)}"
            for attribute, key in FIELDS.items()
            if getattr(record, attribute, None) not in (None, "")
        )
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the structured fields, error."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for attribute, key in FIELDS.items():
            value = getattr(record, attribute, None)
            if value not in (None, ""):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(
    level: str = "INFO", *, json: bool = False, stream: TextIO | None = None
) -> logging.Handler:
    """Install one handler on the root logger (replacing ours from an earlier call)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if json else PlainFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's access log is one line per request: keep it, but through our format.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # Alembic announces every plugin and revision step at INFO on each start; a migration that
    # runs is worth one line from us, not ten from it.
    if root.level <= logging.INFO:
        logging.getLogger("alembic").setLevel(logging.WARNING)
    return handler
